"""WebDataset, WebLoader and RandomMix: pipelines read by libshard, run in C where the
pipeline allows (see the package's documentation) and stage by stage in Python otherwise."""
import copy
import os

import torch
import torch.utils.data

from .. import settings as _settings
from ..torch import ShardDataset
from ..torch.split import rank_world, worker
from .autodecode import Decoder
from .filters import combine_values, default_collation_fn
from .fluid import Fluid
from .handlers import (CONTINUING, ignore_and_stop, reraise_exception, warn_and_stop)
from .splitters import single_node_only, split_by_node, split_by_worker


# name: (dtype, layout, numpy) of the decoders that run in C: numpy arrays or torch tensors,
# as WebDataset's decoders give them
_FAST = {"torchrgb8": ("uint8", "nchw", False), "rgb8": ("uint8", "nhwc", True),
         "torchrgb": ("float32", "nchw", False), "torch": ("float32", "nchw", False),
         "rgb": ("float32", "nhwc", True)}

# the slots of DataLoader workers whose passes are counted (a worker id past it shares one)
_WORKER_SLOTS = 256

# the fields WebDataset's decoders take as images (PIL's extensions that libshard decodes)
_IMAGE_FIELDS = {"jpg", "jpeg", "png", "webp"}


class WebDataset(Fluid, torch.utils.data.IterableDataset):
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
        if seed is not None:
            self.settings["seed"] = seed
        elif self.settings.get("mode") != "resampled":  # one seed for every worker's plan
            self.settings["seed"] = int.from_bytes(os.urandom(8), "little") >> 1
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
        if dtype == "float32":  # WebDataset's float images are 0..1, not normalized
            settings.update(mean=(0.0, 0.0, 0.0), std=(1.0, 1.0, 1.0))
        if dkw["handler"] in CONTINUING:
            settings["skip_errors"] = True
        if len(targs) > 2:
            settings["raw_fields"] = ";".join(targs[2:])
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
        ds.by_worker = bool(self.workersplitter)
        ds.set_epoch(epoch)  # made in this process: its epoch is not shared with others
        if fields is None:
            return self._run(iter(ds), stages, epoch)
        return self._as_webdataset(ds, fields, _FAST[self.stages[-3][1][0]][2])

    @staticmethod
    def _as_webdataset(ds, fields, numpy):
        """The C batches as WebDataset's collation gives them: images a numpy array or a
        torch tensor as the decoder says, labels a numpy int64 array, other fields decoded
        by the basic handlers and combined (numbers to a numpy array, else a list)."""
        decoder = Decoder([])
        for batch in ds:
            images, labels, raw = batch if len(fields) > 2 else (*batch, {})
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


class WebLoader(Fluid, torch.utils.data.IterableDataset):
    """WebLoader(*DataLoader arguments): a DataLoader with the fluid interface, whose stages
    run in the main process on what the loader yields (e.g. .unbatched().shuffle(1000)
    .batched(64) to mix the workers' batches)."""

    def __init__(self, *args, **kw):
        super().__init__()
        self.loader = torch.utils.data.DataLoader(*args, **kw)

    def _epoch(self, k):
        data = iter(self.loader)
        if self.stages and self.loader.num_workers == 0:
            # batches straight from libshard's buffers: copies, as later stages keep them
            data = (_owned(x) for x in data)
        return self._run(data, self.stages, k)


def _owned(x):
    if isinstance(x, torch.Tensor):
        return x.clone()
    if isinstance(x, tuple):
        return tuple(_owned(v) for v in x)
    if isinstance(x, list):
        return [_owned(v) for v in x]
    if isinstance(x, dict):
        return {k: _owned(v) for k, v in x.items()}
    return x


class RandomMix(torch.utils.data.IterableDataset):
    """RandomMix(datasets, probs=None): samples of WebDatasets that differ only in their
    urls, mixed by probs (default equal) through libshard's weighted mixing: each epoch has
    the sources' sizes summed, each source exactly its share (a small one repeated, a large
    one a different part each epoch), interleaved at random from the seed. WebDataset's
    RandomMix draws each sample's source at random and stops at the first source to run
    out; longest=True (go on until all have) has no counterpart and raises."""

    def __init__(self, datasets, probs=None, longest=False):
        super().__init__()
        if longest:
            raise NotImplementedError("libshard.webdataset cannot mix with longest=True: an "
                                      "epoch of a mix holds each source's share, repeating a "
                                      "small source; size it with epoch_samples")
        datasets = list(datasets)
        probs = [1.0] * len(datasets) if probs is None else [float(p) for p in probs]
        if not datasets or len(probs) != len(datasets):
            raise ValueError("RandomMix: one probability per dataset")
        first = datasets[0]
        # a seed a pipeline drew for itself is not a difference: the mix takes the seed one
        # of them was given, else the first one's
        drawn = any(getattr(d, "_seed_drawn", False) for d in datasets)
        given = [d for d in datasets if isinstance(d, WebDataset) and not d._seed_drawn]

        def compared(d):
            settings = {k: v for k, v in d.settings.items() if not (k == "seed" and drawn)}
            return (d.stages, settings, d.nodesplitter, d.workersplitter, d.repetitions,
                    d.nsamples)

        for d in datasets:
            if not isinstance(d, WebDataset):
                raise NotImplementedError(f"libshard.webdataset cannot mix a {type(d).__name__}: "
                                          f"mix libshard.webdataset.WebDataset pipelines")
            if compared(d) != compared(first):
                raise NotImplementedError("libshard.webdataset cannot mix pipelines that differ "
                                          "in more than their urls: build one pipeline and give "
                                          "it the mix, WebDataset([(urls, weight), ...])")
            if isinstance(d.urls, list) and any(isinstance(u, tuple) for u in d.urls):
                raise NotImplementedError("libshard.webdataset cannot mix mixes: list every "
                                          "source with its weight in one")
        self.dataset = copy.copy(given[0] if given else first)
        self.dataset.urls = [(d.urls, p) for d, p in zip(datasets, probs)]
        ShardDataset(self.dataset.urls, **first.settings)  # the mix's errors, now

    def set_epoch(self, epoch):
        """The epoch of the mix's next iteration (as WebDataset.set_epoch)."""
        self.dataset.set_epoch(epoch)

    def __iter__(self):
        return iter(self.dataset)
