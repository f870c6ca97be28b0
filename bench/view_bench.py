"""Training on a tenth of a sharded set: libshard's view (keys=) against WebDataset's
.select over the same shards and cores, decoded and raw, and the bytes each reads.

    /usr/bin/python3 bench/view_bench.py IMAGEFOLDER [--webdataset DIR] [--share 0.1]
                                         [--rounds 5]

IMAGEFOLDER (../shared/bench-data's make_imagefolder.py makes one) is packed into tar shards
of 500 samples with their indexes; --share of the keys, drawn with a fixed seed, are the
subset. Each run is a fresh process timing one epoch of the subset; a round runs every case
once with each library, alternating which goes first; the table gives the medians of
--rounds rounds, in chosen samples a second, their ratio, and the bytes each process read
from the shards (/proc/self/io's rchar: page-cache reads count; the DataLoader workers'
included through their own counters, summed):
  libshard decoded  ShardDataset(shards, keys=FILE, batch_size=64, image_size=224,
                    crop="center", threads=2): the chosen samples found in the indexes,
                    read by index, decoded in C
  webdataset decoded  WebDataset(shards).select(key in keys).decode("pil"), torchvision's
                    Resize(256) + CenterCrop(224) + PILToTensor, batched(64), a DataLoader
                    with 2 workers: every sample read and tested, the chosen decoded
  libshard raw      libshard's Reader(shards, keys=FILE): the chosen samples' bytes
  webdataset raw    WebDataset(shards).select(key in keys), one process
"""
import os
import random
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
from benchtools import packed_once, python_run, webdataset_parser  # noqa: E402

IO = r"""
def rchar(pid="self"):
    for line in open(f"/proc/{pid}/io"):
        if line.startswith("rchar:"):
            return int(line.split()[1])
"""

LIBSHARD_DECODED = IO + r"""
import sys, time
sys.path.insert(0, sys.argv[3])
from libshard.torch import ShardDataset
ds = ShardDataset(sys.argv[1], keys=sys.argv[2], batch_size=64, image_size=224, crop="center",
                  seed=0, threads=2)
r0, t = rchar(), time.perf_counter()
n = sum(len(y) for x, y in ds)
print(n / (time.perf_counter() - t), n, rchar() - r0)
"""

LIBSHARD_RAW = IO + r"""
import sys, time
sys.path.insert(0, sys.argv[3])
from libshard import _libshard
r = _libshard.Reader([sys.argv[1]], keys=sys.argv[2], seed=0)
r0, t = rchar(), time.perf_counter()
n = sum(1 for s in r)
print(n / (time.perf_counter() - t), n, rchar() - r0)
"""

WEBDATASET_DECODED = IO + r"""
import os, sys, time
sys.path.insert(0, sys.argv[3])
import torch, webdataset as wds
from torchvision import transforms
keys = set(open(sys.argv[2]).read().split())
crop = transforms.Compose([transforms.Resize(256), transforms.CenterCrop(224),
                           transforms.PILToTensor()])
def chosen(s): return s["__key__"] in keys
def with_io(batch):  # the worker's bytes read so far, with each batch
    return batch, (os.getpid(), rchar())
ds = (wds.WebDataset(sys.argv[1], shardshuffle=False).select(chosen).decode("pil")
      .to_tuple("jpg", "cls").map_tuple(crop, None).batched(64).map(with_io))
loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2)
t, n, last = time.perf_counter(), 0, {}
for (x, y), (pid, io) in loader:
    n += len(y)
    last[pid] = io
print(n / (time.perf_counter() - t), n, sum(last.values()))
"""

WEBDATASET_RAW = IO + r"""
import sys, time
sys.path.insert(0, sys.argv[3])
import webdataset as wds
keys = set(open(sys.argv[2]).read().split())
ds = wds.WebDataset(sys.argv[1], shardshuffle=False).select(lambda s: s["__key__"] in keys)
r0, t = rchar(), time.perf_counter()
n = sum(1 for s in ds)
print(n / (time.perf_counter() - t), n, rchar() - r0)
"""


def run(code, url, keys, path):
    rate, n, io = python_run(code, [url, keys, path])
    return float(rate), int(n), int(io)


def main():
    ap = webdataset_parser()
    ap.add_argument("--share", type=float, default=0.1)
    a = ap.parse_args()
    work = Path(tempfile.gettempdir()) / "libshard-view-bench"
    shards = packed_once(a.imagefolder, work / "data")
    url = str(work / "data" / f"train-{{000000..{len(shards) - 1:06d}}}.tar")
    every = subprocess.run([str(REPO / "build" / "tools" / "shardcat"), "stream", url, "--seed",
                            "0"], capture_output=True, text=True, check=True).stdout.split("\n")
    every = [l.split("\t")[0] for l in every if l]
    keys = work / f"keys-{a.share}.txt"
    keys.write_text("".join(k + "\n" for k in random.Random(1).sample(
        every, int(len(every) * a.share))))
    ours, theirs = str(REPO / "build" / "python"), str(Path(a.webdataset) / "src")
    cases = {("libshard", "decoded"): (LIBSHARD_DECODED, ours),
             ("webdataset", "decoded"): (WEBDATASET_DECODED, theirs),
             ("libshard", "raw"): (LIBSHARD_RAW, ours),
             ("webdataset", "raw"): (WEBDATASET_RAW, theirs)}
    rows = {k: [] for k in cases}
    counts, io = {}, {}
    for r in range(a.rounds):
        for kind in ("decoded", "raw"):
            order = ("libshard", "webdataset") if r % 2 == 0 else ("webdataset", "libshard")
            for who in order:
                code, path = cases[who, kind]
                rate, n, b = run(code, url, keys, path)
                rows[who, kind].append(rate)
                counts.setdefault((who, kind), set()).add(n)
                io[who, kind] = b
    total = sum(p.stat().st_size for p in shards)
    print(f"{len(shards)} shards ({total / 1e6:.0f} MB), {len(every)} samples, "
          f"{int(len(every) * a.share)} chosen ({a.share:.0%}), {a.rounds} rounds, "
          f"{os.cpu_count()} cores")
    for kind in ("decoded", "raw"):
        med = {who: statistics.median(rows[who, kind]) for who in ("libshard", "webdataset")}
        for who in ("libshard", "webdataset"):
            v = rows[who, kind]
            print(f"  {kind:8s} {who:11s} {med[who]:9.1f} samples/s (min {min(v):.1f}, max "
                  f"{max(v):.1f}), {sorted(counts[who, kind])} samples, "
                  f"{io[who, kind] / 1e6:.1f} MB read")
        print(f"  {kind:8s} libshard / webdataset = {med['libshard'] / med['webdataset']:.2f}")


if __name__ == "__main__":
    main()
