"""What the processes of one ShardDataset share: tensors in shared memory, so that DataLoader
workers, persistent or not, forked or spawned, see what the main process sets: the epoch,
how often workers began iterating, and a ShardLoader's plan for the next iteration (the worker
count it is for, the state every worker resumes from, the rotation of workers)."""
import torch

#: the most DataLoader workers a ShardLoader plans for, and the longest state it hands them
MAX_WORKERS, STATE_BYTES = 64, 64 * 1024

_EPOCH, _WORKER_RUNS, _PLAN_WORKERS, _PLAN_LENGTH, _PLAN_ROTATION = range(5)


class Shared:
    """The shared values of one dataset (pickled with it into spawned workers: the tensors
    stay the same shared memory)."""

    def __init__(self):
        self._slots = torch.zeros(5, dtype=torch.int64).share_memory_()
        self._state = torch.zeros(STATE_BYTES, dtype=torch.uint8).share_memory_()

    @property
    def epoch(self):
        """The epoch the next iteration reads."""
        return int(self._slots[_EPOCH])

    def set_epoch(self, epoch):
        """Sets the epoch the next iteration reads, in every process that shares this."""
        self._slots[_EPOCH] = int(epoch)

    def mark_in_workers(self):
        """Notes that a DataLoader worker iterates the dataset."""
        self._slots[_WORKER_RUNS] += 1

    @property
    def worker_runs(self):
        """How many times DataLoader workers began iterating the dataset (a count that only
        grows: a process compares it with the value it saw last)."""
        return int(self._slots[_WORKER_RUNS])

    def set_plan(self, state, workers, rotation=0):
        """The next iteration's plan, for `workers` workers: the state each resumes from
        (the job's: every worker takes its own partitions of it), or None; and the workers
        rotated by rotation."""
        b = state.encode() if state else b""
        if len(b) > STATE_BYTES:
            raise ValueError(f"a state of {len(b)} bytes: ShardLoader hands its workers at "
                             f"most {STATE_BYTES}")
        if b:
            self._state[:len(b)] = torch.frombuffer(bytearray(b), dtype=torch.uint8)
        self._slots[_PLAN_LENGTH] = len(b)
        self._slots[_PLAN_ROTATION] = rotation
        self._slots[_PLAN_WORKERS] = workers

    def plan(self, worker, workers):
        """(logical worker, state to resume from or None) for DataLoader worker `worker` of
        `workers`. Workers are rotated so that a DataLoader resumed on the topology the
        state was taken on, which always starts with worker 0, hands out batches in the
        order the interrupted one would have."""
        if int(self._slots[_PLAN_WORKERS]) != workers:
            return worker, None
        n = int(self._slots[_PLAN_LENGTH])
        logical = (worker + int(self._slots[_PLAN_ROTATION])) % workers
        return logical, bytes(self._state[:n].tolist()).decode() if n else None
