"""libshard's pipeline under WebDataset's fluid interface: WebDataset(urls, image_size=224,
...) with libshard's own settings. Each pass over it is the next epoch (a new shard order,
shuffle buffer and crops, the same again from the same seed; set_epoch(n) makes the next
pass epoch n), read by libshard (shard shuffle, rank and worker split, a leading shuffle
buffer), and run one of two ways:

- In C, when it is the common one and asks for a crop: shuffles, then decode with one of
  "torchrgb8", "rgb8", "torchrgb", "torch", "rgb", then to_tuple(image, label, other
  fields...), then batched(n), with image_size (and crop, flip, ...) given. The batch is
  what WebDataset's collation gives: images as the decoder says (numpy for "rgb8"/"rgb",
  torch tensors for the others; floats from 0 to 1), labels a numpy int64 array, other
  fields decoded by the basic handlers.
- In Python, stage by stage as WebDataset runs them, for anything else.

Its order and its split are libshard's (the ranks' and workers' shares balanced by samples),
not WebDataset's; compat.WebDataset without libshard's settings is WebDataset's own.
"""
import copy
import itertools
import os
import warnings

import torch
import torch.utils.data

from .. import settings as _settings
from ..torch import ShardDataset
from ..torch import split
from ..torch.split import rank_world, worker
from .autodecode import Decoder, imagehandler, imagespecs
from .counters import Counts
from .filters import STAGES, combine_values, default_collation_fn
from .handlers import (ignore_and_continue, ignore_and_stop, reraise_exception,
                       warn_and_continue, warn_and_stop)
from .shardlists import single_node_only, split_by_node, split_by_worker

CONTINUING = (ignore_and_continue, warn_and_continue)

