"""webdataset.cache as libshard writes it: opening shards as streams (StreamingOpen), or
through a folder of downloaded copies (FileCache), kept to a size by LRUCleanup, the oldest
first."""
import os
import re
import subprocess
import sys
import time
import urllib.parse
from urllib.parse import urlparse

from . import gopen
from .handlers import reraise_exception
from .utils import obsolete
from ..redact import shown

#: where FileCache keeps its copies unless told ($WDS_CACHE, else ./_cache)
default_cache_dir = os.environ.get("WDS_CACHE", "./_cache")
#: the most bytes the cache holds ($WDS_CACHE_SIZE)
default_cache_size = float(os.environ.get("WDS_CACHE_SIZE", "1e18"))
verbose_cache = int(os.environ.get("WDS_VERBOSE_CACHE", "0"))


def islocal(url):
    """Whether url is a local path or a file:// URL."""
    return urlparse(url).scheme in ("", "file")


def get_filetype(fname):
    """What file(1) says of fname."""
    assert os.path.exists(fname), fname
    try:
        subprocess.run(["file", "."], stdout=subprocess.DEVNULL, check=True)
    except (subprocess.SubprocessError, FileNotFoundError):
        raise AssertionError("UNIX/Linux file command not available") from None
    return subprocess.run(["file", fname], stdout=subprocess.PIPE, text=True, check=True).stdout


def magic_filetype(fname):
    """fname's kind from its first bytes, in file(1)'s words: gzip, a POSIX tar, or data."""
    with open(fname, "rb") as f:
        head = f.read(512)
    if head[:2] == b"\x1f\x8b":
        return f"{fname}: gzip compressed data"
    if len(head) > 261 and head[257:262] == b"ustar":
        return f"{fname}: POSIX tar archive"
    return f"{fname}: data"


def check_tar_format(fname):
    """Whether fname looks like a tar or a gzip file (FileCache's default validator)."""
    assert os.path.exists(fname), fname
    kind = magic_filetype(fname).lower()
    return "tar archive" in kind or "gzip compressed" in kind


@obsolete
def pipe_cleaner(spec):
    """The URL inside a pipe: command (curl URL ...), else spec."""
    if spec.startswith("pipe:"):
        for word in spec[5:].split(" "):
            if re.match("^(https?|hdfs|gs|ais|s3):", word):
                return word
    return spec


def url_to_cache_name(url, ndir=0):
    """The file name a URL is cached under: its path's last ndir + 1 parts for known
    schemes, else the whole URL quoted (its last 128 characters)."""
    assert isinstance(url, str)
    parsed = urlparse(url)
    if parsed.scheme in (None, "", "file", "http", "https", "ftp", "ftps", "gs", "s3", "ais"):
        parts = parsed.path.lstrip("/").split("/")
        return "/".join(parts[-1 - ndir:])
    return urllib.parse.quote(url, safe="_+{}*,-")[-128:]


class LRUCleanup:
    """Keeps a folder under cache_size bytes: cleanup() removes files, the oldest by keyfn
    (creation time) first, at most once per interval seconds (None: every call)."""

    def __init__(self, cache_dir=None, cache_size=int(1e12), keyfn=os.path.getctime,
                 verbose=False, interval=30):
        self.cache_dir = cache_dir
        self.cache_size = cache_size
        self.keyfn = keyfn
        self.verbose = verbose
        self.interval = interval
        self.last_run = 0

    def set_cache_dir(self, cache_dir):
        """Watch another folder."""
        self.cache_dir = cache_dir

    def cleanup(self):
        """Removes the oldest files until the folder holds at most cache_size bytes."""
        if self.cache_dir is None or not os.path.exists(self.cache_dir):
            return
        if self.interval is not None and time.time() - self.last_run < self.interval:
            return
        try:
            files = [os.path.join(d, f) for d, _, names in os.walk(self.cache_dir) for f in names]
            total = sum(os.path.getsize(f) for f in files)
            if total > self.cache_size:
                files.sort(key=self.keyfn)
                for f in files:
                    if total <= self.cache_size:
                        break
                    total -= os.path.getsize(f)
                    if self.verbose:
                        print(f"# deleting {f}", file=sys.stderr)
                    os.remove(f)
        except OSError:
            pass  # a file another process removed meanwhile
        self.last_run = time.time()


def download(url, dest, chunk_size=1024 ** 2, verbose=False):
    """url copied into dest, under a temporary name first."""
    temp = f"{dest}.temp{os.getpid()}"
    with gopen.gopen(url) as stream, open(temp, "wb") as f:
        while True:
            data = stream.read(chunk_size)
            if not data:
                break
            f.write(data)
    os.rename(temp, dest)


class StreamingOpen:
    """Each url (or {"url": ...}) opened as a stream: {"url", "stream"}, and "local_path"
    for a local file; a failure goes to handler."""

    def __init__(self, verbose=False, handler=reraise_exception):
        self.verbose = verbose
        self.handler = handler

    def __call__(self, urls):
        for url in urls:
            if isinstance(url, dict):
                url = url["url"]
            parsed = urlparse(url)
            try:
                if parsed.scheme in ("", "file"):
                    yield dict(url=url, stream=open(parsed.path, "rb"), local_path=parsed.path)
                else:
                    yield dict(url=url, stream=gopen.gopen(url))
            except Exception as exn:
                if self.handler(exn):
                    continue
                break


class FileCache:
    """Each url opened from a local copy in cache_dir, downloaded first when there is none
    (checked by validator: a tar or gzip file); local files are read where they are.
    cache_size > 0 keeps the folder under that many bytes."""

    def __init__(self, cache_dir=None, *, url_to_name=url_to_cache_name, verbose=False,
                 validator=check_tar_format, handler=reraise_exception, cache_size=-1,
                 cache_cleanup_interval=30):
        self.url_to_name = url_to_name
        self.validator = validator
        self.handler = handler
        self.cache_dir = default_cache_dir if cache_dir is None else cache_dir
        self.verbose = verbose
        self.cleaner = (LRUCleanup(self.cache_dir, cache_size, verbose=verbose,
                                   interval=cache_cleanup_interval) if cache_size > 0 else None)

    def get_file(self, url):
        """The local path of url's copy (downloaded now if need be)."""
        assert isinstance(url, str)
        if islocal(url):
            return urlparse(url).path
        name = self.url_to_name(url)
        assert "/" not in name, f"bad cache name {name} for {shown(url)}"
        os.makedirs(os.path.join(self.cache_dir, os.path.dirname(name)), exist_ok=True)
        dest = os.path.join(self.cache_dir, name)
        if not os.path.exists(dest):
            if self.verbose:
                print(f"# downloading {shown(url)} to {dest}", file=sys.stderr)
            if self.cleaner is not None:
                self.cleaner.cleanup()
            download(url, dest, verbose=self.verbose)
            if self.validator and not self.validator(dest):
                kind = get_filetype(dest)
                with open(dest, "rb") as f:
                    head = f.read(200)
                os.remove(dest)
                raise ValueError(f"{dest} ({shown(url)}) is not a tar archive, but a {kind}, "
                                 f"contains {head!r}")
        return dest

    def __call__(self, urls):
        for url in urls:
            if isinstance(url, dict):
                url = url["url"]
            delay = 1.0
            for _ in range(10):
                try:
                    dest = self.get_file(url)
                    stream = open(dest, "rb")
                except Exception as exn:
                    if self.handler(exn):
                        time.sleep(delay)
                        delay *= 1.5
                        continue
                    break
                yield dict(url=url, stream=stream, local_path=dest)
                break
