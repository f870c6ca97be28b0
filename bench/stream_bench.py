#!/usr/bin/python3
"""The streaming reader without decode, against sequential iteration, on warm shards.

Packs SRC into .tar shards (once), warms the page cache, then runs ROUNDS times,
interleaved: `shardcat ls` and `shardcat stream` (shard shuffle, rank split, 4 interleaved
streams, a 1000-sample shuffle buffer) printing one line per sample to /dev/null, and the
same two in-process touching every cache line of every sample (build/bench/read_iter).
Also times an epoch plan for 1,000,000 shards and 4,096 ranks (build/bench/plan_bench).

    /usr/bin/python3 bench/stream_bench.py /tmp/imagefolder [--rounds 7]
"""
import argparse
import glob
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

from benchtools import pack, timed, warm


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("src")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--build", default="build")
    a = ap.parse_args()
    sp = os.path.join(a.build, "tools", "shardpack")
    sc = os.path.join(a.build, "tools", "shardcat")
    it = os.path.join(a.build, "bench", "read_iter")
    work = tempfile.mkdtemp(prefix="libshard-streambench-")
    try:
        pack(sp, a.src, f"{work}/t-%06d.tar", 500)
        m = f"{work}/t.json"
        warm(glob.glob(f"{work}/*.tar"))
        cmds = {
            "shardcat ls": [sc, "ls", m],
            "shardcat stream --shuffle 1000": [sc, "stream", m, "--seed", "1", "--shuffle", "1000"],
            "iterate (ShardFile), touch": [it, "--touch", m],
            "reader (shuffle 1000, 4 streams), touch": [it, "--touch", "--reader", "1000", "4", m],
        }
        times = {k: [] for k in cmds}
        for _ in range(a.rounds):
            for k, c in cmds.items():
                times[k].append(timed(c, quiet=True))
        med = {k: statistics.median(v) for k, v in times.items()}
        n = 0
        out = subprocess.run([sc, "ls", m], check=True, capture_output=True, text=True).stdout
        n = out.count("\n")
        print(f"{n} samples in {len(glob.glob(work + '/*.tar'))} shards, {a.rounds} rounds interleaved, medians")
        for k in cmds:
            print(f"  {k:42} {med[k]:8.4f} s  {n / med[k]:10.0f} samples/s")
        print("throughput ratios (reader / sequential iteration; 1 is no cost):")
        print(f"  shardcat stream / shardcat ls            = {med['shardcat ls'] / med['shardcat stream --shuffle 1000']:.2f}")
        print(f"  reader / ShardFile, in process, touched  = {med['iterate (ShardFile), touch'] / med['reader (shuffle 1000, 4 streams), touch']:.2f}")
        print(subprocess.run([os.path.join(a.build, "bench", "plan_bench"), "1000000", "4096"], check=True,
                             capture_output=True, text=True).stdout.strip())
    finally:
        shutil.rmtree(work)


if __name__ == "__main__":
    sys.exit(main())
