#!/usr/bin/python3
"""Sequential sample iteration (no decode) over warm shards, against `cat` and `zstd -dc`.

Packs SRC into .tar and .tar.zst shards of --maxcount samples (once), warms the page
cache, then runs, ROUNDS times interleaved: `cat` of the .tar shards to /dev/null, libshard
iterating them (build/bench/read_iter, plain and --touch reading every cache line of every
member), `zstd -dc` of the .tar.zst shards to /dev/null, and libshard iterating those.
Reports medians and throughput ratios (libshard / baseline; above 1 is faster).

    /usr/bin/python3 bench/read_bench.py /tmp/imagefolder [--rounds 7]
"""
import argparse
import glob
import os
import shutil
import statistics
import sys
import tempfile

from benchtools import pack, timed, warm


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("src")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--maxcount", type=int, default=1000)
    ap.add_argument("--build", default="build")
    a = ap.parse_args()
    sp = os.path.join(a.build, "tools", "shardpack")
    it = os.path.join(a.build, "bench", "read_iter")
    work = tempfile.mkdtemp(prefix="libshard-readbench-")
    try:
        pack(sp, a.src, f"{work}/t-%06d.tar", a.maxcount)
        pack(sp, a.src, f"{work}/z-%06d.tar.zst", a.maxcount)
        tars = sorted(glob.glob(f"{work}/t-*.tar"))
        zsts = sorted(glob.glob(f"{work}/z-*.tar.zst"))
        warm(tars + zsts)
        tar_bytes = sum(os.path.getsize(f) for f in tars)
        cmds = {
            "cat .tar > /dev/null": (["cat"] + tars, False),
            "libshard .tar": ([it, f"{work}/t.json"], False),
            "libshard .tar --touch": ([it, "--touch", f"{work}/t.json"], False),
            "zstd -dc .tar.zst > /dev/null": (["zstd", "-dcq"] + zsts, False),
            "libshard .tar.zst": ([it, f"{work}/z.json"], False),
        }
        times = {k: [] for k in cmds}
        for _ in range(a.rounds):
            for k, (c, sh) in cmds.items():
                times[k].append(timed(c, sh))
        med = {k: statistics.median(v) for k, v in times.items()}
        print(f"{len(tars)} shards, {tar_bytes / 1e6:.1f} MB of tar, {a.rounds} rounds interleaved, medians")
        for k in cmds:
            print(f"  {k:32} {med[k]:8.4f} s  {tar_bytes / med[k] / 1e9:6.2f} GB/s (of tar)")
        print("throughput ratios (above 1: libshard is faster):")
        print(f"  libshard .tar / cat                 = {med['cat .tar > /dev/null'] / med['libshard .tar']:.2f}")
        print(f"  libshard .tar --touch / cat         = {med['cat .tar > /dev/null'] / med['libshard .tar --touch']:.2f}")
        print(f"  libshard .tar.zst / zstd -dc        = {med['zstd -dc .tar.zst > /dev/null'] / med['libshard .tar.zst']:.2f}")
    finally:
        shutil.rmtree(work)


if __name__ == "__main__":
    sys.exit(main())
