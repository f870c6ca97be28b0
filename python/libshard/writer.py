"""Samples in, shards out: WebDataset's ShardWriter, written by libshard's C writer.

    import libshard
    with libshard.ShardWriter("out/train-%06d.tar", maxcount=10000) as sink:
        sink.write({"__key__": "n01440764_10026", "jpg": jpeg_bytes, "cls": 3,
                    "json": {"w": 500, "h": 375}})

Samples are WebDataset's dicts and are encoded as WebDataset's writer encodes them: bytes
as they are, str as UTF-8, and other values by the field's extension (cls -> decimal text,
json -> json.dumps, pyd/pickle -> pickle, npy/npz -> numpy, pth -> torch.save, jpg/png/... ->
an image encoded with PIL from a PIL image or an array); a field ending in ".gz" is
gzip-compressed; fields starting with "_" are metadata and are not written.

What the C writer adds: patterns may name a folder, file://, gs:// or s3:// (shards go up
as they are written, with the remote settings of libshard.settings.BUCKET_KEYS: retries,
ca_bundle, gcs_token, upload_part, ...); every shard gets a DALI-compatible .idx beside it
(index=False: none) and a SHA-256 (checksums=), is complete under its final name or absent
(in a bucket as on disk), and the same
samples give byte-identical shards (member mtime 0 unless given). ".tar.zst" patterns give
zstd frames on sample boundaries with a seek table. Keys follow libshard's key rules
(formats/shard.md): a key that could not be read back as one sample is refused.

How it differs from WebDataset's: maxsize is never exceeded by a shard holding more than one
sample (WebDataset's shards grow past it by one sample), and fields are written in sorted
order of name, as WebDataset's TarWriter also writes them.
"""
import gzip
import io
import json
import os
import pickle
import shutil
import tempfile

from ._libshard import Writer as _Writer
from .settings import BUCKET_KEYS

__all__ = ["ShardWriter", "TarWriter", "encode_sample", "default_handlers"]


def _imageencoder(image, fmt):
    """An image (PIL, or a uint8 or 0..1 float array) encoded as WebDataset encodes it."""
    import numpy as np
    import PIL.Image
    if isinstance(image, np.ndarray):
        if image.dtype in (np.dtype("f"), np.dtype("d")):
            if np.amin(image) <= -0.001 or np.amax(image) >= 1.001:
                raise ValueError(f"image values out of range {np.amin(image)} {np.amax(image)}")
            image = np.array(np.clip(image, 0.0, 1.0) * 255.0, "uint8")
        if image.ndim not in (2, 3) or (image.ndim == 3 and image.shape[2] not in (1, 3)):
            raise ValueError(f"an image array is HxW or HxWx1 or HxWx3, not {image.shape}")
        image = PIL.Image.fromarray(image)
    elif not isinstance(image, PIL.Image.Image):
        raise ValueError(f"cannot encode {type(image).__name__} as an image")
    fmt = {"JPG": "JPEG", "IMG": "PPM", "IMAGE": "PPM"}.get(fmt.upper(), fmt.upper())
    opts = {"quality": 100} if fmt in ("JPEG", "TIFF") else {}
    with io.BytesIO() as out:
        image.save(out, format=fmt, **opts)
        return out.getvalue()


def _torch_dumps(x):
    import torch
    out = io.BytesIO()
    torch.save(x, out)
    return out.getvalue()


def _npy_dumps(x):
    import numpy.lib.format
    out = io.BytesIO()
    numpy.lib.format.write_array(out, x)
    return out.getvalue()


def _npz_dumps(x):
    import numpy as np
    if not isinstance(x, dict) or not all(isinstance(k, str) and isinstance(v, np.ndarray) for k, v in x.items()):
        raise ValueError("npz wants a dict of str to numpy arrays")
    out = io.BytesIO()
    np.savez_compressed(out, **x)
    return out.getvalue()


def _optional(module, fn):
    def dumps(x):
        try:
            mod = __import__(module)
        except ImportError:
            raise ValueError(f"encoding this field needs the {module} module, which is not installed")
        return getattr(mod, fn)(x)
    return dumps


