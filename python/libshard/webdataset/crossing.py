"""The bytes of samples crossing from a DataLoader worker to the main process through shared
memory instead of the worker's pipe.

torch's DataLoader pickles what a worker yields and sends it through a pipe: a sample's bytes
are copied into the pickle, through the pipe in pieces the size of its buffer, and out of the
pickle again, and the main process, which takes every worker's batches, spends its time
doing so. Here a DataPipeline that is the DataLoader's dataset hands each item (a sample, a
batch: a dict, list or tuple) to the DataLoader as a SharedDict, SharedList or SharedTuple,
which torch's collate functions keep (but for tuples, which torch's own make lists of, as
it does without libshard: those cross through the pipe). Pickled for the main process, its
bytes values are copied into a ring of shared memory the worker owns (a memfd: no /dev/shm
needed) and only where they lie goes through the pipe with the rest of the item. The main
process maps each worker's ring once (its fd comes with the worker's first item), copies the
values out as plain bytes into plain dicts, lists and tuples, the samples WebDataset gives,
and gives the space back.

Memory: a ring of LIBSHARD_CROSSING_BYTES bytes (default 32 MiB; as the main process has it
when the workers start, spawned or from a forkserver too) a worker, made when the worker
first sends an item and given back as it ends; 0 turns the crossing off. A value the ring
has no room for (the main process behind, a value larger than the ring) and a small one
(under 16 KiB, cheaper in the pickle) are pickled as before. Values crossed each way are
counted in the pipeline's stats(): values_shared, bytes_shared, values_pickled."""
import os
import threading

from multiprocessing import util
from multiprocessing.reduction import DupFd, ForkingPickler

from .. import _libshard
from .counters import by_token
from .pytorch import get_worker_info

#: the environment variable that sets a worker's ring size in bytes (0: no crossing)
SIZE_VARIABLE = "LIBSHARD_CROSSING_BYTES"
DEFAULT_SIZE = 32 << 20
#: the largest ring: its pages are reused as it wraps, so a ring holds up to its size of the
#: bytes it carried for as long as its worker lives
LARGEST = 1 << 30
#: bytes values smaller than this stay in the pickle
SMALLEST = 16 << 10
#: containers nested deeper than this are pickled as they are
DEEPEST = 32


def ring_size(setting=None):
    """The ring size LIBSHARD_CROSSING_BYTES asks for (setting: its value as the main
    process had it, when the worker's own environment is not that); 0 when the crossing is
    off."""
    text = (os.environ.get(SIZE_VARIABLE, "") if setting is None else setting).strip()
    if not text:
        return DEFAULT_SIZE
    try:
        size = int(text)
    except ValueError:
        size = -1
    if size != 0 and not SMALLEST * 4 <= size <= LARGEST:
        raise ValueError(f"{SIZE_VARIABLE}={text!r}: a worker's shared memory ring in bytes, "
                         f"{SMALLEST * 4} to {LARGEST} (1 GiB: a ring holds what it carried "
                         "until it wraps), or 0 to pickle samples' bytes through the pipe")
    return size


class SharedDict(dict):
    """A worker's item whose bytes cross through shared memory; the main process gets a
    dict. Pickled any other way, a dict."""
    __slots__ = ()

    def __reduce__(self):
        return dict, (dict(self),)


class SharedList(list):
    """As SharedDict, for a list."""
    __slots__ = ()

    def __reduce__(self):
        return list, (list(self),)


class SharedTuple(tuple):
    """As SharedDict, for a tuple."""
    __slots__ = ()

    def __reduce__(self):
        return tuple, (tuple(self),)


_SHARED = {dict: SharedDict, list: SharedList, tuple: SharedTuple}
_PLAIN = {dict: dict, SharedDict: dict, list: list, SharedList: list, tuple: tuple,
          SharedTuple: tuple}


def outgoing(iterator):
    """The items of iterator (a DataLoader worker's dataset's), those that are dicts, lists
    or tuples made to cross through shared memory."""
    for item in iterator:
        kind = _SHARED.get(type(item))
        yield kind(item) if kind is not None else item


class _Slot:
    """Where a value taken out of the ring goes back in an item."""

    def __reduce__(self):
        return "SLOT"


SLOT = _Slot()


class _TooDeep(Exception):
    pass


def _skeleton(x, values, depth):
    """x with its bytes of SMALLEST and more replaced by SLOT (appended to values), its
    containers plain."""
    kind = type(x)
    if kind is bytes:
        if len(x) < SMALLEST:
            return x
        values.append(x)
        return SLOT
    plain = _PLAIN.get(kind)
    if plain is None:
        return x
    if depth > DEEPEST:
        raise _TooDeep
    if plain is dict:
        return {k: _skeleton(v, values, depth + 1) for k, v in x.items()}
    return plain([_skeleton(v, values, depth + 1) for v in x])


