"""webdataset.writer as libshard writes it: TarWriter, one tar (a path, a pipe: command, a
URL gopen writes, or a file object; .tgz/.gz, .bz2 and .xz names compressed) of samples, and
ShardWriter, shards named by a pattern with a new one every maxcount samples or maxsize
bytes, written in Python as WebDataset writes them (ustar members owned by user/group, mode
0o444, the time of writing). Fields are encoded by their extension (libshard.encode: the
table of WebDataset's writer, .ten and .gz included).

libshard.ShardWriter is the C writer: reproducible shards, a .idx beside each, .tar.zst,
buckets, digests."""
import io
import tarfile
import time

from .. import encode as _encode
from . import gopen

imageencoder = _encode.imageencoder
bytestr = _encode.bytestr
torch_dumps = _encode.torch_dumps
numpy_dumps = _encode.numpy_dumps
numpy_npz_dumps = _encode.numpy_npz_dumps
tenbin_dumps = _encode.tenbin_dumps
cbor_dumps = _encode.cbor_dumps
mp_dumps = _encode.mp_dumps
add_handlers = _encode.add_handlers
make_handlers = _encode.make_handlers
default_handlers = _encode.default_handlers
make_encoder = _encode.make_encoder


def encode_based_on_extension1(data, tname, handlers):
    """One field's bytes by its name's extension (".gz": compressed)."""
    return _encode.encode_field(data, tname, handlers)


def encode_based_on_extension(sample, handlers):
    """A sample's fields encoded by their extensions."""
    return _encode.encode_sample(sample, handlers)


class TarWriter:
    """A tar of samples: write(sample) adds its fields as KEY.FIELD members, sorted by name
    (metadata "_" fields only with keep_meta). fileobj: a name gopen opens for writing (a
    path, pipe:COMMAND, ...) or a binary file object; compress (True, "gz", "bz2", "xz", or
    from a name ending so) compresses the stream."""

    def __init__(self, fileobj, user="bigdata", group="bigdata", mode=0o444, compress=None,
                 encoder=True, keep_meta=False, mtime=None, format=None):  # noqa: A002
        self.format = getattr(tarfile, format, format) if format else tarfile.USTAR_FORMAT
        self.mtime = mtime
        tarmode = self.tarmode(fileobj, compress)
        if isinstance(fileobj, str):
            fileobj = gopen.gopen(fileobj, "wb")
            self.own_fileobj = fileobj
        else:
            self.own_fileobj = None
        self.encoder = make_encoder(encoder)
        self.keep_meta = keep_meta
        self.stream = fileobj
        self.tarstream = tarfile.open(fileobj=fileobj, mode=tarmode, format=self.format)
        self.user = user
        self.group = group
        self.mode = mode
        self.compress = compress

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc_val, exc_tb):
        self.close()

    def close(self):
        """Ends the tar (and closes what it opened)."""
        self.tarstream.close()
        if self.own_fileobj is not None:
            self.own_fileobj.close()
            self.own_fileobj = None

    def write(self, obj):
        """Adds a sample (a dict with "__key__"); returns the bytes of its fields."""
        obj = self.encoder(obj)
        if "__key__" not in obj:
            raise ValueError("object must contain a __key__")
        for k, v in obj.items():
            if not k.startswith("_") and not isinstance(v, (bytes, bytearray, memoryview)):
                raise ValueError(f"{k} doesn't map to a bytes after encoding ({type(v)})")
        key = obj["__key__"]
        total = 0
        for k in sorted(obj):
            if k == "__key__" or (not self.keep_meta and k.startswith("_")):
                continue
            v = obj[k]
            if isinstance(v, str):
                v = v.encode("utf-8")
            if not isinstance(v, (bytes, bytearray, memoryview)):
                raise ValueError(f"converter didn't yield bytes: {k}, {type(v)}")
            info = tarfile.TarInfo(key + "." + k)
            info.size = len(v)
            info.mtime = self.mtime if self.mtime is not None else time.time()
            info.mode = self.mode
            info.uname = self.user
            info.gname = self.group
            self.tarstream.addfile(info, io.BytesIO(v))
            total += info.size
        return total

    @staticmethod
    def tarmode(fileobj, compress=None):
        """tarfile's stream mode for a target: compressed as compress or its name says."""
        name = fileobj if isinstance(fileobj, str) else ""
        if compress is False:
            return "w|"
        if compress is True or compress == "gz" or name.endswith("gz"):
            return "w|gz"
        if compress == "bz2" or name.endswith("bz2"):
            return "w|bz2"
        if compress == "xz" or name.endswith("xz"):
            return "w|xz"
        return "w|"


class ShardWriter:
    """Shards named pattern % n (from start_shard), a new one once the current holds
    maxcount samples or maxsize bytes; post(name) after each; opener(name): the file
    object to write into (default: gopen's). kw go to each TarWriter."""

    def __init__(self, pattern, maxcount=100000, maxsize=3e9, post=None, start_shard=0,
                 verbose=1, opener=None, **kw):
        self.verbose = verbose
        self.kw = kw
        self.maxcount = maxcount
        self.maxsize = maxsize
        self.post = post
        self.tarstream = None
        self.shard = start_shard
        self.pattern = pattern
        self.total = 0
        self.count = 0
        self.size = 0
        self.fname = None
        self.opener = opener
        self.next_stream()

    def next_stream(self):
        """Ends the current shard and begins the next."""
        self.finish()
        self.fname = self.pattern % self.shard
        if self.verbose:
            print("# writing", self.fname, self.count, f"{self.size / 1e9:.1f} GB", self.total)
        self.shard += 1
        target = self.opener(self.fname) if self.opener else self.fname
        self.tarstream = TarWriter(target, **self.kw)
        self.count = 0
        self.size = 0

    def write(self, obj):
        """Adds a sample, beginning a new shard first when the current is full."""
        if self.tarstream is None or self.count >= self.maxcount or self.size >= self.maxsize:
            self.next_stream()
        self.size += self.tarstream.write(obj)
        self.count += 1
        self.total += 1

    def finish(self):
        """Ends the current shard (post is called with its name)."""
        if self.tarstream is not None:
            self.tarstream.close()
            assert self.fname is not None
            if callable(self.post):
                self.post(self.fname)
            self.tarstream = None

    def close(self):
        """Ends the last shard."""
        self.finish()

    def __enter__(self):
        return self

    def __exit__(self, *args, **kw):
        self.close()
