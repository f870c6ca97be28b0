"""Two builds of libshard side by side on the same shards: decode (shardcat verify --decode,
every image decoded), stream (shardcat stream, an epoch's order through the shuffle buffer)
and resume (shardcat stream --state from the middle of the epoch: the restore's planning and
replay, then the rest), each timed in pairs, the builds taking turns, the ratio BEFORE/AFTER
per pair (above 1: the new build is faster), and its median.

    /usr/bin/python3 bench/two_builds.py BEFORE_BUILD AFTER_BUILD MANIFEST [--rounds 5]

A build is a meson build folder (its tools/shardcat is run). MANIFEST names the shards, a
shardpack manifest (every count known, the cut a line)."""
import argparse
import statistics
import subprocess

from benchtools import timed, warm


def shardcat(build):
    return f"{build}/tools/shardcat"


def state_at(build, manifest, n):
    """The state after n samples of the epoch, as this build writes it."""
    cp = subprocess.run([shardcat(build), "stream", manifest, *ORDER, "--samples", str(n)],
                        check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    return next(l[len("state: "):] for l in cp.stderr.splitlines() if l.startswith("state: "))


ORDER = ["--seed", "1", "--shuffle", "2000", "--mode", "exact"]


def commands(build, manifest, state):
    return {
        "decode": [shardcat(build), "verify", "--decode", manifest],
        "stream": [shardcat(build), "stream", manifest, *ORDER],
        "resume": [shardcat(build), "stream", manifest, *ORDER, "--state", state],
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("manifest")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--at", type=int, default=4000, help="samples before the resume's state")
    a = ap.parse_args()
    import json
    import os
    shards = [os.path.join(os.path.dirname(a.manifest), s["url"])
              for s in json.load(open(a.manifest))["shardlist"]]
    warm(shards)
    builds = {"before": a.before, "after": a.after}
    cmds = {k: commands(b, a.manifest, state_at(b, a.manifest, a.at)) for k, b in builds.items()}
    print(f"before: {a.before}\nafter:  {a.after}\nshards: {a.manifest} ({len(shards)}), "
          f"{a.rounds} pairs a benchmark, the builds in turn after a warm-up of each")
    print(f"{'bench':8} {'before s':>9} {'after s':>9} {'before/after':>13}  (pairs)")
    for bench in ("decode", "stream", "resume"):
        for k in builds:
            timed(cmds[k][bench], quiet=True)  # warm-up
        t = {k: [] for k in builds}
        for r in range(a.rounds):
            order = list(builds) if r % 2 == 0 else list(reversed(builds))
            for k in order:
                t[k].append(timed(cmds[k][bench], quiet=True))
        ratios = [b / f for b, f in zip(t["before"], t["after"])]
        print(f"{bench:8} {statistics.median(t['before']):9.3f} {statistics.median(t['after']):9.3f} "
              f"{statistics.median(ratios):13.3f}  ({', '.join(f'{x:.3f}' for x in ratios)})")


if __name__ == "__main__":
    main()
