"""MultiLoader: a dataset iterated by worker processes that send their samples back over
ZeroMQ (Debian's python3-zmq), each worker told its number and the count through $WORKER
and $NUM_WORKERS (which utils.pytorch_worker_info reads), so that split_by_worker splits
the shards between them as between DataLoader workers."""
import multiprocessing as mp
import os
import pickle
import uuid
import weakref

try:
    import zmq
except ImportError as _missing:
    raise ImportError("libshard.webdataset.multi needs ZeroMQ's Python binding (Debian: apt-get "
                      "install python3-zmq)") from _missing

the_protocol = pickle.HIGHEST_PROTOCOL
all_pids = weakref.WeakSet()


class EOF:
    """A worker's last message: it has sent everything."""

    def __init__(self, **kw):
        self.__dict__.update(kw)


def reader(dataset, sockname, index, num_workers):
    """A worker: dataset's samples pushed to sockname, then EOF."""
    os.environ["WORKER"] = str(index)
    os.environ["NUM_WORKERS"] = str(num_workers)
    ctx = zmq.Context.instance()
    sock = ctx.socket(zmq.PUSH)
    sock.connect(sockname)
    try:
        for sample in dataset:
            sock.send(pickle.dumps(sample, protocol=the_protocol))
    finally:
        # EOF even when the dataset failed (the loader would wait forever), and every
        # message delivered before the process ends: it leaves without running exit
        # handlers, which would otherwise drop what the context still holds
        sock.send(pickle.dumps(EOF(index=index)))
        sock.close(linger=-1)
        ctx.term()


class MultiLoader:
    """dataset iterated by workers processes; the samples come in the order they arrive."""

    def __init__(self, dataset, workers=4, verbose=False, nokill=False, prefix="/tmp/_multi-"):
        self.dataset = dataset
        self.workers = workers
        self.verbose = verbose
        self.pids = []
        self.socket = None
        self.ctx = zmq.Context.instance()
        self.nokill = nokill
        self.prefix = prefix

    def kill(self):
        """Ends the workers and closes the socket."""
        for pid in self.pids:
            if pid is None:
                continue
            pid.kill()
            pid.join(1.0)
        self.pids = []
        if self.socket is not None:
            self.socket.close()
        self.socket = None

    def __iter__(self):
        if not self.nokill:
            self.kill()
        self.sockname = "ipc://" + self.prefix + str(uuid.uuid4())
        self.socket = self.ctx.socket(zmq.PULL)
        self.socket.bind(self.sockname)
        if self.verbose:
            print("#", self.sockname)
        self.pids = [mp.Process(target=reader, args=(self.dataset, self.sockname, i, self.workers))
                     for i in range(self.workers)]
        all_pids.update(self.pids)
        for pid in self.pids:
            pid.start()
        while self.pids.count(None) < len(self.pids):
            sample = pickle.loads(self.socket.recv())
            if isinstance(sample, EOF):
                if self.verbose:
                    print("# subprocess finished", sample.index)
                self.pids[sample.index].join(1.0)
                self.pids[sample.index] = None
            else:
                yield sample
