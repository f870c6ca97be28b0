"""webdataset.tariterators as libshard writes it: shards opened (url_opener), their members
read in order (tar_file_expander, each shard followed by an end-of-shard marker, {}), and
grouped into samples by WebDataset's key rule (group_by_keys, base_plus_ext: the key is the
path up to the first dot of the file name). tarfile_samples does all three; its curried form
tarfile_to_samples is the pipeline stage."""
import contextlib
import functools
import io
import os
import random
import re
import stat
import tarfile

from . import filters, gopen, limits as _limits
from .handlers import reraise_exception
from .utils import braceexpand
from ..redact import shown

#: print each member as it is grouped
trace = False
meta_prefix = "__"
meta_suffix = "__"


def base_plus_ext(path):
    """(key, extension) of a member's path: the key up to the first dot of the file name,
    the extension the rest; (None, None) when the name has no dot."""
    m = re.match(r"^((?:.*/|)[^.]+)[.]([^/]*)$", path)
    if not m:
        return None, None
    return m.group(1), m.group(2)


def valid_sample(sample):
    """Whether sample is a non-empty dict not marked __bad__."""
    return isinstance(sample, dict) and len(sample) > 0 and not sample.get("__bad__", False)


def shardlist(urls, *, shuffle=False):
    """{"url": u} for each URL (a brace pattern or a list), in order or shuffled."""
    urls = list(braceexpand(urls)) if isinstance(urls, str) else list(urls)
    if shuffle:
        random.shuffle(urls)
    for url in urls:
        yield dict(url=url)


def url_opener(data, handler=reraise_exception, **kw):
    """Each {"url": ...} with "stream" added: the URL opened by gopen (kw: gopen's)."""
    for sample in data:
        assert isinstance(sample, dict), sample
        assert "url" in sample
        url = sample["url"]
        try:
            sample.update(stream=gopen.gopen(url, **kw))
        except Exception as exn:
            exn.args = exn.args + (shown(url),)
            if handler(exn):
                continue
            break
        yield sample


def _skipped(fname, skip_meta):
    if "/" not in fname and fname.startswith(meta_prefix) and fname.endswith(meta_suffix):
        return True
    return skip_meta is not None and re.match(skip_meta, fname) is not None


def libshard_members(fileobj, limits=None):
    """fileobj's members through libshard's C reader, or None where Python's tarfile reads
    it: a stream url_opener opened through libshard (http, https, gs, s3) or a local file,
    nothing read from either yet, is handed over (the file closed, the stream's connection
    the reader's); a pipe, a user's own opener, a stream already read from stay Python's.
    limits: max_member_size and max_sample_size (default: limits.resolved())."""
    limits = limits or _limits.resolved()
    stream = gopen.unread_rawstream(fileobj)
    if stream is not None:
        members = _open_members(stream, limits)
        fileobj.close()
        return members
    if type(fileobj) is not io.BufferedReader:
        return None
    raw = fileobj.raw
    if type(raw) is io.FileIO and fileobj.mode == "rb" and isinstance(raw.name, str):
        if raw.closed or raw.tell() != 0 or not stat.S_ISREG(os.fstat(raw.fileno()).st_mode):
            return None
        from .._libshard import RawStream
        members = _open_members(RawStream(raw.name), limits)
        fileobj.close()
        return members
    return None


@functools.lru_cache(maxsize=None)  # one class: made once, when first needed
def _tar_read_error():
    from .._libshard import ShardError

    class TarReadError(ShardError, tarfile.ReadError):
        """A tar libshard's reader could not read (damaged, cut short): libshard's error,
        naming the shard, offset and member, and tarfile's, as code written for
        WebDataset catches it."""

    # found by pickle as this module's (__getattr__ below): a DataLoader worker sends its
    # class to the main process, which would otherwise lose the error
    TarReadError.__qualname__ = "TarReadError"
    TarReadError.__module__ = __name__
    return ShardError, TarReadError


