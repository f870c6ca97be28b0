"""libshard.wids: WebDataset's indexed datasets (wids) on libshard's indexed access, so that
a wids user changes one import:

    from libshard.wids import ShardListDataset, ShardListSampler    # was: from wids import ...
    ds = ShardListDataset("shards/train.json")                       # a wids descriptor
    ds[7]   # {".jpg": PIL image, ".cls": 3, "__key__": ..., "__index__": 7, "__shard__": ...,
            #  "__shardindex__": ..., "__dataset__": ...}

The descriptor is wids's JSON ({"shardlist": [{"url", "nsamples", ...}], "name"}), which
shardpack's manifests are; relative urls resolve against the descriptor's location, local or
remote (http(s), gs, s3). A sample is wids's dict: each field keyed by its extension with the
leading dot (".jpg", ".seg.png") holding a readable stream until a transformation decodes it
("PIL", the default, and "numpy" decode as wids's default decoder does: images, .cls/.cls2
as int, .txt as str, .json, .npy, .pt/.pth, .pickle/.pkl, .gz inside), plus "__key__",
"__index__", "__shard__" (the shard's url), "__shardindex__" and "__dataset__".

Differences: shards are read in place (a Range request per sample for remote ones) through
their indexes (.idx beside each shard, as shardpack writes them; `shardcat index` makes one),
not downloaded whole into a cache; field names are lower-cased as WebDataset's loader does;
options of wids's download cache that have no meaning here (localname, keep) raise.
"""
import gzip
import io
import json
import os
import pickle
import random
import warnings
from collections.abc import Sequence
from functools import partial

from .indexed import IndexedShards

try:
    from torch.utils.data import Dataset, Sampler
except ImportError:  # wids works without torch too
    Dataset = Sampler = object

__all__ = ["ShardListDataset", "ShardListSampler", "ShardedSampler", "ChunkedSampler",
           "DistributedChunkedSampler", "default_decoder"]


def default_decoder(sample, format=True):
    """Decodes a wids sample's streams by extension, as wids's default decoder does: images
    as PIL images (format "PIL") or arrays ("numpy"), .cls/.cls2 int, .txt/.text str, .json,
    .npy, .pt/.pth, .pickle/.pkl; a trailing .gz is decompressed first. Returns a new dict."""
    sample = dict(sample)
    for key, stream in sample.items():
        if key.startswith("__") or not hasattr(stream, "read"):
            continue
        ext = key.split(".")
        last = ext[-1]
        if last == "gz":
            stream = io.BytesIO(gzip.decompress(stream.read()))
            if len(ext) < 3:
                sample[key] = stream
                continue
            last = ext[-2]
        if last in ("txt", "text"):
            sample[key] = stream.read().decode("utf-8")
        elif last in ("cls", "cls2"):
            sample[key] = int(stream.read().decode("utf-8"))
        elif last in ("jpg", "jpeg", "png", "ppm", "pgm", "pbm", "pnm"):
            import PIL.Image
            if format == "PIL":
                sample[key] = PIL.Image.open(stream)
            elif format == "numpy":
                import numpy as np
                sample[key] = np.asarray(PIL.Image.open(stream))
            else:
                raise ValueError(f"Unknown format: {format}")
        elif last == "json":
            sample[key] = json.loads(stream.read())
        elif last == "npy":
            import numpy as np
            sample[key] = np.load(stream)
        elif last in ("pt", "pth"):
            import torch
            sample[key] = torch.load(stream)
        elif last in ("pickle", "pkl"):
            sample[key] = pickle.load(stream)
    return sample


def _transformations(t):
    out = []
    for x in (t if isinstance(t, list) else [t]):
        if x == "PIL":
            x = partial(default_decoder, format="PIL")
        elif x == "numpy":
            x = partial(default_decoder, format="numpy")
        elif not callable(x):
            raise ValueError(f"transformations: 'PIL', 'numpy' or callables, not {x!r}")
        out.append(x)
    return out