class Fluid:
    """WebDataset's fluid interface: each method returns a new pipeline with one more stage
    (the one it is called on is unchanged)."""

    stages = ()
    repetitions, nsamples, size = 1, -1, None

    def _then(self, name, *args, **kw):
        new = copy.copy(self)
        new.stages = tuple(self.stages) + ((name, args, kw),)
        return new

    def stats(self):
        """What libshard did for this pipeline, its DataLoader workers' part included, as
        DataPipeline.stats() counts it: on the C pipeline, shards_c (shards read) and
        decodes_c (images decoded), or members_c and bytes_c for raw samples."""
        from .counters import total
        return total([self])

    def _unsupported(self, what, instead):
        raise NotImplementedError(f"libshard.webdataset cannot {what}: {instead}")

    def _seed(self):
        return 0

    def shuffle(self, size, **kw):
        """A shuffle buffer of size samples (initial: how many before the first comes out)."""
        return self if size < 1 else self._then("shuffle", size, **kw)

    def decode(self, *args, pre=None, post=None, only=None, partial=False,
               handler=reraise_exception, max_decode_memory=None):
        """Decodes each field: str arguments are image specs ("pil", "rgb8", "torchrgb8",
        ...), callables handlers(key, data); then the basic handlers (txt, cls, json, ...);
        each image under max_decode_memory (limits.py)."""
        for a in args:
            if isinstance(a, str) and a not in imagespecs:
                raise ValueError(f"Unknown imagespec: {a}")
        return self._then("decode", *args, pre=pre, post=post, only=only, partial=partial,
                          handler=handler, max_decode_memory=max_decode_memory)

    def map(self, f, handler=reraise_exception):
        """f(sample) for each sample; None drops it; a dict keeps the sample's __key__."""
        return self._then("map", f, handler=handler)

    def select(self, predicate, **kw):
        """The samples for which predicate(sample) is true."""
        return self._then("select", predicate, **kw)

    def rename(self, **kw):
        """New name=old ('a;b': the first present) for fields; keep=False drops the rest."""
        return self._then("rename", **kw)

    def map_dict(self, handler=reraise_exception, **kw):
        """field=f: each field through its function."""
        return self._then("map_dict", handler=handler, **kw)

    def to_tuple(self, *args, **kw):
        """The named fields as a tuple ('jpg;png': the first present)."""
        return self._then("to_tuple", *args, **kw)

    def map_tuple(self, *args, handler=reraise_exception):
        """Each element of a tuple through the function at its position (None: kept)."""
        return self._then("map_tuple", *args, handler=handler)

    def batched(self, batchsize, collation_fn=default_collation_fn, partial=True):
        """Batches of batchsize, collated (default_collation_fn); partial: the last one
        even when short."""
        return self._then("batched", batchsize, collation_fn=collation_fn, partial=partial)

    def unbatched(self):
        """Batches back into samples."""
        return self._then("unbatched")

    def slice(self, *args):
        """itertools.islice of the stream."""
        return self._then("slice", *args)

    def with_epoch(self, nsamples=-1, nbatches=-1):
        """An epoch of exactly n items of what the pipeline yields (batches after batched),
        per worker, reading on into the next pass over the data as needed."""
        new = copy.copy(self)
        new.repetitions, new.nsamples = 1 << 62, max(nsamples, nbatches)
        return new

    def repeat(self, nepochs=-1, nbatches=-1):
        """nepochs passes (endless if not positive), at most nbatches items in all."""
        new = copy.copy(self)
        new.repetitions = nepochs if nepochs > 0 else 1 << 62
        new.nsamples = nbatches
        return new

    def with_length(self, n, silent=False):
        """len() is n (it does not change the number of samples in an epoch)."""
        if not silent:
            warnings.warn(".with_length() only sets the value of __len__ for compatibility "
                          "with some training environments. It does not change the number of "
                          "samples in an epoch.")
        new = copy.copy(self)
        new.size = int(n)
        return new

    def __len__(self):
        if self.size is None:
            raise TypeError(f"this {type(self).__name__} has no length: give one with "
                            f".with_length(n)")
        return self.size

    def rsample(self, p=0.5):
        """Each sample kept with probability p."""
        return self._then("rsample", p)

    def rename_keys(self, *args, **kw):
        """Fields renamed by glob patterns of their names."""
        return self._then("rename_keys", *args, **kw)

    def extract_keys(self, *args, **kw):
        """Tuples of the fields that match each glob pattern."""
        return self._then("extract_keys", *args, **kw)

    def xdecode(self, *args, **kw):
        """Fields decoded by glob patterns of their names (functions of a stream)."""
        return self._then("xdecode", *args, **kw)

    def log_keys(self, logfile=None):
        """Each sample's key appended to logfile."""
        return self._then("log_keys", logfile)

    def listed(self, batchsize, partial=True):
        """Lists of batchsize samples, not collated."""
        return self._then("batched", batchsize, collation_fn=None, partial=partial)

    def unlisted(self):
        """Lists back into samples."""
        return self._then("unlisted")

    def _cached(self, *a, **k):
        self._unsupported("cache a libshard pipeline's passes", "each pass is the next epoch "
                          "in libshard's order; build the pipeline without libshard's settings "
                          "to cache WebDataset's")

    mcached = lmdb_cached = _cached

    def _run(self, data, stages, epoch):
        """data through stages, in Python."""
        w = worker()[0]
        for name, args, kw in stages:
            if name == "decode":
                handlers = [imagehandler(a, max_decode_memory=kw.get("max_decode_memory"))
                            if isinstance(a, str) else a for a in args]
                dec = Decoder(handlers, pre=kw["pre"], post=kw["post"], only=kw["only"],
                              partial=kw["partial"])
                data = STAGES["map"](data, dec, handler=kw["handler"])
            elif name == "shuffle":
                kw = dict(kw)
                if "seed" not in kw and "rng" not in kw:  # from the pipeline's seed
                    kw["seed"] = hash((self._seed(), epoch, rank_world(None, None)[0], w))
                data = STAGES["shuffle"](data, *args, **kw)
            else:
                data = STAGES[name](data, *args, **kw)
        return data

    def _epoch(self, k):
        raise NotImplementedError

    def _next_pass(self):
        """The number of the pass that begins now, counted in this process."""
        self._passes_here = getattr(self, "_passes_here", -1) + 1
        return self._passes_here

    def _iterator(self):
        for _ in range(self.repetitions):
            # each pass (an iteration, or a repetition within one) is the next epoch, as
            # WebDataset reshuffles on every pass
            count = 0
            for item in self._epoch(self._next_pass()):
                yield item
                count += 1
            if count == 0:  # an empty pass: do not go round forever
                break

    def __iter__(self):
        if self.repetitions != 1 and self.nsamples > 0:
            return itertools.islice(self._iterator(), self.nsamples)
        return self._iterator()


# name: (dtype, layout, numpy) of the decoders that run in C: numpy arrays or torch tensors,
# as WebDataset's decoders give them
_FAST = {"torchrgb8": ("uint8", "nchw", False), "rgb8": ("uint8", "nhwc", True),
         "torchrgb": ("float32", "nchw", False), "torch": ("float32", "nchw", False),
         "rgb": ("float32", "nhwc", True)}

