"""WebDataset's API over libshard, so a pipeline ports by changing its import:

    import libshard.webdataset as wds
    ds = (wds.WebDataset("shards/train-{000000..000099}.tar", shardshuffle=100, seed=0,
                         nodesplitter=wds.split_by_node)
          .shuffle(5000).decode("torchrgb8").to_tuple("jpg;png", "cls").batched(256))

A pipeline runs one of two ways, as it allows:
- In C, when it is the common one: shuffles, then decode with one of "torchrgb8", "rgb8",
  "torchrgb", "torch", "rgb", then to_tuple(image, label, other fields...), then
  batched(n). Shard shuffle, the rank and worker split, the shuffle buffer, decode, crop and
  resize (ShardDataset's image_size, crop, flip, ...) and batching run in libshard's
  threads. Images come cropped to image_size; labels as an int64 tensor; "torchrgb"/
  "torch"/"rgb" give floats from 0 to 1 as in WebDataset.
- In Python, stage by stage as WebDataset runs them, for anything else: libshard reads the
  samples (shard shuffle, split, a leading shuffle buffer) and the stages are WebDataset's:
  decode with its handlers ("pil" gives PIL images, "rgb8" numpy, "torchrgb" tensors, ...,
  callables, and the basic ones for txt, cls, json, npy, ...), map, select, rename,
  map_dict, to_tuple, map_tuple, batched with its collation, unbatched, slice, shuffle.

Writing: ShardWriter and TarWriter are libshard's (libshard.writer), written by the C writer;
ShardWriter prints a line per finished shard, as WebDataset's does (verbose=0: none).

with_epoch(n) counts what the pipeline yields (batches after batched), per DataLoader
worker, as WebDataset's. RandomMix maps onto libshard's weighted mixing. What has no
equivalent raises NotImplementedError naming the method.
"""
import copy
import gzip
import io
import itertools
import json
import os
import pickle
import random
import re
import warnings

import numpy as np
import torch
import torch.utils.data

from . import settings as _settings
from .torch import ShardDataset
from .torch.split import rank_world, worker
from .writer import ShardWriter as _ShardWriter
from .writer import TarWriter

__all__ = ["WebDataset", "WebLoader", "RandomMix", "split_by_node", "split_by_worker",
           "single_node_only", "reraise_exception", "ignore_and_continue", "warn_and_continue",
           "ignore_and_stop", "warn_and_stop", "default_collation_fn", "Decoder",
           "DecodingError", "imagehandler", "ShardWriter", "TarWriter"]

# ---- exception handlers: return True to go on, False to stop, or raise --------------------


def reraise_exception(exn):
    """Raise the exception again (the default handler)."""
    raise exn


def ignore_and_continue(exn):
    """Leave the sample out and go on."""
    return True


def warn_and_continue(exn):
    """Warn, leave the sample out and go on."""
    warnings.warn(repr(exn))
    return True


def ignore_and_stop(exn):
    """End the iteration quietly."""
    return False


def warn_and_stop(exn):
    """Warn and end the iteration."""
    warnings.warn(repr(exn))
    return False


_CONTINUE = (ignore_and_continue, warn_and_continue)

# ---- splitters, as WebDataset defines them over a list of shards ---------------------------


def split_by_node(src, group=None):
    """Every world_size-th item from this rank's. As a WebDataset nodesplitter: each rank
    reads its share (libshard splits the samples, evenly)."""
    rank, world = rank_world(None, None)
    yield from itertools.islice(src, rank, None, world) if world > 1 else src


def single_node_only(src, group=None):
    """WebDataset's default nodesplitter: refuses to run with more than one rank."""
    if rank_world(None, None)[1] > 1:
        raise ValueError("you need to add an explicit nodesplitter to your input pipeline for "
                         "multi-node training")
    yield from src


