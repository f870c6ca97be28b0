"""Checks of the reader's and loader's options, made when a dataset is constructed: an error
names the option and what it accepts, instead of a C-level error at the first batch. Values
are normalized to what the extension takes (lists to tuples, torch dtypes to names)."""
import numbers
import os


def _int(name, v, lo=None, none=False):
    if v is None and none:
        return v
    if isinstance(v, bool) or not isinstance(v, numbers.Integral):
        raise TypeError(f"{name}: an int{' or None' if none else ''}, not {v!r}")
    if lo is not None and v < lo:
        raise ValueError(f"{name}: at least {lo}, not {v}")
    return int(v)


def _real(name, v, lo=0.0):
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        raise TypeError(f"{name}: a number, not {v!r}")
    if v < lo:
        raise ValueError(f"{name}: at least {lo}, not {v}")
    return float(v)


def _bool(name, v):
    if not isinstance(v, (bool, int)) or v not in (0, 1):
        raise TypeError(f"{name}: True or False, not {v!r}")
    return bool(v)


def _choice(name, v, choices):
    if v not in choices:
        raise ValueError(f"{name}: one of {', '.join(repr(c) for c in choices)}, not {v!r}")
    return v


def _numbers(name, v, n, what):
    try:
        seq = [float(x) for x in (v.tolist() if hasattr(v, "tolist") else v)]
    except (TypeError, ValueError):
        seq = None
    if seq is None or len(seq) != n or isinstance(v, (str, bytes)):
        raise TypeError(f"{name}: {what}, not {v!r}")
    return tuple(seq)


def _image_size(v):
    if isinstance(v, numbers.Integral) and not isinstance(v, bool):
        return _int("image_size", v, 1)
    if isinstance(v, (tuple, list)) and len(v) == 2 and all(
            isinstance(x, numbers.Integral) and not isinstance(x, bool) for x in v):
        h, w = (_int("image_size", x, 1) for x in v)
        return (h, w)
    raise TypeError(f"image_size: an int or a pair of ints (height, width), not {v!r}")


DTYPES = ("uint8", "float32", "float16", "bfloat16")  # the last two on the GPU only


def _dtype(v):
    name = getattr(v, "__module__", "") == "torch" and str(v).replace("torch.", "")
    if name in DTYPES:
        return name
    return _choice("dtype", v, DTYPES)


def _fields(name, v, none=False):
    if v is None and none:
        return v
    if not isinstance(v, str):
        raise TypeError(f"{name}: a ';'-separated string of field names, not {v!r}")
    return v


CHECKS = {
    "seed": lambda v: _int("seed", v, 0, none=True),
    "mode": lambda v: _choice("mode", v, ("exact", "equal", "resampled")),
    "pad": lambda v: _bool("pad", v),
    "epoch_samples": lambda v: _int("epoch_samples", v, 0, none=True),
    "shuffle_shards": lambda v: _bool("shuffle_shards", v),
    "shuffle": lambda v: _int("shuffle", v, 0),
    "shuffle_initial": lambda v: _int("shuffle_initial", v, 0),
    "streams": lambda v: _int("streams", v, 1),
    "queue_depth": lambda v: _int("queue_depth", v, 1),
    "memory_budget": lambda v: _int("memory_budget", v, 0),
    "skip_errors": lambda v: _bool("skip_errors", v),
    "manifest_commands": lambda v: _bool("manifest_commands", v),
    "cache_dir": lambda v: None if v is None else os.fspath(v),
    "cache_size": lambda v: _int("cache_size", v, 0),
    "retries": lambda v: _int("retries", v, 0),
    "timeout": lambda v: _real("timeout", v),
    "stall_timeout": lambda v: _real("stall_timeout", v),
    "backoff": lambda v: _real("backoff", v),
    "batch_size": lambda v: _int("batch_size", v, 1),
    "image_size": _image_size,
    "crop": lambda v: _choice("crop", v, ("random_resized", "center", "none")),
    "flip": lambda v: _bool("flip", v),
    "fast": lambda v: _bool("fast", v),
    "layout": lambda v: _choice("layout", v, ("nchw", "nhwc", "channels_last")),
    "dtype": _dtype,
    "mean": lambda v: _numbers("mean", v, 3, "three numbers (red, green, blue), 0 to 1"),
    "std": lambda v: _numbers("std", v, 3, "three numbers (red, green, blue), 0 to 1"),
    "scale": lambda v: _numbers("scale", v, 2, "two numbers (smallest, largest area share)"),
    "ratio": lambda v: _numbers("ratio", v, 2, "two numbers (smallest, largest aspect ratio)"),
    "drop_last": lambda v: _bool("drop_last", v),
    "threads": lambda v: _int("threads", v, 0),
    "batches": lambda v: _int("batches", v, 2),
    "device_buffers": lambda v: _int("device_buffers", v, 2),
    "image_fields": lambda v: _fields("image_fields", v),
    "label_field": lambda v: _fields("label_field", v, none=True),
    "missing_label": lambda v: v if v in ("error", -1) else _choice("missing_label", v,
                                                                     ("error", -1)),
}


def check(settings):
    """settings with each known option checked and normalized (a new dict)."""
    return {k: CHECKS[k](v) if k in CHECKS else v for k, v in settings.items()}


def _paths(v, what):
    if isinstance(v, (str, bytes, os.PathLike)):
        return [os.fsdecode(v)]
    try:
        items = list(v)
    except TypeError:
        raise TypeError(f"{what}: a path or URL, a list of them, or a list of (spec, weight) "
                        f"pairs, not {v!r}") from None
    for u in items:
        if not isinstance(u, (str, bytes, os.PathLike)):
            raise TypeError(f"{what}: a path or URL, not {u!r}")
    return [os.fsdecode(u) for u in items]


def specs(urls):
    """Shard specs as the extension takes them: a list of str (one source), or a list of
    (list of str, weight) pairs (a weighted mix), checked here so the error names the item."""
    if isinstance(urls, (str, bytes, os.PathLike)) or not any(isinstance(u, tuple) for u in urls):
        out = _paths(urls, "urls")
        if not out:
            raise ValueError("urls: no shards given")
        return out
    mix = []
    for i, item in enumerate(urls):
        if not (isinstance(item, tuple) and len(item) == 2):
            raise TypeError(f"a mix is a list of (spec, weight) pairs; item {i} is {item!r}")
        spec, weight = item
        if isinstance(weight, bool) or not isinstance(weight, numbers.Real) or not weight > 0:
            raise ValueError(f"the weight of source {i} ({spec!r}): a positive number, not "
                             f"{weight!r}")
        mix.append((_paths(spec, f"source {i}"), float(weight)))
    return mix
