"""The settings libshard's Python API takes: each one's name, what it accepts, its default and
what it does, from the extension's tables.

The tables are the C extension's (python/libshard/_tables.c): one per C settings struct
(reader, remote, bucket, loader, transform, upload, writer, pack), a row per setting, its default
read from the struct's default function. Reader, Loader and the datasets all take their
settings from them, so a setting added to a table is taken, checked and given its default
everywhere, and listed here:

    >>> import libshard.settings
    >>> libshard.settings.DEFAULTS["streams"], libshard.settings.ROWS["streams"]["doc"]
    (4, 'shards read at once and interleaved')

The datasets check their settings when they are made (an error names the setting and what
it accepts, instead of a C error at the first batch), with the extension's own checks.
torch adds a few values on top of the rows: dtype takes torch dtypes and the GPU's float16
and bfloat16, layout "channels_last", and device_buffers is the upload's buffers (DATASET).
"""
import hashlib
import numbers
import os
import textwrap

from . import _libshard
from .redact import shown_repr

TABLES = _libshard.settings()


def _names(*tables, placement=True):
    return tuple(r["name"] for t in tables for r in TABLES[t]
                 if placement or r["group"] != "placement")


#: what reads remote shards: Reader, Loader, ShardFiles, list_shards
REMOTE_KEYS = _names("remote")
#: what writes into gs:// and s3://: ShardWriter, TarWriter, pack
BUCKET_KEYS = _names("bucket")
#: the reader's settings a dataset passes on (rank, worker and epoch it sets itself)
READER_KEYS = _names("reader", placement=False) + REMOTE_KEYS
#: what a Loader takes beyond the reader's: batching, decoding and augmentation
LOADER_KEYS = _names("loader", "transform")


def _derived(source, row_name, **changes):
    """The row row_name of the table source, with changes."""
    row = next(r for r in TABLES[source] if r["name"] == row_name)
    return {**row, **changes}


_LAYOUTS = next(r["choices"] for r in TABLES["transform"] if r["name"] == "layout")

#: the settings a torch dataset takes on top of the extension's, or with more values
DATASET = {
    # made on the GPU: the upload's dtypes, torch dtypes taken by name
    "dtype": _derived("upload", "dtype", table="dataset",
                      doc="'uint8', or normalized with mean and std: 'float32', and with "
                          "device='cuda' 'float16' and 'bfloat16'"),
    # NCHW-shaped with NHWC strides (torch's channels_last memory format)
    "layout": _derived("transform", "layout", table="dataset",
                       choices=_LAYOUTS + ("channels_last",),
                       doc="'nchw', 'nhwc', or 'channels_last': NCHW-shaped with NHWC "
                           "strides"),
    "device_buffers": _derived("upload", "buffers", name="device_buffers", table="dataset",
                               minimum=2),
    # DDP wants every rank to end the epoch with the same number of batches
    "mode": _derived("reader", "mode", table="dataset", default=None,
                     doc="how an epoch is split between consumers: 'exact' (each sample "
                         "once; ranks may differ by a batch), 'equal' (the same count per "
                         "rank, as DistributedSampler; needs sample counts, made for plain "
                         "tars), 'resampled' (shards drawn with replacement); None: 'equal' "
                         "when the world size is above 1, else 'exact'"),
    # batches are (images, labels) unless fields are asked for
    "raw_fields": _derived("loader", "raw_fields", table="dataset", default=None,
                           doc="fields carried raw into each batch, then (images, labels, "
                               "{name: [bytes or None per sample]}); '*': every field but the "
                               "image and the label; None: none"),
}

#: every setting by name: the reader's, remote, loader's and transform's rows, then DATASET's
ROWS = {r["name"]: r for t in ("reader", "remote", "loader", "transform") for r in TABLES[t]}
ROWS.update(DATASET)
#: their defaults (the C structs')
DEFAULTS = {name: r["default"] for name, r in ROWS.items()}


def _torch_dtype(v):
    """A torch dtype's name ("uint8" for torch.uint8) where it is one of dtype's, else v."""
    name = getattr(v, "__module__", "") == "torch" and str(v).replace("torch.", "")
    return name if name in DATASET["dtype"]["choices"] else v


#: what IndexedShardDataset's ds[i] honours of the Loader's settings: one image's decode
#: and its label
INDEXED_KEYS = ("image_size", "crop", "flip", "fast", "dtype", "mean", "std", "scale", "ratio",
                "image_fields", "label_field", "missing_label")

#: the settings ShardDataset takes as keywords (its signature's and stub's)
DATASET_KEYS = tuple(dict.fromkeys(READER_KEYS + LOADER_KEYS))
#: the settings IndexedShardDataset takes as keywords
INDEXED_DATASET_KEYS = INDEXED_KEYS + ("make_indexes",) + REMOTE_KEYS

#: torch DataLoader's own keywords (ShardLoader passes them on; a dataset takes none)
DATALOADER_KEYS = ("num_workers", "pin_memory", "timeout", "worker_init_fn",
                   "multiprocessing_context", "generator", "prefetch_factor",
                   "persistent_workers", "pin_memory_device", "collate_fn", "sampler",
                   "batch_sampler", "in_order")


