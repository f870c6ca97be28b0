"""A WebDataset-style builder over libshard, for the common pipeline:

    import libshard.webdataset as wds
    ds = (wds.WebDataset("shards/train-{000000..000099}.tar", shardshuffle=True, seed=0)
          .shuffle(5000).decode("torchrgb8").to_tuple("jpg;png", "cls").batched(256))

Everything runs in C: shard shuffle, split by rank and worker, the shuffle buffer, decode,
crop and batching. Stages that would run arbitrary Python per sample (.map, .select,
decoders other than the RGB ones) are refused with a message saying what to do instead.
"""
from .torch import ShardDataset

_DECODERS = {"torchrgb8": ("uint8", "nchw"), "rgb8": ("uint8", "nhwc"),
             "torchrgb": ("float32", "nchw"), "rgb": ("float32", "nhwc")}


class WebDataset:
    def __init__(self, urls, shardshuffle=True, resampled=False, seed=None, **settings):
        self.urls = urls
        self.settings = dict(settings)
        self.settings["shuffle_shards"] = bool(shardshuffle)
        if resampled:
            self.settings["mode"] = "resampled"
        if seed is not None:
            self.settings["seed"] = seed
        self.decoded = False
        self.tuple = None

    def _unsupported(self, what, instead):
        raise NotImplementedError(f"libshard's WebDataset builder cannot {what}: {instead}")

    def shuffle(self, size, initial=None):
        self.settings["shuffle"] = int(size)
        if initial is not None:
            self.settings["shuffle_initial"] = int(initial)
        return self

    def decode(self, *handlers, **kw):
        if len(handlers) != 1 or not isinstance(handlers[0], str) or handlers[0] not in _DECODERS:
            self._unsupported(f"decode with {handlers!r}",
                              "use one of 'torchrgb8', 'rgb8', 'torchrgb', 'rgb' (decoded in C), "
                              "or read raw samples from libshard.Reader and decode in Python")
        dtype, layout = _DECODERS[handlers[0]]
        self.settings.update(dtype=dtype, layout=layout)
        self.decoded = True
        return self

    def to_tuple(self, *fields):
        """("jpg;png", "cls", more...): images, labels, then for each further name (or
        ';'-separated alternatives, the first a sample has) a list of bytes, None where a
        sample has none of them."""
        if len(fields) < 2:
            self._unsupported(f"to_tuple{fields!r}",
                              "batches start with (image, label): name the image fields and the "
                              "label field, then any raw fields")
        self.settings["image_fields"], self.settings["label_field"] = fields[:2]
        if len(fields) > 2:
            self.settings["raw_fields"] = ";".join(fields[2:])
        self.tuple = fields
        return self

    def batched(self, batch_size, partial=True, collation_fn=None):
        if collation_fn is not None:
            self._unsupported("use a collation function", "batches are collated in C")
        self.settings["batch_size"] = int(batch_size)
        self.settings["drop_last"] = not partial
        return self

    def with_epoch(self, n):
        self.settings["epoch_samples"] = int(n)
        return self

    def map(self, *a, **k):
        self._unsupported("run a Python function per sample",
                          "set image_size/crop/flip for augmentation, or transform whole batches")

    map_tuple = map
    select = map

    def _dataset(self):
        if not self.decoded:
            return ShardDataset(self.urls, decode=False, **{
                k: v for k, v in self.settings.items()
                if k in ("seed", "mode", "pad", "epoch_samples", "shuffle_shards", "shuffle",
                         "shuffle_initial", "streams", "queue_depth", "skip_errors")})
        return ShardDataset(self.urls, **self.settings)

    def __iter__(self):
        if not self.decoded or not self.tuple or len(self.tuple) == 2:
            yield from self._dataset()
            return
        for images, labels, fields in self._dataset():
            extra = []
            for want in self.tuple[2:]:
                names = [n for n in want.split(";") if n in fields]
                extra.append([next((fields[n][i] for n in names if fields[n][i] is not None), None)
                              for i in range(len(labels))])
            yield (images, labels, *extra)
