"""Where this process is in a training job: its rank and the world size, and its DataLoader
worker. The datasets split their shards by these, and libshard.webdataset's splitters too."""
import os

import torch
import torch.utils.data


def rank_world(rank=None, world_size=None):
    """(rank, world size): the ones given when both are; else torch.distributed's when it is
    initialized; else $RANK and $WORLD_SIZE (0 and 1 when unset)."""
    if rank is not None and world_size is not None:
        return rank, world_size
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_rank(), torch.distributed.get_world_size()
    return int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))


def worker():
    """(this process's DataLoader worker, worker count); (0, 1) outside DataLoader workers."""
    info = torch.utils.data.get_worker_info()
    return (info.id, info.num_workers) if info else (0, 1)


def in_worker():
    """Whether this process is a DataLoader worker."""
    return torch.utils.data.get_worker_info() is not None