def _make_handlers():
    h = {}

    def add(keys, f):
        for k in keys.split():
            h[k] = f
    add("cls cls2 class count index inx id", lambda x: str(x).encode("ascii"))
    add("txt text transcript html htm", lambda x: x.encode("utf-8"))
    add("pyd pickle", pickle.dumps)
    add("pth", _torch_dumps)
    add("npy", _npy_dumps)
    add("npz", _npz_dumps)
    add("json jsn", lambda x: json.dumps(x).encode("utf-8"))
    add("mp msgpack msg", _optional("msgpack", "packb"))
    add("cbor", _optional("cbor", "dumps"))
    add("jpg jpeg img image", lambda x: _imageencoder(x, "jpg"))
    for fmt in ("png", "pbm", "pgm", "ppm"):
        add(fmt, lambda x, f=fmt: _imageencoder(x, f))
    add("tiff tif", lambda x: _imageencoder(x, "tiff"))
    return h


default_handlers = _make_handlers()


def _encode1(data, name, handlers):
    compress = name.endswith(".gz")
    ext = (name[:-3] if compress else name).rsplit(".", 1)[-1].lower()
    if isinstance(data, (bytes, bytearray, memoryview)):
        out = data
    elif isinstance(data, str):
        out = data.encode("utf-8")
    else:
        handler = handlers.get(ext)
        if handler is None:
            raise ValueError(f"{name}: no encoder for a {type(data).__name__} (give bytes, or a field "
                             f"name whose extension has one: {' '.join(sorted(handlers))})")
        out = handler(data)
    return gzip.compress(bytes(out), mtime=0) if compress else out


def encode_sample(sample, handlers=None):
    """A WebDataset sample dict encoded as WebDataset's writer encodes it: {field: bytes},
    metadata ("_" fields) checked to be str and kept as they are."""
    handlers = default_handlers if handlers is None else handlers
    out = {}
    for k, v in sample.items():
        if k.startswith("_"):
            if not isinstance(v, str):
                raise ValueError(f"{k}: the values of metadata must be of string type")
            out[k] = v
        else:
            out[k] = _encode1(v, k, handlers)
    return out


def _make_encoder(spec):
    if spec is False or spec is None:
        return lambda x: x
    if spec is True:
        return encode_sample
    if isinstance(spec, dict):
        return lambda x: encode_sample(x, spec)
    if callable(spec):
        return spec
    raise ValueError(f"encoder: True, False, a dict of handlers or a callable, not {spec!r}")


def _fields(sample, key):
    fields = []
    for k, v in sample.items():
        if k.startswith("_"):
            continue
        if not isinstance(v, (bytes, bytearray, memoryview)):
            raise ValueError(f"{key}.{k} doesn't map to bytes after encoding ({type(v).__name__})")
        fields.append((k, v))
    return fields


class ShardWriter:
    """Writes samples into shards named by pattern ("out/train-%06d.tar" or ".tar.zst"), a new
    shard every maxcount samples or maxsize bytes, as WebDataset's ShardWriter does.

    The pattern may name a folder, file://, gs:// or s3:// (with the remote settings of
    libshard.settings.BUCKET_KEYS). post(path) is called with each shard's path or URL once
    it is complete;
    start_shard numbers the first shard; encoder is WebDataset's (True: by extension, False:
    bytes given, a dict of handlers, or a callable). libshard's own: level and frame_size for
    .tar.zst, mtime of the members (default 0), checksums ("sha256", "md5", "md5,sha256" or
    "none"), sync (fsync before the rename), index (write the .idx), manifest (a path: a wids
    manifest of the shards written at close). `shards` lists what was written: dicts of url,
    nsamples, filesize, tarsize and the digests. Leaving a `with` block by an exception drops
    the shard being written (completed ones stay) and writes no manifest.
    """

    def __init__(self, pattern, maxcount=100000, maxsize=3e9, post=None, start_shard=0, verbose=0,
                 encoder=True, *, level=3, frame_size=4 << 20, mtime=0, checksums="sha256", sync=True,
                 index=True, manifest=None, opener=None, **kw):
        if opener is not None:
            raise NotImplementedError("ShardWriter(opener=...): libshard writes the files itself, "
                                      "into a folder, gs:// or s3://; post= sees each finished shard")
        if kw.pop("keep_meta", False):
            raise NotImplementedError("ShardWriter(keep_meta=True): libshard writes no metadata members")
        for k in ("user", "group", "mode", "format", "compress"):
            kw.pop(k, None)  # WebDataset's TarWriter options: libshard's tar headers are fixed
        bucket = {k: kw.pop(k) for k in BUCKET_KEYS if k in kw}
        if kw:
            raise TypeError(f"ShardWriter: unexpected arguments {sorted(kw)}")
        pattern = os.fspath(pattern)
        self.pattern = pattern
        self.post = post
        self.verbose = verbose
        self.manifest = os.fspath(manifest) if manifest is not None else None
        self._encode = _make_encoder(encoder)
        self._w = _Writer(pattern, maxcount=maxcount, maxsize=maxsize, first_shard=start_shard, level=level,
                          frame_size=frame_size, mtime=mtime, checksums=checksums, sync=sync, index=index,
                          **bucket)
        self._posted = 0
        self.total = 0
        self._closed = False

    def write(self, obj):
        """Writes one sample (a dict with "__key__"); returns the bytes of its fields."""
        if self._closed:
            raise ValueError("write to a closed ShardWriter")
        obj = self._encode(obj)
        if "__key__" not in obj:
            raise ValueError("object must contain a __key__")
        key = obj["__key__"]
        if not isinstance(key, str):
            raise ValueError(f"__key__ must be a str, not {type(key).__name__}")
        fields = _fields(obj, key)
        done = self._w.write(key, fields)
        self.total += 1
        if done > self._posted:
            self._post(done)
        return sum(len(memoryview(v)) for _, v in fields)

    def _post(self, upto):
        shards = self._w.shards
        while self._posted < upto:
            info = shards[self._posted]
            self._posted += 1
            if self.verbose:
                print(f"# wrote {info['url']} {info['nsamples']} {info['filesize'] / 1e9:.1f} GB {self.total}")
            if callable(self.post):
                self.post(info["url"])

    @property
    def shards(self):
        """The shards completed so far: dicts of url, nsamples, filesize, tarsize, digests."""
        return self._w.shards

    def close(self):
        """Completes the last shard, calls post for it and writes the manifest, if asked."""
        if self._closed:
            return
        self._closed = True
        self._w.finish()
        self._post(len(self._w.shards))
        if self.manifest:
            self._w.write_manifest(self.manifest, self.manifest.rsplit("/", 1)[-1].split(".")[0])

    finish = close

    def abort(self):
        """Drops the shard being written; completed shards stay; no manifest."""
        self._closed = True
        self._w.abort()

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is not None:
            self.abort()
        else:
            self.close()


