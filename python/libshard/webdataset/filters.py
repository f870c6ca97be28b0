"""webdataset.filters as libshard writes it: the stages a pipeline is built of, each a
generator over the samples before it (the underscored functions), and its curried form
(shuffle(1000) is a stage waiting for its source), as WebDataset's pipelinefilter makes
them; the collation batched uses; the caches Cached and LMDBCached.

A stage's exceptions go to its handler: True goes on without the sample, False ends the
stream, raising propagates (reraise_exception, the default)."""
import functools
import io
import itertools
import os
import random
import re
import sys
import time
from fnmatch import fnmatch

import numpy as np

from . import autodecode, counters, utils
from .handlers import reraise_exception
from .pytorch import TorchTensor
from .caching import Cached, LMDBCached  # noqa: F401 (filters' names, as WebDataset's)
from .utils import PipelineStage


class FilterFunction:
    """A stage function with its arguments bound: called on a source, it runs."""

    def __init__(self, f, *args, **kw):
        self.f = f
        self.args = args
        self.kw = kw
        if getattr(f, "counted", False):  # a stage of libshard's that counts what it does
            self.counts = counters.Counts()

    def __call__(self, data):
        if hasattr(self, "counts"):
            return self.f(data, *self.args, counts=self.counts, **self.kw)
        return self.f(data, *self.args, **self.kw)

    def __str__(self):
        return f"<{self.f.__name__} {self.args} {self.kw}>"

    __repr__ = __str__


class RestCurried:
    """f(source, *args, **kw) taken as f(*args, **kw)(source)."""

    def __init__(self, f):
        self.f = f

    def __call__(self, *args, **kw):
        return FilterFunction(self.f, *args, **kw)


def pipelinefilter(f):
    """f(source, ...) as a curried stage: pipelinefilter(f)(...) is called on a source."""
    curried = RestCurried(f)
    functools.update_wrapper(curried, f)
    return curried


def identity(x):
    """x itself."""
    return x


def compose2(f, g):
    """g after f."""
    return lambda x: g(f(x))


def compose(*args):
    """The functions applied left to right."""
    return functools.reduce(compose2, args)


def pipeline(source, *args):
    """source through each stage in turn."""
    return compose(*args)(source) if args else source


def getfirst(a, keys, default=None, missing_is_error=True):
    """The value of the first of keys (a list, or names separated by ';') that a has."""
    if isinstance(keys, str):
        assert " " not in keys
        keys = keys.split(";")
    for k in keys:
        if k in a:
            return a[k]
    if missing_is_error:
        raise ValueError(f"didn't find {keys} in {list(a.keys())}")
    return default


def parse_field_spec(fields):
    """"a;b c" as [["a", "b"], ["c"]]."""
    if isinstance(fields, str):
        fields = fields.split()
    return [f.split(";") for f in fields]


def transform_with(sample, transformers):
    """Each element of a tuple through the function at its position (None: unchanged)."""
    if not transformers:
        return sample
    out = list(sample)
    assert len(transformers) <= len(sample)
    for i, f in enumerate(transformers):
        if f is not None:
            out[i] = f(sample[i])
    return out


def _guarded(data, f, handler):
    """f(sample) for each sample, exceptions to handler; None results are yielded."""
    for sample in data:
        try:
            out = f(sample)
        except Exception as exn:
            if handler(exn):
                continue
            break
        yield out


def _info(data, fmt=None, n=3, every=-1, width=50, stream=sys.stderr, name=""):
    """The samples, the first n (and every every-th) printed to stream."""
    for i, sample in enumerate(data):
        if i < n or (every > 0 and (i + 1) % every == 0):
            if fmt is None:
                print("---", name, file=stream)
                for k, v in sample.items():
                    print(k, repr(v)[:width], file=stream)
            else:
                print(fmt.format(**sample), file=stream)
        yield sample


info = pipelinefilter(_info)


def pick(buf, rng):
    """A random element taken out of buf (its place filled by the last)."""
    k = rng.randint(0, len(buf) - 1)
    sample, buf[k] = buf[k], buf[-1]
    buf.pop()
    return sample


