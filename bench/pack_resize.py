#!/usr/bin/python3
"""What resizing while packing buys at training time: decoded batches (ShardDataset, 224x224
RandomResizedCrop, the fast path) from shards packed as they are against the same photos
packed with --resize 256, one epoch each, rounds interleaved; and the packing cost of the
resize against plain packing.

    /usr/bin/python3 bench/pack_resize.py /tmp/imagefolder [--rounds 3] [--side 256]
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "build" / "python"))

from benchtools import timed, warm  # noqa: E402

EPOCH = """
import sys, time, torch
sys.path.insert(0, {path!r})
from libshard.torch import ShardDataset
ds = ShardDataset({spec!r}, image_size=224, batch_size=256, seed=0)
t = time.perf_counter()
n = sum(b[0].shape[0] for b in torch.utils.data.DataLoader(ds, batch_size=None, num_workers=0))
print(n, time.perf_counter() - t)
"""


def epoch(spec):
    out = subprocess.run([sys.executable, "-c", EPOCH.format(path=str(REPO / "build" / "python"), spec=spec)],
                         check=True, capture_output=True, text=True).stdout.split()
    return int(out[0]), float(out[1])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("src")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--side", type=int, default=256)
    ap.add_argument("--shardpack", default=str(REPO / "build" / "tools" / "shardpack"))
    a = ap.parse_args()
    files = [os.path.join(r, f) for r, _, fs in os.walk(a.src) for f in fs]
    warm(files)
    work = Path(tempfile.mkdtemp(prefix="libshard-resizebench-", dir=os.path.dirname(os.path.abspath(a.src))))
    try:
        pack_t = {"as they are": [], f"--resize {a.side}": []}
        for _ in range(a.rounds):
            for k, opts in zip(pack_t, ([], ["--resize", str(a.side)])):
                out = work / ("orig" if not opts else "small")
                shutil.rmtree(out, ignore_errors=True)
                out.mkdir()
                pack_t[k].append(timed([a.shardpack, a.src, "-o", str(out / "t-%06d.tar"), "-q", "-c", "500",
                                        "-j", "2", "--no-fsync", *opts]))
        sizes = {k: sum(p.stat().st_size for p in (work / d).glob("*.tar")) for k, d in zip(pack_t, ("orig", "small"))}
        train = {k: [] for k in pack_t}
        for _ in range(a.rounds):
            for k, d in zip(train, ("orig", "small")):
                n, t = epoch(str(work / d / "t.json"))
                train[k].append(n / t)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"input: {len(files)} photos; shards of 500, -j 2; {a.rounds} rounds interleaved, medians")
    print(f"{'shards':18} {'pack s':>8} {'stored MB':>10} {'train img/s':>12}")
    for k in pack_t:
        print(f"{k:18} {statistics.median(pack_t[k]):8.2f} {sizes[k] / 1e6:10.1f} {statistics.median(train[k]):12.0f}")
    o, s = pack_t
    print(f"training rate, resized / as they are = {statistics.median(train[s]) / statistics.median(train[o]):.2f}")
    print(f"packing time, resized / as they are  = {statistics.median(pack_t[s]) / statistics.median(pack_t[o]):.2f}")


if __name__ == "__main__":
    sys.exit(main())
