"""What the processes of one ShardDataset share: tensors in shared memory, so that DataLoader
workers, persistent or not, forked or spawned, see what the main process sets: the epoch,
how often workers began iterating, and a ShardLoader's plan for the next iteration (the worker count
it is for, the rotation of workers, each worker's state to resume from)."""
import torch

#: the most DataLoader workers a ShardLoader plans for, and the longest state it hands one
MAX_WORKERS, STATE_BYTES = 64, 512

_EPOCH, _WORKER_RUNS, _PLAN_WORKERS, _PLAN_ROTATION = range(4)


class Shared:
    """The shared values of one dataset (pickled with it into spawned workers: the tensors
    stay the same shared memory)."""

    def __init__(self):
        self._slots = torch.zeros(4, dtype=torch.int64).share_memory_()
        self._states = torch.zeros(MAX_WORKERS, STATE_BYTES, dtype=torch.uint8).share_memory_()

    @property
    def epoch(self):
        """The epoch the next iteration reads."""
        return int(self._slots[_EPOCH])

    @epoch.setter
    def epoch(self, epoch):
        self._slots[_EPOCH] = int(epoch)

    def mark_in_workers(self):
        """Notes that a DataLoader worker iterates the dataset."""
        self._slots[_WORKER_RUNS] += 1

    @property
    def worker_runs(self):
        """How many times DataLoader workers began iterating the dataset (a count that only
        grows: a process compares it with the value it saw last)."""
        return int(self._slots[_WORKER_RUNS])

    def set_plan(self, states, rotation):
        """The next iteration's plan: states[w] (or None) for logical worker w, the workers
        rotated by rotation; for len(states) workers."""
        plan = torch.zeros(MAX_WORKERS, STATE_BYTES, dtype=torch.uint8)
        for w, st in enumerate(states):
            if st:
                b = st.encode()
                plan[w, :len(b)] = torch.tensor(list(b), dtype=torch.uint8)
        self._states.copy_(plan)
        self._slots[_PLAN_ROTATION] = rotation
        self._slots[_PLAN_WORKERS] = len(states)

    def plan(self, worker, workers):
        """(logical worker, state to resume from or None) for DataLoader worker `worker` of
        `workers`. Workers are rotated so that a resumed DataLoader, which always starts with
        worker 0, hands out batches in the order the interrupted one would have."""
        if int(self._slots[_PLAN_WORKERS]) != workers:
            return worker, None
        logical = (worker + int(self._slots[_PLAN_ROTATION])) % workers
        raw = bytes(self._states[logical].tolist()).rstrip(b"\0")
        return logical, raw.decode() if raw else None
