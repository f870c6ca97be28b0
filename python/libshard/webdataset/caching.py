"""The caches a pipeline may end with (webdataset.filters' Cached and LMDBCached): the first
pass's samples kept, in memory or in an LMDB database, and given again on later passes."""
import pickle

from .utils import PipelineStage


class Cached(PipelineStage):
    """The first pass's samples kept in memory and given again on every later pass."""

    def __init__(self):
        super().__init__()
        self.cached = None

    def run(self, source):
        """source the first time, then what it gave."""
        if self.cached is not None:
            yield from self.cached
            return
        kept = []
        for sample in source:
            kept.append(sample)
            yield sample
        self.cached = kept


class LMDBCached(PipelineStage):
    """The first pass's samples written into an LMDB database at fname (Debian's
    python3-lmdb), which later passes, and later processes, read instead of the source once
    it is complete."""

    def __init__(self, fname, map_size=1e12, pickler=pickle, chunksize=500):
        try:
            import lmdb
        except ImportError as exn:
            raise ImportError("LMDBCached needs the lmdb package (Debian: apt-get install "
                              "python3-lmdb)") from exn
        self.db = lmdb.open(fname, readonly=False, map_size=int(map_size))
        self.pickler = pickler
        self.chunksize = chunksize

    def is_complete(self):
        """Whether a whole pass was written."""
        with self.db.begin(write=False) as txn:
            return txn.get(b"_") is not None

    def add_samples(self, samples):
        """(key, sample) pairs written."""
        with self.db.begin(write=True) as txn:
            for key, sample in samples:
                txn.put(key.encode(), self.pickler.dumps(sample))

    def run(self, source):
        """The cached samples, or source's, written as they pass."""
        if self.is_complete():
            with self.db.begin(write=False) as txn:
                for key, value in txn.cursor():
                    if key != b"_":
                        yield self.pickler.loads(value)
            return
        pending = []
        for i, sample in enumerate(source):
            key = isinstance(sample, dict) and sample.get("__key__") or str(i)
            pending.append((key, sample))
            if len(pending) >= self.chunksize:
                self.add_samples(pending)
                pending = []
            yield sample
        if pending:
            self.add_samples(pending)
        with self.db.begin(write=True) as txn:
            txn.put(b"_", b"1")