def _shuffle(data, bufsize=1000, initial=100, rng=None, seed=None, handler=None):
    """A shuffle buffer: bufsize samples held, the first handed out once initial are in; a
    sample drawn for each one read (two read per draw while the buffer fills)."""
    if seed is not None:
        assert rng is None
        rng = random.Random(seed)
    elif rng is None:
        rng = random.Random(int((os.getpid() + time.time()) * 1e9))
    initial = min(initial, bufsize)
    buf = []
    data = iter(data)
    for sample in data:
        buf.append(sample)
        if len(buf) < bufsize:
            try:
                buf.append(next(data))
            except StopIteration:
                pass
        if len(buf) >= initial:
            yield pick(buf, rng)
    while buf:
        yield pick(buf, rng)


shuffle = pipelinefilter(_shuffle)


class detshuffle(PipelineStage):  # noqa: N801 (WebDataset's name)
    """A shuffle buffer whose order follows from seed and the pass: each run is the next
    epoch (from epoch + 1), the same again for the same seed."""

    def __init__(self, bufsize=1000, initial=100, seed=0, epoch=-1):
        self.bufsize = bufsize
        self.initial = initial
        self.seed = seed
        self.epoch = epoch

    def run(self, src):
        """The next epoch's shuffle of src."""
        self.epoch += 1
        rng = random.Random()
        rng.seed(self.seed + self.epoch)
        return _shuffle(src, self.bufsize, self.initial, rng)


def _select(data, predicate):
    """The samples for which predicate(sample) is true."""
    return (sample for sample in data if predicate(sample))


select = pipelinefilter(_select)


def _log_keys(data, logfile=None):
    """The samples, each one's key appended to logfile (locked, for several processes)."""
    import fcntl
    if not logfile:
        yield from data
        return
    with open(logfile, "a") as stream:
        for i, sample in enumerate(data):
            line = (f"{i}\t{sample.get('__worker__')}\t{sample.get('__rank__')}\t"
                    f"{sample.get('__key__')}\n")
            fcntl.flock(stream.fileno(), fcntl.LOCK_EX)
            try:
                stream.write(line)
            finally:
                fcntl.flock(stream.fileno(), fcntl.LOCK_UN)
            yield sample


log_keys = pipelinefilter(_log_keys)


def _decode(data, *args, handler=reraise_exception, counts=None, max_decode_memory=None, **kw):
    """Each sample decoded (autodecode.Decoder; str arguments are image specs, their
    decodes counted in counts, each image under max_decode_memory: limits.py)."""
    handlers = [autodecode.ImageHandler(x, counts=counts, max_decode_memory=max_decode_memory)
                if isinstance(x, str) else x for x in args]
    decoder = autodecode.Decoder(handlers, **kw)
    for sample in data:
        assert isinstance(sample, dict), sample
        try:
            decoded = decoder(sample)
        except Exception as exn:
            if handler(exn):
                continue
            break
        yield decoded


_decode.counted = True
decode = pipelinefilter(_decode)


def _map(data, f, handler=reraise_exception):
    """f(sample) for each sample; None leaves it out; a dict result keeps the __key__."""
    for sample in data:
        try:
            result = f(sample)
        except Exception as exn:
            if handler(exn):
                continue
            break
        if result is None:
            continue
        if isinstance(sample, dict) and isinstance(result, dict):
            result["__key__"] = sample.get("__key__")
        yield result


map = pipelinefilter(_map)  # noqa: A001 (WebDataset's name)


def _rename(data, handler=reraise_exception, keep=True, **kw):
    """new=old ("a;b": the first present) for fields; keep=False drops the others."""
    def one(sample):
        if not keep:
            return {k: getfirst(sample, v, missing_is_error=True) for k, v in kw.items()}
        replaced = {x for v in kw.values() for x in (v.split(";") if isinstance(v, str) else v)}
        out = {k: v for k, v in sample.items() if k not in replaced}
        out.update({k: getfirst(sample, v, missing_is_error=True) for k, v in kw.items()})
        return out
    return _guarded(data, one, handler)


rename = pipelinefilter(_rename)


def _associate(data, associator, **kw):
    """Each sample updated with associator(key) (or associator[key]: a dict)."""
    for sample in data:
        extra = (associator(sample["__key__"]) if callable(associator)
                 else associator.get(sample["__key__"], {}))
        sample.update(extra)
        yield sample


associate = pipelinefilter(_associate)


