"""ShardDataset: a torch IterableDataset of batches decoded in C (or of raw samples).

Each iteration runs a libshard Loader (a Reader with decode=False) on this process's share
of the shards: its rank's, then its DataLoader worker's. The Loader of the last iteration
goes on into the next epoch, threads and read-ahead included, when nothing changed.
"""
import os
import sys
import warnings

import torch
import torch.utils.data

from .. import _libshard
from .. import settings as _settings
from . import counts, skips, split
from .report import Reporter
from .shared import Shared
from .upload import Device, Upload

ShardSkipWarning = skips.ShardSkipWarning


class UnequalRanksWarning(UserWarning):
    """mode='exact' leaves the ranks different numbers of batches this epoch."""

# raw_fields that are not fields: what each sample's batch row carries besides
_SPECIAL = ("__key__", "__url__", "__source__", "__index__", "__pad__")


class ShardDataset(torch.utils.data.IterableDataset):
    """Batches of (images, labels) tensors, or raw sample dicts with decode=False.

    urls: a spec (path or URL, braces, a manifest, a gs:// or s3:// prefix), a list of them,
    or a mix: [(spec or list of specs, weight), ...], each source giving its weight's share of
    every epoch (README, "Mixing datasets").

    rank, world_size: this consumer's place in the job (None: torch.distributed's when it is
    initialized, else $RANK / $WORLD_SIZE). device: "cpu", "cuda" or "cuda:N" ("cuda" is
    torch.cuda.current_device(), so set_device(LOCAL_RANK) picks each rank's GPU);
    device_buffers: device buffers in the ring, the batches held plus those uploaded ahead.
    report_every (seconds; None: off) with report ("log": the libshard logger at INFO,
    "stderr", or a callable taking the report dict): the periodic report while iterating.

    The settings below, with their defaults (libshard.settings lists them all). shuffle=False
    is dataset order, for evaluation (no shard shuffle, one stream). Remote shards (http://,
    https://, gs://, s3://) take their credentials from the environment (README, "Remote
    shards"). trace: with DataLoader workers each writes PATH.worker-N.json. raw_fields: also
    a list of names, and "__key__", "__url__" (its shard), "__source__" (int64: its source's
    index in a mix), "__index__" (int64) and "__pad__" (bool) give each sample's key, shard,
    source, data-set index and padding flag; batches are then (images, labels, {name:
    [bytes or None per sample]}); a name no sample of the first batch has is warned of. dtype: also a torch dtype; "float16" and "bfloat16" with
    device="cuda", where dtype and layout are made on the GPU.
    """

    def __init__(self, urls, *, decode=True, device="cpu", rank=None, world_size=None,
                 device_buffers=_settings.DEFAULTS["device_buffers"], report_every=None,
                 report="log", **settings):
        super().__init__()
        unknown = set(settings) - set(_settings.READER_KEYS) - set(_settings.LOADER_KEYS)
        if unknown:
            raise _settings.unknown("ShardDataset", unknown, [*_settings.READER_KEYS,
                                                              *_settings.LOADER_KEYS, "decode",
                                                              "device", "rank", "world_size"])
        if settings.get("shuffle") is False:  # dataset order: for evaluation
            settings["shuffle"] = 0
            settings.setdefault("shuffle_shards", False)
            settings.setdefault("streams", 1)
        raw = settings.get("raw_fields")
        if raw is not None and not isinstance(raw, str):
            if not (isinstance(raw, (list, tuple)) and all(isinstance(n, str) for n in raw)):
                raise TypeError(f"raw_fields: a name, a ';'-separated list or a list of names, "
                                f"not {raw!r}")
            settings["raw_fields"] = ";".join(raw)
        if "mode" in settings and settings["mode"] is None:
            del settings["mode"]  # the default: chosen by the world size at iteration
        settings = _settings.check(settings)
        # a seed drawn here (none given) gives way to a state's (load_state_dict)
        self._seed_drawn = settings.get("seed") is None
        if settings.get("seed") is None and self._get(settings, "mode") != "resampled":
            settings["seed"] = int.from_bytes(os.urandom(8), "little") >> 1
        self.urls = _settings.specs(urls)
        self.decode = decode
        self.device = self._torch_device(device)
        if self.device.type == "cpu" and settings.get("dtype") in ("float16", "bfloat16"):
            raise ValueError(f"dtype {settings['dtype']!r} is made on the GPU (device='cuda'); "
                             f"on the CPU: 'uint8' or 'float32'")
        self.device_buffers = _settings.check_value("device_buffers", device_buffers)
        if report_every is not None and not report_every > 0:
            raise ValueError(f"report_every: seconds between reports, more than 0, not "
                             f"{report_every!r}")
        if not (callable(report) or report in ("log", "stderr")):
            raise ValueError(f"report: 'log', 'stderr' or a callable taking the report dict, "
                             f"not {report!r}")
        self.report_every, self.report = report_every, report
        self.rank, self.world_size = rank, world_size
        self.settings = settings
        #: whether DataLoader workers split the rank's share between them (libshard.webdataset
        #: with workersplitter=None has every worker read all of it)
        self.by_worker = True
        self.shared = Shared()
        self._resume = self._resume_epoch = None
        self._skips = skips.Skips()
        self._source = self._source_pid = self._source_key = self._source_device = None
        self._upload = None
        self._handed_state = None
        self._worker_runs_seen = 0
        self._warned_unequal = False
        self._busy = False

    @staticmethod
    def _torch_device(device):
        try:
            d = torch.device(device)
        except (RuntimeError, TypeError):
            raise ValueError(f"device: 'cpu' or 'cuda' ('cuda:N'), not {device!r}") from None
        if d.type not in ("cpu", "cuda"):
            raise ValueError(f"device: 'cpu' or 'cuda' ('cuda:N'), not {device!r}: libshard has no "
                             f"{d.type} path; leave device='cpu' and move the batches "
                             f"in the training loop")
        return d

    @staticmethod
    def _get(settings, name):
        return settings.get(name, _settings.DEFAULTS[name])

    def setting(self, name):
        """The value of the setting name in use: the one given, else its default."""
        return self._get(self.settings, name)

    @property
    def epoch(self):
        """The epoch the next iteration reads (set_epoch; workers see it too)."""
        return self.shared.epoch

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
        self.shared.epoch = epoch

    def _placement(self, worker=None):
        """Where this iteration's reader is: rank, world_size, worker, num_workers."""
        rank, world = split.rank_world(self.rank, self.world_size)
        w, workers = split.worker() if self.by_worker else (0, 1)
        return dict(rank=rank, world_size=world, worker=w if worker is None else worker,
                    num_workers=workers)

    def _mode(self, world):
        """The mode in use for world ranks: the given one, else 'equal' with several ranks
        (each the same number of batches: DDP's collectives wait on every rank)."""
        return self.settings.get("mode") or ("equal" if world > 1 else "exact")

    def _reader_args(self, world):
        args = {k: v for k, v in self.settings.items() if k in _settings.READER_KEYS}
        args["mode"] = self._mode(world)
        return args

    def _warn_unequal(self, world, worker, workers):
        """Warns once when mode='exact' leaves this epoch's ranks unequal batch counts."""
        if self._warned_unequal or world < 2 or self.settings.get("mode") != "exact" or worker:
            return
        self._warned_unequal = True
        try:
            plan = self._planner(0, world, workers)
            counts = [plan.rank_batches(self._unit(), self._drop(), rank=r) for r in range(world)]
        except (ValueError, OSError, _libshard.ShardError):
            return  # the epoch says what is wrong
        if None in counts:
            why = "shards without a sample count are dealt whole to the ranks"
        elif len(set(counts)) == 1:
            return
        else:
            most, fewest = max(counts), min(counts)
            why = (f"{counts.count(most)} rank(s) get {most} batches and "
                   f"{world - counts.count(most)} get {fewest}")
        warnings.warn(f"ShardDataset(mode='exact') with world size {world}: {why}; a DDP job "
                      f"waits forever for the ranks that have finished. mode='equal' (the "
                      f"default with several ranks) gives every rank the same count",
                      UnequalRanksWarning, stacklevel=4)

    def _unit(self):
        """What a step delivers: batch_size samples, or one with decode=False."""
        return self.setting("batch_size") if self.decode else 1

    def _drop(self):
        return bool(self.settings.get("drop_last")) if self.decode else False

    def _planner(self, rank, world, workers, make_indexes=None, epoch=None):
        """A Reader of an epoch's order (None: the next iteration's) for the first worker
        of rank `rank` that reads nothing (until iterated): for counts and states."""
        args = self._reader_args(world)
        if make_indexes:
            args["make_indexes"] = make_indexes
        return _libshard.Reader(self.urls, epoch=self.epoch if epoch is None else epoch,
                                rank=rank, world_size=world, worker=0, num_workers=workers,
                                queue_depth=1, **args)

    def _adopt(self, source):
        # one inherited through fork is let go without being freed (the extension knows it
        # was made in another process)
        self._source, self._source_pid = source, os.getpid()

    def __iter__(self):
        return self._iterate(tagged=False)

    def _iterate(self, tagged):
        """_iterate_open, letting go of the reader when Ctrl-C stops the iteration: its
        threads stop and the commands of pipe: shards end now, not at the process's exit
        (a DataLoader worker leaves with os._exit, which frees nothing)."""
        try:
            yield from self._iterate_open(tagged)
        except KeyboardInterrupt:
            if self._source is not None and self._source_pid == os.getpid():
                self._source.stop()  # its threads and commands end now, batches held or not
            self._source = self._source_pid = self._upload = None
            raise

    @staticmethod
    def _batched_again():
        """Whether the caller is a DataLoader fetcher that batches what it takes (a
        DataLoader made without batch_size=None): it would stack libshard's batches into
        (1, B, ...) tensors."""
        frame = sys._getframe(2)  # _iterate; then its consumer, when a fetcher takes from it
        for _ in range(2):
            if frame is None:
                return False
            fetcher = frame.f_locals.get("self")
            if hasattr(fetcher, "dataset_iter") and hasattr(fetcher, "auto_collation"):
                return bool(fetcher.auto_collation)
            frame = frame.f_back
        return False

    def _iterate_open(self, tagged):
        """The epoch's batches (or samples); tagged (for ShardLoader): each as (item,
        (logical worker, state after it, skipped so far, worker's stats or None))."""
        if split.in_worker():
            self.shared.mark_in_workers()
        else:
            self._worker_runs_seen = self.shared.worker_runs
        logical, resume = self.shared.plan(*split.worker()) if tagged else (None, None)
        if not tagged and self._resume and self._resume_epoch == self.epoch:
            resume = self._resume
        self._resume = self._resume_epoch = None
        self._skips.reset()
        if self.decode and not tagged and self._batched_again():
            raise ValueError("ShardDataset yields whole batches (batch_size=... is its own): "
                             "a DataLoader that batches them again stacks them into (1, B, ...) "
                             "tensors; make it DataLoader(ds, batch_size=None, ...), or use "
                             "libshard.torch.ShardLoader(ds, num_workers=...)")
        place = self._placement(logical)
        self._warn_unequal(place["world_size"], place["worker"], place["num_workers"])
        if not self.decode:
            yield from self._samples(place, resume, tagged, logical)
            return
        cuda = self.device.type == "cuda"
        in_worker = split.in_worker()
        if cuda and in_worker and not tagged:
            raise RuntimeError("ShardDataset(device='cuda') with DataLoader workers: the upload "
                               "must happen in the main process, so iterate it through "
                               "libshard.torch.ShardLoader(dataset, num_workers=...), or use "
                               "num_workers=0, where libshard's own threads decode")
        args = self._loader_args(cuda, in_worker, place)
        loader, device, base = self._loader(place, args, cuda and not in_worker)
        self._handed_state = None
        if resume:
            loader.restore(resume)
        self._busy = True
        try:
            yield from self._batches_of(loader, device, cuda, tagged, in_worker, logical,
                                        args.get("trace"), base)
        finally:
            self._busy = False

    def _samples(self, place, resume, tagged, logical):
        """decode=False: the raw samples of a Reader."""
        reader = _libshard.Reader(self.urls, epoch=self.epoch, **place,
                                   **self._reader_args(place["world_size"]))
        self._adopt(reader)
        if resume:
            reader.restore(resume)
        skip = self.settings.get("skip_errors")
        for sample in reader:
            if skip:
                self._skips.note(skips.of_reader(reader.stats()), self.epoch)
            yield (sample, (logical, reader.state(), self.skipped, None)) if tagged else sample
        if skip:
            self._skips.note(skips.of_reader(reader.stats()), self.epoch, end=True)

    def _loader_args(self, cuda, in_worker, place):
        """The Loader's settings for this iteration: with device="cuda", uint8 NHWC on the
        host (type and layout are made on the GPU); channels_last as NHWC; the raw fields
        without the special names; a trace per worker."""
        names = self._raw_names()
        args = {**self.settings, "raw_fields": ";".join(n for n in names if n not in _SPECIAL),
                "mode": self._mode(place["world_size"])}
        layout = args.pop("layout", _settings.DEFAULTS["layout"])
        if cuda:
            args.update(layout="nhwc", dtype="uint8")
        else:
            args["layout"] = "nhwc" if layout == "channels_last" else layout
        if cuda and not in_worker:
            args["batches"] = max(self._get(args, "batches"), self.device_buffers + 2)
        trace = args.get("trace")
        if trace is not None:
            trace = os.fspath(trace)
            if in_worker:  # one file per worker: the workers' names, and no clobbering
                root, ext = os.path.splitext(trace)
                trace = f"{root}.worker-{place['worker']}{ext}"
            args["trace"] = trace
        return args

    def _raw_names(self):
        raw = self.settings.get("raw_fields")
        return raw.split(";") if raw else []

    def _loader(self, place, args, upload):
        """(Loader, Device or None, its skip counts before this epoch): the last iteration's
        when it is for the same shards, split and settings (its threads stay, and it has read
        ahead into the next epoch, so the new epoch's first batches are ready), else a new
        one; upload: its batches go to the GPU from this process."""
        key = (repr(self.urls), repr(sorted(place.items())), repr(sorted(args.items())), upload)
        prev = self._source
        if (prev is not None and isinstance(prev, _libshard.Loader) and not self._busy
                and self._source_pid == os.getpid() and self._source_key == key):
            base = dict(prev.skipped_by)  # at the end of the epoch before (the C loader's)
            if self._upload is not None:
                self._upload.stop()  # its thread takes no batch while the epoch is set
            prev.set_epoch(self.epoch)
            return prev, self._source_device, base
        if self._upload is not None:  # it holds the last loader, and its device memory
            self._upload.close()
            self._upload = None
        self._source = None  # the last one's threads end before the new one's start
        del prev
        device = Device(self.device) if upload else None
        loader = _libshard.Loader(self.urls, epoch=self.epoch, **place, **args,
                                  **({"gpu": device.gpu} if device is not None else {}))
        self._adopt(loader)
        self._source_key, self._source_device = key, device
        return loader, device, {}

    def _batches_of(self, loader, device, cuda, tagged, in_worker, logical, trace, base):
        names = self._raw_names()
        keys = any(n in _SPECIAL for n in names)
        if device is not None:
            if self._upload is None or not self._upload.fits(device, self.settings,
                                                              self.device_buffers, loader):
                self._upload = Upload(device, self.settings, self.device_buffers, loader)
            batches = self._upload.from_loader(host=bool(names))
        else:
            batches = self._host_batches(loader, "nhwc" if cuda else self.setting("layout"))
        skip = self.settings.get("skip_errors")

        def skipped():  # the loader counts across epochs: this one's
            return {k: v - base.get(k, 0) for k, v in loader.skipped_by.items()}

        reporter = Reporter(self, loader) if self.report_every else None
        unseen = [n for n in names if n not in _SPECIAL]
        for images, labels, batch in batches:
            if reporter:
                reporter.tick()
            item = (images, labels)
            if names:
                fields = batch.fields
                if unseen is not None:  # the first batch: a name no sample has, said once
                    for n in unseen:
                        if all(v is None for v in fields[n]):
                            warnings.warn(f"raw_fields: no sample of the first batch has a field "
                                          f"{n!r} (fields are members' extensions, lower-cased, "
                                          f"e.g. 'jpg', 'cls', 'json'; {', '.join(_SPECIAL)} "
                                          f"are the samples' own)", stacklevel=2)
                    unseen = None
                if keys:
                    fields = {n: self._special(batch, n) if n in _SPECIAL else fields[n]
                              for n in names}
                item = (images, labels, fields)
            if skip:
                self._skips.note(skipped(), self.epoch)
            state = batch.state if device is not None else loader.state()
            self._handed_state = state if device is not None else None
            del batch
            stats = loader.stats() if tagged and in_worker else None
            yield (item, (logical, state, self.skipped, stats)) if tagged else item
        if skip:
            self._skips.note(skipped(), self.epoch, end=True)
        if trace is not None:
            loader.write_trace(trace)

    def _host_batches(self, loader, layout):
        """(images, labels, batch) in host memory: images view the loader's batch buffer,
        unless the caller keeps so many that the ring would run dry (a list(ds), outputs
        gathered for evaluation): then they are a copy, and the buffer goes back at once."""
        float32 = self.setting("dtype") == "float32" and self.device.type == "cpu"
        it = iter(loader)
        while (batch := next(it, None)) is not None:
            images = torch.frombuffer(batch, dtype=torch.float32 if float32 else torch.uint8)
            images = images.view(memoryview(batch).shape)
            held, ring = loader.held
            if held >= ring - 1:  # the producer would be left one buffer, then none
                images = images.clone()
            if layout == "channels_last":
                images = images.permute(0, 3, 1, 2)
            labels = torch.frombuffer(bytearray(batch.labels), dtype=torch.int64)
            yield images, labels, batch
            batch = images = labels = None  # the buffer is the caller's to keep, not ours

    @staticmethod
    def _special(batch, name):
        if name == "__key__":
            return list(batch.keys)
        if name == "__url__":
            return list(batch.urls)
        if name == "__source__":
            return torch.frombuffer(bytearray(batch.sources), dtype=torch.int32).long()
        if name == "__index__":
            return torch.frombuffer(bytearray(batch.indices), dtype=torch.int64)
        return torch.frombuffer(bytearray(batch.repeats), dtype=torch.uint8).bool()

    def gpu_stats(self):
        """The upload's counters for this process's current or last iteration with
        device="cuda" (num_workers=0; ShardLoader.gpu_stats with workers): batches, bytes,
        copy_seconds and finish_seconds (GPU time on the copy stream), upload_gbps,
        wait_seconds (time the training loop waited for a batch), in_flight and
        max_in_flight (device buffers uploading, uploaded ahead or held), buffers."""
        return self._upload.stats() if self._upload is not None else {}

    @property
    def skipped(self):
        """What skip_errors left out in this process's current or last iteration: samples
        by reason (image: did not decode, no_image, label: missing or not a class index),
        shards skipped after errors and the samples lost with them (shard_samples), and
        the samples' total. With DataLoader workers, ShardLoader.skipped sums the workers'."""
        return self._skips.get()

    def __len__(self):
        """Batches per epoch for this rank (samples with decode=False); needs sample counts.

        Each DataLoader worker takes whole partitions and ends on its own partial batch, so
        the count is for the workers of the DataLoader that asks (ShardLoader, or a
        DataLoader's len()); asked directly, for num_workers=0. len_for(workers) says it for
        any.
        """
        return self.len_for(self._asking_workers())

    @staticmethod
    def _asking_workers():
        """The num_workers of the DataLoader whose len() asks (1 when none does)."""
        frame = sys._getframe(2)
        for _ in range(3):
            if frame is None:
                break
            loader = frame.f_locals.get("self")
            if isinstance(loader, torch.utils.data.DataLoader):
                return max(1, loader.num_workers)
            frame = frame.f_back
        return 1

    def len_for(self, workers):
        """Batches per epoch for this rank read by `workers` DataLoader workers (1 for
        num_workers=0); samples with decode=False."""
        rank, world = split.rank_world(self.rank, self.world_size)
        make = None if self.settings.get("make_indexes") == "never" else "always"
        r = self._planner(rank, world, max(1, int(workers)), make)  # plain tars: counted once
        n = r.rank_batches(self._unit(), self._drop())
        del r
        if n is None:
            raise counts.no_count(self.urls, self.settings)
        missing = counts.missing_shard(self.urls, self.settings)
        if missing:  # a manifest counts it, but the epoch would fail at it
            raise FileNotFoundError(f"len(): shard {missing} does not exist"
                                    f"{counts.moved_hint(self.urls)}")
        return n

    def __getstate__(self):
        # Pickled for spawn-started workers: the running reader stays behind.
        state = dict(self.__dict__)
        state.update(_source=None, _source_pid=None, _upload=None, _source_device=None,
                     _busy=False)
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
        cuda = self.device.type == "cuda"
        st = (self._upload.stages() if cuda and self._upload is not None else {}) or src.stats()
        up = self.gpu_stats() if cuda else {}
        if up:
            st["upload"] = up
        return st

    def remote_stats(self):
        """Counters of this process's remote reads for the current iteration (bytes,
        requests, retries, resumes, cache hits ...); {} before the first."""
        return self._source.remote_stats() if self._source is not None else {}

    def state_dict(self):
        """Where iteration stands (num_workers=0): {"epoch", "seed", "state"}, the job's
        state (formats/order.md), the same on every rank in step; load_state_dict on any
        number of ranks continues it (ShardLoader.load_state_dict too, with workers). With
        DataLoader workers the position lives in the workers: use ShardLoader, whose
        state_dict covers them."""
        seed = self.settings.get("seed")
        if self.shared.worker_runs != self._worker_runs_seen:
            raise RuntimeError(
                "ShardDataset.state_dict(): this dataset was last iterated in DataLoader worker "
                "processes, whose positions this process cannot see; iterate it through "
                "libshard.torch.ShardLoader(dataset, num_workers=...) and take "
                "loader.state_dict() instead")
        if self._handed_state is not None and self._source_pid == os.getpid():
            # with device="cuda" the loader runs ahead of the batches handed out
            return {"epoch": self.epoch, "state": self._handed_state, "seed": seed}
        if self._source is None or self._source_pid != os.getpid():
            return {"epoch": self.epoch, "state": None, "seed": seed}
        return {"epoch": self.epoch, "state": self._source.state(), "seed": seed}

    def take_seed(self, state):
        """A state's seed, for a resume: taken when this dataset drew its own (made without
        seed=, as in a new process), refused when it was given another."""
        seed = state.get("seed")
        if seed is None or seed == self.settings.get("seed"):
            return
        if not self._seed_drawn:
            raise ValueError(f"the state was taken with seed {seed}, this dataset was given "
                             f"seed={self.settings.get('seed')} (make it without seed= to take "
                             f"the state's)")
        self.settings["seed"] = seed

    def load_state_dict(self, state):
        """Continue, on the next iteration, after the last batch the state was taken at (by
        this dataset or a ShardLoader, on any number of ranks and workers). A dataset made
        without seed= takes the state's seed."""
        if "workers" in state or "states" in state:
            raise ValueError(f"this state was taken by libshard 0.3's ShardLoader, in the order "
                             f"before canonical partitions, which this libshard reads "
                             f"differently: go on from the next epoch's start, "
                             f"set_epoch({int(state['epoch']) + 1}), with no state")
        self.take_seed(state)
        self.shared.epoch = int(state["epoch"])
        self._resume = state["state"]
        self._resume_epoch = int(state["epoch"])


ShardDataset.__doc__ += f"""
    Reader settings:
{_settings.doc(_settings.READER_KEYS)}

    Batch settings:
{_settings.doc(_settings.LOADER_KEYS)}
"""
