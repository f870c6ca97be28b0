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


def group_up():
    """Whether torch.distributed's process group is initialized in this process."""
    return torch.distributed.is_available() and torch.distributed.is_initialized()


def agreed_seed(drawn, rank=None, world_size=None, final=False, who="ShardDataset"):
    """The seed every rank of the job uses when none was given: drawn (this process's own)
    on one rank; on several, rank 0's, broadcast over the initialized process group (a
    collective: every rank calls this at the same point, as they make their datasets or
    begin iterating). None when the ranks cannot agree yet (several ranks, no group up:
    the group may come up later); with final, that is refused, naming seed= as the way on,
    as ranks that each drew their own would read overlapping shares."""
    rank, world = rank_world(rank, world_size)
    if world <= 1:
        return drawn
    if group_up() and not in_worker() and torch.distributed.get_world_size() == world:
        box = [drawn]
        torch.distributed.broadcast_object_list(box, src=0)
        return int(box[0])
    if not final:
        return None
    raise ValueError(f"{who}: no seed= on rank {rank} of {world}, and no process group to "
                     f"agree on one with (torch.distributed is not initialized): each rank "
                     f"would draw its own and the ranks would read overlapping shares; pass "
                     f"seed= (the same on every rank), or make the dataset after "
                     f"init_process_group")