def _filled(x, values):
    """The skeleton x with each SLOT the next of values (an iterator)."""
    if x is SLOT:
        return next(values)
    kind = type(x)
    if kind is dict:
        return {k: _filled(v, values) for k, v in x.items()}
    if kind is list or kind is tuple:
        return kind([_filled(v, values) for v in x])
    return x


class _Outgoing:
    """This process's ring (one a process: a worker's items go out in its one pipe's
    order), made at the first item; a forked child makes its own."""

    def __init__(self):
        self.lock = threading.Lock()
        self.pid = None
        self.ring = None
        self.name = None
        self.fd_sent = False

    def put(self, values, size):
        """((pid, ring name, fd or None, ring size), places), a place (start, offset, n, end)
        for a value in the ring, the value itself for one the ring had no room for; or
        (None, values) when no ring is here. size: the ring's, if one is to be made."""
        with self.lock:
            if self.pid != os.getpid():
                self.pid, self.ring, self.fd_sent = os.getpid(), None, False
                if size:
                    try:
                        self.ring = _libshard.Ring(size)
                    except OSError:  # no memfd here: the pipe, as torch does
                        self.ring = None
                    else:  # its pages back as the worker ends (after its queue's last
                        # item is written, -5), mapped where they may be
                        util.Finalize(None, self.ring.release, exitpriority=-10)
                    self.name = os.urandom(8).hex()  # pids are reused; names are not
            if self.ring is None:
                return None, values
            places = self.ring.put_all(values)
            if all(p is None for p in places):  # none had room: the ring need not be named
                return None, values
            out = [v if p is None else (p[0], p[1], len(v), p[2])
                   for v, p in zip(values, places)]
            fd = None
            if not self.fd_sent:  # with the first item that has a value in it
                fd, self.fd_sent = DupFd(self.ring.fd), True
            return (self.pid, self.name, fd, self.ring.size), out


_OUT = _Outgoing()


def _reduce(item):
    info = get_worker_info()
    values = []
    try:
        skeleton = _skeleton(item, values, 0)
    except _TooDeep:
        return _PLAIN[type(item)], (_PLAIN[type(item)](item),)
    if not values:  # decoded batches, small values: as torch sends them
        return _PLAIN[type(item)], (skeleton,)
    dataset = getattr(info, "dataset", None)
    counts = getattr(dataset, "counts", None)
    size = getattr(dataset, "crossing_size", 0)  # as the worker's pipeline found it
    ring, places = _OUT.put(values, size) if size else (None, values)
    return _arrive, (getattr(counts, "token", None), ring, skeleton, places)


for _kind in (SharedDict, SharedList, SharedTuple):
    ForkingPickler.register(_kind, _reduce)


class _Incoming:
    """The rings of this process's workers, mapped at their first item; a ring whose worker
    has ended is unmapped when another worker's first item comes."""

    def __init__(self):
        self.lock = threading.Lock()
        self.views = {}  # ring name: (pid, RingView)

    def view(self, pid, name, fd, size):
        with self.lock:
            found = self.views.get(name)
            if found is not None:
                return found[1]
            if fd is None:
                raise RuntimeError(
                    f"libshard: an item from DataLoader worker {pid}'s shared memory ring "
                    "came before the one that brings the ring (an item taken out of order, "
                    "or in another process)")
            for other, (owner, view) in list(self.views.items()):
                if not _alive(owner):
                    view.close()
                    del self.views[other]
            handle = fd.detach()
            try:
                view = _libshard.RingView(handle, size)
            finally:
                os.close(handle)
            self.views[name] = (pid, view)
            return view


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


_IN = _Incoming()


def _after_fork():
    # a lock another thread held as the process forked stays held in the child
    _OUT.lock = threading.Lock()
    _IN.lock = threading.Lock()


os.register_at_fork(after_in_child=_after_fork)


def _arrive(tally, ring, skeleton, places):
    """A worker's item rebuilt in the main process (what unpickling it calls): its values
    taken out of the ring (or as they came), counted in the Counts whose token is tally."""
    values = _IN.view(*ring).take_all(places) if ring is not None else places
    counts = by_token(tally) if tally is not None and places else None
    if counts is not None:
        kept = [v for v in places if type(v) is bytes]
        counts.add(values_shared=len(places) - len(kept),
                   bytes_shared=sum(map(len, values)) - sum(map(len, kept)),
                   values_pickled=len(kept))
    return _filled(skeleton, iter(values))


def mapped():
    """How many workers' rings this process has mapped (what the tests watch)."""
    with _IN.lock:
        return len(_IN.views)
