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

ShardLoader(ds, num_workers=..., **DataLoader options) is a DataLoader whose state_dict()
and load_state_dict() resume mid-epoch whatever the number of workers:

    loader = ShardLoader(ds, num_workers=4, persistent_workers=True)
    loader.load_state_dict(torch.load("ckpt.pt")["data"])     # or nothing, to start
    for epoch in range(loader.epoch, epochs):
        loader.set_epoch(epoch)             # keeps a restored position in its own epoch
        for images, labels in loader:
            ...
            torch.save({"data": loader.state_dict(), ...}, "ckpt.pt")

device="cuda" delivers batches already on the GPU: the decoders write into pinned memory,
a copy stream uploads batch N+1 while the model computes on batch N, and the batch arrives
through DLPack on torch's current stream (the stream waits for the copy on the GPU, and the
buffer is reused only after the work queued on it when the tensor was freed). dtype
"float32", "float16" or "bfloat16" and layout "nchw", "nhwc" or "channels_last" are made on
the GPU, in one kernel, from uint8: the host never touches floats. With num_workers=0
libshard's threads do everything; with workers, ShardLoader(ds, num_workers=N) uploads in
the main process (a plain DataLoader refuses: its workers cannot hand out GPU memory).
"""
import collections
import logging
import os
import sys
import time
import warnings

import torch
import torch.utils.data

from . import _libshard, _options
from .indexed import REMOTE_KEYS, IndexedShards

_READER_KEYS = ("seed", "mode", "pad", "epoch_samples", "shuffle_shards", "shuffle",
                "shuffle_initial", "streams", "queue_depth", "skip_errors",
                "manifest_commands", "memory_budget") + REMOTE_KEYS
_LOADER_KEYS = ("batch_size", "image_size", "crop", "flip", "fast", "layout", "dtype", "mean",
                "std", "scale", "ratio", "drop_last", "threads", "batches", "image_fields",
                "label_field", "raw_fields", "missing_label", "trace")


_LOG = logging.getLogger("libshard")
_SKIP_KEYS = ("image", "no_image", "label", "shards", "shard_samples", "total")


class ShardSkipWarning(UserWarning):
    """skip_errors=True left data out: issued on the first skip of an iteration."""


def _reader_skipped(stats):
    return {"image": 0, "no_image": 0, "label": 0, "shards": stats["skipped_shards"],
            "shard_samples": stats["skipped_samples"], "total": stats["skipped_samples"]}


def _skip_text(d):
    parts = [f"{d['image']} images that did not decode" if d["image"] else "",
             f"{d['no_image']} samples without an image" if d["no_image"] else "",
             f"{d['label']} samples without a valid label" if d["label"] else "",
             f"{d['shards']} shards after errors ({d['shard_samples']} samples)" if d["shards"] else ""]
    return ", ".join(p for p in parts if p)

# What the processes of one dataset share (tensors in shared memory, so that DataLoader
# workers, persistent or not, forked or spawned, see what the main process sets): the
# epoch, whether workers iterated, and a ShardLoader's plan for the next iteration (the
# worker count it is for, the rotation of workers, each worker's state to resume from).
_EPOCH, _IN_WORKERS, _PLAN_WORKERS, _PLAN_ROTATION = range(4)
_MAX_WORKERS, _STATE_BYTES = 64, 96


def _rank_world(rank, world_size):
    if rank is not None and world_size is not None:
        return rank, world_size
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_rank(), torch.distributed.get_world_size()
    return int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))


class ShardDataset(torch.utils.data.IterableDataset):
    """Batches of (images, labels) tensors, or raw sample dicts with decode=False.

    urls: a spec (path or URL, braces, a manifest, a gs:// or s3:// prefix), a list of them,
    or a mix: [(spec or list of specs, weight), ...], each source giving its weight's share of
    every epoch (README, "Mixing datasets").

    Reader settings: shuffle (buffer size), shuffle_initial, seed (None: a fresh one, same
    for every rank only if given), mode ("exact", "equal", "resampled"), pad, epoch_samples,
    shuffle_shards, streams, queue_depth, memory_budget (bytes the streams may hold read
    ahead, default 256 MiB), skip_errors, rank, world_size, manifest_commands
    (let a manifest list pipe:COMMAND shards; off: a manifest runs nothing).
    Remote shards (http://, https://, gs://, s3://): cache_dir (a folder that keeps them,
    shared by the processes of a machine), cache_size (bytes), retries, timeout (connect,
    seconds), stall_timeout (seconds), backoff (first retry delay, seconds); credentials
    come from the environment (README, "Remote shards").
    Batch settings: batch_size, decode, image_size (int or (h, w)), crop ("random_resized",
    "center", "none"), flip, fast, layout ("nchw", "nhwc", "channels_last": NCHW-shaped with
    NHWC strides), dtype ("uint8", "float32": normalized with mean and std; with
    device="cuda" also "float16" and "bfloat16"), scale, ratio, drop_last, threads, batches,
    image_fields ("jpg;jpeg;png"), label_field ("cls"), device ("cpu", "cuda" or "cuda:N";
    "cuda" is torch.cuda.current_device(), so set_device(LOCAL_RANK) picks each rank's GPU),
    device_buffers (3: device buffers in the ring, the batches held plus those uploaded
    ahead). report_every (seconds; None: off) with report ("log": the libshard logger at
    INFO, "stderr", or a callable taking the report dict): the periodic report while
    iterating. trace: a path: the stages' spans of each iteration written there in the Chrome
    trace event format (Perfetto, chrome://tracing); DataLoader workers each write
    PATH.worker-N.json.
    raw_fields: other fields to carry along ("json;txt", a list of names, or "*" for every
    field but the image and label); batches are then (images, labels, {name: [bytes or
    None per sample]}).
    """

    def __init__(self, urls, *, decode=True, device="cpu", rank=None, world_size=None, **settings):
        super().__init__()
        unknown = (set(settings) - set(_READER_KEYS) - set(_LOADER_KEYS)
                   - {"device_buffers", "report_every", "report"})
        if unknown:
            raise TypeError(f"ShardDataset: unknown settings {sorted(unknown)}")
        if settings.get("shuffle") is False:  # dataset order: for evaluation
            settings["shuffle"] = 0
            settings.setdefault("shuffle_shards", False)
            settings.setdefault("streams", 1)
        settings = _options.check(settings)
        if settings.get("seed") is None and settings.get("mode", "exact") != "resampled":
            settings["seed"] = int.from_bytes(os.urandom(8), "little") >> 1
        raw = settings.get("raw_fields")
        if raw is not None and not isinstance(raw, str):
            if not (isinstance(raw, (list, tuple)) and all(isinstance(n, str) for n in raw)):
                raise TypeError(f"raw_fields: a name, a ';'-separated list or a list of names, "
                                f"not {raw!r}")
            settings["raw_fields"] = ";".join(raw)
        self.urls = _options.specs(urls)
        self.decode = decode
        try:
            self.device = torch.device(device)
        except (RuntimeError, TypeError):
            raise ValueError(f"device: 'cpu' or 'cuda' ('cuda:N'), not {device!r}") from None
        if self.device.type not in ("cpu", "cuda"):
            raise ValueError(f"device: 'cpu' or 'cuda' ('cuda:N'), not {device!r}: libshard has no "
                             f"{self.device.type} path; leave device='cpu' and move the batches "
                             f"in the training loop")
        if self.device.type == "cpu" and settings.get("dtype") in ("float16", "bfloat16"):
            raise ValueError(f"dtype {settings['dtype']!r} is made on the GPU (device='cuda'); "
                             f"on the CPU: 'uint8' or 'float32'")
        self.device_buffers = settings.pop("device_buffers", 3)
        self.report_every = settings.pop("report_every", None)
        self.report = settings.pop("report", "log")
        if self.report_every is not None and not self.report_every > 0:
            raise ValueError(f"report_every: seconds between reports, more than 0, not "
                             f"{self.report_every!r}")
        if not (callable(self.report) or self.report in ("log", "stderr")):
            raise ValueError(f"report: 'log', 'stderr' or a callable taking the report dict, "
                             f"not {self.report!r}")
        self.rank, self.world_size = rank, world_size
        self.settings = settings
        self._shared = torch.zeros(4, dtype=torch.int64).share_memory_()
        self._plan_states = torch.zeros(_MAX_WORKERS, _STATE_BYTES, dtype=torch.uint8).share_memory_()
        self._resume = None
        self._resume_epoch = None
        self._skipped = {}
        self._source = None
        self._source_pid = None
        self._by_worker = True
        self._uploader = None
        self._handed_state = None
        self._busy = False
        self._source_key = self._source_gpu = None

    @property
    def epoch(self):
        """The epoch the next iteration reads (set_epoch; workers see it too)."""
        return int(self._shared[_EPOCH])

    @property
    def seed(self):
        """The seed of every random choice (the given one, or the fresh one drawn when the
        dataset was made; None in resampled mode without one: each worker draws its own)."""
        return self.settings.get("seed")

    def set_epoch(self, epoch):
        """Use epoch's shard order and shuffle next time the dataset is iterated, in this
        process and in DataLoader workers (persistent ones too). A position restored by
        load_state_dict is kept when epoch is its own epoch, and dropped otherwise."""
        epoch = int(epoch)
        if epoch != self._resume_epoch:
            self._resume = self._resume_epoch = None
        self._shared[_EPOCH] = epoch

    def _worker(self):
        """(this process's worker, worker count), (0, 1) outside DataLoader workers."""
        info = torch.utils.data.get_worker_info()
        return (info.id, info.num_workers) if info else (0, 1)

    def _split(self, worker=None):
        rank, world = _rank_world(self.rank, self.world_size)
        # (libshard.webdataset's workersplitter=None: every worker reads the whole share)
        w, workers = self._worker() if self._by_worker else (0, 1)
        return dict(rank=rank, world_size=world, worker=w if worker is None else worker,
                    num_workers=workers)

    def _plan(self):
        """For a ShardLoader's iteration: (logical worker, state to resume from or None).
        Workers are rotated so that a resumed DataLoader, which always starts with worker
        0, hands out batches in the order the interrupted one would have."""
        w, n = self._worker()
        if int(self._shared[_PLAN_WORKERS]) != n:
            return w, None
        logical = (w + int(self._shared[_PLAN_ROTATION])) % n
        raw = bytes(self._plan_states[logical].tolist()).rstrip(b"\0")
        return logical, raw.decode() if raw else None

    def _reader_args(self):
        return {k: v for k, v in self.settings.items() if k in _READER_KEYS}

    def _adopt(self, source):
        # one inherited through fork is let go without being freed (the extension knows it
        # was made in another process)
        self._source, self._source_pid = source, os.getpid()

    def __iter__(self):
        return self._iterate(tagged=False)

    def _iterate(self, tagged):
        """The epoch's batches (or samples); tagged (for ShardLoader): each as (item,
        (logical worker, state after it))."""
        if torch.utils.data.get_worker_info() is not None:
            self._shared[_IN_WORKERS] = 1
        logical, resume = self._plan() if tagged else (None, None)
        if not tagged and self._resume and self._resume_epoch == self.epoch:
            resume = self._resume
        self._resume = self._resume_epoch = None
        self._skipped = {}
        split = self._split(logical)
        if not self.decode:
            reader = _libshard.Reader(self.urls, epoch=self.epoch, **split, **self._reader_args())
            self._adopt(reader)
            if resume:
                reader.restore(resume)
            skip = self.settings.get("skip_errors")
            for sample in reader:
                if skip:
                    self._note_skips(_reader_skipped(reader.stats()))
                yield (sample, (logical, reader.state(), self.skipped, None)) if tagged else sample
            if skip:
                self._note_skips(_reader_skipped(reader.stats()), end=True)
            return
        raw = self.settings.get("raw_fields")
        names = raw.split(";") if raw else []
        special = {"__key__", "__index__", "__pad__"}
        keys = any(n in special for n in names)
        raw_c = ";".join(n for n in names if n not in special)
        cuda = self.device.type == "cuda"
        in_worker = torch.utils.data.get_worker_info() is not None
        if cuda and in_worker and not tagged:
            raise RuntimeError("ShardDataset(device='cuda') with DataLoader workers: the upload "
                               "must happen in the main process, so iterate it through "
                               "libshard.torch.ShardLoader(dataset, num_workers=...), or use "
                               "num_workers=0, where libshard's own threads decode")
        args = {**self.settings, "raw_fields": raw_c}
        layout = args.pop("layout", "nchw")
        if cuda:  # uint8 NHWC on the host; type and layout are made on the GPU
            args.update(layout="nhwc", dtype="uint8")
        elif layout == "channels_last":
            args["layout"] = "nhwc"
        else:
            args["layout"] = layout
        gpu = None
        if cuda and not in_worker:
            args["batches"] = max(args.get("batches", 4), self.device_buffers + 2)
        trace = args.get("trace")
        if trace is not None:
            trace = os.fspath(trace)
            if in_worker:  # one file per worker: the workers' names, and no clobbering
                root, ext = os.path.splitext(trace)
                trace = f"{root}.worker-{split['worker']}{ext}"
            args["trace"] = trace
        # The loader of the last iteration goes on: its threads stay, and it has read ahead
        # into the next epoch, so the new epoch's first batches are ready (no stall).
        key = (repr(self.urls), repr(sorted(split.items())), repr(sorted(args.items())),
               cuda and not in_worker)
        prev = self._source
        if (prev is not None and isinstance(prev, _libshard.Loader) and not self._busy
                and self._source_pid == os.getpid() and self._source_key == key):
            loader, gpu = prev, self._source_gpu
            base = dict(loader.skipped_by)  # at the end of the epoch before (the C loader's)
            loader.set_epoch(self.epoch)
        else:
            self._source = None  # the last one's threads end before the new one's start
            del prev
            if cuda and not in_worker:
                gpu = _libshard.Gpu(self._device_index())
            loader = _libshard.Loader(self.urls, epoch=self.epoch, **split, **args,
                                      **({"gpu": gpu} if gpu is not None else {}))
            self._adopt(loader)
            self._source_key, self._source_gpu = key, gpu
            base = {}
        self._handed_state = None
        if resume:
            loader.restore(resume)
        self._busy = True
        try:
            yield from self._batches_of(loader, gpu, cuda, raw, names, special, keys, tagged,
                                        in_worker, logical, trace, base)
        finally:
            self._busy = False

    def _batches_of(self, loader, gpu, cuda, raw, names, special, keys, tagged, in_worker,
                    logical, trace, base):
        layout = self.settings.get("layout", "nchw")
        if gpu is not None:
            batches = self._uploaded(gpu, loader)
        else:
            batches = self._host_batches(loader, layout if not cuda else "nhwc")
        skip = self.settings.get("skip_errors")
        def skipped():  # the loader counts across epochs: this one's
            return {k: v - base.get(k, 0) for k, v in loader.skipped_by.items()}

        reporter = _Reporter(self, loader) if self.report_every else None
        for images, labels, batch in batches:
            if reporter:
                reporter.tick()
            if raw:
                fields = batch.fields
                if keys:
                    fields = {n: self._special(batch, n) if n in special else fields[n]
                              for n in names}
                item = (images, labels, fields)
            else:
                item = (images, labels)
            if skip:
                self._note_skips(skipped())
            state = batch.state if gpu is not None else loader.state()
            self._handed_state = state if gpu is not None else None
            del batch
            stats = loader.stats() if tagged and in_worker else None
            yield (item, (logical, state, self.skipped, stats)) if tagged else item
        if skip:
            self._note_skips(skipped(), end=True)
        if trace is not None:
            loader.write_trace(trace)

    def _device_index(self):
        if self.device.index is not None:
            return self.device.index
        # without CUDA in torch, libshard's own error says why there is no GPU
        return torch.cuda.current_device() if torch.cuda.is_available() else 0

    def _host_batches(self, loader, layout):
        """(images, labels, batch) in host memory."""
        float32 = self.settings.get("dtype", "uint8") == "float32" and self.device.type == "cpu"
        for batch in loader:
            images = torch.frombuffer(batch, dtype=torch.float32 if float32 else torch.uint8)
            images = images.view(memoryview(batch).shape)
            if layout == "channels_last":
                images = images.permute(0, 3, 1, 2)
            labels = torch.frombuffer(bytearray(batch.labels), dtype=torch.int64)
            yield images, labels, batch

    def _uploaded(self, gpu, loader):
        """(images, labels, device batch) on the GPU, uploaded by libshard's thread ahead of
        the consumer; each arrives on torch's current stream at the time it is asked for."""
        h, w = _hw(self.settings.get("image_size", 224))
        up = _libshard.Uploader(gpu, loader, **self._upload_args(h, w))
        self._uploader = up
        host = bool(self.settings.get("raw_fields"))  # keys and fields wanted
        dev = torch.device("cuda", self._device_index())
        try:
            while True:
                db = up.next(torch.cuda.current_stream(dev).cuda_stream, host=host)
                if db is None:
                    return
                yield self._tensors(db) + (db,)
                del db
        finally:
            self._gpu_last = _gpu_stats(up)
            self._stages_last = up.loader_stats()
            up.close()

    def _upload_args(self, h, w):
        s = self.settings
        layout = s.get("layout", "nchw")
        out = dict(buffers=self.device_buffers, batch_size=s.get("batch_size", 256), height=h,
                   width=w, dtype=s.get("dtype", "uint8"),
                   layout="nchw" if layout == "nchw" else "nhwc")
        for k in ("mean", "std"):
            if s.get(k) is not None:
                out[k] = s[k]
        return out

    def _tensors(self, db):
        images = torch.from_dlpack(db.images)
        labels = torch.from_dlpack(db.labels)
        if self.settings.get("layout") == "channels_last":
            images = images.permute(0, 3, 1, 2)
        return images, labels

    def gpu_stats(self):
        """The upload's counters for this process's current or last iteration with
        device="cuda" (num_workers=0; ShardLoader.gpu_stats with workers): batches, bytes,
        copy_seconds and finish_seconds (GPU time on the copy stream), upload_gbps,
        wait_seconds (time the training loop waited for a batch), in_flight and
        max_in_flight (device buffers uploading, uploaded ahead or held), buffers."""
        return _gpu_stats(self._uploader, getattr(self, "_gpu_last", None))

    @staticmethod
    def _special(batch, name):
        if name == "__key__":
            return list(batch.keys)
        if name == "__index__":
            return torch.frombuffer(bytearray(batch.indices), dtype=torch.int64)
        return torch.frombuffer(bytearray(batch.repeats), dtype=torch.uint8).bool()

    def _note_skips(self, counts, end=False):
        """Keeps this iteration's skip counts; warns at the first skip, logs a summary at
        the end of an epoch that skipped anything."""
        first = counts["total"] and not self._skipped.get("total")
        self._skipped = dict(counts)
        if first:
            warnings.warn(f"libshard: skip_errors left out {_skip_text(counts)} (so far; "
                          f"ds.skipped counts them)", ShardSkipWarning, stacklevel=3)
        if end and counts["total"]:
            _LOG.warning("libshard: epoch %d left out %s", self.epoch, _skip_text(counts))

    @property
    def skipped(self):
        """What skip_errors left out in this process's current or last iteration: samples
        by reason (image: did not decode, no_image, label: missing or not a class index),
        shards skipped after errors and the samples lost with them (shard_samples), and
        the samples' total. With DataLoader workers, ShardLoader.skipped sums the workers'."""
        return dict(self._skipped) if self._skipped else dict.fromkeys(_SKIP_KEYS, 0)

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
            raise self._no_count()
        missing = self._missing_shard()
        if missing:  # a manifest counts it, but the epoch would fail at it
            raise FileNotFoundError(f"len(): shard {missing} does not exist")
        if not self.decode:
            return n
        bs = self.settings.get("batch_size", 256)
        return n // bs if self.settings.get("drop_last") else -(-n // bs)

    def _shard_list(self):
        specs = self.urls if not (self.urls and isinstance(self.urls[0], tuple)) else [
            u for spec, _ in self.urls for u in spec]
        remote = {k: v for k, v in self.settings.items() if k in REMOTE_KEYS}
        return _libshard.list_shards(specs, **remote)

    @staticmethod
    def _local_path(u):
        """The file a local shard URL names (a path or file:///PATH), else None."""
        if u.startswith("file://"):
            return u[len("file://"):] if u.startswith("file:///") else None
        return None if "://" in u or u.startswith("pipe:") else u

    def _missing_shard(self, listed=None):
        """The first local shard that does not exist, or None (also when the list cannot be
        read here: a manifest of commands, for one; the epoch says what is wrong)."""
        if listed is None:
            try:
                listed = self._shard_list()
            except (ValueError, OSError, _libshard.ShardError):
                return None
        for u, _ in listed:
            p = self._local_path(u)
            if p is not None and not os.path.exists(p):
                return u
        return None

    def _no_count(self):
        """Why len() has no count, naming the shards: a missing one, or those without an
        index."""
        listed = self._shard_list()
        missing = self._missing_shard(listed)
        if missing:
            return FileNotFoundError(f"len(): shard {missing} does not exist")
        uncounted = [u for u, n in listed if n is None]
        shown = ", ".join(uncounted[:3]) + (f" and {len(uncounted) - 3} more"
                                              if len(uncounted) > 3 else "")
        return TypeError(f"len() needs sample counts: a manifest, or a .idx beside every shard; "
                         f"{len(uncounted)} shard(s) have neither: {shown}")

    def __getstate__(self):
        # Pickled for spawn-started workers: the running reader stays behind.
        state = dict(self.__dict__)
        state["_source"] = None
        state["_source_pid"] = None
        state["_uploader"] = None
        state["_source_gpu"] = None
        state["_busy"] = False
        return state

    def stats(self):
        """Where the time goes, for this process's current or last iteration (num_workers=0;
        ShardLoader.stats() covers DataLoader workers): {"wall_seconds", "stages": {list,
        fetch, decompress, parse, shuffle, batch, decode, deliver: {threads, items, bytes,
        seconds, busy_seconds, wait_input_seconds, wait_output_seconds, queue_fill,
        queue_capacity}}, "bottleneck":
        the stage the others wait on, "verdict": the evidence in words}; with
        device="cuda" the stages have "upload" between decode and deliver (its thread:
        busy, waiting for a host batch, waiting for a free device buffer; deliver is then
        the training loop), and the dict also "upload" (gpu_stats()). {} before the first
        iteration, and with decode=False."""
        src = self._source
        if src is None or self._source_pid != os.getpid() or not hasattr(src, "stats"):
            return {}
        st = self._stages_with_upload() if self.device.type == "cuda" else {}
        st = st or src.stats()
        up = self.gpu_stats() if self.device.type == "cuda" else {}
        if up:
            st["upload"] = up
        return st

    def _stages_with_upload(self):
        """The stages with the upload among them (libshard's upload thread fed by the
        loader); {} when the batches come some other way."""
        up = self._uploader
        try:
            return up.loader_stats() if up is not None else {}
        except ValueError:  # closed: as it was then
            return dict(getattr(self, "_stages_last", {}))

    def remote_stats(self):
        """Counters of this process's remote reads for the current iteration (bytes,
        requests, retries, resumes, cache hits ...); {} before the first."""
        return self._source.remote_stats() if self._source is not None else {}

    def state_dict(self):
        """Where iteration stands in this process (num_workers=0): pass to load_state_dict
        to continue. With DataLoader workers the position lives in the workers: use
        ShardLoader, whose state_dict covers them."""
        if self._handed_state is not None and self._source_pid == os.getpid():
            # with device="cuda" the loader runs ahead of the batches handed out
            return {"epoch": self.epoch, "state": self._handed_state,
                    "seed": self.settings.get("seed")}
        if self._source is None or self._source_pid != os.getpid():
            if int(self._shared[_IN_WORKERS]):
                raise RuntimeError(
                    "ShardDataset.state_dict(): this dataset was iterated in DataLoader worker "
                    "processes, whose positions this process cannot see; iterate it through "
                    "libshard.torch.ShardLoader(dataset, num_workers=...) and take "
                    "loader.state_dict() instead")
            return {"epoch": self.epoch, "state": None, "seed": self.settings.get("seed")}
        return {"epoch": self.epoch, "state": self._source.state(), "seed": self.settings.get("seed")}

    def load_state_dict(self, state):
        """Continue, on the next iteration, after the last batch the state was taken at."""
        if "workers" in state:
            raise ValueError("this state was taken by a ShardLoader: restore it with "
                             "ShardLoader.load_state_dict")
        if state.get("seed") is not None and state["seed"] != self.settings.get("seed"):
            raise ValueError(f"the state was taken with seed {state['seed']}, this dataset has "
                             f"{self.settings.get('seed')}")
        self._shared[_EPOCH] = int(state["epoch"])
        self._resume = state["state"]
        self._resume_epoch = int(state["epoch"])


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
        if num_workers > _MAX_WORKERS:
            raise ValueError(f"ShardLoader: at most {_MAX_WORKERS} workers, not {num_workers}")
        options["batch_size"] = None
        super().__init__(_Tagged(dataset), num_workers=num_workers, **options)
        self._states = [None] * max(1, num_workers)
        self._next = 0
        self._batches = 0
        self._restored = None  # (epoch, states, next, batches) from load_state_dict

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
        plan = torch.zeros(_MAX_WORKERS, _STATE_BYTES, dtype=torch.uint8)
        for w, st in enumerate(states):
            if st:
                b = st.encode()
                plan[w, :len(b)] = torch.tensor(list(b), dtype=torch.uint8)
        ds._plan_states.copy_(plan)
        ds._shared[_PLAN_ROTATION] = rotation
        ds._shared[_PLAN_WORKERS] = n
        self._states, self._next, self._batches = list(states), rotation, batches
        self._skips = {}
        items = super().__iter__()
        if ds.device.type == "cuda" and self.num_workers > 0:
            items = self._upload(ds, items)
        self._worker_stats = {}
        for item, (logical, state, skipped, stats) in items:
            if stats is not None:
                self._worker_stats[logical] = stats
            self._states[logical] = state
            self._skips[logical] = skipped
            self._next = (logical + 1) % n
            self._batches += 1
            yield item

    def _upload(self, ds, items):
        """The workers' host batches (uint8 NHWC) onto the GPU, from this process: each is
        copied into a device buffer's pinned staging memory and uploaded on the copy stream
        while the batches before it are trained on; the ring is kept as full as it goes."""
        h, w = _hw(ds.settings.get("image_size", 224))
        gpu = _libshard.Gpu(ds._device_index())
        up = _libshard.Uploader(gpu, None, **ds._upload_args(h, w))
        self._uploader = up
        dev = torch.device("cuda", ds._device_index())
        pending = collections.deque()  # (the rest of the item, its tag), in put order
        src = iter(items)
        self._host_wait = 0.0  # the training loop waiting on the workers, nothing uploaded

        def fetch():
            t0 = time.perf_counter()
            item = next(src, None)
            if not pending:
                self._host_wait += time.perf_counter() - t0
            return item

        nxt = fetch()
        try:
            while True:
                while nxt is not None:
                    (images, labels, *rest), tag = nxt
                    if not up.put(images.numpy(), labels.numpy()):
                        break  # every buffer is uploaded ahead or held
                    pending.append((rest, tag))
                    nxt = fetch()
                    if nxt is None:
                        up.put_end()
                if not pending:
                    return
                db = up.next(torch.cuda.current_stream(dev).cuda_stream)
                rest, tag = pending.popleft()
                images, labels = ds._tensors(db)
                del db
                yield (images, labels, *rest), tag
        finally:
            self._gpu_last = _gpu_stats(up)
            up.close()

    def stats(self):
        """ShardDataset.stats for this loader: with num_workers=0 the dataset's; with workers
        {"workers": {worker: that worker's stats as of its last batch handed out}} (and
        "upload", this process's, with device="cuda")."""
        if self.num_workers == 0:
            return self.dataset.shard_dataset.stats()
        out = {"workers": dict(getattr(self, "_worker_stats", {}))}
        up = self.gpu_stats() if self.dataset.shard_dataset.device.type == "cuda" else {}
        if up:
            out["upload"] = up
        return out

    def gpu_stats(self):
        """ShardDataset.gpu_stats for this loader: its own upload with workers, the
        dataset's with num_workers=0."""
        if self.num_workers == 0:
            return self.dataset.shard_dataset.gpu_stats()
        st = _gpu_stats(getattr(self, "_uploader", None), getattr(self, "_gpu_last", None))
        if st:  # with workers the wait is for their batches, upstream of the ring
            st["wait_seconds"] += getattr(self, "_host_wait", 0.0)
        return st

    @property
    def skipped(self):
        """ShardDataset.skipped summed over the workers, as of the batches handed out."""
        out = dict.fromkeys(_SKIP_KEYS, 0)
        for d in getattr(self, "_skips", {}).values():
            for k in _SKIP_KEYS:
                out[k] += d[k]
        return out

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
        if state.get("seed") is not None and state["seed"] != ds.settings.get("seed"):
            raise ValueError(f"the state was taken with seed {state['seed']}, this dataset has "
                             f"{ds.settings.get('seed')}")
        n = len(self._states)
        if state["workers"] != n:
            raise ValueError(f"the state was taken with num_workers={state['workers']}; this "
                             f"loader has {n if self.num_workers else 0}: each worker's "
                             f"position is its share of the epoch, so the count must match")
        states = list(state["states"])
        if len(states) != n:
            raise ValueError(f"a ShardLoader state with {len(states)} worker states for "
                             f"{n} workers")
        ds._shared[_EPOCH] = int(state["epoch"])
        self._restored = (int(state["epoch"]), states, int(state["next"]) % n, int(state["batches"]))


class _Reporter:
    """The periodic report: every report_every seconds, what the last interval did (samples/s,
    MB/s read), the bottleneck so far with its evidence, the queues' fill and the GPU's wait,
    to the logging module, stderr or the dataset's callable."""

    def __init__(self, ds, loader):
        self.ds, self.loader = ds, loader
        self.every = float(ds.report_every)
        self.last = time.monotonic()
        self.prev = loader.stats()

    def tick(self):
        now = time.monotonic()
        if now - self.last < self.every:
            return
        st = self.loader.stats()
        dt = now - self.last
        prev = self.prev["stages"]
        cur = st["stages"]
        rep = {"interval_seconds": dt,
               "samples_per_second": (cur["deliver"]["items"] - prev["deliver"]["items"]) / dt,
               "mb_per_second": (cur["fetch"]["bytes"] - prev["fetch"]["bytes"]) / dt / 1e6,
               "bottleneck": st["bottleneck"], "verdict": st["verdict"],
               "queues": {k: (v["queue_fill"], v["queue_capacity"]) for k, v in cur.items()
                          if v["queue_capacity"]},
               "stats": st}
        up = self.ds.gpu_stats() if self.ds.device.type == "cuda" else {}
        if up:
            rep["gpu_wait_seconds"] = up["wait_seconds"]
        self.last, self.prev = now, st
        if callable(self.ds.report):
            self.ds.report(rep)
            return
        queues = " ".join(f"{k} {f}/{c}" for k, (f, c) in rep["queues"].items())
        line = (f"libshard: {rep['samples_per_second']:.0f} samples/s, "
                f"{rep['mb_per_second']:.1f} MB/s read; bottleneck {rep['verdict']}; "
                f"queues {queues}"
                + (f"; GPU waited {up['wait_seconds']:.1f} s" if up else ""))
        if self.ds.report == "stderr":
            print(line, file=sys.stderr, flush=True)
        else:
            _LOG.info("%s", line)


def _hw(size):
    return (size, size) if isinstance(size, int) else tuple(size)


def _gpu_stats(up, last=None):
    """An uploader's counters, or last (taken as it closed) once it is closed."""
    if up is None:
        return dict(last or {})
    try:
        st = up.stats()
    except ValueError:
        return dict(last or {})
    st["upload_gbps"] = st["bytes"] / st["copy_seconds"] / 1e9 if st["copy_seconds"] else 0.0
    return st


def _mix(*parts):
    """A 64-bit seed from integers (splitmix64 steps): each sample's augmentation draws."""
    x = 0
    for p in parts:
        x = (x ^ (int(p) & 0xFFFFFFFFFFFFFFFF)) + 0x9E3779B97F4A7C15 & 0xFFFFFFFFFFFFFFFF
        x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9 & 0xFFFFFFFFFFFFFFFF
        x = (x ^ (x >> 27)) * 0x94D049BB133111EB & 0xFFFFFFFFFFFFFFFF
        x ^= x >> 31
    return x


_INDEXED_KEYS = ("image_size", "crop", "flip", "fast", "dtype", "mean", "std", "scale", "ratio",
                 "image_fields", "label_field", "missing_label")


class IndexedShardDataset(torch.utils.data.Dataset):
    """A map-style dataset over shards: len(ds), ds[i] -> (image, label), ds.raw(i) -> the
    sample's dict. Any sampler orders it: one permutation per epoch spread over ranks by
    torch's DistributedSampler, or a custom one.

    spec: a manifest, braces, a gs:// / s3:// prefix or a list of them, local or remote
    (cache_dir, cache_size, retries, timeout, stall_timeout, backoff as ShardDataset's). Each
    shard needs its sample count (a manifest, or the .idx beside it, which also gives the
    random access: a seek locally, a Range request remotely). open_files: shards kept open
    per process. Transform options as ShardDataset's: image_size (224), crop
    ("random_resized"; "center" for evaluation), flip, fast, dtype ("uint8", or "float32"
    normalized with mean and std), scale, ratio, image_fields, label_field, missing_label.
    Images come out (3, H, W). Augmentation draws follow (seed, epoch, index): set_epoch
    changes them; the same index in the same epoch is the same image.
    """

    def __init__(self, spec, *, seed=0, open_files=8, **options):
        super().__init__()
        remote = {k: options.pop(k) for k in list(options) if k in REMOTE_KEYS}
        unknown = set(options) - set(_INDEXED_KEYS)
        if unknown:
            raise TypeError(f"IndexedShardDataset: unknown settings {sorted(unknown)}")
        self.options = _options.check(options)
        self.seed = _options.check({"seed": seed})["seed"]
        self.epoch = 0
        self.shards = IndexedShards(spec, open_files=open_files, **remote)
        size = self.options.get("image_size", 224)
        self.height, self.width = (size, size) if isinstance(size, int) else size
        o = self.options
        self._decode = dict(crop=o.get("crop", "random_resized"), fast=o.get("fast", True),
                            flip=o.get("flip", False), layout="nchw")
        for k in ("scale", "ratio"):
            if k in o:
                self._decode[k] = o[k]
        self._fields = o.get("image_fields", "jpg;jpeg;png").split(";")
        self._label = o.get("label_field", "cls")
        self._float = o.get("dtype", "uint8") == "float32"
        self._mean = torch.tensor(o.get("mean", (0.485, 0.456, 0.406))).view(3, 1, 1)
        self._std = torch.tensor(o.get("std", (0.229, 0.224, 0.225))).view(3, 1, 1)

    def __len__(self):
        return len(self.shards)

    def set_epoch(self, epoch):
        """Augmentation draws of epoch (with DataLoader workers, call it before iterating:
        workers started after it see it)."""
        self.epoch = int(epoch)

    def raw(self, i):
        """Sample i as WebDataset's dict (field: bytes), with __index__, __shard__ and
        __shardindex__."""
        return self.shards[i]

    def __getitem__(self, i):
        d = self.shards[i]
        where = f"{d['__shard__']}: sample '{d['__key__']}'"
        data = next((d[f] for f in self._fields if f in d), None)
        if data is None:
            raise ValueError(f"{where}: no image field (looked for {';'.join(self._fields)})")
        try:
            px = _libshard.decode(data, self.width, self.height,
                                  seed=_mix(self.seed, self.epoch, d["__index__"]), **self._decode)
        except _libshard.ShardError as e:
            raise _libshard.ShardError(f"{where}: {e}") from None
        image = torch.frombuffer(bytearray(px), dtype=torch.uint8).view(3, self.height, self.width)
        if self._float:
            image = (image.float() / 255 - self._mean) / self._std
        return image, self._label_of(d, where)

    def _label_of(self, d, where):
        if not self._label:
            return -1
        v = d.get(self._label)
        text = v.strip() if v is not None else b""
        if text.isdigit():
            return int(text)
        if self.options.get("missing_label", "error") == -1:
            return -1
        what = (f"no field '{self._label}'" if v is None else
                f"label field '{self._label}' is not a decimal class index: {v[:20]!r}")
        raise ValueError(f"{where}: {what} (missing_label=-1 gives -1)")

    def remote_stats(self):
        """Counters of this process's remote reads (bytes, requests, retries, cache hits ...)."""
        return self.shards.remote_stats()
