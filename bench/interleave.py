"""Runs commands in turn, round after round, and prints each one's median time and its ratio
to the first command's: an A/B of builds (or a build against curl) on a noisy machine.

    /usr/bin/python3 bench/interleave.py ROUNDS 'COMMAND A' 'COMMAND B' ...
"""
import shlex
import statistics
import sys

from benchtools import timed


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    rounds = int(sys.argv[1])
    cmds = [shlex.split(c) for c in sys.argv[2:]]
    times = [[] for _ in cmds]
    for _ in range(rounds):
        for i, c in enumerate(cmds):
            times[i].append(timed(c, quiet=True))
    med = [statistics.median(t) for t in times]
    for i, c in enumerate(cmds):
        print(f"{med[i]:.3f} s  {med[0] / med[i]:.3f} of the first  {shlex.join(c)[:100]}")


if __name__ == "__main__":
    main()
