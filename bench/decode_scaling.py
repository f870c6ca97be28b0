#!/usr/bin/python3
"""Decode threads against independent decoders: does one loader with N decode threads go
as fast as N single-thread decoders that share nothing?

For each N (default 1, 2, 4, 8, 16, those the machine has): (a) one libshard Loader with
threads=N decodes an epoch of the shards (decode, RandomResizedCrop-style crop, flip, resize
to 224, batches of 256); (b) N processes at once, each a Loader with threads=1 over its
share of the same epoch (world_size=N, rank=i): no queue, thread or buffer shared. Both are
timed as images/s of wall time, side by side in this run, ROUNDS times interleaved; the
ratio (a)/(b) is the threads' efficiency (target >= 0.9). Packs SRC (an image folder of real
photographs) into shards once and reads them from the page cache.

    python3 bench/decode_scaling.py /tmp/imagefolder [--threads 1,2,4,8,16] [--rounds 2]
"""
import argparse
import glob
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from benchtools import pack, warm

ONE = r'''
import sys, time
sys.path.insert(0, sys.argv[1])
from libshard import _libshard as L
manifest, threads, rank, world = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
sys.stdin.readline()  # everyone starts together; the loader decodes ahead from its open
t = time.perf_counter()
lo = L.Loader([manifest], threads=threads, rank=rank, world_size=world, batch_size=256,
              image_size=224, seed=0, shuffle=1000, flip=True, raw_fields="", epoch=0)
n = 0
for b in lo:
    n += len(memoryview(b))
print(n, time.perf_counter() - t, flush=True)
'''


def run(py, build, manifest, threads, world):
    """Images/s of wall time for world processes of threads decode threads each."""
    procs = [subprocess.Popen([py, "-c", ONE, os.path.join(build, "python"), manifest,
                               str(threads), str(r), str(world)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True) for r in range(world)]
    time.sleep(0.5)  # every process imported and opened
    t = time.perf_counter()
    for p in procs:
        p.stdin.write("go\n")
        p.stdin.flush()
    images = 0
    for p in procs:
        out, _ = p.communicate()
        images += int(out.split()[0])
        if p.returncode:
            raise SystemExit(f"decode_scaling: a decoder failed ({p.returncode})")
    return images / (time.perf_counter() - t), images


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("src", help="an image folder (class/*.jpg) of real photographs")
    ap.add_argument("--threads", default="1,2,4,8,16")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--build", default="build")
    a = ap.parse_args()
    cores = os.cpu_count() or 1
    counts = [n for n in map(int, a.threads.split(",")) if n <= cores]
    tmp = tempfile.mkdtemp(prefix="decode-scaling-")
    try:
        pack(os.path.join(a.build, "tools", "shardpack"), a.src,
             os.path.join(tmp, "s-%04d.tar"), 200)
        warm(glob.glob(os.path.join(tmp, "*.tar")))
        manifest = os.path.join(tmp, "s.json")
        print(f"decode scaling: {cores} CPU cores, python {sys.version.split()[0]}")
        print("threads  one loader img/s  N independent img/s  ratio (target >= 0.9)")
        for n in counts:
            ours, theirs = [], []
            for _ in range(a.rounds):
                ours.append(run(sys.executable, a.build, manifest, n, 1)[0])
                theirs.append(run(sys.executable, a.build, manifest, 1, n)[0])
            o, t = statistics.median(ours), statistics.median(theirs)
            print(f"{n:7d}  {o:17.0f}  {t:19.0f}  {o / t:.3f}", flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
