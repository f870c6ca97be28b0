#!/usr/bin/python3
"""The gap between epochs: the time from the last batch of epoch N to the first of N+1,
against the median interval between batches inside an epoch, and the share of those
intervals at least as long as the gap (near half: the gap is an ordinary interval).
libshard's dataset keeps its loader from epoch to epoch, which has already read and decoded the next epoch's first
batches; the baseline makes a new dataset (new threads, cold queues) every epoch, as a
loader without look-ahead does. Target: the gap no longer than a normal batch interval.

    /usr/bin/python3 bench/epoch_gap.py /tmp/imagefolder [--shards 2] [--epochs 4]
"""
import argparse
import glob
import os
import shutil
import statistics
import sys
import tempfile
import time

from benchtools import pack, warm


def run(make, epochs):
    """(in-epoch intervals, [gaps]) over epochs, the first epoch's start left out."""
    stamps = []
    ds = make()
    for e in range(epochs):
        if e and make is not None and getattr(make, "fresh", False):
            ds = make()
        ds.set_epoch(e)
        stamps.append([])
        for _ in ds:
            stamps[-1].append(time.perf_counter())
    inside = [b - a for s in stamps for a, b in zip(s, s[1:])]
    gaps = [stamps[e][0] - stamps[e - 1][-1] for e in range(1, epochs)]
    return inside, gaps


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("src")
    ap.add_argument("--shards", type=int, default=2, help="shards of 1000 images used")
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--build", default="build")
    a = ap.parse_args()
    sys.path.insert(0, os.path.join(a.build, "python"))
    from libshard.torch import ShardDataset
    tmp = tempfile.mkdtemp(prefix="epoch-gap-")
    try:
        pack(os.path.join(a.build, "tools", "shardpack"), a.src, os.path.join(tmp, "s-%04d.tar"),
             1000)
        shards = sorted(glob.glob(os.path.join(tmp, "s-*.tar")))[:a.shards]
        warm(shards)
        kw = dict(seed=0, shuffle=1000, batch_size=128, image_size=224, flip=True)

        def kept():
            return ShardDataset(shards, **kw)

        def fresh():
            return ShardDataset(shards, **kw)
        fresh.fresh = True
        rows = []
        for name, make in (("libshard (one loader, read-ahead)", kept),
                           ("a new loader every epoch", fresh)):
            inside, gaps = run(make, a.epochs)
            rows.append((name, inside, gaps))
        print(f"{a.shards} shards of 1000 photos, batch 128, {a.epochs} epochs, "
              f"{os.cpu_count()} CPUs")
        for name, inside, gaps in rows:
            g, interval = statistics.median(gaps), statistics.median(inside)
            longer = sum(i >= g for i in inside) / len(inside)  # where the gap falls among them
            print(f"{name:36s} batch interval {interval * 1e3:6.1f} ms  epoch gap "
                  f"{g * 1e3:6.1f} ms (median of {len(gaps)})  gap / interval {g / interval:.2f}"
                  f"  intervals as long or longer {100 * longer:.0f}%")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
