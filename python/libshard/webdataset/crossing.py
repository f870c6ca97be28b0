"""The bytes of samples crossing from a DataLoader worker to the main process through shared
memory instead of the worker's pipe.

torch's DataLoader pickles what a worker yields and sends it through a pipe: a sample's bytes
are copied into the pickle, through the pipe in pieces the size of its buffer, and out of the
pickle again, and the main process, which takes every worker's batches, spends its time
doing so. Here a DataPipeline that is the DataLoader's dataset hands its bytes to the
DataLoader as SharedBytes; pickled for the main process, each is copied into a ring of
shared memory the worker owns (a memfd, no /dev/shm needed) and only where it lies goes
through the pipe. The main process maps each worker's ring once (its fd comes with the
worker's first value), copies the value out as plain bytes, the samples WebDataset gives,
and gives the space back.

Memory: a ring of LIBSHARD_CROSSING_BYTES bytes (default 32 MiB) a worker, made when the
worker first sends a value; 0 turns the crossing off. A value the ring has no room for (the
main process behind, a value larger than the ring) and a small one (under 16 KiB, cheaper in
the pickle) are pickled as before. Values crossed each way are counted in the pipeline's
stats(): values_shared, bytes_shared, values_pickled."""
import os
import threading

from multiprocessing.reduction import DupFd, ForkingPickler

from .. import _libshard
from .counters import by_token
from .pytorch import get_worker_info

#: the environment variable that sets a worker's ring size in bytes (0: no crossing)
SIZE_VARIABLE = "LIBSHARD_CROSSING_BYTES"
DEFAULT_SIZE = 32 << 20
#: bytes values smaller than this stay in the pickle
SMALLEST = 16 << 10


def ring_size():
    """The ring size LIBSHARD_CROSSING_BYTES asks for; 0 when the crossing is off."""
    text = os.environ.get(SIZE_VARIABLE, "").strip()
    if not text:
        return DEFAULT_SIZE
    try:
        size = int(text)
    except ValueError:
        size = -1
    if size != 0 and not 4096 <= size <= 1 << 40:
        raise ValueError(f"{SIZE_VARIABLE}={text!r}: a worker's shared memory ring in bytes, "
                         "4096 to 2**40, or 0 to pickle samples' bytes through the pipe")
    return size


class SharedBytes(bytes):
    """bytes a DataLoader worker sends through its shared memory ring; what arrives in the
    main process is plain bytes. Pickled any other way (pickle.dumps, copy), plain bytes."""

    def __reduce__(self):
        return bytes, (bytes(self),)


def shared(item, tally):
    """item with its bytes of SMALLEST and more (in dicts, lists and tuples, as samples and
    their batches are built) made SharedBytes, counted as they arrive in the main process in
    the Counts whose token is tally."""
    kind = type(item)
    if kind is bytes:
        if len(item) < SMALLEST:
            return item
        value = SharedBytes(item)
        value.tally = tally
        return value
    if kind is dict:
        return {k: shared(v, tally) for k, v in item.items()}
    if kind is list:
        return [shared(v, tally) for v in item]
    if kind is tuple:
        return tuple(shared(v, tally) for v in item)
    return item


def outgoing(iterator, tally):
    """The items of iterator (a DataLoader worker's dataset's), their bytes made to cross
    through shared memory, counted in the Counts whose token is tally."""
    for item in iterator:
        yield shared(item, tally)


class _Outgoing:
    """This process's ring (one a process: a worker's values go out in its one pipe's
    order), made at the first value; a forked child makes its own."""

    def __init__(self):
        self.lock = threading.Lock()
        self.pid = None
        self.ring = None
        self.name = None
        self.fd_sent = False

    def put(self, value):
        """(pid, ring name, fd or None, ring size, start, offset, end), or None: pickle
        value."""
        with self.lock:
            if self.pid != os.getpid():
                self.pid, self.ring, self.fd_sent = os.getpid(), None, False
                size = ring_size()
                if size:
                    try:
                        self.ring = _libshard.Ring(size)
                    except OSError:  # no memfd here: the pipe, as torch does
                        self.ring = None
                    self.name = os.urandom(8).hex()  # pids are reused; names are not
            if self.ring is None:
                return None
            placed = self.ring.put(value)
            if placed is None:
                return None
            fd = None
            if not self.fd_sent:  # the first value takes the fd to the main process
                fd, self.fd_sent = DupFd(self.ring.fd), True
            return (self.pid, self.name, fd, self.ring.size) + placed


_OUT = _Outgoing()


def _reduce(value):
    tally = getattr(value, "tally", None)
    where = _OUT.put(value) if get_worker_info() is not None else None
    if where is None:
        return _pickled, (tally, bytes(value))
    return _take, (tally,) + where + (len(value),)


ForkingPickler.register(SharedBytes, _reduce)


class _Incoming:
    """The rings of this process's workers, mapped at their first value; a ring whose
    worker has ended is unmapped when another worker's first value comes."""

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
                    f"libshard: a value from DataLoader worker {pid}'s shared memory ring "
                    "came before the one that brings the ring (a value taken out of order, "
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


def _take(tally, pid, name, fd, size, start, offset, end, n):
    """The value a worker put into its ring, as bytes (unpickled in the main process)."""
    value = _IN.view(pid, name, fd, size).take(start, offset, n, end)
    _count(tally, values_shared=1, bytes_shared=n)
    return value


def _pickled(tally, value):
    """A value the ring had no room for, as it came through the pipe."""
    _count(tally, values_pickled=1)
    return value


def _count(tally, **counts):
    found = by_token(tally) if tally is not None else None
    if found is not None:
        found.add(**counts)


def mapped():
    """How many workers' rings this process has mapped (what the tests watch)."""
    with _IN.lock:
        return len(_IN.views)