def __getattr__(name):
    if name == "TarReadError":
        return _tar_read_error()[1]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _read_error(exn, reading=True):
    """exn, a ShardError, as a TarReadError where it says the tar is damaged (else None);
    reading: raised while reading members (not opening the tar)."""
    if exn.code != -5:  # SHARD_ERR_FORMAT: not the network's, not a missing object's
        return None
    args = (_limits.explained(str(exn.args[0])),) + exn.args[1:] if exn.args else ()
    error = _tar_read_error()[1](*args)
    error.url, error.offset, error.member, error.code = exn.url, exn.offset, exn.member, exn.code
    text = str(exn)
    # a member's data cut or damaged (not a header): tarfile fails reading that member
    error.in_member = (reading and "the header after member" not in text
                       and "first header" not in text and "(max_" not in text)
    return error


@contextlib.contextmanager
def _read_errors(reading):
    """A ShardError saying the tar is damaged, raised inside, as a TarReadError; reading:
    while reading members (not opening the tar)."""
    try:
        yield
    except _tar_read_error()[0] as exn:
        error = _read_error(exn, reading)
        if error is None:
            raise
        raise error from None


def _open_members(stream, limits):
    """stream.members(**limits), a tar that is none or whose start is damaged a
    TarReadError."""
    with _read_errors(reading=False):
        return stream.members(**limits)


def _c_members(members):
    """members' (name, bytes), a damaged tar raised as a TarReadError."""
    with _read_errors(reading=True):
        yield from members


def _python_members(fileobj, limits):
    """fileobj's regular files through tarfile as (name, a function reading its bytes); a
    member or a sample (consecutive members of one key) past limits refused before it is
    read, as libshard's reader refuses it."""
    stream = tarfile.open(fileobj=fileobj, mode="r|*")
    key, held = None, 0
    for info in stream:
        name = info.name
        if info.isreg() and name is not None:
            k = base_plus_ext(name)[0]
            held = held + info.size if k is not None and k == key else info.size
            key = k
            for what, size, limit in (("declares", info.size, limits["max_member_size"]),
                                      ("takes its sample to", held, limits["max_sample_size"])):
                if size > limit:
                    which = "max_member_size" if what == "declares" else "max_sample_size"
                    raise tarfile.ReadError(_limits.explained(
                        f"{shown(str(getattr(fileobj, 'name', fileobj)))}: offset {info.offset}: "
                        f"member '{name}' {what} {size} bytes, more than the limit of {limit} "
                        f"({which})"))
            yield name, lambda info=info: stream.extractfile(info).read()
        stream.members = []  # a stream read once: remember nothing of the members
    del stream


def tar_file_iterator(fileobj, skip_meta=r"__[^/]*__($|/)", handler=reraise_exception,
                      select_files=None, rename_files=None, counts=None, max_member_size=None,
                      max_sample_size=None):
    """{"fname", "data"} for each regular file of the tar stream fileobj (gzip, bzip2 and
    xz detected), in order; metadata members (__...__) skipped; rename_files(name) renames
    a member, select_files(name) keeps it. A member that fails goes to handler; a damaged
    archive raises (tarfile.ReadError, or libshard's ShardError naming the offset), and so
    does a member or sample past max_member_size or max_sample_size (limits.py: the
    keyword, else the environment's, else the default), before its bytes are read. Read by
    libshard's C reader where libshard_members takes the stream, by tarfile otherwise;
    counts (counters.Counts) counts which."""
    limits = _limits.resolved(max_member_size=max_member_size, max_sample_size=max_sample_size)
    members = libshard_members(fileobj, limits)
    c = members is not None
    n = 0
    it = _c_members(members) if c else _python_members(fileobj, limits)
    try:
        while True:
            try:
                fname, data = next(it)
            except StopIteration:
                break
            except tarfile.ReadError as exn:
                if not getattr(exn, "in_member", False):
                    raise
                # as tarfile: the member's read fails, to the handler; then, going on, the
                # archive's next header does
                again = type(exn)(*exn.args)
                again.__dict__.update(exn.__dict__)
                exn.args = (f"{exn.args[0]} @ {shown(str(fileobj))}",) + exn.args[1:]
                if handler(exn):
                    raise again from None
                break
            n += 1
            try:
                if _skipped(fname, skip_meta):
                    continue
                if rename_files:
                    fname = rename_files(fname)
                if select_files is not None and not select_files(fname):
                    continue
                yield dict(fname=fname, data=data if c else data())
            except Exception as exn:
                if exn.args:
                    exn.args = (f"{exn.args[0]} @ {shown(str(fileobj))}",) + exn.args[1:]
                if handler(exn):
                    continue
                break
    finally:
        if counts is not None:
            if c:
                counts.add(shards_c=1, members_c=members.members, bytes_c=members.bytes)
            else:
                counts.add(shards_python=1, members_python=n)
        if c:
            members.close()


