"""libshard.torch: a torch IterableDataset over shards, decoded and batched in C.

    from libshard.torch import ShardDataset
    ds = ShardDataset("shards/train.json", shuffle=5000, seed=0, image_size=224,
                      crop="random_resized", flip=True, batch_size=256)
    for images, labels in torch.utils.data.DataLoader(ds, batch_size=None):
        ...   # images: uint8 (256, 3, 224, 224), labels: int64 (256,)

The fast way is num_workers=0: libshard's own threads fetch, decode and batch, with the GIL
released. With num_workers > 0 every DataLoader worker runs its own reader on its share of
the shards (the reader starts inside the worker, so fork is safe). Rank and world size come
from torch.distributed when it is initialized (else $RANK / $WORLD_SIZE).
"""
import os

import torch
import torch.utils.data

from . import _libshard

_READER_KEYS = ("seed", "mode", "pad", "epoch_samples", "shuffle_shards", "shuffle",
                "shuffle_initial", "streams", "queue_depth", "skip_errors",
                "cache_dir", "cache_size", "retries", "timeout", "stall_timeout", "backoff")
_LOADER_KEYS = ("batch_size", "image_size", "crop", "flip", "fast", "layout", "dtype", "mean",
                "std", "scale", "ratio", "drop_last", "threads", "batches", "image_fields",
                "label_field", "raw_fields")


_INHERITED = []  # readers forked from a parent process, kept alive deliberately


def _rank_world(rank, world_size):
    if rank is not None and world_size is not None:
        return rank, world_size
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_rank(), torch.distributed.get_world_size()
    return int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))


