"""Random access to the samples of a set of shards, by a global index.

    from libshard.indexed import IndexedShards
    shards = IndexedShards("shards/train.json")      # a manifest, braces, a list, a prefix
    len(shards), shards[12345]                       # {"__key__", "__url__", field: bytes, ...}

Sample i lives in the shard whose cumulative count passes i; it is read through that shard's
index: for a local shard a seek in the mapped file, for a remote one a Range request for the
sample's bytes (and .tar.zst frames through the seek table). The index is the .idx beside the
shard, else one libshard makes from a pass over the shard's headers the first time (a plain
tar, as WebDataset's writer or GNU tar leave it) and keeps in index_cache (default
$XDG_CACHE_HOME/libshard/index, or cache_dir/index) while the shard is unchanged. The shard list
and counts are read once; the open shards are per process (safe in DataLoader workers), the
open_files most recently read kept open.
"""
import array
import bisect
import os
import sys

from . import _libshard, hublist
from . import settings as _settings
from .settings import REMOTE_KEYS
from .redact import shown, shown_repr


def _specs(spec):
    return [os.fspath(spec)] if isinstance(spec, (str, os.PathLike)) else [os.fspath(s) for s in spec]


class IndexedShards:
    """Samples of shards by global index. spec: a manifest, a brace pattern, a gs:// or s3://
    prefix, or a list of them. index_cache: where the indexes of shards without one are made
    (make_indexes=False: such shards are refused). keys: a view (a file of keys, one a line,
    or a list of keys): only the samples they choose, found in the shards' indexes, indexed
    0..len-1 in shard order. Remote settings: libshard.settings.REMOTE_KEYS (as
    ShardDataset's)."""

    def __init__(self, spec, *, open_files=8, entries=None, index_cache=None, make_indexes=True,
                 keys=None, **remote):
        unknown = set(remote) - set(REMOTE_KEYS)
        if unknown:
            raise _settings.unknown("IndexedShards", unknown, REMOTE_KEYS)
        self.remote = {k: v for k, v in remote.items() if v is not None}
        self.open_files = open_files
        cache = os.fspath(index_cache) if index_cache is not None else None
        specs = hublist.listed_once(_specs(spec), self.remote) if entries is None else [
            u for u, _ in entries]
        keys = _settings.key_file(keys)
        listed, self.manifests = _libshard.list_shards(specs, manifests=True,
            make_indexes=make_indexes, index_cache=cache, keys=keys, **self.remote)
        # a view (keys): each shard's chosen samples, numbered in it; i counts them alone
        self.chosen = [array.array("Q", c) for *_, c in listed] if keys is not None else None
        listed = [t[:3] for t in listed]
        if not listed:
            raise ValueError(f"{shown_repr(spec)}: no shards")
        for url, n, _ in listed:
            if n is None:  # make_indexes=False, and no .idx beside it
                raise ValueError(f"{shown(url)}: indexed access needs each shard's index: a .idx "
                                 f"beside it (`shardcat index {shown(url)}`), or make_indexes")
        if entries is not None:  # counts given (a wids shard list): they must be the shards'
            if len(listed) != len(entries):
                raise ValueError(f"{len(entries)} shards given, {len(listed)} found (a url "
                                 f"with braces or a manifest in a shard list?)")
            for (url, n), (_, found, _) in zip(entries, listed):
                if n is not None and int(n) != found:
                    raise ValueError(f"{shown(url)}: the shard list says {n} samples, the shard has "
                                     f"{found}")
        for url, _, _ in listed:
            if url.endswith((".gz", ".tgz")):
                raise ValueError(f"{shown(url)}: indexed access seeks, and a gzip stream cannot: "
                                 f"repack it as .tar, or as .tar.zst with a seek table "
                                 f"(shardpack --compress zstd)")
        # a million shards: one str each, and the numbers in arrays (8 bytes a shard)
        self.urls = [u for u, _, _ in listed]
        self.counts = array.array("Q", (int(n) for _, n, _ in listed) if self.chosen is None
                                  else (len(c) for c in self.chosen))
        self.indexes = [ix for _, _, ix in listed] if any(ix for _, _, ix in listed) else None
        del listed
        self.ends = array.array("Q")
        total = 0
        for n in self.counts:
            total += n
            self.ends.append(min(total, (1 << 64) - 1))
        if total > sys.maxsize:  # len() and indexes could not address them
            raise ValueError(f"{shown_repr(spec)}: {total} samples in all, more than an index can "
                             f"address (a count in the manifest is wrong)")
        self._files = None
        self._pid = None

    def __len__(self):
        return self.ends[-1] if self.ends else 0

    def locate(self, i):
        """(shard number, index in it) of sample i (negative i counts from the end)."""
        n = len(self)
        if not -n <= i < n:
            raise IndexError(f"index {i} is out of range: the data set has {n} samples "
                             f"(0 to {n - 1}, or -{n} to -1 from the end)" if n else
                             f"index {i}: the data set has no samples")
        i %= n
        s = bisect.bisect_right(self.ends, i)
        return s, i - (self.ends[s - 1] if s else 0)

    def _open(self):
        if self._files is None or self._pid != os.getpid():
            self._files = _libshard.ShardFiles(self.urls, self.open_files, indexes=self.indexes,
                                               **self.remote)
            self._pid = os.getpid()
        return self._files

    def __getitem__(self, i):
        """Sample i as WebDataset's dict, with "__index__", "__shard__" (its shard's url)
        and "__shardindex__" (its index in the shard)."""
        s, j = self.locate(i)
        if self.chosen is not None:
            j = self.chosen[s][j]
        d = self._open().read(s, j)
        d["__index__"] = i % len(self)
        d["__shard__"] = self.urls[s]
        d["__shardindex__"] = j
        return d

    def close(self):
        """Lets go of the open shards (opened again at the next read)."""
        self._files = None

    def remote_stats(self):
        """This process's remote counters (bytes, requests, ...); {} before the first read."""
        return self._files.remote_stats() if self._files is not None else {}

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_files"] = None  # opened again in the process that unpickles it
        state["_pid"] = None
        return state
