"""WebDataset's node and worker splitters. libshard splits the samples itself (each rank
and DataLoader worker its share, evenly); these say which split a pipeline asks for and,
called on a list, split it as WebDataset's do."""
import itertools

from ..torch.split import rank_world, worker


def split_by_node(src, group=None):
    """Every world_size-th item from this rank's. As a WebDataset nodesplitter: each rank
    reads its share (libshard splits the samples, evenly)."""
    rank, world = rank_world(None, None)
    yield from itertools.islice(src, rank, None, world) if world > 1 else src


def single_node_only(src, group=None):
    """WebDataset's default nodesplitter: refuses to run with more than one rank."""
    if rank_world(None, None)[1] > 1:
        raise ValueError("you need to add an explicit nodesplitter to your input pipeline for "
                         "multi-node training")
    yield from src


def split_by_worker(src):
    """Every num_workers-th item from this DataLoader worker's. As a workersplitter: each
    worker reads its share of the rank's samples."""
    w, n = worker()
    yield from itertools.islice(src, w, None, n) if n > 1 else src
