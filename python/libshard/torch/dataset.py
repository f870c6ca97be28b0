"""ShardDataset: a torch IterableDataset of batches decoded in C (or of raw samples).

The class holds the settings and the public calls; its concerns live beside it, as the C
side's do: planning (plan.py: placement, modes, len), iteration (epochs.py: the Loader of
each epoch, the upload), and the position as a state (state.py).
"""
import os
import sys

import torch
import torch.utils.data

from .. import settings as _settings
from .. import hublist
from . import plan, skips, split, state as _state
from .epochs import Epochs
from .plan import UnequalRanksWarning
from .shared import Shared

ShardSkipWarning = skips.ShardSkipWarning
__all__ = ["ShardDataset", "ShardSkipWarning", "UnequalRanksWarning"]


class ShardDataset(torch.utils.data.IterableDataset):
    """Batches of (images, labels) tensors, or raw sample dicts with decode=False.

    urls: a spec (path or URL, braces, a manifest, a gs:// or s3:// prefix), a list of them,
    or a mix: [(spec or list of specs, weight), ...], each source giving its weight's share of
    every epoch (docs/mixing.md).

    rank, world_size: this consumer's place in the job (None: torch.distributed's when it is
    initialized, else $RANK / $WORLD_SIZE). device: "cpu", "cuda" or "cuda:N" ("cuda" is
    torch.cuda.current_device(), so set_device(LOCAL_RANK) picks each rank's GPU);
    device_buffers: device buffers in the ring, the batches held plus those uploaded ahead.
    decoder (device="cuda"): who decodes the JPEGs: "auto" (the CPU threads and the GPU's
    JPEG decoder, nvJPEG, split by their measured throughput as it runs; the CPU alone, with
    a warning saying why, where the GPU's decoder cannot start), "cpu", or "gpu" (every
    JPEG the GPU takes; progressive, CMYK, 4:4:0 and other images go to the CPU). The order,
    the crops and resume are the same whichever decodes; gpu_stats() says how many went
    where and why.
    report_every (seconds; None: off) with report ("log": the libshard logger at INFO,
    "stderr", or a callable taking the report dict): the periodic report while iterating.

    The settings below, with their defaults (libshard.settings lists them all). shuffle=False
    is dataset order, for evaluation (no shard shuffle, one stream). Remote shards (http://,
    https://, gs://, s3://) take their credentials from the environment (docs/remote.md). trace: with DataLoader workers each writes PATH.worker-N.json. raw_fields: also
    a list of names, and "__key__", "__url__" (its shard), "__source__" (int64: its source's
    index in a mix), "__index__" (int64) and "__pad__" (bool) give each sample's key, shard,
    source, data-set index and padding flag; batches are then (images, labels, {name:
    [bytes or None per sample]}); a name no sample of the first batch has is warned of. dtype: also a torch dtype; "float16" and "bfloat16" with
    device="cuda", where dtype and layout are made on the GPU.
    """

    def __init__(self, urls, *, decode=True, device="cpu", rank=None, world_size=None,
                 device_buffers=_settings.DEFAULTS["device_buffers"], report_every=None,
                 report="log", decoder="auto", **settings):
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
        if "keys" in settings:
            settings["keys"] = _settings.key_file(settings["keys"])
        if "mode" in settings and settings["mode"] is None:
            del settings["mode"]  # the default: chosen by the world size at iteration
        settings = _settings.check(settings)
        # a seed drawn here (none given) gives way to a state's (load_state_dict); on several
        # ranks, rank 0's (split.agreed_seed): now when the process group is up, else before
        # the first iteration
        self.seed_drawn = settings.get("seed") is None
        self.seed_pending = False
        self.mode_taken = False  # from a state (load_state_dict), the dataset made without
        if settings.get("seed") is None and settings.get("mode", _settings.DEFAULTS["mode"]) != "resampled":
            drawn = int.from_bytes(os.urandom(8), "little") >> 1
            agreed = split.agreed_seed(drawn, rank, world_size)
            settings["seed"] = drawn if agreed is None else agreed
            self.seed_pending = agreed is None
        # an hf:// folder listed once for the job: its manifest is what every process reads
        self.urls = hublist.listed_once(_settings.specs(urls), {
            k: v for k, v in settings.items() if k in _settings.REMOTE_KEYS})
        self.decode = decode
        self.device = self._torch_device(device)
        if self.device.type == "cpu" and settings.get("dtype") in ("float16", "bfloat16"):
            raise ValueError(f"dtype {settings['dtype']!r} is made on the GPU (device='cuda'); "
                             f"on the CPU: 'uint8' or 'float32'")
        self.device_buffers = _settings.check_value("device_buffers", device_buffers)
        if decoder not in ("auto", "cpu", "gpu"):
            raise ValueError(f"decoder: 'auto', 'cpu' or 'gpu', not {decoder!r}")
        if decoder == "gpu" and settings.get("aspect_buckets"):
            raise ValueError("decoder='gpu' with aspect_buckets: the GPU's JPEG decoder fills "
                             "batches of one image size; bucketed batches decode on the CPU "
                             "(decoder='auto' or 'cpu') and go to the GPU by torch's pinned "
                             "copy")
        if decoder == "gpu" and self.device.type != "cuda":
            raise ValueError("decoder='gpu' decodes on the GPU: it needs device='cuda'")
        self.decoder = decoder
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
        #: (epoch, state) the next or running iteration of that epoch begins from (state
        #: None: its start): what len() counts from
        self.started = None
        self.skips = skips.Skips()
        self.epochs = Epochs(self)
        self.worker_runs_seen = 0
        self.warned_unequal = False
        self.keys_said = False

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

    def setting(self, name):
        """The value of the setting name in use: the one given, else its default."""
        return self.settings.get(name, _settings.DEFAULTS[name])

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
        if self.started is not None and self.started[0] != epoch:
            self.started = None
        self.shared.set_epoch(epoch)

    def __iter__(self):
        return self._iterate(tagged=False)

    def agree_seed(self):
        """The drawn seed made the job's (rank 0's) where the process group came up after the
        dataset was made; refused, naming seed=, where the ranks cannot agree."""
        if self.seed_pending:
            self.settings["seed"] = split.agreed_seed(self.settings["seed"], self.rank,
                                                      self.world_size, final=True)
            self.seed_pending = False

    def _iterate(self, tagged):
        """This process's epoch (tagged: for ShardLoader, each item with its worker and
        state), from a restored position when there is one for this epoch."""
        self.agree_seed()  # in a DataLoader worker: refused, when the main process did not
        if split.in_worker():
            self.shared.mark_in_workers()
        else:
            self.worker_runs_seen = self.shared.worker_runs
        logical, resume = self.shared.plan(*split.worker()) if tagged else (None, None)
        if not tagged and self._resume and self._resume_epoch == self.epoch:
            resume = self._resume
        if not tagged and not split.in_worker():
            self.started = (self.epoch, resume)
        self._resume = self._resume_epoch = None
        return self.epochs.iterate(tagged, resume, logical)

    def batch_keys(self, epoch, step, rank=None):
        """Which samples were in step `step` of epoch `epoch` (steps from the epoch's start,
        as this dataset iterated without DataLoader workers delivers them; ShardLoader's own
        counts its workers): a dict per sample, in batch order (__key__, __url__, index:
        the sample's number in its shard, rank, worker, step, slot, position, pad: equal
        mode's repeat), from the manifests and indexes alone, no sample byte read; an epoch
        resumed (load_state_dict) on other ranks and workers is named across its topologies,
        steps from the epoch's start. rank:
        None for this rank, "all" for every rank's, else that rank. A step past the
        epoch's end, or a rank not below the world size, is a ValueError naming the last
        step or the world size. With skip_errors, the planned samples."""
        return plan.batch_keys(self, 1, self._began(epoch), epoch, step, rank)

    def where_is(self, key, epoch):
        """Every (step, rank, slot) of key in epoch `epoch`, as batch_keys' dicts;
        libshard.ShardNotFoundError "not in epoch E" when it is in none. Names the whole epoch (its cost is stated in
        bench/RESULTS.md)."""
        return plan.where_is(self, 1, self._began(epoch), key, epoch)

    def _began(self, epoch):
        """The state epoch `epoch` resumed from here (load_state_dict), or None."""
        if self._resume and self._resume_epoch == epoch:
            return self._resume
        if self.started is not None and self.started[0] == epoch:
            return self.started[1]
        return None

    def gpu_stats(self):
        """The upload's counters for this process's current or last iteration with
        device="cuda" (num_workers=0; ShardLoader.gpu_stats with workers): batches, bytes,
        copy_seconds and finish_seconds (GPU time on the copy stream), upload_gbps,
        wait_seconds (time the training loop waited for a batch), in_flight and
        max_in_flight (device buffers uploading, uploaded ahead or held), buffers."""
        up = self.epochs.upload
        return up.stats() if up is not None else {}

    @property
    def skipped(self):
        """What skip_errors left out in this process's current or last iteration: samples
        by reason (image: did not decode, no_image, label: missing or not a class index,
        no_size: no image size beside the index, with aspect_buckets),
        shards skipped after errors and the samples lost with them (shard_samples), and
        the samples' total. With DataLoader workers, ShardLoader.skipped sums the workers'."""
        return self.skips.get()

    def __len__(self):
        """Batches per epoch for this rank (samples with decode=False); needs sample counts.
        After load_state_dict, those left from the state on: what the resumed iteration
        delivers.

        Each DataLoader worker ends on its own partial batch, so the count is for the workers
        of the DataLoader that asks (ShardLoader, or a DataLoader's len()); asked directly,
        for num_workers=0. len_for(workers) says it for any.
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
        return plan.batches_per_epoch(self, workers)

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
        return self.epochs.stats()

    def remote_stats(self):
        """Counters of this process's remote reads for the current iteration (bytes,
        requests, retries, resumes, cache hits ...); {} before the first."""
        src = self.epochs.source
        return src.remote_stats() if src is not None else {}

    def state_dict(self):
        """Where iteration stands (num_workers=0): {"epoch", "seed", "state"}, the job's
        state (formats/order.md), the same on every rank in step; load_state_dict on any
        number of ranks continues it (ShardLoader.load_state_dict too, with workers). With
        DataLoader workers the position lives in the workers: use ShardLoader, whose
        state_dict covers them."""
        self.agree_seed()
        return _state.of_dataset(self, self.epochs)

    def take_state(self, state, text):
        """A state's seed and mode, for a resume (state.py says when it takes which); what
        give_back_state needs to undo it, when the state is refused after."""
        undo = (dict(self.settings), self.seed_pending, self.mode_taken)
        seed = _state.seed_to_take(state, self.settings, self.seed_drawn)
        if seed is not None:
            self.settings["seed"] = seed
            self.seed_pending = False  # every rank takes it from the same state
        mode = _state.mode_to_take(text, self.settings)
        if mode is not None:
            self.settings["mode"] = mode
            self.mode_taken = True
        return undo

    def give_back_state(self, undo):
        """The seed and mode as they were before take_state."""
        settings, self.seed_pending, self.mode_taken = undo
        self.settings.clear()
        self.settings.update(settings)

    def begin_at(self, epoch, state):
        """The next iteration reads epoch, from state (None: its start), in every process."""
        self.shared.set_epoch(epoch)
        self.started = (epoch, state)

    def note_start(self, state):
        """The running iteration of this epoch began from state (None: its start)."""
        self.started = (self.epoch, state)

    def warn_unequal(self, world, workers, resume=None):
        """plan.warn_unequal, asked once per dataset."""
        if not self.warned_unequal and world >= 2 and self.settings.get("mode") == "exact":
            self.warned_unequal = True
            plan.warn_unequal(self, world, workers, resume)

    def warn_keys(self, reader):
        """plan.warn_keys, said once per dataset (every planner finds the same)."""
        if not self.keys_said:
            self.keys_said = True
            plan.warn_keys(reader)

    def split_by_worker(self, by_worker):
        """Whether DataLoader workers split the rank's share between them (True) or each
        reads all of it."""
        self.by_worker = bool(by_worker)

    def load_state_dict(self, state):
        """Continue, on the next iteration, after the last batch the state was taken at (by
        this dataset or a ShardLoader, on any number of ranks and workers). A dataset made
        without seed= takes the state's seed, and one made without mode= the state's mode
        (its default follows the world size, which a resume may change). Anything but a libshard state, and a state of
        other settings, is refused here, naming what differs."""
        epoch, text = _state.check(state, "ShardDataset")
        undo = self.take_state(state, text)
        if text:
            rank, world = split.rank_world(self.rank, self.world_size)
            try:  # refused now, naming what differs, rather than at the first batch
                plan.planner(self, rank, world, 1, epoch=epoch).restore(text)
            except BaseException:
                self.give_back_state(undo)
                raise
        self._resume = text
        self._resume_epoch = epoch
        self.begin_at(epoch, text)


ShardDataset.__doc__ += f"""
    Reader settings:
{_settings.doc(_settings.READER_KEYS)}

    Batch settings:
{_settings.doc(_settings.LOADER_KEYS)}
"""
ShardDataset.__init__.__signature__ = _settings.signature(
    ShardDataset.__init__, _settings.DATASET_KEYS)