# the slots of DataLoader workers whose passes are counted (a worker id past it shares one)
_WORKER_SLOTS = 256

# the fields WebDataset's decoders take as images (PIL's extensions that libshard decodes)
_IMAGE_FIELDS = {"jpg", "jpeg", "png", "webp"}


class FastWebDataset(Fluid, torch.utils.data.IterableDataset):
    #: its C batches view libshard's buffers, reused once the next batch is asked for
    views_buffers = True

    """WebDataset(urls, handler=reraise_exception, resampled=False, repeat=False,
    shardshuffle=None, cache_dir=None, cache_size=-1, nodesplitter=single_node_only,
    workersplitter=split_by_worker, seed=None, **ShardDataset settings): an IterableDataset
    built up with WebDataset's methods.

    urls: as ShardDataset's (braces, a manifest, a list, a prefix, remote URLs, or a mix of
    (spec, weight) pairs). Each pass over the pipeline (an iteration, in each DataLoader
    worker) is the next epoch: a new shard order, shuffle and crops, the same again from the
    same seed (set_epoch sets the next pass's). shardshuffle: a number or True shuffles the
    shards each pass;
    None, False or 0 keeps their order. nodesplitter: split_by_node (each rank its share),
    single_node_only (the default: an error with more than one rank) or None (every rank
    reads everything); workersplitter: split_by_worker or None. A handler that continues
    (ignore_and_continue, warn_and_continue) skips bad shards and samples (skip_errors).
    """

    def __init__(self, urls, handler=reraise_exception, mode=None, resampled=False, repeat=False,
                 shardshuffle=None, cache_size=-1, cache_dir=None, url_to_name=None,
                 detshuffle=False, nodesplitter=single_node_only, workersplitter=split_by_worker,
                 select_files=None, rename_files=None, empty_check=True, verbose=False,
                 seed=None, **settings):
        super().__init__()
        self.counts = Counts()  # what the C pipeline did, its DataLoader workers' too
        for name in ("max_member_size", "max_sample_size"):
            if settings.get(name) is not None:
                self._unsupported(f"take {name}= with libshard's settings", "the C pipeline "
                                  "bounds a sample by memory_budget= (docs/reliability.md)")
            settings.pop(name, None)
        for name, value in (("select_files", select_files), ("rename_files", rename_files),
                            ("url_to_name", url_to_name)):
            if value is not None:
                self._unsupported(f"take {name}=", "samples keep every member of the shard; "
                                  "drop or rename fields with .map() or .rename()")
        if nodesplitter not in (split_by_node, single_node_only, None):
            self._unsupported(f"use nodesplitter={nodesplitter!r}",
                              "pass split_by_node, single_node_only or None")
        if workersplitter not in (split_by_worker, None, False):
            self._unsupported(f"use workersplitter={workersplitter!r}",
                              "pass split_by_worker or None")
        if handler in (ignore_and_stop, warn_and_stop):
            self._unsupported(f"use handler={handler.__name__}",
                              "use reraise_exception, or a handler that continues")
        self.urls = urls
        self.nodesplitter, self.workersplitter = nodesplitter, workersplitter
        self.settings = dict(settings)
        if resampled or mode == "resampled":
            self.settings["mode"] = "resampled"
        else:
            self.settings["shuffle_shards"] = bool(shardshuffle)
            if not shardshuffle:
                self.settings.setdefault("streams", 1)  # one shard after another, in order
        self._seed_drawn = seed is None
        self._seed_pending = False
        if seed is not None:
            self.settings["seed"] = seed
        elif self.settings.get("mode") != "resampled":  # one seed for every worker's plan
            drawn = int.from_bytes(os.urandom(8), "little") >> 1
            # and every rank's, where the ranks split one order (split.agreed_seed)
            agreed = split.agreed_seed(drawn) if nodesplitter is split_by_node else drawn
            self.settings["seed"] = drawn if agreed is None else agreed
            self._seed_pending = agreed is None
        if handler in CONTINUING:
            self.settings["skip_errors"] = True
        if cache_dir is not None:
            self.settings["cache_dir"] = cache_dir
            if cache_size is not None and cache_size > 0:
                self.settings["cache_size"] = int(cache_size)
        if repeat:
            self.repetitions = 1 << 62
        # the epoch of the first pass, and the passes each worker began since: in shared
        # memory, so that DataLoader workers (new processes each pass, or persistent) count
        # on from where the last pass left off, and set_epoch reaches them
        self._base_epoch = torch.zeros(1, dtype=torch.int64).share_memory_()
        self._passes = torch.zeros(_WORKER_SLOTS, dtype=torch.int64).share_memory_()
        ShardDataset(urls, **self.settings)  # checks the settings now, naming a wrong one

    def set_epoch(self, epoch):
        """The epoch of the next pass (each pass after it counts one more), in this process
        and in DataLoader workers."""
        self._base_epoch[0] = int(epoch)
        self._passes.zero_()

    def _next_pass(self):
        # each worker id begins one pass per iteration of a DataLoader: its own count is
        # the pass number, the same in every worker of the iteration
        w = worker()[0] % _WORKER_SLOTS
        k = int(self._passes[w])
        self._passes[w] = k + 1
        return k

    def _seed(self):
        return self.settings.get("seed", 0)

    def _split(self):
        if self._seed_pending:
            self.settings["seed"] = split.agreed_seed(self.settings["seed"], final=True,
                                                      who="libshard.webdataset.WebDataset")
            self._seed_pending = False
        if self.nodesplitter is None:
            rank, world = 0, 1
        else:
            rank, world = rank_world(None, None)
            if self.nodesplitter is single_node_only and world > 1:
                raise ValueError("you need to add an explicit nodesplitter to your input "
                                 "pipeline for multi-node training")
        return rank, world

    def _fast(self):
        """(settings, stages left to run in Python, to_tuple's fields): the fields are None
        unless the whole pipeline runs in C (then no stage is left); a leading shuffle
        becomes the reader's buffer either way. The C path crops and resizes, which
        WebDataset's decoders never do: it runs only when the pipeline asks for that
        (image_size given), so that without it the images are WebDataset's, whole."""
        settings, stages = dict(self.settings), list(self.stages)
        if stages and stages[0][0] == "shuffle" and not set(stages[0][2]) - {"initial"}:
            size = stages[0][1][0]
            settings["shuffle"] = int(size)
            settings["shuffle_initial"] = min(int(stages[0][2].get("initial", 100)), int(size))
            stages.pop(0)
        if [s[0] for s in stages] != ["decode", "to_tuple", "batched"] or \
                "image_size" not in self.settings:
            return settings, stages, None
        (_, dargs, dkw), (_, targs, tkw), (_, bargs, bkw) = stages
        if (len(dargs) != 1 or dargs[0] not in _FAST or dkw["pre"] or dkw["post"] or dkw["only"]
                or dkw["handler"] not in (reraise_exception,) + CONTINUING or len(targs) < 2
                or tkw or not all(isinstance(f, str) and " " not in f for f in targs)
                or not set(targs[0].split(";")) <= _IMAGE_FIELDS
                or bkw["collation_fn"] is not default_collation_fn):
            return settings, stages, None
        dtype, layout, _ = _FAST[dargs[0]]
        settings.update(dtype=dtype, layout=layout, batch_size=int(bargs[0]),
                        drop_last=not bkw["partial"], image_fields=targs[0], label_field=targs[1])
        raw = list(targs[2:])
        if dkw.get("max_decode_memory") is not None:
            settings["max_decode_memory"] = dkw["max_decode_memory"]
        if dtype == "float32":  # WebDataset's float images are 0..1, not normalized
            settings.update(mean=(0.0, 0.0, 0.0), std=(1.0, 1.0, 1.0))
        if dkw["handler"] in CONTINUING:
            settings["skip_errors"] = True
        if settings.get("skip_errors"):
            # a skipped sample's place holds a marked repeat: taken out here and the batches
            # filled from the next ones, as WebDataset's batched() fills them
            raw.append("__pad__")
            settings["drop_last"] = False
        raw.append("__url__")  # the shards read, counted in stats() (_counted)
        if raw:
            settings["raw_fields"] = ";".join(raw)
        return settings, [], targs

    def _epoch(self, k):
        rank, world = self._split()
        settings, stages, fields = self._fast()
        epoch = int(self._base_epoch[0]) + k
        if fields is None:
            ds = ShardDataset(self.urls, decode=False, rank=rank, world_size=world,
                              **{k_: v for k_, v in settings.items() if k_ in _settings.READER_KEYS})
        else:
            ds = ShardDataset(self.urls, rank=rank, world_size=world, **settings)
        ds.split_by_worker(self.workersplitter)
        ds.set_epoch(epoch)  # made in this process: its epoch is not shared with others
        if fields is None:
            return self._run(_counted_samples(iter(ds), self.counts), stages, epoch)
        batches = iter(ds)
        if settings.get("skip_errors"):
            batches = _without_repeats(batches, settings["batch_size"],
                                       self.stages[-1][2]["partial"])
        return self._as_webdataset(_counted(batches, self.counts), fields,
                                   _FAST[self.stages[-3][1][0]][2])

    @staticmethod
    def _as_webdataset(batches, fields, numpy):
        """The C batches as WebDataset's collation gives them: images a numpy array or a
        torch tensor as the decoder says, labels a numpy int64 array, other fields decoded
        by the basic handlers and combined (numbers to a numpy array, else a list)."""
        decoder = Decoder([])
        for batch in batches:
            images, labels, raw = batch if len(batch) > 2 else (*batch, {})
            extra = []
            for want in fields[2:]:
                names = [n for n in want.split(";") if n in raw]
                column = []
                for i in range(len(labels)):
                    name = next((n for n in names if raw[n][i] is not None), None)
                    if name is None:
                        raise ValueError(f"didn't find {want} in the sample's fields")
                    column.append(decoder.decode1(name, raw[name][i]))
                extra.append(combine_values(column))
            yield (images.numpy() if numpy else images, labels.numpy(), *extra)


