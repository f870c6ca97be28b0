"""The stages WebDataset runs in Python (its filters.py), each a generator over the
samples before it, and STAGES: the stage functions by the fluid method's name."""
import itertools
import random

import numpy as np
import torch

from .handlers import reraise_exception


def getfirst(a, keys, default=None, missing_is_error=True):
    """The value of the first of keys (a list or a ';'-separated str) that a has."""
    for k in keys.split(";") if isinstance(keys, str) else keys:
        if k in a:
            return a[k]
    if missing_is_error:
        raise ValueError(f"didn't find {keys} in {list(a.keys())}")
    return default


def combine_values(b):
    """A column of a batch as WebDataset's collation combines it: numbers into a numpy array,
    tensors and arrays stacked (of one shape), anything else a list."""
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
    cols = {k: (combine_values(v) if (combine_tensors or combine_scalars) else v) for k, v in cols.items()}
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


STAGES = {"shuffle": _shuffle, "map": _map, "rename": _rename, "map_dict": _map_dict,
        "to_tuple": _to_tuple, "map_tuple": _map_tuple, "batched": _batched,
        "unbatched": _unbatched, "select": _select, "slice": _slice}