def tar_file_expander(data, handler=reraise_exception, select_files=None, rename_files=None,
                      eof_value={}, counts=None, max_member_size=None,  # noqa: B006
                      max_sample_size=None):
    """The members of each opened shard ({"url", "stream"}) as {"fname", "data", "__url__"}
    (and "__local_path__" where the opener set one), each shard followed by eof_value
    (None: no marker); limits as tar_file_iterator's."""
    limits = _limits.resolved(max_member_size=max_member_size, max_sample_size=max_sample_size)
    for source in data:
        url = source["url"]
        local_path = source.get("local_path")
        try:
            assert isinstance(source, dict)
            assert "stream" in source
            for member in tar_file_iterator(source["stream"], handler=handler,
                                            select_files=select_files, rename_files=rename_files,
                                            counts=counts, **limits):
                assert isinstance(member, dict) and "data" in member and "fname" in member
                member["__url__"] = url
                if local_path is not None:
                    member["__local_path__"] = local_path
                yield member
            if eof_value is not None:
                yield eof_value
        except Exception as exn:
            exn.args = exn.args + (source.get("stream"), shown(str(source.get("url"))))
            if handler(exn):
                continue
            break


tar_file_expander.counted = True


def group_by_keys(data, keys=base_plus_ext, lcase=True, suffixes=None, handler=reraise_exception):
    """Members grouped into samples: consecutive members of one key make a sample
    {"__key__", "__url__", extension: bytes}; an end-of-shard marker ({}) ends the sample
    before it; a member whose name has no dot is left out; an extension twice in a sample is
    a ValueError (to handler)."""
    current = None
    for member in data:
        try:
            assert isinstance(member, dict)
            if member == {}:  # the end of a shard
                if valid_sample(current):
                    yield current
                current = None
                continue
            fname, value = member["fname"], member["data"]
            prefix, suffix = keys(fname)
            if trace:
                print(prefix, suffix, current.keys() if isinstance(current, dict) else None)
            if prefix is None:
                continue
            if lcase:
                suffix = suffix.lower()
            if current is None or prefix != current["__key__"]:
                if valid_sample(current):
                    yield current
                current = dict(__key__=prefix, __url__=member["__url__"])
            if suffix in current:
                raise ValueError(f"{fname}: duplicate file name in tar file {suffix} "
                                 f"{current.keys()}")
            if suffixes is None or suffix in suffixes:
                current[suffix] = value
            if member.get("__local_path__") is not None:
                current["__local_path__"] = member["__local_path__"]
        except Exception as exn:
            exn.args = exn.args + (member.get("stream"), member.get("url"))
            if handler(exn):
                continue
            break
    if valid_sample(current):
        yield current


def tarfile_samples(src, handler=reraise_exception, select_files=None, rename_files=None,
                    counts=None, max_member_size=None, max_sample_size=None):
    """The samples of the shards src names ({"url": ...} each): opened, expanded, grouped;
    limits as tar_file_iterator's."""
    streams = url_opener(src, handler=handler)
    files = tar_file_expander(streams, handler=handler, select_files=select_files,
                              rename_files=rename_files, counts=counts,
                              max_member_size=max_member_size, max_sample_size=max_sample_size)
    return group_by_keys(files, handler=handler)


tarfile_samples.counted = True


tarfile_to_samples = filters.pipelinefilter(tarfile_samples)
