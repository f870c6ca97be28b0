"""Datasets around a dataset: MockDataset (one sample again and again), and the stages that
repeat a source (repeatedly), cut it into epochs of a length (with_epoch) or give it a
length (with_length)."""
from . import utils
from .pytorch import IterableDataset
from .utils import PipelineStage


class MockDataset(IterableDataset):
    """sample, length times: for measuring and testing what comes after."""

    def __init__(self, sample, length):
        self.sample = sample
        self.length = length

    def __iter__(self):
        for _ in range(self.length):
            yield self.sample


class repeatedly(IterableDataset, PipelineStage):  # noqa: N801 (WebDataset's name)
    """Its source again and again, up to nepochs passes or nbatches items."""

    def __init__(self, source, nepochs=None, nbatches=None, length=None):
        self.source = source
        self.nepochs = nepochs
        self.nbatches = nbatches
        self.length = length

    def invoke(self, source):
        """source repeated."""
        return utils.repeatedly(source, nepochs=self.nepochs, nbatches=self.nbatches)


class with_epoch(IterableDataset):  # noqa: N801 (WebDataset's name)
    """Epochs of length items taken from a dataset iterated on and on: each epoch goes on
    where the last one stopped, starting the dataset over when it ends."""

    def __init__(self, dataset, length):
        super().__init__()
        self.length = length
        self.source = None

    def __getstate__(self):
        state = dict(self.__dict__)
        state["source"] = None  # an iterator does not pickle
        return state

    def invoke(self, dataset):
        """The next length items of dataset."""
        if self.source is None:
            self.source = iter(dataset)
        for _ in range(self.length):
            try:
                sample = next(self.source)
            except StopIteration:
                self.source = iter(dataset)
                try:
                    sample = next(self.source)
                except StopIteration:
                    return
            yield sample
        self.source = None


class with_length(IterableDataset, PipelineStage):  # noqa: N801 (WebDataset's name)
    """A dataset with len() length (its epoch unchanged)."""

    def __init__(self, dataset, length):
        super().__init__()
        self.dataset = dataset
        self.length = length

    def invoke(self, dataset):
        """dataset's items."""
        return iter(dataset)

    def __len__(self):
        return self.length
