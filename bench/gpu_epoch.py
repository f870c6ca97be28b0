#!/usr/bin/python3
"""Where an epoch into GPU memory spends its time: what it costs once (the first batch of a
new ShardDataset, of a later epoch of the same one) against the rate after it, for
device="cpu" and device="cuda" side by side, with what the pinned batch buffers and the
device ring cost to make.

gpu_bench.py's figure 3 makes a new ShardDataset per short epoch; this separates the cost of
starting one from the cost of each batch, so the two can be read apart.

    python3 bench/gpu_epoch.py /tmp/imagefolder [--batch 256] [--epochs 3] [--build build]
"""
import argparse
import glob
import os
import shutil
import sys
import tempfile
import time

import torch

from benchtools import pack, warm


def epochs(manifest, device, epochs, kw):
    """[(seconds to the first batch, seconds for the rest, batches)] for epochs of one
    ShardDataset, and the seconds to make it."""
    from libshard.torch import ShardDataset
    t = time.perf_counter()
    ds = ShardDataset(manifest, device=device, **kw)
    made = time.perf_counter() - t
    out = []
    for e in range(epochs):
        ds.set_epoch(e)
        t = time.perf_counter()
        first = None
        n = 0
        for x, _ in ds:
            if first is None:
                if device == "cuda":
                    torch.cuda.synchronize()
                first = time.perf_counter() - t
            n += 1
        if device == "cuda":
            torch.cuda.synchronize()
        out.append((first, time.perf_counter() - t - first, n))
    del ds
    return made, out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("src", help="an image folder (class/*.jpg)")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--build", default="build")
    a = ap.parse_args()
    sys.path.insert(0, os.path.join(a.build, "python"))
    from libshard import _libshard as lib
    if not torch.cuda.is_available():
        print("gpu_epoch: no CUDA device here: nothing to measure")
        return 0
    torch.zeros(1, device="cuda")  # the context, outside every figure
    nbytes = a.batch * a.size * a.size * 3
    for what, make in (("torch pin_memory of one batch", lambda: torch.empty(
                            nbytes, dtype=torch.uint8).pin_memory()),
                       ("libshard Uploader, 4 buffers", lambda: lib.Uploader(
                            lib.Gpu(0), None, buffers=4, batch_size=a.batch, height=a.size,
                            width=a.size, layout="nchw", dtype="float32"))):
        for i in range(2):
            t = time.perf_counter()
            obj = make()
            torch.cuda.synchronize()
            print(f"make {what} ({nbytes / 1e6:.1f} MB a batch), try {i}: "
                  f"{(time.perf_counter() - t) * 1e3:.1f} ms")
            del obj
    tmp = tempfile.mkdtemp(prefix="gpu-epoch-")
    try:
        pack(os.path.join(a.build, "tools", "shardpack"), a.src,
             os.path.join(tmp, "s-%04d.tar"), 1000)
        warm(glob.glob(os.path.join(tmp, "*.tar")))
        manifest = os.path.join(tmp, "s.json")
        kw = dict(seed=0, shuffle=1000, batch_size=a.batch, image_size=a.size, flip=True)
        print(f"{'device':6} {'epoch':>5} {'first batch ms':>14} {'rest batches/s':>14} "
              f"{'epoch batches/s':>15}")
        for rnd in range(2):
            for device in ("cpu", "cuda"):
                made, eps = epochs(manifest, device, a.epochs, kw)
                print(f"{device:6} made in {made * 1e3:.1f} ms (round {rnd})")
                for e, (first, rest, n) in enumerate(eps):
                    print(f"{device:6} {e:5d} {first * 1e3:14.1f} {(n - 1) / rest:14.2f} "
                          f"{n / (first + rest):15.2f}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
