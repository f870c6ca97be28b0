"""The peer pipeline `shardcat bench --peer` sets beside libshard's: what WebDataset users run
on the same shards. WebDataset itself when it is installed (`webdataset.WebDataset`, its
"pil" decoder), else the same thing written out: the shards read in order with tarfile,
members grouped into samples by WebDataset's rules, PIL decode. Then torchvision's
RandomResizedCrop, RandomHorizontalFlip and PILToTensor, batched by a torch DataLoader whose
workers split the shards. Local shards and http(s):// ones (streamed); the shard list comes
from libshard, so patterns and manifests name the same shards as for libshard.

    /usr/bin/python3 -m libshard.peer [--seconds S] [--warmup S] [--workers N]
        [--batch-size N] [--image-size N] SHARD...

prints one JSON line: {"samples_per_second", "samples", "seconds", "workers", "pipeline"}.
"""
import argparse
import io
import json
import sys
import tarfile
import time
import urllib.request
from .redact import shown

IMAGE = ("jpg", "jpeg", "png")


def _open(url):
    if url.startswith(("http://", "https://")):
        return tarfile.open(fileobj=urllib.request.urlopen(url), mode="r|*")
    if url.startswith("file://"):
        url = url[len("file://"):]
    if "://" in url:
        raise SystemExit(f"libshard.peer: {shown(url)}: the peer reads local and http(s) shards")
    return tarfile.open(url, mode="r|*")


def _samples(url):
    """A shard's samples as WebDataset groups them: regular members; the key is the name up
    to the first dot of its basename, the field the rest, lower-cased; a sample ends where
    the key changes."""
    sample, key = {}, None
    with _open(url) as tf:
        for m in tf:
            if not m.isfile():
                continue
            base = m.name.rsplit("/", 1)[-1]
            if "." not in base or base.startswith("."):
                continue
            stem, ext = base.split(".", 1)
            k = m.name[: len(m.name) - len(base)] + stem
            if key is not None and k != key:
                yield sample
                sample = {}
            key = k
            sample[ext.lower()] = tf.extractfile(m).read()
    if sample:
        yield sample


def _pipeline(urls, size, batch_size, workers):
    import torch
    import torchvision.transforms as T
    from PIL import Image

    tf = T.Compose([T.RandomResizedCrop(size), T.RandomHorizontalFlip(), T.PILToTensor()])
    try:
        import webdataset as wds
    except ImportError:
        wds = None

    def first_image(s):
        return next(s[k] for k in IMAGE if k in s)

    if wds is not None:
        ds = (wds.WebDataset(urls, shardshuffle=False, nodesplitter=None, empty_check=False)
              .decode("pil").to_tuple("jpg;jpeg;png").map_tuple(tf))
        name = "webdataset %s (pil) + torchvision" % getattr(wds, "__version__", "")
    else:
        class Shards(torch.utils.data.IterableDataset):
            def __iter__(self):
                info = torch.utils.data.get_worker_info()
                mine = urls[info.id::info.num_workers] if info else urls
                for u in mine:
                    for s in _samples(u):
                        img = Image.open(io.BytesIO(first_image(s))).convert("RGB")
                        yield (tf(img),)
        ds = Shards()
        name = "tarfile + WebDataset grouping + PIL + torchvision"
    dl = torch.utils.data.DataLoader(ds, batch_size=batch_size, num_workers=workers,
                                     persistent_workers=workers > 0)
    return dl, f"{name}, DataLoader with {workers} worker{'s' if workers != 1 else ''}"


def run(urls, seconds, warmup, size, batch_size, workers):
    """Samples/s over seconds after warmup, epochs repeated as needed."""
    dl, name = _pipeline(urls, size, batch_size, workers)
    start = time.perf_counter()
    t0, n = None, 0
    while True:
        got = 0
        for (images,) in dl:
            got += 1
            now = time.perf_counter()
            if t0 is None:
                if now - start >= warmup:
                    t0 = now
                continue
            n += images.shape[0]
            if now - t0 >= seconds:
                return {"samples_per_second": n / (now - t0), "samples": n,
                        "seconds": now - t0, "workers": workers, "pipeline": name}
        if not got:
            raise SystemExit("libshard.peer: the shards have no samples with an image")


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m libshard.peer")
    ap.add_argument("shards", nargs="+")
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--warmup", type=float, default=2)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--image-size", type=int, default=224)
    a = ap.parse_args(argv)
    from . import _libshard
    urls = [u for u, *_ in _libshard.list_shards(a.shards)]
    print(json.dumps(run(urls, a.seconds, a.warmup, a.image_size, a.batch_size, a.workers)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
