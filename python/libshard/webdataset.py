"""A WebDataset-style builder over libshard, for the common pipeline:

    import libshard.webdataset as wds
    ds = (wds.WebDataset("shards/train-{000000..000099}.tar", shardshuffle=True, seed=0)
          .shuffle(5000).decode("torchrgb8").to_tuple("jpg;png", "cls").batched(256))

Everything runs in C: shard shuffle, split by rank and worker, the shuffle buffer, decode,
crop and batching. As in WebDataset, "torchrgb8"/"rgb8" give uint8 and "torchrgb"/"torch"/
"rgb" floats from 0 to 1 (ImageNet normalisation is ShardDataset's dtype="float32");
shardshuffle=False reads the shards in their order. Stages that would run arbitrary Python
per sample (.map, .select, .rename, ...) raise NotImplementedError naming the method.
"""
import torch.utils.data

from .torch import _READER_KEYS, ShardDataset

# name: (dtype, layout, scaled to 0..1 rather than normalized)
_DECODERS = {"torchrgb8": ("uint8", "nchw"), "rgb8": ("uint8", "nhwc"),
             "torchrgb": ("float32", "nchw"), "torch": ("float32", "nchw"),
             "rgb": ("float32", "nhwc")}


class WebDataset(torch.utils.data.IterableDataset):
    """WebDataset(urls, shardshuffle=True, resampled=False, seed=None, **ShardDataset
    settings): an IterableDataset, usable in a DataLoader, built up with WebDataset's
    methods."""

    def __init__(self, urls, shardshuffle=True, resampled=False, seed=None, **settings):
        super().__init__()
        self.urls = urls
        self.settings = dict(settings)
        self.settings["shuffle_shards"] = bool(shardshuffle)
        if not shardshuffle:
            self.settings.setdefault("streams", 1)  # one shard after another, in order
        if resampled:
            self.settings["mode"] = "resampled"
        if seed is not None:
            self.settings["seed"] = seed
        self.decoded = False
        self.tuple = None
        self.length = None

    def _unsupported(self, what, instead):
        raise NotImplementedError(f"libshard's WebDataset builder cannot {what}: {instead}")

    def with_length(self, n):
        """len(self) is n (as WebDataset's with_length), e.g. for a DataLoader's len."""
        self.length = int(n)
        return self

    def __len__(self):
        if self.length is None:
            raise TypeError("this WebDataset has no length: give one with .with_length(n)")
        return self.length

    def shuffle(self, size, initial=None):
        self.settings["shuffle"] = int(size)
        if initial is not None:
            self.settings["shuffle_initial"] = int(initial)
        return self

    def decode(self, *handlers, **kw):
        if len(handlers) != 1 or not isinstance(handlers[0], str) or handlers[0] not in _DECODERS:
            self._unsupported(f"decode with {handlers!r}",
                              "use one of 'torchrgb8', 'rgb8', 'torchrgb', 'torch', 'rgb' (decoded "
                              "in C), "
                              "or read raw samples from libshard.Reader and decode in Python")
        dtype, layout = _DECODERS[handlers[0]]
        self.settings.update(dtype=dtype, layout=layout)
        if dtype == "float32":  # WebDataset's float images are 0..1, not normalized
            self.settings.update(mean=(0.0, 0.0, 0.0), std=(1.0, 1.0, 1.0))
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

    def _python_stage(name):
        def stage(self, *a, **k):
            self._unsupported(f"run .{name}() (a Python function per sample)",
                              "set image_size/crop/flip for augmentation, transform whole "
                              "batches, or read raw samples from libshard.Reader")
        stage.__name__ = name
        stage.__doc__ = f"Not supported: raises NotImplementedError naming .{name}()."
        return stage

    map = _python_stage("map")
    map_tuple = _python_stage("map_tuple")
    map_dict = _python_stage("map_dict")
    select = _python_stage("select")
    rename = _python_stage("rename")
    del _python_stage

    def _dataset(self):
        if not self.decoded:
            return ShardDataset(self.urls, decode=False, **{
                k: v for k, v in self.settings.items() if k in _READER_KEYS})
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
