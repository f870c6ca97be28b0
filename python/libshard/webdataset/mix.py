"""Mixing datasets: RoundRobin (one item of each in turn) and RandomMix (each item from a
dataset drawn by its probability), stopping at the first dataset to run out, or with
longest=True going on with the others."""
import random

import numpy as np

from .pytorch import IterableDataset


def round_robin_shortest(*sources):
    """An item of each source in turn, until one runs out."""
    i = 0
    while True:
        try:
            yield next(sources[i % len(sources)])
        except StopIteration:
            return
        i += 1


def round_robin_longest(*sources):
    """An item of each source in turn, a source that runs out left out, until none is left."""
    sources = list(sources)
    i = 0
    while sources:
        i %= len(sources)
        try:
            sample = next(sources[i])
        except StopIteration:
            del sources[i]
            continue
        i += 1
        yield sample


class RoundRobin(IterableDataset):
    """The datasets' items in turn (longest: until all have run out)."""

    def __init__(self, datasets, longest=False):
        self.datasets = datasets
        self.longest = longest

    def __iter__(self):
        sources = [iter(d) for d in self.datasets]
        return round_robin_longest(*sources) if self.longest else round_robin_shortest(*sources)


def random_samples(sources, probs=None, longest=False):
    """Items from sources drawn by probs (default equal), until one runs out (longest: a
    source that runs out is left out until none is left)."""
    probs = [1] * len(sources) if probs is None else list(probs)
    sources = list(sources)
    while sources:
        cum = (np.array(probs) / np.sum(probs)).cumsum()
        i = int(np.searchsorted(cum, random.random()))
        try:
            yield next(sources[i])
        except StopIteration:
            if not longest:
                return
            del sources[i]
            del probs[i]


class RandomMix(IterableDataset):
    """Items of the datasets drawn at random by probs (default equal), until one runs out
    (longest: until all have)."""

    def __init__(self, datasets, probs=None, longest=False):
        self.datasets = datasets
        self.probs = probs
        self.longest = longest

    def __iter__(self):
        return random_samples([iter(d) for d in self.datasets], self.probs, longest=self.longest)