def split_by_worker(src):
    """Every num_workers-th item from this DataLoader worker's. As a workersplitter: each
    worker reads its share of the rank's samples."""
    w, n = worker()
    yield from itertools.islice(src, w, None, n) if n > 1 else src


# ---- decoding, as webdataset.autodecode ----------------------------------------------------

_IMAGESPECS = {
    "l8": ("numpy", "uint8", "l"), "rgb8": ("numpy", "uint8", "rgb"),
    "rgba8": ("numpy", "uint8", "rgba"), "l": ("numpy", "float", "l"),
    "rgb": ("numpy", "float", "rgb"), "rgba": ("numpy", "float", "rgba"),
    "torchl8": ("torch", "uint8", "l"), "torchrgb8": ("torch", "uint8", "rgb"),
    "torchrgba8": ("torch", "uint8", "rgba"), "torchl": ("torch", "float", "l"),
    "torchrgb": ("torch", "float", "rgb"), "torch": ("torch", "float", "rgb"),
    "torchrgba": ("torch", "float", "rgba"), "pill": ("pil", None, "l"),
    "pil": ("pil", None, "rgb"), "pilrgb": ("pil", None, "rgb"),
    "pilrgba": ("pil", None, "rgba"),
}


def _image_extensions():
    import PIL.Image
    return {e.lstrip(".").lower() for e in PIL.Image.registered_extensions()}


class DecodingError(Exception):
    """A field that did not decode: url, key (the sample's), k (the field)."""

    def __init__(self, url=None, key=None, k=None, sample=None):
        super().__init__(f"cannot decode field {k!r} of sample {key!r} in {url}")
        self.url, self.key, self.k, self.sample = url, key, k, sample


def imagehandler(imagespec, extensions=None):
    """A handler that decodes image fields as imagespec says ("pil", "rgb8", "torchrgb",
    ...; the table of WebDataset's ImageHandler)."""
    if imagespec not in _IMAGESPECS:
        raise ValueError(f"Unknown imagespec: {imagespec}")
    exts = set(extensions) if extensions is not None else _image_extensions()
    atype, etype, mode = _IMAGESPECS[imagespec]

    def handler(key, data):
        import PIL.Image
        if re.sub(r".*[.]", "", key).lower() not in exts:
            return None
        with io.BytesIO(data) as stream:
            img = PIL.Image.open(stream)
            img.load()
            img = img.convert(mode.upper())
        if atype == "pil":
            return img
        a = np.asarray(img)
        if etype == "float":
            a = a.astype(np.float32) / 255.0
        if atype == "numpy":
            return a
        return torch.from_numpy((a.transpose(2, 0, 1) if a.ndim == 3 else a).copy())

    return handler


def _npy(data):
    return np.lib.format.read_array(io.BytesIO(data))


_BASIC = {
    "txt": lambda d: d.decode("utf-8"), "text": lambda d: d.decode("utf-8"),
    "transcript": lambda d: d.decode("utf-8"),
    "cls": int, "cls2": int, "index": int, "inx": int, "id": int,
    "json": json.loads, "jsn": json.loads,
    "pkl": pickle.loads, "pickle": pickle.loads, "pyd": pickle.loads,
    "pth": lambda d: torch.load(io.BytesIO(d), weights_only=False),
    "npy": _npy, "npz": lambda d: dict(np.load(io.BytesIO(d))),
}


def basichandlers(key, data):
    """txt/text -> str; cls, cls2, index, inx, id -> int; json -> objects; pickle, pth,
    npy, npz as their libraries load them; None for other extensions."""
    f = _BASIC.get(re.sub(r".*[.]", "", key))
    return f(data) if f else None


class _Continue:
    def __init__(self, key, data):
        self.key, self.data = key, data


def gzfilter(key, data):
    """x.gz fields: decompressed, then decoded as x."""
    if not key.endswith(".gz"):
        return None
    return _Continue(key[:-3], gzip.decompress(data))


