"""Decoded images a second from a stand-in of the Hugging Face Hub, libshard against
WebDataset's way there, on the same shards and cores.

    /usr/bin/python3 bench/hub_bench.py IMAGEFOLDER [--webdataset DIR] [--rounds 5]

IMAGEFOLDER (../shared/bench-data's make_imagefolder.py makes one) is packed into tar shards
of 500 samples, served by nginx on 127.0.0.1 as the Hub serves a data set's files: each
/datasets/o/n/resolve/COMMIT/PATH answers a 302 to a second server block (the CDN), as
huggingface.co does. Both read the shards pinned to the commit, one epoch each run, in a
fresh process, a round running both (alternating which goes first):
  libshard    ShardDataset("hf://datasets/o/n@COMMIT/...", batch_size=64, image_size=224,
              crop="center"): libshard's reader and its decode threads (2, the cores)
  webdataset  WebDataset 1.0.2 (--webdataset: a copy of its repository at e0953f9) over
              "pipe:curl -s -L .../resolve/COMMIT/..." (what WebDataset users write for the
              Hub), decode("pil"), torchvision's Resize(256) + CenterCrop(224) and
              PILToTensor, batched(64), through a DataLoader with 2 workers
The table gives the median of --rounds rounds in images a second, and the ratio.
"""
import os
import statistics
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "remote"))
import servers  # noqa: E402
from benchtools import packed_once, python_run, webdataset_parser  # noqa: E402

SHA = "0123456789abcdef0123456789abcdef01234567"

LIBSHARD = r"""
import sys, time
sys.path.insert(0, sys.argv[2])
from libshard.torch import ShardDataset
ds = ShardDataset(sys.argv[1], batch_size=64, image_size=224, crop="center", seed=0,
                  threads=2)
t = time.perf_counter()
n = sum(len(y) for x, y in ds)
print(n / (time.perf_counter() - t), n)
"""

WEBDATASET = r"""
import sys, time
sys.path.insert(0, sys.argv[2])
import torch, webdataset as wds
from torchvision import transforms
crop = transforms.Compose([transforms.Resize(256), transforms.CenterCrop(224),
                           transforms.PILToTensor()])
ds = (wds.WebDataset(sys.argv[1], shardshuffle=False).decode("pil").to_tuple("jpg", "cls")
      .map_tuple(crop, None).batched(64))
loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2)
t = time.perf_counter()
n = sum(len(y) for x, y in loader)
print(n / (time.perf_counter() - t), n)
"""


def run(code, url, path, endpoint):
    rate, n = python_run(code, [url, path], {"HF_ENDPOINT": endpoint})
    return float(rate), int(n)


def main():
    ap = webdataset_parser()
    a = ap.parse_args()
    work = Path(tempfile.gettempdir()) / "libshard-hub-bench"
    shards = packed_once(a.imagefolder, work / "www" / "data")
    cdn = servers.free_port()
    ng = servers.Nginx(work / "www", extra=f"""
      location ~ ^/datasets/o/n/resolve/{SHA}/(.*)$ {{ return 302 http://127.0.0.1:{cdn}/$1; }}
    """, http=f"server {{ listen 127.0.0.1:{cdn}; root {work / 'www'}; }}")
    try:
        spec = f"{{000000..{len(shards) - 1:06d}}}"
        ours = f"hf://datasets/o/n@{SHA}/data/train-{spec}.tar"
        theirs = (f"pipe:curl -s -L {ng.url}/datasets/o/n/resolve/{SHA}/data/train-{spec}.tar")
        rows = {"libshard": [], "webdataset": []}
        counts = set()
        for r in range(a.rounds):
            order = ["libshard", "webdataset"] if r % 2 == 0 else ["webdataset", "libshard"]
            for who in order:
                rate, n = (run(LIBSHARD, ours, str(REPO / "build" / "python"), ng.url)
                           if who == "libshard"
                           else run(WEBDATASET, theirs, str(Path(a.webdataset) / "src"), ng.url))
                rows[who].append(rate)
                counts.add(n)
    finally:
        ng.close()
    med = {k: statistics.median(v) for k, v in rows.items()}
    print(f"{len(shards)} shards, {sorted(counts)} images an epoch, {a.rounds} rounds, "
          f"{os.cpu_count()} cores")
    for k, v in rows.items():
        print(f"  {k:11s} {med[k]:8.1f} images/s  (min {min(v):.1f}, max {max(v):.1f})")
    print(f"  libshard / webdataset = {med['libshard'] / med['webdataset']:.2f}")


if __name__ == "__main__":
    main()
