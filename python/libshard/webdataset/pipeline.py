"""DataPipeline: a source (a shard list, a dataset, a function returning an iterator) and
the stages after it, each called on the output of the one before; iterating it runs one
pass (an epoch), or several (repeat, with_epoch)."""
import copy
import multiprocessing
import os
import sys
import warnings
from itertools import islice

from . import crossing
from .counters import LocalCounts
from .pytorch import DataLoader, IterableDataset, get_worker_info
from .utils import PipelineStage


def add_length_method(obj):
    """obj given a __len__ returning obj.size (its class replaced by a subclass with it)."""
    def length(self):
        return self.size

    obj.__class__ = type(obj.__class__.__name__ + "_Length", (obj.__class__, IterableDataset),
                         {"__len__": length})
    return obj


class DataPipeline(IterableDataset, PipelineStage):
    """DataPipeline(source, stage, stage, ...): None arguments are left out, lists spliced
    in. A stage is a function of the source's iterator (a curried filter: shuffle(100), or
    a plain function: split_by_worker), a PipelineStage (its run), or the first stage: an
    IterableDataset or DataLoader (iterated), a list, or a function of no arguments."""

    def __init__(self, *args, **kwargs):
        super().__init__()
        self.pipeline = []
        self.length = -1
        self.repetitions = 1
        self.nsamples = -1
        self.counts = LocalCounts()  # the bytes arriving from its DataLoader workers (crossing.py)
        for arg in args:
            if arg is None:
                continue
            if isinstance(arg, list):
                self.pipeline.extend(arg)
            else:
                self.pipeline.append(arg)

    def close(self):
        """Closes the stages that can be, and lets go of them."""
        for step in self.pipeline:
            if hasattr(step, "close"):
                step.close()
        del self.pipeline

    def invoke(self, f, *args, **kwargs):
        """One stage run on the stage before's output (args), or as the source (none)."""
        if isinstance(f, (IterableDataset, DataLoader)) and not args:
            return iter(f)
        if isinstance(f, PipelineStage):
            return f.run(*args, **kwargs)
        if isinstance(f, list):
            return iter(f)
        if callable(f):
            return f(*args, **kwargs)
        raise ValueError(f"{f}: not a valid pipeline stage")

    def iterator1(self):
        """One pass: the source, then each stage on the output of the one before."""
        source = self.invoke(self.pipeline[0])
        for step in self.pipeline[1:]:
            source = self.invoke(step, source)
        return source

    def iterator(self):
        """repetitions passes, one after the other; a pass that gives nothing ends them."""
        for _ in range(self.repetitions):
            count = 0
            for sample in self.iterator1():
                yield sample
                count += 1
            if count == 0:  # an empty dataset: do not go round forever
                break

    def __iter__(self):
        items = self.iterator()
        if self.repetitions != 1 and self.nsamples > 0:
            items = islice(items, self.nsamples)
        info = get_worker_info()
        if info is not None and info.dataset is self:
            # a DataLoader worker's dataset: its items' bytes cross through shared memory
            self.crossing_size = crossing.ring_size(self.__dict__.get("crossing_setting"))
            if self.crossing_size:
                return crossing.outgoing(items)
        return items

    def __getstate__(self):
        state = self.__dict__.copy()
        if multiprocessing.context.get_spawning_popen() is not None:
            # a DataLoader worker started by spawn or a forkserver: its environment is not
            # this process's as it is now (a forkserver's is as it was when it started)
            state["crossing_setting"] = os.environ.get(crossing.SIZE_VARIABLE, "")
        return state

    def stats(self):
        """What libshard did for this pipeline, its DataLoader workers' part included (forked,
        spawned or from a forkserver):
        {"shards_c", "members_c", "bytes_c"}: the tar stages' shards read by libshard's C
        reader, {"shards_python", "members_python"}: by Python's tarfile (a pipe:, a user's
        opener), {"decodes_c", "decodes_python"}: images decoded by libshard's decoder and
        by PIL, {"values_shared", "bytes_shared", "values_pickled"}: bytes values its
        DataLoader workers sent the main process through shared memory, and those pickled
        through the pipe instead (crossing.py; libshard's addition: WebDataset has no such
        counts)."""
        from .counters import total
        return total([self])

    def stage(self, i):
        """The i-th stage."""
        return self.pipeline[i]

    def append(self, f):
        """Adds a stage to this pipeline."""
        self.pipeline.append(f)

    def compose(self, *args):
        """A copy of the pipeline with the stages added (this one unchanged)."""
        result = copy.copy(self)
        result.pipeline = copy.copy(result.pipeline)
        for arg in args:
            result.append(arg)
        return result

    def with_length(self, n, silent=False):
        """len() gives n from now on (for training code that asks; the epoch is not
        changed by it)."""
        if not silent:
            warnings.warn(".with_length() only sets the value of __len__ for compatibility "
                          "with some training environments. It does not change the number of "
                          "samples in an epoch.")
        self.size = n
        return add_length_method(self)

    def with_epoch(self, nsamples=-1, nbatches=-1):
        """An iteration yields exactly max(nsamples, nbatches) items, passing over the data
        as many times as that takes."""
        self.repetitions = sys.maxsize
        self.nsamples = max(nsamples, nbatches)
        return self

    def repeat(self, nepochs=-1, nbatches=-1):
        """nepochs passes (forever when not positive), at most nbatches items in all."""
        self.repetitions = nepochs if nepochs > 0 else sys.maxsize
        self.nsamples = nbatches
        return self
