"""A ShardDataset's iteration: each epoch runs a libshard Loader (a Reader with
decode=False) on this process's share of the shards, its rank's, then its DataLoader
worker's. The Loader of the last iteration goes on into the next epoch, threads and
read-ahead included, when nothing changed; with device="cuda" its batches go through the
upload ring (upload.py)."""
import os
import sys

import torch

from .. import _libshard
from .. import settings as _settings
from . import plan, skips, split
from .report import Reporter
from . import shapedupload
from .upload import Device, Upload
from .warn import warn

# raw_fields that are not fields: what each sample's batch row carries besides
SPECIAL = ("__key__", "__url__", "__source__", "__index__", "__pad__", "__bucket__")


class Epochs:
    """The running part of a dataset ds: its current source (Loader or Reader, made in
    this process), its upload ring, and the state of the last batch it handed out."""

    def __init__(self, ds):
        self.ds = ds
        self.source = self.pid = self.key = self.device = None
        self.upload = None
        self.handed_state = None  # with device="cuda": the loader runs ahead of the batches
        self.busy = False

    def __getstate__(self):
        # Pickled with the dataset for spawn-started workers: the running reader stays.
        return {"ds": self.ds, "source": None, "pid": None, "key": None, "device": None,
                "upload": None, "handed_state": None, "busy": False}

    def mine(self):
        """The source when this process made it (one inherited through fork is not)."""
        return self.source if self.source is not None and self.pid == os.getpid() else None

    def adopt(self, source):
        # one inherited through fork is let go without being freed (the extension knows it
        # was made in another process)
        self.source, self.pid = source, os.getpid()

    def iterate(self, tagged, resume, logical):
        """run(), letting go of the reader when Ctrl-C stops the iteration: its threads stop
        and the commands of pipe: shards end now, not at the process's exit (a DataLoader
        worker leaves with os._exit, which frees nothing)."""
        try:
            yield from self.run(tagged, resume, logical)
            self.note_ranges()
        except KeyboardInterrupt:
            if self.mine() is not None:
                self.source.stop()  # its threads and commands end now, batches held or not
            self.source = self.pid = self.upload = None
            raise

    def note_ranges(self):
        """Says once, at an epoch's end, that a server answered Range requests with whole
        objects (counted in remote_stats()["range_ignored"]): each seek then read an object
        from its start, more bytes than the shards hold."""
        src = self.mine()
        rs = src.remote_stats() if src is not None and hasattr(src, "remote_stats") else {}
        n = rs.get("range_ignored", 0)
        if n and not getattr(self, "ranges_said", False):
            self.ranges_said = True
            warn(f"libshard: {n} Range requests were answered with the whole object: each "
                 f"read from an offset fetched the object from its start ({rs.get('bytes', 0)} "
                 f"bytes so far); serve the shards from a server that honours Range (nginx, "
                 f"GCS, S3 do; python -m http.server does not)", RuntimeWarning)

    def run(self, tagged, resume, logical):
        """The epoch's batches (or samples); tagged (for ShardLoader): each as (item,
        (logical worker, state after it, skipped so far, worker's stats or None))."""
        ds = self.ds
        ds.skips.reset()
        if ds.decode and not tagged and batched_again():
            raise ValueError("ShardDataset yields whole batches (batch_size=... is its own): "
                             "a DataLoader that batches them again stacks them into (1, B, ...) "
                             "tensors; make it DataLoader(ds, batch_size=None, ...), or use "
                             "libshard.torch.ShardLoader(ds, num_workers=...)")
        place = plan.placement(ds, logical)
        if not place["worker"] and not (tagged and split.in_worker()):  # ShardLoader's own
            ds.warn_unequal(place["world_size"], place["num_workers"], resume)
        if not ds.decode:
            yield from self.samples(place, resume, tagged, logical)
            return
        cuda = ds.device.type == "cuda"
        in_worker = split.in_worker()
        if cuda and in_worker and not tagged:
            raise RuntimeError("ShardDataset(device='cuda') with DataLoader workers: the upload "
                               "must happen in the main process, so iterate it through "
                               "libshard.torch.ShardLoader(dataset, num_workers=...), or use "
                               "num_workers=0, where libshard's own threads decode")
        args = self.loader_args(cuda, in_worker, place)
        shaped = bool(ds.settings.get("aspect_buckets"))  # torch's copy, not the ring
        loader, device, base = self.loader(place, args, cuda and not in_worker and not shaped)
        self.handed_state = None
        if resume:
            loader.restore(resume)
        self.busy = True
        try:
            yield from self.batches_of(loader, device, cuda, tagged, in_worker, logical,
                                       args.get("trace"), base)
        finally:
            self.busy = False

    def samples(self, place, resume, tagged, logical):
        """decode=False: the raw samples of a Reader."""
        ds = self.ds
        reader = _libshard.Reader(ds.urls, epoch=ds.epoch, **place,
                                  **plan.reader_args(ds, place["world_size"]))
        self.adopt(reader)
        if resume:
            reader.restore(resume)
        skip = ds.settings.get("skip_errors")
        for sample in reader:
            if skip:
                ds.skips.note(skips.of_reader(reader.stats()), ds.epoch)
            yield (sample, (logical, reader.state(), ds.skipped, None)) if tagged else sample
        if skip:
            ds.skips.note(skips.of_reader(reader.stats()), ds.epoch, end=True)

    def loader_args(self, cuda, in_worker, place):
        """The Loader's settings for this iteration: with device="cuda", uint8 NHWC on the
        host (type and layout are made on the GPU); channels_last as NHWC; the raw fields
        without the special names; a trace per worker."""
        ds = self.ds
        names = raw_names(ds)
        args = {**ds.settings, "raw_fields": ";".join(n for n in names if n not in SPECIAL),
                "mode": plan.mode(ds, place["world_size"])}
        layout = args.pop("layout", _settings.DEFAULTS["layout"])
        if cuda:
            args.update(layout="nhwc", dtype="uint8")
        else:
            args["layout"] = "nhwc" if layout == "channels_last" else layout
        if cuda and not in_worker:
            args["batches"] = max(args.get("batches", _settings.DEFAULTS["batches"]),
                                  ds.device_buffers + 2)
        trace = args.get("trace")
        if trace is not None:
            trace = os.fspath(trace)
            if in_worker:  # one file per worker: the workers' names, and no clobbering
                root, ext = os.path.splitext(trace)
                trace = f"{root}.worker-{place['worker']}{ext}"
            args["trace"] = trace
        return args

    def loader(self, place, args, upload):
        """(Loader, Device or None, its skip counts before this epoch): the last iteration's
        when it is for the same shards, split and settings (its threads stay, and it has read
        ahead into the next epoch, so the new epoch's first batches are ready), else a new
        one; upload: its batches go to the GPU from this process."""
        ds = self.ds
        key = (repr(ds.urls), repr(sorted(place.items())), repr(sorted(args.items())), upload)
        prev = self.mine()
        if (prev is not None and isinstance(prev, _libshard.Loader) and not self.busy
                and self.key == key):
            base = dict(prev.skipped_by)  # at the end of the epoch before (the C loader's)
            if self.upload is not None:
                self.upload.stop()  # its thread takes no batch while the epoch is set
            prev.set_epoch(ds.epoch)
            return prev, self.device, base
        if self.upload is not None:  # it holds the last loader, and its device memory
            self.upload.close()
            self.upload = None
        self.source = None  # the last one's threads end before the new one's start
        del prev
        device = Device(ds.device) if upload else None
        loader = _libshard.Loader(ds.urls, epoch=ds.epoch, **place, **args,
                                  **({"gpu": device.gpu} if device is not None else {}))
        self.adopt(loader)
        self.key, self.device = key, device
        return loader, device, {}

    def batches_of(self, loader, device, cuda, tagged, in_worker, logical, trace, base):
        ds = self.ds
        names = raw_names(ds)
        keys = any(n in SPECIAL for n in names)
        if device is not None:
            if self.upload is None or not self.upload.fits(device, ds.settings,
                                                            ds.device_buffers, loader):
                self.upload = Upload(device, ds.settings, ds.device_buffers, loader,
                                     decoder=ds.decoder)
            batches = self.upload.from_loader(host=bool(names))
        elif cuda and not in_worker:  # aspect_buckets: each batch its own image size
            torch_device = shapedupload.cuda_device(ds.device)
            if (not isinstance(self.upload, shapedupload.ShapedUpload)
                    or not self.upload.fits(torch_device, ds.settings, ds.device_buffers)):
                if self.upload is not None:
                    self.upload.close()
                self.upload = shapedupload.ShapedUpload(torch_device, ds.settings,
                                                        ds.device_buffers)
            batches = self.upload.from_loader(
                (images, labels, batch, loader.state())  # the state as each was taken
                for images, labels, batch in host_batches(ds, loader, "nhwc"))
        else:
            batches = host_batches(ds, loader, "nhwc" if cuda else ds.setting("layout"))
        skip = ds.settings.get("skip_errors")

        def skipped():  # the loader counts across epochs: this one's
            return {k: v - base.get(k, 0) for k, v in loader.skipped_by.items()}

        reporter = Reporter(ds, loader) if ds.report_every else None
        unseen = [n for n in names if n not in SPECIAL]
        for images, labels, batch, *taken in batches:
            if reporter:
                reporter.tick()
            item = (images, labels)
            if names:
                fields = batch.fields
                if unseen is not None:  # the first batch: a name no sample has, said once
                    warn_unseen(unseen, fields)
                    unseen = None
                if keys:
                    fields = {n: special(batch, n) if n in SPECIAL else fields[n]
                              for n in names}
                item = (images, labels, fields)
            if skip:
                ds.skips.note(skipped(), ds.epoch)
            state = (taken[0] if taken else batch.state if device is not None
                     else loader.state())
            # the loader runs ahead of the batches handed out: the GPU's ring, the copies
            self.handed_state = state if device is not None or taken else None
            del batch
            stats = loader.stats() if tagged and in_worker else None
            yield (item, (logical, state, ds.skipped, stats)) if tagged else item
        if skip:
            ds.skips.note(skipped(), ds.epoch, end=True)
        if trace is not None:
            loader.write_trace(trace)

    def stats(self):
        """ShardDataset.stats: the running loader's (and the upload's), {} when none."""
        src = self.mine()
        if src is None or not hasattr(src, "stats"):
            return {}
        cuda = self.ds.device.type == "cuda"
        st = (self.upload.stages() if cuda and self.upload is not None else {}) or src.stats()
        up = self.upload.stats() if cuda and self.upload is not None else {}
        if up:
            st["upload"] = up
        return st