class Decoder:
    """Decodes each field of a sample with the first handler that returns something (pre
    handlers, then the given ones, then post); "__" fields become str; with only, other
    fields stay bytes; with partial, fields that are not bytes are kept."""

    def __init__(self, handlers, pre=None, post=None, only=None, partial=False):
        self.only = set(only.split() if isinstance(only, str) else only) if only else None
        self.handlers = ([gzfilter] if pre is None else list(pre)) + list(handlers) + (
            [basichandlers] if post is None else list(post))
        self.partial = partial

    def decode1(self, key, data):
        """One field (its name, its bytes) through the handlers."""
        key = "." + key
        for f in self.handlers:
            out = f(key, data)
            if isinstance(out, _Continue):
                key, data = out.key, out.data
                continue
            if out is not None:
                return out
        return data

    def __call__(self, sample):
        out = {}
        for k, v in sample.items():
            try:
                if k.startswith("__"):
                    out[k] = v.decode("utf-8") if isinstance(v, bytes) else v
                elif (self.only is not None and k not in self.only) or (
                        self.partial and not isinstance(v, bytes)):
                    out[k] = v
                else:
                    out[k] = self.decode1(k, v)
            except Exception as exn:
                raise DecodingError(sample.get("__url__"), sample.get("__key__"), k,
                                    sample) from exn
        return out


# ---- the stages, run in Python as WebDataset runs them --------------------------------------


def getfirst(a, keys, default=None, missing_is_error=True):
    """The value of the first of keys (a list or a ';'-separated str) that a has."""
    for k in keys.split(";") if isinstance(keys, str) else keys:
        if k in a:
            return a[k]
    if missing_is_error:
        raise ValueError(f"didn't find {keys} in {list(a.keys())}")
    return default


def _combine(b):
    if isinstance(b[0], (int, float)):
        return np.array(list(b))
    if isinstance(b[0], torch.Tensor):
        shapes = {x.shape for x in b}
        assert len(shapes) == 1, f"all shapes must be equal in collation, got {shapes}"
        return torch.stack(list(b))
    if isinstance(b[0], np.ndarray):
        shapes = {x.shape for x in b}
        assert len(shapes) == 1, f"all shapes must be equal in collation, got {shapes}"
        return np.array(list(b))
    return list(b)


def default_collation_fn(samples, combine_tensors=True, combine_scalars=True):
    """A batch of tuples (or dicts) as one tuple (dict) of columns: numbers become a numpy
    array, tensors and arrays are stacked, anything else a list."""
    rows = [x if isinstance(x, dict) else dict(enumerate(x)) for x in samples]
    keys = set(rows[0])
    assert all(set(r) == keys for r in rows), "keys don't match in different samples"
    cols = {k: [r[k] for r in rows] for k in keys}
    cols = {k: (_combine(v) if (combine_tensors or combine_scalars) else v) for k, v in cols.items()}
    if isinstance(samples[0], (list, tuple)):
        return tuple(cols[i] for i in range(len(cols)))
    return cols


def _guard(data, f, handler):
    """Yields f(sample) for each sample; an exception goes to handler (go on or stop)."""
    for sample in data:
        try:
            out = f(sample)
        except Exception as exn:
            if handler(exn):
                continue
            break
        yield out


def _shuffle(data, bufsize=1000, initial=100, rng=None, seed=None):
    rng = rng or random.Random(seed)
    initial = min(initial, bufsize)
    buf = []
    data = iter(data)

    def pick():
        k = rng.randint(0, len(buf) - 1)
        sample, buf[k] = buf[k], buf[-1]
        buf.pop()
        return sample

    for sample in data:
        buf.append(sample)
        if len(buf) < bufsize:
            try:
                buf.append(next(data))
            except StopIteration:
                pass
        if len(buf) >= initial:
            yield pick()
    while buf:
        yield pick()


