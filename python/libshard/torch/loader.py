"""ShardLoader: a DataLoader over a ShardDataset whose state_dict() / load_state_dict() resume
mid-epoch on any number of ranks and workers, and which uploads the workers' batches to the
GPU from the main process with device="cuda"."""
import re

import torch
import torch.utils.data

from .. import _libshard
from .. import settings as _settings
from . import plan, shapedupload, skips, split, state as _state
from .dataset import ShardDataset
from .shared import MAX_WORKERS
from .upload import Device, Upload


class _Tagged(torch.utils.data.IterableDataset):
    """What a ShardLoader's DataLoader iterates: the dataset's items, each tagged with the
    worker that made it and that worker's state after it. Other attributes are the
    dataset's."""

    def __init__(self, dataset, workers):
        super().__init__()
        self.shard_dataset = dataset
        self.workers = workers

    def __iter__(self):
        return self.shard_dataset._iterate(tagged=True)

    def __len__(self):
        return self.shard_dataset.len_for(self.workers)

    def __getattr__(self, name):
        if name in ("shard_dataset", "workers"):
            raise AttributeError(name)
        return getattr(self.shard_dataset, name)


class ShardLoader(torch.utils.data.DataLoader):
    """A DataLoader over a ShardDataset whose state_dict() / load_state_dict() save and
    restore the position mid-epoch, for any num_workers (0 included), and resume on another
    number of ranks and workers than the state was taken on (formats/order.md).

    state_dict() on any rank is the whole job's state: from this rank's count of batches
    (data-parallel ranks take as many steps each) and the turns a DataLoader gives its
    workers, it says how far every canonical partition was delivered; rank 0 saving it for
    all is enough. load_state_dict() on every rank of the new job, with any world size and
    num_workers, continues the epoch: every sample not yet delivered, exactly once, with the
    augmentation of the uninterrupted run, spread over the new ranks a sample apart (equal
    mode adds at most a batch of marked repeats, "__pad__", so that every rank still gets
    the same number of batches; exact mode's ranks are at most a batch apart, and
    UnequalRanksWarning says so where they differ); len() is then the batches left
    (docs/resume.md). The state is a small
    dict of strings and ints (torch.save / torch.load keep it), for the same dataset
    settings and seed. Batches are made by the dataset (its batch_size): DataLoader's
    batch_size stays None. set_epoch reaches the workers, persistent or not.
    """

    def __init__(self, dataset, num_workers=0, **options):
        if not isinstance(dataset, ShardDataset):
            raise TypeError(f"ShardLoader takes a libshard.torch.ShardDataset, not "
                            f"{type(dataset).__name__}")
        if options.get("batch_size") is not None:
            raise ValueError("ShardLoader: the dataset makes the batches (ShardDataset("
                             "batch_size=...)); leave the DataLoader's batch_size at None")
        options.pop("batch_size", None)
        unknown = set(options) - set(_settings.DATALOADER_KEYS)
        if unknown:
            raise _settings.unknown("ShardLoader", unknown, _settings.DATALOADER_KEYS)
        if num_workers > MAX_WORKERS:
            raise ValueError(f"ShardLoader: at most {MAX_WORKERS} workers, not {num_workers}")
        options["batch_size"] = None
        super().__init__(_Tagged(dataset, max(1, num_workers)), num_workers=num_workers,
                         **options)
        self._states = [None] * max(1, num_workers)
        self._next = 0          # the logical worker whose batch is next
        self._first = 0         # the one this iteration's DataLoader began with
        self._start = None      # the state this iteration began from (None: its epoch's start)
        self._run_epoch = None  # the epoch of the current or last iteration
        self._batches = 0       # batches handed out since it began
        self._restored = None   # (epoch, state, next) from load_state_dict
        self._planner = None    # (key, Reader): plans states without reading
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
        ds.agree_seed()  # here, before the workers start: they cannot take part
        n = len(self._states)
        start, rotation = None, 0
        if self._restored is not None and self._restored[0] == ds.epoch:
            _, start, rotation = self._restored
        self._restored = None
        ds.shared.set_plan(start, n, rotation)
        ds.note_start(start)
        if self.num_workers > 0:  # the workers' own would be in their processes
            rank, world = split.rank_world(ds.rank, ds.world_size)
            ds.warn_unequal(world, n, start)
        self._start, self._run_epoch, self._batches = start, ds.epoch, 0
        self._first = self._next = rotation
        self._states = [None] * n
        self._skips = {}
        items = super().__iter__()
        if ds.device.type == "cuda" and self.num_workers > 0:
            if ds.decoder == "gpu":
                raise ValueError("decoder='gpu': with DataLoader workers the workers decode "
                                 "on their CPUs; the GPU's JPEG decoder takes the batches "
                                 "of num_workers=0")
            # the workers' host batches go to the GPU from here, through one ring for every
            # epoch of this loader
            shaped = bool(ds.settings.get("aspect_buckets"))  # each batch its own size
            up, kind = self._upload, shapedupload.ShapedUpload if shaped else Upload
            device = shapedupload.cuda_device(ds.device) if shaped else Device(ds.device)
            if (up is None or not isinstance(up, kind)
                    or not up.fits(device, ds.settings, ds.device_buffers)):
                if up is not None:
                    up.close()
                self._upload = kind(device, ds.settings, ds.device_buffers)
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

    def batch_keys(self, epoch, step, rank=None):
        """ShardDataset.batch_keys for this loader's job: its steps are its workers' batches
        as the DataLoader hands them out, worker 0 first, each in turn."""
        return plan.batch_keys(self.dataset.shard_dataset, max(self.num_workers, 1),
                               self._began(epoch), epoch, step, rank)

    def where_is(self, key, epoch):
        """ShardDataset.where_is for this loader's job (its workers counted)."""
        return plan.where_is(self.dataset.shard_dataset, max(self.num_workers, 1),
                             self._began(epoch), key, epoch)

    def _began(self, epoch):
        """The state epoch `epoch` resumed from (load_state_dict), or None."""
        if self._restored is not None and self._restored[0] == epoch:
            return self._restored[1]
        if self._run_epoch == epoch:
            return self._start
        return None

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

    def _plan(self, epoch, start):
        """A Reader for this rank's first worker that reads nothing: the epoch's order on
        this topology, restored to start, to take states from (kept while they are the
        same)."""
        ds = self.dataset.shard_dataset
        rank, world = split.rank_world(ds.rank, ds.world_size)
        key = (epoch, start, rank, world, len(self._states))
        if self._planner is None or self._planner[0] != key:
            self._planner = None
            reader = plan.planner(ds, rank, world, len(self._states), epoch=epoch)
            if start:
                reader.restore(start)
            self._planner = (key, reader)
        return self._planner[1]

    def _job_state(self):
        """The job's state after the batches handed out this iteration."""
        ds = self.dataset.shard_dataset
        if not self._batches:
            return self._start
        planner = self._plan(self._run_epoch, self._start)
        if planner.rank_batches(plan.unit(ds), plan.drop(ds)) is not None:
            return planner.state_after(self._batches, plan.unit(ds), plan.drop(ds), self._first)
        # without counts (or resampled) each worker's state says its own partitions; one that
        # has handed out no batch yet is where this iteration began
        states = list(self._states)
        for w, s in enumerate(states):
            if s is None:
                rank, world = split.rank_world(ds.rank, ds.world_size)
                idle = plan.planner(ds, rank, world, len(states), epoch=self._run_epoch,
                                    worker=w)
                if self._start:
                    idle.restore(self._start)
                states[w] = idle.state()
        return _libshard.merge_states(states)

    def state_dict(self):
        """The job's position after the last batch handed out: {"epoch", "seed", "state",
        "next"} (the same on every rank of a job in step); next: the worker whose batch
        comes next, which a resume on the same topology begins with."""
        ds = self.dataset.shard_dataset
        here = self._run_epoch == ds.epoch
        return {"epoch": ds.epoch, "seed": ds.settings.get("seed"),
                "state": self._job_state() if here else None, "next": self._next if here else 0}

    def load_state_dict(self, state):
        """Continue, on the next iteration of its epoch (set_epoch to another epoch starts
        that one from its beginning), after the batches the state was taken at: on any
        number of ranks and workers (a dataset made without seed= or mode= takes the
        state's); anything but a libshard state, and a state of other settings, is refused
        now, naming what differs."""
        ds = self.dataset.shard_dataset
        epoch, text = _state.check(state, "ShardLoader")
        undo = ds.take_state(state, text)
        rotation = 0
        if text:
            try:
                self._plan(epoch, text)  # refused here, naming what differs
            except BaseException:
                ds.give_back_state(undo)
                raise
            # on the topology it was taken on, the workers' batches come in the turn the
            # interrupted loader was at
            taken = dict(re.findall(r"[,:](world_size|num_workers)=(\d+)", text.split(";")[0]))
            rank, world = split.rank_world(ds.rank, ds.world_size)
            if taken == {"world_size": str(world), "num_workers": str(len(self._states))}:
                rotation = int(state.get("next", 0)) % len(self._states)
        ds.begin_at(epoch, text)
        self._restored = (epoch, text, rotation)


def _loader_signature():
    """ShardLoader's signature: the dataset, then the DataLoader's own keywords with its
    defaults (batching, shuffling and sampling are the dataset's)."""
    import inspect
    theirs = inspect.signature(torch.utils.data.DataLoader.__init__).parameters
    params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD),
              inspect.Parameter("dataset", inspect.Parameter.POSITIONAL_OR_KEYWORD),
              inspect.Parameter("num_workers", inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                default=0)]
    params += [inspect.Parameter(k, inspect.Parameter.KEYWORD_ONLY, default=theirs[k].default)
               for k in _settings.DATALOADER_KEYS
               if k in theirs and k not in ("num_workers", "sampler", "batch_sampler")]
    return inspect.Signature(params)


ShardLoader.__init__.__signature__ = _loader_signature()
