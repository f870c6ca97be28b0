"""What a stage did, counted where DataLoader workers add to it too: which reader read the
shards (libshard's C reader, or Python's tarfile) and which decoder decoded the images
(libshard's, or PIL). A pipeline's stats() adds up its stages' counts.

The counts live in shared memory made when the stage is made, so the DataLoader's workers
(forked, spawned or from a forkserver: the memory goes with the stage as the worker starts)
add to the counts the main process reads; a stage pickled any other way counts apart. What
only the main process counts (the bytes arriving from the workers) is in LocalCounts."""
import multiprocessing
import os
import threading
import weakref

#: the counts, by name
NAMES = ("shards_c", "members_c", "bytes_c", "shards_python", "members_python",
         "decodes_c", "decodes_python", "values_shared", "bytes_shared", "values_pickled")
_INDEX = {name: i for i, name in enumerate(NAMES)}
#: this process's Counts by token
_LIVE = weakref.WeakValueDictionary()


def by_token(token):
    """The Counts of this process that token names, or None."""
    return _LIVE.get(token)


class _Tally:
    """What Counts and LocalCounts share: the counters of NAMES in _values, by index, under
    _lock, and a token this process finds them by."""

    def _name(self, token=None):
        # what a DataLoader worker's values name to be counted here as they arrive
        self.token = token or os.urandom(8).hex()
        _LIVE[self.token] = self

    def add(self, **counts):
        """Adds each name=n to its counter."""
        with self._lock:
            for name, n in counts.items():
                self._values[_INDEX[name]] += n

    def as_dict(self):
        """{name: count}."""
        with self._lock:
            return dict(zip(NAMES, self._values))


class Counts(_Tally):
    """Counters of NAMES, shared with forked processes."""

    def __init__(self):
        self._name()
        self._values = multiprocessing.RawArray("q", len(NAMES))
        # a lock whose semaphore outlives its creation, so that a spawned process can open
        # it too (one of the fork context's is unlinked at once); forked ones inherit it
        self._lock = multiprocessing.get_context("spawn").Lock()

    def __getstate__(self):
        if multiprocessing.context.get_spawning_popen() is not None:
            # a process being started (a spawned or forkserver DataLoader worker): shared
            return {"values": self._values, "lock": self._lock, "token": self.token}
        return {"counts": self.as_dict()}  # pickled otherwise: counted apart from here on

    def __setstate__(self, state):
        if "values" in state:
            self._values, self._lock = state["values"], state["lock"]
            self._name(state["token"])  # the same counts, found by token here too
        else:
            self.__init__()
            self.add(**state["counts"])


class LocalCounts(_Tally):
    """Counters of NAMES added to in this process only: what arrives in the main process
    from its DataLoader workers (no shared memory, no semaphore to leave behind). Sent to a
    process being started (a spawned worker or rank), the same token there; pickled any
    other way, counted apart."""

    def __init__(self, token=None):
        self._name(token)
        self._values = [0] * len(NAMES)
        self._lock = threading.Lock()

    def __getstate__(self):
        if multiprocessing.context.get_spawning_popen() is not None:
            return {"token": self.token}
        return {"counts": self.as_dict()}

    def __setstate__(self, state):
        self.__init__(state.get("token"))
        self.add(**state.get("counts", {}))


def found(obj, seen=None):
    """Every Counts of a stage: its own (obj.counts), its arguments' (a decoder's handlers,
    the stages of a pipeline inside it, a DataLoader's dataset), each once."""
    seen = set() if seen is None else seen
    if id(obj) in seen:
        return []
    seen.add(id(obj))
    out = []
    counts = getattr(obj, "counts", None)
    if isinstance(counts, _Tally) and id(counts) not in seen:
        seen.add(id(counts))
        out.append(counts)
    inner = []
    for name in ("args", "handlers", "pipeline"):
        value = getattr(obj, name, None)
        if isinstance(value, (list, tuple)):
            inner.extend(value)
    if getattr(obj, "dataset", None) is not None:  # a DataLoader's
        inner.append(obj.dataset)
    kw = getattr(obj, "kw", None)
    if isinstance(kw, dict):
        inner.extend(kw.values())
    for x in inner:
        if not isinstance(x, (str, bytes, int, float, type(None))):
            out.extend(found(x, seen))
    return out


def total(stages):
    """The counts of the stages added up, {name: count}."""
    sums = dict.fromkeys(NAMES, 0)
    seen = set()
    for stage in stages:
        for counts in found(stage, seen):
            for name, n in counts.as_dict().items():
                sums[name] += n
    return sums
