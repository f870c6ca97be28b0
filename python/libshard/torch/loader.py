"""ShardLoader: a DataLoader over a ShardDataset whose state_dict() / load_state_dict() resume
mid-epoch whatever the number of workers, and which uploads the workers' batches to the GPU
from the main process with device="cuda"."""
import torch
import torch.utils.data

from . import skips
from .dataset import ShardDataset
from .shared import MAX_WORKERS
from .upload import Device, Upload


class _Tagged(torch.utils.data.IterableDataset):
    """What a ShardLoader's DataLoader iterates: the dataset's items, each tagged with the
    worker that made it and that worker's state after it. Other attributes are the
    dataset's."""

    def __init__(self, dataset):
        super().__init__()
        self.shard_dataset = dataset

    def __iter__(self):
        return self.shard_dataset._iterate(tagged=True)

    def __len__(self):
        return len(self.shard_dataset)

    def __getattr__(self, name):
        if name == "shard_dataset":
            raise AttributeError(name)
        return getattr(self.shard_dataset, name)


class ShardLoader(torch.utils.data.DataLoader):
    """A DataLoader over a ShardDataset whose state_dict() / load_state_dict() save and
    restore the position mid-epoch for any num_workers (0 included).

    The main process keeps, for each worker, the state the worker attached to the last
    batch it delivered, and which worker comes next; a restore hands each worker its state
    and rotates the workers so that the rest of the epoch comes in the order, and with the
    augmentation draws, of the uninterrupted run. The state is a small dict of strings and
    ints (torch.save / torch.load keep it); it is for the same dataset settings, seed and
    num_workers. Batches are made by the dataset (its batch_size): DataLoader's batch_size
    stays None. set_epoch reaches the workers, persistent or not.
    """

    def __init__(self, dataset, num_workers=0, **options):
        if not isinstance(dataset, ShardDataset):
            raise TypeError(f"ShardLoader takes a libshard.torch.ShardDataset, not "
                            f"{type(dataset).__name__}")
        if options.get("batch_size") is not None:
            raise ValueError("ShardLoader: the dataset makes the batches (ShardDataset("
                             "batch_size=...)); leave the DataLoader's batch_size at None")
        if num_workers > MAX_WORKERS:
            raise ValueError(f"ShardLoader: at most {MAX_WORKERS} workers, not {num_workers}")
        options["batch_size"] = None
        super().__init__(_Tagged(dataset), num_workers=num_workers, **options)
        self._states = [None] * max(1, num_workers)
        self._next = 0
        self._batches = 0
        self._restored = None  # (epoch, states, next, batches) from load_state_dict
        self._skips = {}
        self._worker_stats = {}
        self._upload = None

    @property
    def epoch(self):
        """The epoch the next iteration reads: a restored state's, or the last set_epoch's."""
        return self.dataset.shard_dataset.epoch

    def set_epoch(self, epoch):
        """The dataset's set_epoch: a restored position is kept for its own epoch only."""
        if self._restored is not None and int(epoch) != self._restored[0]:
            self._restored = None
        self.dataset.shard_dataset.set_epoch(epoch)

    def __iter__(self):
        ds = self.dataset.shard_dataset
        n = len(self._states)
        states, rotation, batches = [None] * n, 0, 0
        if self._restored is not None and self._restored[0] == ds.epoch:
            _, states, rotation, batches = self._restored
        self._restored = None
        ds.shared.set_plan(states, rotation)
        self._states, self._next, self._batches = list(states), rotation, batches
        self._skips = {}
        items = super().__iter__()
        if ds.device.type == "cuda" and self.num_workers > 0:
            # the workers' host batches go to the GPU from here
            self._upload = Upload(Device(ds.device), ds.settings, ds.device_buffers)
            items = self._upload.from_host(items)
        self._worker_stats = {}
        for item, (logical, state, skipped, stats) in items:
            if stats is not None:
                self._worker_stats[logical] = stats
            self._states[logical] = state
            self._skips[logical] = skipped
            self._next = (logical + 1) % n
            self._batches += 1
            yield item

    def stats(self):
        """ShardDataset.stats for this loader: with num_workers=0 the dataset's; with workers
        {"workers": {worker: that worker's stats as of its last batch handed out}} (and
        "upload", this process's, with device="cuda")."""
        if self.num_workers == 0:
            return self.dataset.shard_dataset.stats()
        out = {"workers": dict(self._worker_stats)}
        up = self.gpu_stats() if self.dataset.shard_dataset.device.type == "cuda" else {}
        if up:
            out["upload"] = up
        return out

    def gpu_stats(self):
        """ShardDataset.gpu_stats for this loader: its own upload with workers, the
        dataset's with num_workers=0."""
        if self.num_workers == 0:
            return self.dataset.shard_dataset.gpu_stats()
        if self._upload is None:
            return {}
        st = self._upload.stats()
        if st:  # with workers the wait is for their batches, upstream of the ring
            st["wait_seconds"] += self._upload.host_wait
        return st

    @property
    def skipped(self):
        """ShardDataset.skipped summed over the workers, as of the batches handed out."""
        return skips.summed(self._skips.values())

    def state_dict(self):
        """The position after the last batch handed out: {"epoch", "seed", "workers",
        "states", "next", "batches"}."""
        ds = self.dataset.shard_dataset
        return {"epoch": ds.epoch, "seed": ds.settings.get("seed"), "workers": len(self._states),
                "states": list(self._states), "next": self._next, "batches": self._batches}

    def load_state_dict(self, state):
        """Continue after the batch the state was taken at, on the next iteration of its
        epoch (set_epoch to another epoch starts that one from its beginning)."""
        ds = self.dataset.shard_dataset
        if "workers" not in state:
            raise ValueError("not a ShardLoader state (a ShardDataset's state goes to "
                             "ShardDataset.load_state_dict)")
        n = len(self._states)
        if state["workers"] != n:
            then = "0 or 1" if state["workers"] == 1 else state["workers"]
            raise ValueError(f"the state was taken with num_workers={state['workers']}; this "
                             f"loader has {n if self.num_workers else 0}: each worker's "
                             f"position is its share of the epoch, so the count must match "
                             f"(resume with num_workers={then}, or start the next epoch: "
                             f"set_epoch({int(state['epoch']) + 1}))")
        ds.take_seed(state)
        states = list(state["states"])
        if len(states) != n:
            raise ValueError(f"a ShardLoader state with {len(states)} worker states for "
                             f"{n} workers")
        ds.shared.epoch = int(state["epoch"])
        self._restored = (int(state["epoch"]), states, int(state["next"]) % n, int(state["batches"]))
