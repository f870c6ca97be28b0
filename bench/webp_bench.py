#!/usr/bin/python3
"""Decoded batches from WebP shards against the same images as JPEG shards.

The first N photographs of an image folder (class folders kept) are packed twice by
shardpack: as they are (JPEG), and re-encoded by PIL as WebP (lossy, quality 90; what
img2dataset users commonly store). Each set is read for one epoch by libshard.torch's
ShardDataset (random_resized 224, flip, batch 256, num_workers=0: libshard's own decode
threads), each in a fresh process, ROUNDS times interleaved; medians of images per second.
WebP has no reduced-scale partial decode (JPEG's fast path), so the JPEG set is also read
with fast=False: the like-for-like full decode.

    /usr/bin/python3 bench/webp_bench.py /tmp/imagefolder [--n 2000] [--rounds 5]
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from benchtools import pack, warm

REPO = Path(__file__).resolve().parents[1]
WORKER = r'''
import sys, time
sys.path.insert(0, sys.argv[1])
import torch
from libshard.torch import ShardDataset
ds = ShardDataset(sys.argv[2], seed=1, batch_size=256, image_size=224, flip=True,
                  fast=sys.argv[3] == "1")
n = 0
t = time.perf_counter()
for images, labels in torch.utils.data.DataLoader(ds, batch_size=None, num_workers=0):
    n += images.shape[0]
print(n, time.perf_counter() - t)
'''


def first_images(src, n):
    """(class, file name) of an image folder's first n images, in name order."""
    out = []
    for c in sorted(os.listdir(src)):
        out += [(c, f) for f in sorted(os.listdir(os.path.join(src, c)))]
    return out[:n]


def copy_set(src, dst, n, webp):
    """The first n images into dst: linked as they are, or re-encoded as WebP."""
    from PIL import Image
    for c, f in first_images(src, n):
        os.makedirs(os.path.join(dst, c), exist_ok=True)
        out = os.path.join(dst, c, os.path.splitext(f)[0] + ".webp" if webp else f)
        if os.path.exists(out):
            continue
        if webp:
            Image.open(os.path.join(src, c, f)).convert("RGB").save(out, "WEBP", quality=90)
        else:
            os.link(os.path.join(src, c, f), out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("imagefolder")
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "webp-bench"))
    a = ap.parse_args()
    sets = {}
    for kind in ("jpeg", "webp"):
        folder = os.path.join(a.work, kind + "-images")
        copy_set(a.imagefolder, folder, a.n, kind == "webp")
        out = os.path.join(a.work, kind + "-shards")
        if not os.path.exists(os.path.join(out, "t.json")):
            os.makedirs(out, exist_ok=True)
            pack(str(REPO / "build" / "tools" / "shardpack"), folder, os.path.join(out, "t-%06d.tar"),
                 500)
        sets[kind] = os.path.join(out, "t.json")
        warm(sorted(str(p) for p in Path(out).glob("*.tar")))
    runs = {"jpeg fast": (sets["jpeg"], "1"), "jpeg full": (sets["jpeg"], "0"),
            "webp": (sets["webp"], "0")}
    rates = {k: [] for k in runs}
    for _ in range(a.rounds):
        for k, (manifest, fast) in runs.items():
            out = subprocess.run(["/usr/bin/python3", "-c", WORKER, str(REPO / "build" / "python"),
                                  manifest, fast], check=True, capture_output=True,
                                 text=True).stdout.split()
            n, s = int(out[0]), float(out[1])
            assert n == a.n, (k, n)
            rates[k].append(n / s)
    sizes = {k: sum(p.stat().st_size for p in Path(os.path.dirname(m)).glob("*.tar"))
             for k, m in sets.items()}
    print(f"{a.n} photographs; shards: jpeg {sizes['jpeg'] / 1e6:.0f} MB, webp "
          f"{sizes['webp'] / 1e6:.0f} MB; {a.rounds} rounds interleaved, medians")
    med = {k: statistics.median(v) for k, v in rates.items()}
    for k, v in med.items():
        print(f"  {k:10} {v:8.0f} images/s   / jpeg full {v / med['jpeg full']:5.2f}")


if __name__ == "__main__":
    sys.exit(main())