def _counted(batches, counts):
    """The C batches with their "__url__" field taken out and counted in counts: the
    shards read (as they first come) and the images decoded, in C (stats())."""
    seen = set()
    for images, labels, raw in batches:
        raw = dict(raw)
        urls = raw.pop("__url__")
        new = set(urls) - seen
        seen |= new
        counts.add(shards_c=len(new), decodes_c=len(labels))
        yield (images, labels, raw) if raw else (images, labels)


def _counted_samples(samples, counts):
    """The C reader's samples, counted in counts as they pass: the shards read (as they first
    come), their members and bytes (stats())."""
    seen = set()
    for sample in samples:
        url = sample.get("__url__")
        fields = [v for k, v in sample.items() if not k.startswith("__")]
        counts.add(shards_c=url not in seen, members_c=len(fields),
                   bytes_c=sum(len(v) for v in fields if isinstance(v, (bytes, bytearray))))
        seen.add(url)
        yield sample


def _without_repeats(batches, size, partial):
    """The loader's batches (images, labels, raw fields with "__pad__") without the marked
    repeats that hold skipped samples' places, made up again to size from the samples after
    them, as WebDataset's batched() does after a handler skipped a sample; the last one
    short when partial. A batch with no repeat, nothing held over, passes as it is."""
    held = None  # (images, labels, raw) of samples waiting for a batch: owned copies

    def take(images, labels, raw, keep):
        return (images[keep], labels[keep],
                {n: [v for v, k in zip(vs, keep.tolist()) if k] for n, vs in raw.items()})

    def join(a, b):
        return (torch.cat([a[0], b[0]]), torch.cat([a[1], b[1]]),
                {n: a[2][n] + b[2][n] for n in a[2]})

    def cut(x, n):
        return ((x[0][:n], x[1][:n], {k: v[:n] for k, v in x[2].items()}),
                (x[0][n:], x[1][n:], {k: v[n:] for k, v in x[2].items()}))

    def shown(x):
        return (x[0], x[1], x[2]) if x[2] else (x[0], x[1])

    for images, labels, raw in batches:
        raw = dict(raw)
        pads = raw.pop("__pad__")
        if held is None and not bool(pads.any()):
            yield shown((images, labels, raw))
            continue
        got = take(images, labels, raw, ~pads)
        held = got if held is None else join(held, got)
        while held is not None and len(held[1]) >= size:
            out, held = cut(held, size)
            held = held if len(held[1]) else None  # caught up: batches pass as they are
            yield shown(out)
    if held is not None and len(held[1]) and partial:
        yield shown(held)


def owned(x):
    """x with every tensor in it copied (a batch that viewed libshard's buffers, kept)."""
    if isinstance(x, torch.Tensor):
        return x.clone()
    if isinstance(x, tuple):
        return tuple(owned(v) for v in x)
    if isinstance(x, list):
        return [owned(v) for v in x]
    if isinstance(x, dict):
        return {k: owned(v) for k, v in x.items()}
    return x


def owned_all(src):
    """Each item of src with its tensors copied (WebLoader over a FastWebDataset without
    workers: later stages keep samples while libshard reuses their buffers)."""
    for x in src:
        yield owned(x)