def _map_dict(data, handler=reraise_exception, **kw):
    """field=f: each field of each sample through its function."""
    assert kw, "map_dict: at least one field=function"
    for key, f in kw.items():
        assert callable(f), (key, f)

    def one(sample):
        assert isinstance(sample, dict)
        for k, f in kw.items():
            sample[k] = f(sample[k])
        return sample
    return _guarded(data, one, handler)


map_dict = pipelinefilter(_map_dict)


def _to_tuple(data, *args, handler=reraise_exception, missing_is_error=True, none_is_error=None):
    """The named fields of each sample as a tuple ("a;b": the first present)."""
    if none_is_error is None:
        none_is_error = missing_is_error
    if len(args) == 1 and isinstance(args[0], str) and " " in args[0]:
        args = args[0].split()

    def one(sample):
        out = tuple(getfirst(sample, f, missing_is_error=missing_is_error) for f in args)
        if none_is_error and any(x is None for x in out):
            raise ValueError(f"to_tuple {args} got {sample.keys()}")
        return out
    return _guarded(data, one, handler)


to_tuple = pipelinefilter(_to_tuple)


def _map_tuple(data, *args, handler=reraise_exception):
    """Each element of a tuple through the function at its position (None: kept)."""
    fs = [f if f is not None else utils.identity for f in args]
    for f in fs:
        assert callable(f), f

    def one(sample):
        assert isinstance(sample, (list, tuple))
        sample = list(sample)
        for i in range(min(len(fs), len(sample))):
            sample[i] = fs[i](sample[i])
        return tuple(sample)
    return _guarded(data, one, handler)


map_tuple = pipelinefilter(_map_tuple)


def combine_values(b, combine_tensors=True, combine_scalars=True):
    """A batch's column: numbers into a numpy array, tensors and arrays stacked (all of one
    shape), anything else a list."""
    first = b[0]
    if isinstance(first, (int, float)):
        return np.array(list(b)) if combine_scalars else b
    if isinstance(first, TorchTensor):
        if not combine_tensors:
            return b
        import torch
        shapes = {x.shape for x in b}
        assert len(shapes) == 1, f"all shapes must be equal in collation, got {shapes}"
        return torch.stack(list(b))
    if isinstance(first, np.ndarray):
        if not combine_tensors:
            return b
        shapes = {x.shape for x in b}
        assert len(shapes) == 1, f"all shapes must be equal in collation, got {shapes}"
        return np.array(list(b))
    return list(b)


def tuple2dict(row):
    """A tuple as {position: value} (a dict stays as it is)."""
    return row if isinstance(row, dict) else dict(enumerate(row))


def dict2tuple(d):
    """{0: a, 1: b, ...} back into (a, b, ...)."""
    return tuple(d[i] for i in range(1 + max(d.keys())))


def default_collation_fn(samples, combine_tensors=True, combine_scalars=True):
    """A batch of tuples (or dicts) as one tuple (dict) of columns (combine_values)."""
    rows = [tuple2dict(x) for x in samples]
    keys = set(rows[0].keys())
    for row in rows[1:]:
        assert set(row.keys()) == keys, "keys don't match in different samples"
    out = {k: combine_values([row[k] for row in rows], combine_tensors, combine_scalars)
           for k in keys}
    return dict2tuple(out) if isinstance(samples[0], (list, tuple)) else out


def _batched(data, batchsize=20, collation_fn=default_collation_fn, partial=True):
    """Batches of batchsize, collated (None: lists); partial: the last even when short."""
    batch = []
    for sample in data:
        if len(batch) >= batchsize:
            yield collation_fn(batch) if collation_fn is not None else batch
            batch = []
        batch.append(sample)
    if batch and (len(batch) == batchsize or partial):
        yield collation_fn(batch) if collation_fn is not None else batch


batched = pipelinefilter(_batched)


def _unlisted(data):
    """Lists back into their items."""
    for batch in data:
        assert isinstance(batch, list), batch
        yield from batch


unlisted = pipelinefilter(_unlisted)


def _unbatched(data):
    """Batches (tuples or dicts of columns) back into samples."""
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


unbatched = pipelinefilter(_unbatched)


def _rsample(data, p=0.5):
    """Each sample kept with probability p."""
    assert 0.0 <= p <= 1.0
    return (sample for sample in data if random.uniform(0.0, 1.0) < p)


rsample = pipelinefilter(_rsample)
slice = pipelinefilter(itertools.islice)  # noqa: A001 (WebDataset's name)


