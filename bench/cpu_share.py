"""Where a command's CPU goes on this machine: runs it (output thrown away) and prints its
wall time, the machine's idle share meanwhile, the command's own CPU time and that of other
processes named on the command line (a server sharing the cores, e.g. nginx's worker).

    /usr/bin/python3 bench/cpu_share.py [--watch NAME ...] -- COMMAND...

Read from /proc/stat, the command's rusage and /proc/PID/stat of the watched processes.
"""
import os
import resource
import sys

from benchtools import timed

TICK = os.sysconf("SC_CLK_TCK")


def machine():
    f = open("/proc/stat").readline().split()[1:9]
    t = [int(x) for x in f]
    return sum(t), t[3] + t[4]  # all, idle + iowait


def pids(name):
    out = []
    for p in os.listdir("/proc"):
        if p.isdigit() and int(p) != os.getpid():
            try:
                if name in open(f"/proc/{p}/cmdline", "rb").read().replace(b"\0", b" ").decode():
                    out.append(int(p))
            except OSError:
                pass
    return out


def cpu_of(pid):
    try:
        f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        return (int(f[11]) + int(f[12])) / TICK  # utime, stime
    except OSError:
        return 0.0


def main():
    argv = sys.argv[1:]
    watch = []
    while argv and argv[0] == "--watch":
        watch.append(argv[1])
        argv = argv[2:]
    if not argv or argv[0] != "--":
        sys.exit(__doc__)
    cmd = argv[1:]
    watched = {n: pids(n) for n in watch}
    before = {n: sum(cpu_of(p) for p in ps) for n, ps in watched.items()}
    a0, i0 = machine()
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = timed(cmd, quiet=True)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    a1, i1 = machine()
    line = (f"wall {wall:.3f} s  idle {(i1 - i0) / max(a1 - a0, 1):.1%}  "
            f"command {r1.ru_utime - r0.ru_utime:.2f} user + {r1.ru_stime - r0.ru_stime:.2f} sys CPU-s")
    for n, ps in watched.items():
        line += f"  {n} {sum(cpu_of(p) for p in ps) - before[n]:.2f} CPU-s"
    print(line)


if __name__ == "__main__":
    main()