def _map(data, f, handler=reraise_exception):
    def one(sample):
        out = f(sample)
        if isinstance(sample, dict) and isinstance(out, dict):
            out["__key__"] = sample.get("__key__")
        return out
    return (out for out in _guard(data, one, handler) if out is not None)


def _rename(data, handler=reraise_exception, keep=True, **kw):
    def one(sample):
        if not keep:
            return {k: getfirst(sample, v) for k, v in kw.items()}
        gone = {x for v in kw.values() for x in (v.split(";") if isinstance(v, str) else v)}
        out = {k: v for k, v in sample.items() if k not in gone}
        out.update({k: getfirst(sample, v) for k, v in kw.items()})
        return out
    return _guard(data, one, handler)


def _map_dict(data, handler=reraise_exception, **kw):
    def one(sample):
        for k, f in kw.items():
            sample[k] = f(sample[k])
        return sample
    return _guard(data, one, handler)


def _to_tuple(data, *args, handler=reraise_exception, missing_is_error=True, none_is_error=None):
    if none_is_error is None:
        none_is_error = missing_is_error
    if len(args) == 1 and isinstance(args[0], str) and " " in args[0]:
        args = args[0].split()

    def one(sample):
        out = tuple(getfirst(sample, f, missing_is_error=missing_is_error) for f in args)
        if none_is_error and any(x is None for x in out):
            raise ValueError(f"to_tuple {args} got {sample.keys()}")
        return out
    return _guard(data, one, handler)


def _map_tuple(data, *fs, handler=reraise_exception):
    fs = [f if f is not None else (lambda x: x) for f in fs]

    def one(sample):
        sample = list(sample)
        for i in range(min(len(fs), len(sample))):
            sample[i] = fs[i](sample[i])
        return tuple(sample)
    return _guard(data, one, handler)


def _batched(data, batchsize=20, collation_fn=default_collation_fn, partial=True):
    batch = []
    for sample in data:
        if len(batch) >= batchsize:
            yield collation_fn(batch) if collation_fn is not None else batch
            batch = []
        batch.append(sample)
    if batch and (len(batch) == batchsize or partial):
        yield collation_fn(batch) if collation_fn is not None else batch


def _unbatched(data):
    for sample in data:
        if isinstance(sample, (list, tuple)):
            for i in range(len(sample[0])):
                yield tuple(x[i] for x in sample)
        elif isinstance(sample, dict):
            lengths = {len(v) for v in sample.values()}
            assert len(lengths) == 1, lengths
            for i in range(lengths.pop()):
                yield {k: v[i] for k, v in sample.items()}
        else:
            raise ValueError(f"unknown sample type: {type(sample)}")


def _select(data, predicate):
    return (s for s in data if predicate(s))


def _slice(data, *args):
    return itertools.islice(data, *args)


_RUN = {"shuffle": _shuffle, "map": _map, "rename": _rename, "map_dict": _map_dict,
        "to_tuple": _to_tuple, "map_tuple": _map_tuple, "batched": _batched,
        "unbatched": _unbatched, "select": _select, "slice": _slice}