class TarWriter:
    """One tar file (a path, file://, gs:// or s3:// URL, or a writable binary file object) from
    samples, as WebDataset's TarWriter. A path or URL is written by the C writer under that
    name, complete or absent (a temporary renamed into place, an object that appears once
    uploaded); a file object gets the bytes of one written into a temporary folder. A name
    ending in .tar.zst gives libshard's zstd-framed tar; gzip, bz2 and xz are not written
    (compress=). Remote settings as ShardWriter's."""

    def __init__(self, fileobj, user="bigdata", group="bigdata", mode=0o444, compress=None, encoder=True,
                 keep_meta=False, mtime=None, format=None, *, index=False, checksums="none", sync=True, **kw):
        if keep_meta:
            raise NotImplementedError("TarWriter(keep_meta=True): libshard writes no metadata members")
        name = os.fspath(fileobj) if isinstance(fileobj, (str, os.PathLike)) else None
        if compress not in (None, False) or (name and name.endswith(("gz", "bz2", "xz"))):
            raise ValueError("TarWriter: libshard writes .tar and .tar.zst, not gzip, bz2 or xz")
        self._stream = None if name else fileobj
        self._tmp = None if name else tempfile.mkdtemp(prefix=".tarwriter-")
        # a pattern without a conversion names the one file; % is a literal in a name
        pattern = name.replace("%", "%%") if name else os.path.join(self._tmp, "t.tar")
        self._sink = ShardWriter(pattern, maxcount=0, maxsize=0, encoder=encoder, mtime=int(mtime or 0),
                                 checksums=checksums, sync=sync and name is not None, index=index, **kw)

    def write(self, obj):
        """Writes one sample; returns the bytes of its fields."""
        return self._sink.write(obj)

    def close(self):
        """Completes the file: under its name, or copied into the stream."""
        if self._sink is None:
            return
        sink, self._sink = self._sink, None
        try:
            sink.close()
            self._shards = sink.shards
            if self._stream is not None:
                with open(sink.shards[0]["url"], "rb") as f:
                    shutil.copyfileobj(f, self._stream, 1 << 20)
        finally:
            if self._tmp:
                shutil.rmtree(self._tmp, ignore_errors=True)

    @property
    def shards(self):
        """The tar written, once complete (a list of one info dict), else []."""
        return getattr(self, "_shards", [])

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is not None and self._sink is not None:
            self._sink.abort()
            self._sink = None
            if self._tmp:
                shutil.rmtree(self._tmp, ignore_errors=True)
        else:
            self.close()
