"""Aspect-ratio buckets: decoded batches a second, side by side on the same shards and cores.

    /usr/bin/python3 bench/bucket_bench.py IMAGEFOLDER [--n 2000] [--rounds 5] [--threads 2]
                                           [--webdataset DIR]

IMAGEFOLDER (../shared/bench-data's make_imagefolder.py makes one) gives the photographs;
--n of them are cut to 4:3, 3:4, 16:9 and 1:1 in turn (a mixed-aspect set, JPEG quality 90)
and packed by shardpack into shards of 500 with their image sizes (.cols). The cases, each
a fresh process timing one epoch, a round running each once in turn (the order rotating),
the medians of --rounds rounds:

  center      libshard's Loader, the fixed-size path: crop="center" at 224 x 224
  whole       the same with crop="none": the whole image resized to 224 x 224 (the image
              decoded whole, as a bucket's cover crop of it nearly is)
  buckets     libshard's Loader with aspect_buckets of 224 x 224's area (192x256, 256x192,
              168x296, 224x224), crop="center" (resized to cover the bucket, its middle
              taken): the same output pixels a sample within 1 %
  python      WebDataset + PIL as diffusion trainers bucket in Python: read the tar, decode
              with PIL, the nearest bucket in log aspect, resize to cover it, crop the
              middle, per-bucket batches of 64 collected in each DataLoader worker
              (--threads workers), the batches crossing to the main process as tensors

libshard's cases decode on --threads threads; WebDataset's on --threads DataLoader
workers. --webdataset is a copy of WebDataset's repository at v1.0.2 (default:
~/.cache/libshard/webdataset-e0953f9, the copy tests/wds_suite/run.py runs).
"""
import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BUCKETS = "192x256,256x192,168x296,224x224"
BATCH = 64

RUN = r"""
import json, math, os, sys, time, warnings
warnings.simplefilter("ignore")
case, manifest, shards, threads, wdsdir = sys.argv[1:6]
threads = int(threads)
BUCKETS = [tuple(int(v) for v in s.split("x")) for s in sys.argv[6].split(",")]
B = int(sys.argv[7])
from libshard import _libshard  # noqa: E402  (imports before the clock starts)
sys.path.insert(0, wdsdir)
import numpy as np  # noqa: E402
import torch  # noqa: E402
import webdataset as wds  # noqa: E402
from PIL import Image  # noqa: E402
t0 = time.perf_counter()
n = 0
if case in ("center", "whole", "buckets"):
    extra = dict(aspect_buckets=sys.argv[6]) if case == "buckets" else {}
    ld = _libshard.Loader(manifest, seed=0, batch_size=B, image_size=224,
                          crop="none" if case == "whole" else "center", threads=threads, **extra)
    for b in ld:
        n += b.size
else:
    logs = [math.log(w / h) for h, w in BUCKETS]

    def bucketed(samples):
        pending = {}
        for s in samples:
            im = s["jpg"].convert("RGB")
            W, H = im.size
            k = min(range(len(BUCKETS)), key=lambda i: (abs(math.log(W / H) - logs[i]), i))
            h, w = BUCKETS[k]
            s_ = max(w / W, h / H)
            rw, rh = max(w, round(W * s_)), max(h, round(H * s_))
            im = im.resize((rw, rh), Image.BILINEAR)
            x, y = (rw - w) // 2, (rh - h) // 2
            a = np.asarray(im.crop((x, y, x + w, y + h)))
            pending.setdefault(k, []).append(torch.from_numpy(a).permute(2, 0, 1))
            if len(pending[k]) == B:
                yield torch.stack(pending.pop(k))
        for rest in pending.values():
            yield torch.stack(rest)

    ds = wds.DataPipeline(wds.SimpleShardList(shards), wds.split_by_worker,
                          wds.tarfile_to_samples(), wds.decode("pil"), bucketed)
    for x in torch.utils.data.DataLoader(ds, batch_size=None, num_workers=threads):
        n += x.shape[0]
print(json.dumps({"n": n, "seconds": time.perf_counter() - t0}))
"""


def mixed_set(src, n, out):
    """n photographs of src cut to 4:3, 3:4, 16:9 and 1:1 in turn, into out/c{k}/."""
    files = sorted(Path(src).rglob("*.jpg"))[:n]
    from PIL import Image
    aspects = [(4, 3), (3, 4), (16, 9), (1, 1)]
    rng = random.Random(0)
    for i, f in enumerate(files):
        im = Image.open(f).convert("RGB")
        W, H = im.size
        aw, ah = aspects[i % 4]
        s = min(W / aw, H / ah) * rng.uniform(0.85, 1.0)
        w, h = int(aw * s), int(ah * s)
        x, y = rng.randrange(W - w + 1), rng.randrange(H - h + 1)
        p = out / f"c{i % 10}" / f"m{i:05d}.jpg"
        p.parent.mkdir(parents=True, exist_ok=True)
        im.crop((x, y, x + w, y + h)).save(p, quality=90)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("imagefolder")
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--webdataset",
                    default=str(Path.home() / ".cache/libshard/webdataset-e0953f9"))
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bucket-bench-"))
    mixed_set(a.imagefolder, a.n, work / "img")
    shardpack = REPO / "build" / "tools" / "shardpack"
    subprocess.run([str(shardpack), str(work / "img"), "-o",
                    str(work / "s" / "train-%06d.tar"), "-c", "500", "--no-fsync", "-q"],
                   check=True)
    manifest = work / "s" / "train.json"
    tars = sorted((work / "s").glob("train-*.tar"))
    shards = str(work / "s" / f"train-{{000000..{len(tars) - 1:06d}}}.tar")
    env = dict(os.environ, PYTHONPATH=str(REPO / "build" / "python"))
    cases = ["center", "whole", "buckets", "python"]
    rates = {c: [] for c in cases}
    for r in range(a.rounds):
        for c in cases[r % len(cases):] + cases[:r % len(cases)]:
            cp = subprocess.run([sys.executable, "-c", RUN, c, str(manifest), shards,
                                 str(a.threads), str(Path(a.webdataset) / "src"), BUCKETS,
                                 str(BATCH)], capture_output=True, text=True, env=env)
            if cp.returncode:
                sys.exit(f"bucket_bench: {c}: {cp.stderr[-3000:]}")
            got = json.loads(cp.stdout.strip().splitlines()[-1])
            assert got["n"] == a.n, (c, got)
            rates[c].append(got["n"] / got["seconds"])
    print(f"{a.n} photographs cut to 4:3, 3:4, 16:9, 1:1; batches of {BATCH}; "
          f"{a.threads} threads; medians of {a.rounds} rounds, images/s")
    med = {c: statistics.median(v) for c, v in rates.items()}
    for c in cases:
        print(f"  {c:10s} {med[c]:8.1f}   (min {min(rates[c]):.1f}, max {max(rates[c]):.1f})")
    print(f"  buckets / center = {med['buckets'] / med['center']:.2f}")
    print(f"  buckets / whole  = {med['buckets'] / med['whole']:.2f}")
    print(f"  buckets / python = {med['buckets'] / med['python']:.2f}")


if __name__ == "__main__":
    main()
