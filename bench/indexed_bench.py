"""Random-order reading through indexed access against sequential streaming of the same
shards, local and over loopback HTTP (nginx), raw samples in Python on both sides.

    /usr/bin/python3 bench/indexed_bench.py IMAGEFOLDER [--rounds 3] [--shards DIR] [--n N]

IMAGEFOLDER is packed into tar shards of 500 with a manifest unless --shards names a folder
packed before. Each round, in turn: libshard.Reader streaming every sample (4 streams), and
libshard.indexed.IndexedShards reading N samples (default all) in a random order, one at a
time (open_files 16), first from local files, then from nginx on 127.0.0.1. Prints samples/s
(medians) and the indexed / streaming ratio for each place.
"""
import argparse
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "remote"))
sys.path.insert(0, str(REPO / "build" / "python"))
import servers  # noqa: E402

import libshard  # noqa: E402
from libshard.indexed import IndexedShards  # noqa: E402


def stream(url):
    t = time.perf_counter()
    n = sum(1 for _ in libshard.Reader([url], seed=0, streams=4))
    return n, time.perf_counter() - t


def indexed(url, order):
    t = time.perf_counter()
    shards = IndexedShards(url, open_files=16)
    for i in order:
        shards[i]
    return len(order), time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("imagefolder")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--shards")
    ap.add_argument("--n", type=int, default=0, help="samples read by index (0: all)")
    a = ap.parse_args()
    shards = Path(a.shards) if a.shards else Path(tempfile.mkdtemp(prefix="indexed-bench-"))
    if not a.shards:
        subprocess.run([str(REPO / "build" / "tools" / "shardpack"), a.imagefolder, "-o",
                        str(shards / "t-%03d.tar"), "-c", "500", "-q", "-j", "2", "--no-fsync"],
                       check=True)
    ng = servers.Nginx(shards)
    try:
        places = {"local": str(shards / "t.json"), "http": f"{ng.url}/t.json"}
        total = len(IndexedShards(places["local"]))
        order = list(range(total))
        random.Random(0).shuffle(order)
        order = order[:a.n] if a.n else order
        rates = {(p, k): [] for p in places for k in ("stream", "indexed")}
        for _ in range(a.rounds):
            for p, url in places.items():
                n, s = stream(url)
                rates[(p, "stream")].append(n / s)
                n, s = indexed(url, order)
                rates[(p, "indexed")].append(n / s)
    finally:
        ng.close()
    print(f"{total} samples in {len(list(shards.glob('t-*.tar')))} shards; {len(order)} read "
          f"by index in a random order; {a.rounds} rounds (medians)")
    for p in places:
        s, i = (statistics.median(rates[(p, k)]) for k in ("stream", "indexed"))
        print(f"  {p:6s} streaming {s:8.0f} samples/s   indexed {i:8.0f} samples/s   "
              f"indexed / streaming {i / s:.3f}")


if __name__ == "__main__":
    main()