def homes(owner):
    """{keyword: where it belongs} for keywords given to owner that another class takes:
    the misplaced ones a user is told the right home of."""
    if owner == "ShardLoader":
        return {k: f"ShardDataset's: ShardDataset(urls, {k}=...)"
                for k in READER_KEYS + LOADER_KEYS + tuple(DATASET)
                if k not in DATALOADER_KEYS}
    if owner not in ("ShardDataset", "IndexedShardDataset"):
        return {}
    loader = ("ShardLoader's (the DataLoader's): ShardLoader(dataset, {k}=...)"
              if owner == "ShardDataset" else "the DataLoader's: DataLoader(dataset, {k}=...)")
    return {k: loader.format(k=k) for k in DATALOADER_KEYS}


#: the C settings' field names whose keyword here is another (as errors and states name them)
C_NAMES = {"shuffle_buffer": "shuffle", "trace_path": "trace", "width": "image_size",
           "height": "image_size", "scale_min": "scale", "scale_max": "scale",
           "ratio_min": "ratio", "ratio_max": "ratio", "write_index": "index",
           "shuffle_seed": "shuffle", "max_side": "resize"}


def unknown(owner, names, known):
    """The TypeError for settings names that owner does not take: a misplaced one with its
    right home (homes), a C field's name with its keyword here (C_NAMES), a misspelt one
    with the closest known name."""
    import difflib
    elsewhere = homes(owner)
    misplaced = [f"{owner} does not take {n!r}: it is {elsewhere[n]}"
                 for n in sorted(names) if n in elsewhere]
    parts = []
    for n in sorted(set(names) - set(elsewhere)):
        if C_NAMES.get(n) in known:
            parts.append(f"{n!r} (did you mean {C_NAMES[n]!r}? {n} is the C field's name)")
            continue
        near = difflib.get_close_matches(n, list(known), n=1, cutoff=0.75)
        parts.append(f"{n!r} (did you mean {near[0]!r}?)" if near else repr(n))
    if parts:
        misplaced.append(f"{owner}: unknown settings {', '.join(parts)}")
    return TypeError("; ".join(misplaced))


#: a bucket writer's settings by name (ShardWriter, TarWriter)
BUCKET_ROWS = {r["name"]: r for r in TABLES["bucket"]}


def signature(function, names, rows=None):
    """function's signature with **settings spelt out: a keyword-only parameter per setting
    in names with its default from rows (default ROWS), for help(), IPython's ? and
    inspect.signature; the .pyi stubs give IDEs the same, with types."""
    import inspect
    rows = ROWS if rows is None else rows
    sig = inspect.signature(function)
    params = [p for p in sig.parameters.values() if p.kind is not p.VAR_KEYWORD]
    have = {p.name for p in params}
    params += [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, default=rows[n]["default"])
               for n in dict.fromkeys(names) if n not in have]
    return sig.replace(parameters=params)


def check_value(name, value):
    """value for the setting name checked and normalized (an int, a bool, a float, a str or
    a tuple); TypeError or ValueError naming the setting and what it accepts."""
    if name == "dtype":
        value = _torch_dtype(value)
    return _libshard.check_setting(ROWS[name], value)


def check(settings):
    """settings with each known setting checked and normalized (a new dict); other names
    are left as they are, for the caller to refuse or take."""
    return {k: check_value(k, v) if k in ROWS else v for k, v in settings.items()}


def doc(names, indent="    "):
    """Lines "name (default): what it does" for the settings names, for docstrings."""
    return "\n".join(textwrap.fill(f"{n} ({DEFAULTS[n]!r}): {ROWS[n]['doc']}", 92,
                                   initial_indent=indent, subsequent_indent=indent + "    ")
                     for n in names)


def _paths(v, what):
    if isinstance(v, (str, bytes, os.PathLike)):
        return [os.fsdecode(v)]
    try:
        items = list(v)
    except TypeError:
        raise TypeError(f"{what}: a path or URL, a list of them, or a list of (spec, weight) "
                        f"pairs, not {shown_repr(v)}") from None
    for u in items:
        if not isinstance(u, (str, bytes, os.PathLike)):
            raise TypeError(f"{what}: a path or URL, not {shown_repr(u)}")
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
            raise TypeError(f"a mix is a list of (spec, weight) pairs; item {i} is {shown_repr(item)}")
        spec, weight = item
        if isinstance(weight, bool) or not isinstance(weight, numbers.Real) or not weight > 0:
            raise ValueError(f"the weight of source {i} ({shown_repr(spec)}): a positive number, not "
                             f"{weight!r}")
        mix.append((_paths(spec, f"source {i}"), float(weight)))
    return mix


def key_file(keys):
    """keys= as the reader takes it: a path as given; a list of keys written once, one a
    line, to a file named by its content in the cache folder (DataLoader workers and later
    runs read the same file)."""
    if not isinstance(keys, (list, tuple)):
        return keys  # a path, None, or what the check refuses by name
    keys = [k if isinstance(k, str) else None for k in keys]
    if any(k is None or "\n" in k or not k for k in keys):
        raise TypeError("keys: a path, or a list of keys (non-empty str without a newline)")
    text = "".join(k + "\n" for k in keys).encode()
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    folder = os.path.join(cache, "libshard", "keys")
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, hashlib.sha256(text).hexdigest()[:32] + ".txt")
    if not os.path.exists(path):
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "wb") as f:
            f.write(text)
        os.replace(tmp, path)
    return path