class _Fluid:
    """WebDataset's fluid interface: each method returns a new pipeline with one more stage
    (the one it is called on is unchanged)."""

    stages = ()
    repetitions, nsamples, size = 1, -1, None

    def _then(self, name, *args, **kw):
        new = copy.copy(self)
        new.stages = tuple(self.stages) + ((name, args, kw),)
        return new

    def _unsupported(self, what, instead):
        raise NotImplementedError(f"libshard.webdataset cannot {what}: {instead}")

    def _seed(self):
        return 0

    def shuffle(self, size, **kw):
        """A shuffle buffer of size samples (initial: how many before the first comes out)."""
        return self if size < 1 else self._then("shuffle", size, **kw)

    def decode(self, *args, pre=None, post=None, only=None, partial=False,
               handler=reraise_exception):
        """Decodes each field: str arguments are image specs ("pil", "rgb8", "torchrgb8",
        ...), callables handlers(key, data); then the basic handlers (txt, cls, json, ...)."""
        for a in args:
            if isinstance(a, str) and a not in _IMAGESPECS:
                raise ValueError(f"Unknown imagespec: {a}")
        return self._then("decode", *args, pre=pre, post=post, only=only, partial=partial,
                          handler=handler)

    def map(self, f, handler=reraise_exception):
        """f(sample) for each sample; None drops it; a dict keeps the sample's __key__."""
        return self._then("map", f, handler=handler)

    def select(self, predicate, **kw):
        """The samples for which predicate(sample) is true."""
        return self._then("select", predicate, **kw)

    def rename(self, **kw):
        """New name=old ('a;b': the first present) for fields; keep=False drops the rest."""
        return self._then("rename", **kw)

    def map_dict(self, handler=reraise_exception, **kw):
        """field=f: each field through its function."""
        return self._then("map_dict", handler=handler, **kw)

    def to_tuple(self, *args, **kw):
        """The named fields as a tuple ('jpg;png': the first present)."""
        return self._then("to_tuple", *args, **kw)

    def map_tuple(self, *args, handler=reraise_exception):
        """Each element of a tuple through the function at its position (None: kept)."""
        return self._then("map_tuple", *args, handler=handler)

    def batched(self, batchsize, collation_fn=default_collation_fn, partial=True):
        """Batches of batchsize, collated (default_collation_fn); partial: the last one
        even when short."""
        return self._then("batched", batchsize, collation_fn=collation_fn, partial=partial)

    def unbatched(self):
        """Batches back into samples."""
        return self._then("unbatched")

    def slice(self, *args):
        """itertools.islice of the stream."""
        return self._then("slice", *args)

    def with_epoch(self, nsamples=-1, nbatches=-1):
        """An epoch of exactly n items of what the pipeline yields (batches after batched),
        per worker, reading on into the next pass over the data as needed."""
        new = copy.copy(self)
        new.repetitions, new.nsamples = 1 << 62, max(nsamples, nbatches)
        return new

    def repeat(self, nepochs=-1, nbatches=-1):
        """nepochs passes (endless if not positive), at most nbatches items in all."""
        new = copy.copy(self)
        new.repetitions = nepochs if nepochs > 0 else 1 << 62
        new.nsamples = nbatches
        return new

    def with_length(self, n, silent=False):
        """len() is n (it does not change the number of samples in an epoch)."""
        if not silent:
            warnings.warn(".with_length() only sets the value of __len__ for compatibility "
                          "with some training environments. It does not change the number of "
                          "samples in an epoch.")
        new = copy.copy(self)
        new.size = int(n)
        return new

    def __len__(self):
        if self.size is None:
            raise TypeError(f"this {type(self).__name__} has no length: give one with "
                            f".with_length(n)")
        return self.size

    def _unsupported_stage(name):
        def stage(self, *a, **k):
            self._unsupported(f"run .{name}()", "it has no counterpart here yet; write the "
                              "step as a .map()")
        stage.__name__ = name
        stage.__doc__ = f"Not supported: raises NotImplementedError naming .{name}()."
        return stage

    listed = _unsupported_stage("listed")
    unlisted = _unsupported_stage("unlisted")
    log_keys = _unsupported_stage("log_keys")
    rsample = _unsupported_stage("rsample")
    rename_keys = _unsupported_stage("rename_keys")
    extract_keys = _unsupported_stage("extract_keys")
    xdecode = _unsupported_stage("xdecode")
    mcached = _unsupported_stage("mcached")
    lmdb_cached = _unsupported_stage("lmdb_cached")
    del _unsupported_stage

    def _run(self, data, stages, epoch):
        """data through stages, in Python."""
        w = worker()[0]
        for name, args, kw in stages:
            if name == "decode":
                handlers = [imagehandler(a) if isinstance(a, str) else a for a in args]
                dec = Decoder(handlers, pre=kw["pre"], post=kw["post"], only=kw["only"],
                              partial=kw["partial"])
                data = _map(data, dec, handler=kw["handler"])
            elif name == "shuffle":
                kw = dict(kw)
                if "seed" not in kw and "rng" not in kw:  # from the pipeline's seed
                    kw["seed"] = hash((self._seed(), epoch, rank_world(None, None)[0], w))
                data = _shuffle(data, *args, **kw)
            else:
                data = _RUN[name](data, *args, **kw)
        return data

    def _epoch(self, k):
        raise NotImplementedError

    def _iterator(self):
        for k in range(self.repetitions):
            count = 0
            for item in self._epoch(k):
                yield item
                count += 1
            if count == 0:  # an empty pass: do not go round forever
                break

    def __iter__(self):
        if self.repetitions != 1 and self.nsamples > 0:
            return itertools.islice(self._iterator(), self.nsamples)
        return self._iterator()