class _Shards(Sequence):
    """wids's shard list, {"url", "nsamples"[, "dataset"]} a shard, made as it is asked for:
    a million shards hold no dict each."""

    def __init__(self, indexed, datasets):
        self.indexed, self.datasets = indexed, datasets

    def __len__(self):
        return len(self.indexed.urls)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        i = range(len(self))[i]
        d = {"url": self.indexed.urls[i], "nsamples": self.indexed.counts[i]}
        if i in self.datasets:
            d["dataset"] = self.datasets[i]
        return d


class ShardListDataset(Dataset):
    """An indexable dataset over a list of shards, as wids's ShardListDataset: shards is a
    wids descriptor (a path or URL to its JSON, or an open file) or a list of
    {"url", "nsamples"} dicts. lru_size shards are kept open per process; cache_dir and
    cache_size keep remote shards' bytes on local disk (libshard's cache). keys (libshard's):
    a view, the samples a file or list of keys chooses alone (IndexedShards' keys)."""

    def __init__(self, shards, *, cache_size=int(1e12), cache_dir=None, lru_size=10,
                 dataset_name=None, localname=None, transformations="PIL", keep=False,
                 base=None, options=None, keys=None):
        super().__init__()
        if localname is not None:
            raise NotImplementedError("localname: libshard reads shards in place (or through "
                                      "cache_dir), it has no download names to map")
        if keep:
            raise NotImplementedError("keep: libshard does not download shards whole")
        remote = {"cache_dir": os.fspath(cache_dir)} if cache_dir is not None else {}
        if cache_dir is not None:
            remote["cache_size"] = int(cache_size)
        if isinstance(shards, io.IOBase):
            shards = json.load(shards).get("shardlist", [])
        if isinstance(shards, (str, os.PathLike)):
            url = os.fspath(shards)
            self.base = base if base is not None else url.rsplit("/", 1)[0] if "/" in url else "."
            # libshard reads the manifest, under its limits, with its name and each shard's
            # "dataset": Python builds no object of the whole
            self.indexed = IndexedShards(url, open_files=lru_size, keys=keys, **remote)
            name = self.indexed.manifests["names"][0]
            self.spec = {"name": name} if name else {}
            self.shards_source = url
            self.shards = _Shards(self.indexed, self.indexed.manifests["datasets"])
            self.dataset_name = name or dataset_name or url
        else:
            self.base = base
            self.spec = options or {}
            self.shards = [dict(d) for d in shards]
            for d in self.shards:
                if base is not None and "://" not in d["url"] and not os.path.isabs(d["url"]):
                    d["url"] = os.path.join(base, d["url"])
            self.indexed = IndexedShards(None, open_files=lru_size, keys=keys, **remote,
                                         entries=[(d["url"], d["nsamples"]) for d in self.shards])
            self.dataset_name = dataset_name or str(shards)[:64]
        self.lengths = list(self.indexed.counts)
        self.total_length = len(self.indexed)
        self.transformations = _transformations(transformations)
        if lru_size > 200:
            warnings.warn("LRU size is very large; consider reducing it to avoid running out "
                          "of file descriptors")
        self.accesses = self.misses = 0
        self._seen = set()

    def add_transform(self, transform):
        """Appends a transformation (a callable on the sample dict); returns the dataset."""
        self.transformations.append(transform)
        return self

    def __len__(self):
        return self.total_length

    def get_stats(self):
        """(accesses, shard opens): how often a sample needed a shard not opened before."""
        return self.accesses, self.misses

    def __getitem__(self, index):
        raw = self.indexed[index]
        s, _ = self.indexed.locate(index)
        self.accesses += 1
        if s not in self._seen:
            self._seen.add(s)
            self.misses += 1
        sample = {}
        for k, v in raw.items():
            if not k.startswith("__"):
                sample["." + k] = io.BytesIO(v)
        sample["__key__"] = raw["__key__"]
        sample["__dataset__"] = self.shards[s].get("dataset")
        sample["__index__"] = raw["__index__"]
        sample["__shard__"] = raw["__shard__"]
        sample["__shardindex__"] = raw["__shardindex__"]
        for t in self.transformations:
            sample = t(sample)
        return sample

    def close(self):
        """Lets go of the open shards."""
        self.indexed.close()