class ShardDataset(torch.utils.data.IterableDataset):
    """Batches of (images, labels) tensors, or raw sample dicts with decode=False.

    Reader settings: shuffle (buffer size), shuffle_initial, seed (None: a fresh one, same
    for every rank only if given), mode ("exact", "equal", "resampled"), pad, epoch_samples,
    shuffle_shards, streams, queue_depth, skip_errors, rank, world_size.
    Remote shards (http://, https://, gs://, s3://): cache_dir (a folder that keeps them,
    shared by the processes of a machine), cache_size (bytes), retries, timeout (connect,
    seconds), stall_timeout (seconds), backoff (first retry delay, seconds); credentials
    come from the environment (README, "Remote shards").
    Batch settings: batch_size, decode, image_size (int or (h, w)), crop ("random_resized",
    "center", "none"), flip, fast, layout ("nchw", "nhwc"), dtype ("uint8", "float32":
    normalized with mean and std), scale, ratio, drop_last, threads, batches, image_fields
    ("jpg;jpeg;png"), label_field ("cls"), device ("cpu" or "cuda").
    raw_fields: other fields to carry along ("json;txt", a list of names, or "*" for every
    field but the image and label); batches are then (images, labels, {name: [bytes or
    None per sample]}).
    """

    def __init__(self, urls, *, decode=True, device="cpu", rank=None, world_size=None, **settings):
        super().__init__()
        unknown = set(settings) - set(_READER_KEYS) - set(_LOADER_KEYS)
        if unknown:
            raise TypeError(f"ShardDataset: unknown settings {sorted(unknown)}")
        if settings.get("seed") is None and settings.get("mode", "exact") != "resampled":
            settings["seed"] = int.from_bytes(os.urandom(8), "little") >> 1
        raw = settings.get("raw_fields")
        if raw is not None and not isinstance(raw, str):
            if not (isinstance(raw, (list, tuple)) and all(isinstance(n, str) for n in raw)):
                raise TypeError(f"raw_fields: a name, a ';'-separated list or a list of names, "
                                f"not {raw!r}")
            settings["raw_fields"] = ";".join(raw)
        self.urls = [os.fspath(u) for u in ([urls] if isinstance(urls, (str, os.PathLike)) else urls)]
        self.decode = decode
        self.device = torch.device(device)
        self.rank, self.world_size = rank, world_size
        self.settings = settings
        self.epoch = 0
        self._resume = None
        self._source = None
        self._source_pid = None

    @property
    def seed(self):
        return self.settings["seed"]

    def set_epoch(self, epoch):
        """Use epoch's shard order and shuffle next time the dataset is iterated."""
        self.epoch = int(epoch)
        self._resume = None

    def _split(self):
        rank, world = _rank_world(self.rank, self.world_size)
        info = torch.utils.data.get_worker_info()
        worker, workers = (info.id, info.num_workers) if info else (0, 1)
        return dict(rank=rank, world_size=world, worker=worker, num_workers=workers)

    def _reader_args(self):
        return {k: v for k, v in self.settings.items() if k in _READER_KEYS}

    def _adopt(self, source):
        # A reader inherited through fork has no threads in this process: never free it here
        # (that would join threads that do not exist); keep it for good instead.
        if self._source is not None and self._source_pid != os.getpid():
            _INHERITED.append(self._source)
        self._source, self._source_pid = source, os.getpid()

    def __iter__(self):
        split = self._split()
        if not self.decode:
            reader = _libshard.Reader(self.urls, epoch=self.epoch, **split, **self._reader_args())
            self._adopt(reader)
            if self._resume:
                reader.restore(self._resume)
                self._resume = None
            yield from reader
            return
        raw = self.settings.get("raw_fields")
        loader = _libshard.Loader(self.urls, epoch=self.epoch, **split,
                                  **{**self.settings, "raw_fields": raw or ""})
        self._adopt(loader)
        if self._resume:
            loader.restore(self._resume)
            self._resume = None
        float32 = self.settings.get("dtype", "uint8") == "float32"
        cuda = self.device.type == "cuda"
        if cuda and torch.utils.data.get_worker_info() is not None:
            raise RuntimeError("ShardDataset(device='cuda') runs with DataLoader(num_workers=0), "
                               "where libshard's own threads decode; with worker processes, "
                               "leave device='cpu' and move batches in the training loop")
        for batch in loader:
            images = torch.frombuffer(batch, dtype=torch.float32 if float32 else torch.uint8)
            view = memoryview(batch)
            images = images.view(view.shape)
            labels = torch.frombuffer(bytearray(batch.labels), dtype=torch.int64)
            if cuda:
                images = images.to(self.device, non_blocking=False)
                labels = labels.to(self.device, non_blocking=False)
            yield (images, labels, batch.fields) if raw else (images, labels)

    def __len__(self):
        """Batches per epoch for this rank (samples with decode=False); needs sample counts.

        The rank's samples are split between DataLoader workers in whole batches, so the
        count does not depend on num_workers: only the last worker ends on a partial batch.
        """
        rank, world = _rank_world(self.rank, self.world_size)
        args = {k: v for k, v in self._reader_args().items() if k not in ("streams", "queue_depth")}
        r = _libshard.Reader(self.urls, epoch=self.epoch, rank=rank, world_size=world, worker=0,
                             num_workers=1, streams=1, queue_depth=1, **args)
        n = r.epoch_length
        del r
        if n is None:
            raise TypeError("len() needs sample counts: a manifest, or a .idx beside every shard")
        if not self.decode:
            return n
        bs = self.settings.get("batch_size", 256)
        return n // bs if self.settings.get("drop_last") else -(-n // bs)

    def __getstate__(self):
        # Pickled for spawn-started workers: the running reader stays behind.
        state = dict(self.__dict__)
        state["_source"] = None
        state["_source_pid"] = None
        return state

    def remote_stats(self):
        """Counters of this process's remote reads for the current iteration (bytes,
        requests, retries, resumes, cache hits ...); {} before the first."""
        return self._source.remote_stats() if self._source is not None else {}

    def state_dict(self):
        """Where iteration stands (num_workers=0): pass to load_state_dict to continue."""
        if self._source is None or self._source_pid != os.getpid():
            return {"epoch": self.epoch, "state": None, "seed": self.settings.get("seed")}
        return {"epoch": self.epoch, "state": self._source.state(), "seed": self.settings.get("seed")}

    def load_state_dict(self, state):
        """Continue, on the next iteration, after the last batch the state was taken at."""
        if state.get("seed") is not None and state["seed"] != self.settings.get("seed"):
            raise ValueError(f"the state was taken with seed {state['seed']}, this dataset has "
                             f"{self.settings.get('seed')}")
        self.epoch = state["epoch"]
        self._resume = state["state"]
