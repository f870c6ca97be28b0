"""IndexedShardDataset: a map-style torch dataset over shards, ds[i] decoded in C from sample
i, read through its shard's index (libshard.indexed.IndexedShards)."""
import torch
import torch.utils.data

from .. import _libshard
from .. import settings as _settings
from ..indexed import IndexedShards
from ..redact import shown

_KEYS = _settings.INDEXED_KEYS

# ShardDataset's settings that order or split a stream: a sampler does that for a map-style
# dataset, and a DataLoader batches it
_STREAMING = {
    "shuffle": "a sampler orders a map-style dataset (DistributedSampler(shuffle=True), "
               "RandomSampler)",
    "shuffle_shards": "a sampler orders a map-style dataset",
    "shuffle_initial": "a sampler orders a map-style dataset",
    "mode": "DistributedSampler splits a map-style dataset between ranks (drop_last for "
            "equal counts)",
    "pad": "DistributedSampler pads (drop_last=False)",
    "epoch_samples": "a sampler sets the samples per epoch (RandomSampler(num_samples=...))",
    "batch_size": "DataLoader(batch_size=...) batches a map-style dataset",
    "drop_last": "DataLoader(drop_last=...) batches a map-style dataset",
}


def _mix(*parts):
    """A 64-bit seed from integers (splitmix64 steps): each sample's augmentation draws."""
    x = 0
    for p in parts:
        x = (x ^ (int(p) & 0xFFFFFFFFFFFFFFFF)) + 0x9E3779B97F4A7C15 & 0xFFFFFFFFFFFFFFFF
        x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9 & 0xFFFFFFFFFFFFFFFF
        x = (x ^ (x >> 27)) * 0x94D049BB133111EB & 0xFFFFFFFFFFFFFFFF
        x ^= x >> 31
    return x


class IndexedShardDataset(torch.utils.data.Dataset):
    """A map-style dataset over shards: len(ds), ds[i] -> (image, label), ds.raw(i) -> the
    sample's dict. Any sampler orders it: one permutation per epoch spread over ranks by
    torch's DistributedSampler, or a custom one.

    spec: a manifest, braces, a gs:// / s3:// prefix or a list of them, local or remote
    (the remote settings, as ShardDataset's). Each shard needs its sample count (a manifest,
    or the .idx beside it, which also gives the random access: a seek locally, a Range
    request remotely). open_files: shards kept open per process. Transform settings as
    ShardDataset's: image_size, crop ("center" for evaluation), flip, fast, dtype ("uint8",
    or "float32" normalized with mean and std), scale, ratio, image_fields, label_field,
    missing_label. Images come out (3, H, W). Augmentation draws follow (seed, epoch,
    index): set_epoch changes them; the same index in the same epoch is the same image.
    decode=False: ds[i] is the sample's dict, as ShardDataset(decode=False) yields it. Shards
    without an index (plain tars) are indexed once and kept in index_cache (IndexedShards);
    make_indexes="never" refuses them instead. keys: a view (IndexedShards' keys): the samples
    a file or list of keys chooses alone. ShardDataset's streaming and batching
    settings are refused, each naming what does it for a map-style dataset.
    """

    def __init__(self, spec, *, seed=0, open_files=8, decode=True, index_cache=None, keys=None,
                 **options):
        super().__init__()
        remote = {k: options.pop(k) for k in list(options) if k in _settings.REMOTE_KEYS}
        make = options.pop("make_indexes", "auto")
        if make not in ("auto", "always", "never"):
            raise ValueError(f"make_indexes: 'auto', 'always' or 'never', not {make!r}")
        for k in options:
            if k in _STREAMING:
                raise TypeError(f"IndexedShardDataset: {k!r} is a streaming setting: "
                                f"{_STREAMING[k]}")
            if k not in _KEYS and k in _settings.READER_KEYS + _settings.LOADER_KEYS:
                raise TypeError(f"IndexedShardDataset: {k!r} is ShardDataset's (its streaming "
                                f"reader's or batch loader's); a map-style dataset reads one "
                                f"sample at a time (ds.raw(i) gives every field)")
        unknown = set(options) - set(_KEYS)
        if unknown:
            raise _settings.unknown("IndexedShardDataset", unknown,
                                    [*_KEYS, *_settings.REMOTE_KEYS, "seed", "open_files",
                                     "decode", "index_cache", "make_indexes", "keys"])
        self.options = _settings.check(options)
        self.seed = _settings.check({"seed": seed})["seed"]
        self.decode = bool(decode)
        self.epoch = 0
        self.shards = IndexedShards(spec, open_files=open_files, index_cache=index_cache,
                                    make_indexes=make != "never", keys=keys, **remote)
        o = {**{k: _settings.DEFAULTS[k] for k in _KEYS}, **self.options}
        size = o["image_size"]
        self.height, self.width = (size, size) if isinstance(size, int) else size
        self._decode = dict(crop=o["crop"], fast=o["fast"], flip=o["flip"], layout="nchw")
        for k in ("scale", "ratio"):
            if k in self.options:
                self._decode[k] = o[k]
        self._fields = o["image_fields"].split(";")
        self._label = o["label_field"]
        self._float = o["dtype"] == "float32"
        self._mean = torch.tensor(o["mean"]).view(3, 1, 1)
        self._std = torch.tensor(o["std"]).view(3, 1, 1)
        self._minus_one = o["missing_label"] == -1

    def __len__(self):
        return len(self.shards)

    def set_epoch(self, epoch):
        """Augmentation draws of epoch (with DataLoader workers, call it before iterating:
        workers started after it see it)."""
        self.epoch = int(epoch)

    def raw(self, i):
        """Sample i as WebDataset's dict (field: bytes), with __index__, __shard__ and
        __shardindex__."""
        return self.shards[i]

    def __getitem__(self, i):
        d = self.shards[i]
        if not self.decode:
            return d
        where = f"{shown(d['__shard__'])}: sample '{d['__key__']}'"
        data = next((d[f] for f in self._fields if f in d), None)
        if data is None:
            raise ValueError(f"{where}: no image field (looked for {';'.join(self._fields)})")
        try:
            px = _libshard.decode(data, self.width, self.height,
                                  seed=_mix(self.seed, self.epoch, d["__index__"]), **self._decode)
        except _libshard.ShardError as e:
            raise _libshard.ShardError(f"{where}: {e}") from None
        image = torch.frombuffer(bytearray(px), dtype=torch.uint8).view(3, self.height, self.width)
        if self._float:
            image = (image.float() / 255 - self._mean) / self._std
        return image, self._label_of(d, where)

    def _label_of(self, d, where):
        if not self._label:
            return -1
        v = d.get(self._label)
        text = v.strip() if v is not None else b""
        if text.isdigit():
            return int(text)
        if self._minus_one:
            return -1
        what = (f"no field '{self._label}'" if v is None else
                f"label field '{self._label}' is not a decimal class index: {v[:20]!r}")
        raise ValueError(f"{where}: {what} (missing_label=-1 gives -1)")

    def remote_stats(self):
        """Counters of this process's remote reads (bytes, requests, retries, cache hits ...)."""
        return self.shards.remote_stats()


IndexedShardDataset.__init__.__signature__ = _settings.signature(
    IndexedShardDataset.__init__, _settings.INDEXED_DATASET_KEYS)