# name: (dtype, layout) of the decoders that run in C
_FAST = {"torchrgb8": ("uint8", "nchw"), "rgb8": ("uint8", "nhwc"),
         "torchrgb": ("float32", "nchw"), "torch": ("float32", "nchw"),
         "rgb": ("float32", "nhwc")}


class WebDataset(_Fluid, torch.utils.data.IterableDataset):
    """WebDataset(urls, handler=reraise_exception, resampled=False, repeat=False,
    shardshuffle=None, cache_dir=None, cache_size=-1, nodesplitter=single_node_only,
    workersplitter=split_by_worker, seed=None, **ShardDataset settings): an IterableDataset
    built up with WebDataset's methods.

    urls: as ShardDataset's (braces, a manifest, a list, a prefix, remote URLs, or a mix of
    (spec, weight) pairs). shardshuffle: a number or True shuffles the shards each pass;
    None, False or 0 keeps their order. nodesplitter: split_by_node (each rank its share),
    single_node_only (the default: an error with more than one rank) or None (every rank
    reads everything); workersplitter: split_by_worker or None. A handler that continues
    (ignore_and_continue, warn_and_continue) skips bad shards and samples (skip_errors).
    """

    def __init__(self, urls, handler=reraise_exception, mode=None, resampled=False, repeat=False,
                 shardshuffle=None, cache_size=-1, cache_dir=None, url_to_name=None,
                 detshuffle=False, nodesplitter=single_node_only, workersplitter=split_by_worker,
                 select_files=None, rename_files=None, empty_check=True, verbose=False,
                 seed=None, **settings):
        super().__init__()
        for name, value in (("select_files", select_files), ("rename_files", rename_files),
                            ("url_to_name", url_to_name)):
            if value is not None:
                self._unsupported(f"take {name}=", "samples keep every member of the shard; "
                                  "drop or rename fields with .map() or .rename()")
        if nodesplitter not in (split_by_node, single_node_only, None):
            self._unsupported(f"use nodesplitter={nodesplitter!r}",
                              "pass split_by_node, single_node_only or None")
        if workersplitter not in (split_by_worker, None, False):
            self._unsupported(f"use workersplitter={workersplitter!r}",
                              "pass split_by_worker or None")
        if handler in (ignore_and_stop, warn_and_stop):
            self._unsupported(f"use handler={handler.__name__}",
                              "use reraise_exception, or a handler that continues")
        self.urls = urls
        self.nodesplitter, self.workersplitter = nodesplitter, workersplitter
        self.settings = dict(settings)
        if resampled or mode == "resampled":
            self.settings["mode"] = "resampled"
        else:
            self.settings["shuffle_shards"] = bool(shardshuffle)
            if not shardshuffle:
                self.settings.setdefault("streams", 1)  # one shard after another, in order
        if seed is not None:
            self.settings["seed"] = seed
        elif self.settings.get("mode") != "resampled":  # one seed for every worker's plan
            self.settings["seed"] = int.from_bytes(os.urandom(8), "little") >> 1
        if handler in _CONTINUE:
            self.settings["skip_errors"] = True
        if cache_dir is not None:
            self.settings["cache_dir"] = cache_dir
            if cache_size is not None and cache_size > 0:
                self.settings["cache_size"] = int(cache_size)
        if repeat:
            self.repetitions = 1 << 62
        self._base_epoch = torch.zeros(1, dtype=torch.int64).share_memory_()
        ShardDataset(urls, **self.settings)  # checks the settings now, naming a wrong one

    def set_epoch(self, epoch):
        """The epoch of the next iteration (each repetition within it counts one more), in
        this process and in DataLoader workers."""
        self._base_epoch[0] = int(epoch)

    def _seed(self):
        return self.settings.get("seed", 0)

    def _split(self):
        if self.nodesplitter is None:
            rank, world = 0, 1
        else:
            rank, world = rank_world(None, None)
            if self.nodesplitter is single_node_only and world > 1:
                raise ValueError("you need to add an explicit nodesplitter to your input "
                                 "pipeline for multi-node training")
        return rank, world

    def _fast(self):
        """(settings, stages left to run in Python, to_tuple's fields): the fields are None
        unless the whole pipeline runs in C (then no stage is left); a leading shuffle
        becomes the reader's buffer either way."""
        settings, stages = dict(self.settings), list(self.stages)
        if stages and stages[0][0] == "shuffle" and not set(stages[0][2]) - {"initial"}:
            size = stages[0][1][0]
            settings["shuffle"] = int(size)
            settings["shuffle_initial"] = min(int(stages[0][2].get("initial", 100)), int(size))
            stages.pop(0)
        if [s[0] for s in stages] != ["decode", "to_tuple", "batched"]:
            return settings, stages, None
        (_, dargs, dkw), (_, targs, tkw), (_, bargs, bkw) = stages
        if (len(dargs) != 1 or dargs[0] not in _FAST or dkw["pre"] or dkw["post"] or dkw["only"]
                or dkw["handler"] not in (reraise_exception,) + _CONTINUE or len(targs) < 2
                or tkw or not all(isinstance(f, str) and " " not in f for f in targs)
                or bkw["collation_fn"] is not default_collation_fn):
            return settings, stages, None
        dtype, layout = _FAST[dargs[0]]
        settings.update(dtype=dtype, layout=layout, batch_size=int(bargs[0]),
                        drop_last=not bkw["partial"], image_fields=targs[0], label_field=targs[1])
        if dtype == "float32":  # WebDataset's float images are 0..1, not normalized
            settings.update(mean=(0.0, 0.0, 0.0), std=(1.0, 1.0, 1.0))
        if dkw["handler"] in _CONTINUE:
            settings["skip_errors"] = True
        if len(targs) > 2:
            settings["raw_fields"] = ";".join(targs[2:])
        return settings, [], targs

    def _epoch(self, k):
        rank, world = self._split()
        settings, stages, fields = self._fast()
        epoch = int(self._base_epoch[0]) + k
        if fields is None:
            ds = ShardDataset(self.urls, decode=False, rank=rank, world_size=world,
                              **{k_: v for k_, v in settings.items() if k_ in _settings.READER_KEYS})
        else:
            ds = ShardDataset(self.urls, rank=rank, world_size=world, **settings)
        ds.by_worker = bool(self.workersplitter)
        ds.set_epoch(epoch)  # made in this process: its epoch is not shared with others
        if fields is None:
            return self._run(iter(ds), stages, epoch)
        if len(fields) == 2:
            return iter(ds)
        return self._with_fields(ds, fields)

    @staticmethod
    def _with_fields(ds, fields):
        for images, labels, raw in ds:
            extra = []
            for want in fields[2:]:
                names = [n for n in want.split(";") if n in raw]
                extra.append([next((raw[n][i] for n in names if raw[n][i] is not None), None)
                              for i in range(len(labels))])
            yield (images, labels, *extra)