def raw_names(ds):
    raw = ds.settings.get("raw_fields")
    names = raw.split(";") if raw else []
    if ds.settings.get("aspect_buckets") and "__bucket__" not in names:
        names.append("__bucket__")  # a bucketed batch says its size
    return names


def warn_unseen(unseen, fields):
    """A raw field no sample of the first batch has, said once."""
    for n in unseen:
        if all(v is None for v in fields[n]):
            warn(f"raw_fields: no sample of the first batch has a field {n!r} (fields are "
                 f"members' extensions, lower-cased, e.g. 'jpg', 'cls', 'json'; "
                 f"{', '.join(SPECIAL)} are the samples' own)")


def batched_again():
    """Whether the caller is a DataLoader fetcher that batches what it takes (a DataLoader
    made without batch_size=None): it would stack libshard's batches into (1, B, ...)
    tensors."""
    frame = sys._getframe(1)
    for _ in range(6):  # the generators between the dataset's __iter__ and its consumer
        if frame is None:
            return False
        fetcher = frame.f_locals.get("self")
        if hasattr(fetcher, "dataset_iter") and hasattr(fetcher, "auto_collation"):
            return bool(fetcher.auto_collation)
        frame = frame.f_back
    return False


def host_batches(ds, loader, layout):
    """(images, labels, batch) in host memory: images view the loader's batch buffer,
    unless the caller keeps so many that the ring would run dry (a list(ds), outputs
    gathered for evaluation): then they are a copy, and the buffer goes back at once."""
    float32 = ds.setting("dtype") == "float32" and ds.device.type == "cpu"
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


def special(batch, name):
    """A batch's column of one of the SPECIAL names."""
    if name == "__key__":
        return list(batch.keys)
    if name == "__url__":
        return list(batch.urls)
    if name == "__source__":
        return torch.frombuffer(bytearray(batch.sources), dtype=torch.int32).long()
    if name == "__index__":
        return torch.frombuffer(bytearray(batch.indices), dtype=torch.int64)
    if name == "__bucket__":
        return batch.bucket
    return torch.frombuffer(bytearray(batch.repeats), dtype=torch.uint8).bool()