def _ranges(lengths):
    out, start = [], 0
    for n in lengths:
        out.append((start, start + n))
        start += n
    return out


def _iterate(ranges, rng, indexshuffle=True, shardshuffle=True):
    order = list(range(len(ranges)))
    if shardshuffle:
        rng.shuffle(order)
    for i in order:
        idx = list(range(*ranges[i]))
        if indexshuffle:
            rng.shuffle(idx)
        yield from idx


class ShardListSampler(Sampler):
    """wids's shard-local sampler: the shards in a random order (from the second epoch, or
    the first with shufflefirst), each shard's indexes shuffled; the epoch advances per
    iteration."""

    def __init__(self, dataset, *, lengths=None, seed=0, shufflefirst=False):
        self.ranges = _ranges(list(dataset.lengths) if lengths is None else lengths)
        self.seed, self.shufflefirst, self.epoch = seed, shufflefirst, 0

    def __iter__(self):
        rng = random.Random(self.seed + 1289738273 * self.epoch)
        yield from _iterate(self.ranges, rng, shardshuffle=self.shufflefirst or self.epoch > 0)
        self.epoch += 1

    def __len__(self):
        return self.ranges[-1][1] if self.ranges else 0


ShardedSampler = ShardListSampler


class ChunkedSampler(Sampler):
    """wids's chunked sampler: indexes in chunks of chunksize, the chunks and the indexes in
    them shuffled (chunks from the second epoch, or the first with shufflefirst)."""

    def __init__(self, dataset, *, num_samples=None, chunksize=2000, seed=0, shuffle=True,
                 shufflefirst=False):
        lo, hi = ((0, num_samples) if isinstance(num_samples, int) else
                  (0, len(dataset)) if num_samples is None else num_samples)
        self.ranges = [(i, min(i + chunksize, hi)) for i in range(lo, hi, chunksize)]
        self.seed, self.shuffle, self.shufflefirst, self.epoch = seed, shuffle, shufflefirst, 0

    def set_epoch(self, epoch):
        """The epoch whose permutation the next iteration draws."""
        self.epoch = epoch

    def __iter__(self):
        rng = random.Random(self.seed + 1289738273 * self.epoch)
        shards = self.shuffle and (self.shufflefirst or self.epoch > 0)
        yield from _iterate(self.ranges, rng, indexshuffle=self.shuffle, shardshuffle=shards)
        self.epoch += 1

    def __len__(self):
        return sum(b - a for a, b in self.ranges)


def DistributedChunkedSampler(dataset, *, num_replicas=None, num_samples=None, rank=None,
                              shuffle=True, shufflefirst=False, seed=0, drop_last=None,
                              chunksize=1000000):
    """wids's per-rank ChunkedSampler: rank r takes the r-th of num_replicas contiguous
    slices of the indexes (from torch.distributed when it is initialized)."""
    import torch.distributed as dist
    if drop_last is not None:
        warnings.warn("DistributedChunkedSampler does not support drop_last, thus it will be "
                      "ignored")
    if not dist.is_available() or not dist.is_initialized():
        warnings.warn("DistributedChunkedSampler is called without distributed initialized; "
                      "assuming single process")
        num_replicas, rank = 1, 0
    else:
        num_replicas = num_replicas or dist.get_world_size()
        rank = rank or dist.get_rank()
    if not 0 <= rank < num_replicas:
        raise ValueError(f"rank {rank} of {num_replicas}")
    n = num_samples or len(dataset)
    chunk = (n + num_replicas - 1) // num_replicas
    start = rank * chunk
    return ChunkedSampler(dataset, num_samples=(start, min(start + chunk, n)),
                          chunksize=chunksize, seed=seed, shuffle=shuffle,
                          shufflefirst=shufflefirst)