class WebLoader(_Fluid, torch.utils.data.IterableDataset):
    """WebLoader(*DataLoader arguments): a DataLoader with the fluid interface, whose stages
    run in the main process on what the loader yields (e.g. .unbatched().shuffle(1000)
    .batched(64) to mix the workers' batches)."""

    def __init__(self, *args, **kw):
        super().__init__()
        self.loader = torch.utils.data.DataLoader(*args, **kw)

    def _epoch(self, k):
        data = iter(self.loader)
        if self.stages and self.loader.num_workers == 0:
            # batches straight from libshard's buffers: copies, as later stages keep them
            data = (_owned(x) for x in data)
        return self._run(data, self.stages, k)


def _owned(x):
    if isinstance(x, torch.Tensor):
        return x.clone()
    if isinstance(x, tuple):
        return tuple(_owned(v) for v in x)
    if isinstance(x, list):
        return [_owned(v) for v in x]
    if isinstance(x, dict):
        return {k: _owned(v) for k, v in x.items()}
    return x


class RandomMix(torch.utils.data.IterableDataset):
    """RandomMix(datasets, probs=None): samples of WebDatasets that differ only in their
    urls, mixed by probs (default equal) through libshard's weighted mixing: each epoch has
    the sources' sizes summed, each source exactly its share (a small one repeated, a large
    one a different part each epoch), interleaved at random from the seed. WebDataset's
    RandomMix draws each sample's source at random and stops at the first source to run
    out; longest=True (go on until all have) has no counterpart and raises."""

    def __init__(self, datasets, probs=None, longest=False):
        super().__init__()
        if longest:
            raise NotImplementedError("libshard.webdataset cannot mix with longest=True: an "
                                      "epoch of a mix holds each source's share, repeating a "
                                      "small source; size it with epoch_samples")
        datasets = list(datasets)
        probs = [1.0] * len(datasets) if probs is None else [float(p) for p in probs]
        if not datasets or len(probs) != len(datasets):
            raise ValueError("RandomMix: one probability per dataset")
        first = datasets[0]
        for d in datasets:
            if not isinstance(d, WebDataset):
                raise NotImplementedError(f"libshard.webdataset cannot mix a {type(d).__name__}: "
                                          f"mix libshard.webdataset.WebDataset pipelines")
            if (d.stages, d.settings, d.nodesplitter, d.workersplitter, d.repetitions,
                    d.nsamples) != (first.stages, first.settings, first.nodesplitter,
                                    first.workersplitter, first.repetitions, first.nsamples):
                raise NotImplementedError("libshard.webdataset cannot mix pipelines that differ "
                                          "in more than their urls: build one pipeline and give "
                                          "it the mix, WebDataset([(urls, weight), ...])")
            if isinstance(d.urls, list) and any(isinstance(u, tuple) for u in d.urls):
                raise NotImplementedError("libshard.webdataset cannot mix mixes: list every "
                                          "source with its weight in one")
        self.dataset = copy.copy(first)
        self.dataset.urls = [(d.urls, p) for d, p in zip(datasets, probs)]
        ShardDataset(self.dataset.urls, **first.settings)  # the mix's errors, now

    def set_epoch(self, epoch):
        """The epoch of the mix's next iteration (as WebDataset.set_epoch)."""
        self.dataset.set_epoch(epoch)

    def __iter__(self):
        return iter(self.dataset)


class ShardWriter(_ShardWriter):
    """libshard.ShardWriter with WebDataset's default verbose=1 (a line per finished shard)."""

    def __init__(self, pattern, maxcount=100000, maxsize=3e9, post=None, start_shard=0, verbose=1, **kw):
        super().__init__(pattern, maxcount, maxsize, post, start_shard, verbose, **kw)
