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
and its samples' image sizes (.cols, formats/columns.md) beside that (index=False: neither),
and a SHA-256 (checksums=), is complete under its final name or absent
(in a bucket as on disk), and the same
samples give byte-identical shards (member mtime 0 unless given). ".tar.zst" patterns give
zstd frames on sample boundaries with a seek table. Keys follow libshard's key rules
(formats/shard.md): a key that could not be read back as one sample is refused.

How it differs from WebDataset's: maxsize is never exceeded by a shard holding more than one
sample (WebDataset's shards grow past it by one sample), and fields are written in sorted
order of name, as WebDataset's TarWriter also writes them.
"""
import os
import shutil
import tempfile

from ._libshard import Writer as _Writer
from .encode import default_handlers, encode_sample, make_encoder
from . import settings as _settings
from .settings import BUCKET_KEYS
from .redact import shown

__all__ = ["ShardWriter", "TarWriter", "encode_sample", "default_handlers"]


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
            raise _settings.unknown("ShardWriter", kw, BUCKET_KEYS)
        pattern = os.fspath(pattern)
        self.pattern = pattern
        self.post = post
        self.verbose = verbose
        self.manifest = os.fspath(manifest) if manifest is not None else None
        self._encode = make_encoder(encoder)
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
                print(f"# wrote {shown(info['url'])} {info['nsamples']} {info['filesize'] / 1e9:.1f} GB {self.total}")
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


ShardWriter.__init__.__signature__ = _settings.signature(ShardWriter.__init__, BUCKET_KEYS,
                                                         _settings.BUCKET_ROWS)
TarWriter.__init__.__signature__ = _settings.signature(TarWriter.__init__, BUCKET_KEYS,
                                                       _settings.BUCKET_ROWS)