def _matches(name, patterns):
    return any(fnmatch("." + name, p) or fnmatch(name, p) for p in patterns)


def _extract_keys(source, *patterns, duplicate_is_error=True, ignore_missing=False):
    """Tuples of the fields matching each glob pattern (";"-separated alternatives)."""
    for sample in source:
        out = []
        for pattern in patterns:
            pattern = pattern.split(";") if isinstance(pattern, str) else pattern
            found = [k for k in sample.keys() if _matches(k, pattern)]
            if not found:
                if ignore_missing:
                    continue
                raise ValueError(f"Cannot find {pattern} in sample keys {sample.keys()}.")
            if len(found) > 1 and duplicate_is_error:
                raise ValueError(f"Multiple sample keys {sample.keys()} match {pattern}.")
            out.append(sample[found[0]])
        yield tuple(out)


extract_keys = pipelinefilter(_extract_keys)


def _rename_keys(source, *args, keep_unselected=False, must_match=True, duplicate_is_error=True,
                 **kw):
    """Fields renamed by glob patterns of their file names: (new, pattern) pairs or
    new=pattern; the last that matches wins."""
    renamings = [(pattern, name) for name, pattern in args]
    renamings += [(pattern, name) for name, pattern in kw.items()]
    for sample in source:
        out, matched = {}, {pattern: False for pattern, _ in renamings}
        for path, value in sample.items():
            fname = re.sub(".*/", "", path)
            new = None
            for pattern, name in reversed(renamings):  # the last given wins
                if fnmatch(fname.lower(), pattern):
                    matched[pattern] = True
                    new = name
                    break
            if new is None:
                if keep_unselected:
                    out[path] = value
                continue
            if new in out:
                if duplicate_is_error:
                    raise ValueError(f"Duplicate value in sample {sample.keys()} after rename.")
                continue
            out[new] = value
        if must_match and not all(matched.values()):
            raise ValueError(f"Not all patterns ({matched}) matched sample keys ({sample.keys()}).")
        yield out


rename_keys = pipelinefilter(_rename_keys)


def decode_bin(stream):
    """The stream's bytes."""
    return stream.read()


def decode_text(stream):
    """The stream as UTF-8 text."""
    return stream.read().decode("utf-8")


def decode_pickle(stream):
    """The stream unpickled (refused when enforce_security is set)."""
    return autodecode.unpickle_loads(stream.read())


#: xdecode's decoders before those given: (glob pattern, function of a stream)
default_decoders = [("*.bin", decode_bin), ("*.txt", decode_text), ("*.pyd", decode_pickle)]


def find_decoder(decoders, path):
    """The decoder for a field's path: the last of decoders whose pattern matches its file
    name (metadata fields, "__...", are kept); None when none does."""
    fname = re.sub(".*/", "", path)
    if fname.startswith("__"):
        return identity
    for pattern, fun in reversed(decoders):
        if fnmatch(fname.lower(), pattern) or fnmatch("." + fname.lower(), pattern):
            return fun
    return None


def _xdecode(source, *args, must_decode=True, defaults=default_decoders, **kw):
    """Fields decoded by glob patterns of their names: (pattern, f(stream)) pairs, or
    ext=f; default_decoders first."""
    decoders = list(defaults) + list(args) + [("*." + k, v) for k, v in kw.items()]
    for sample in source:
        out = {}
        for path, data in sample.items():
            if path.startswith("__"):
                out[path] = data
                continue
            decoder = find_decoder(decoders, path)
            if decoder is False:
                out[path] = data
            elif decoder is None:
                if must_decode:
                    raise ValueError(f"No decoder found for {path}.")
                out[path] = data
            else:
                out[path] = decoder(io.BytesIO(data) if isinstance(data, bytes) else data)
        yield out


xdecode = pipelinefilter(_xdecode)


#: the stage functions by the fluid method's name (libshard's fast pipeline runs these)
STAGES = {"shuffle": _shuffle, "map": _map, "rename": _rename, "map_dict": _map_dict,
          "to_tuple": _to_tuple, "map_tuple": _map_tuple, "batched": _batched,
          "unbatched": _unbatched, "select": _select, "slice": itertools.islice,
          "rsample": _rsample, "rename_keys": _rename_keys, "extract_keys": _extract_keys,
          "xdecode": _xdecode, "unlisted": _unlisted, "log_keys": _log_keys}
