"""libshard.torch: a torch IterableDataset over shards, decoded and batched in C.

    from libshard.torch import ShardDataset
    ds = ShardDataset("shards/train.json", shuffle=5000, seed=0, image_size=224,
                      crop="random_resized", flip=True, batch_size=256)
    for images, labels in torch.utils.data.DataLoader(ds, batch_size=None):
        ...   # images: uint8 (256, 3, 224, 224), labels: int64 (256,)

The fast way is num_workers=0: libshard's own threads fetch, decode and batch, with the GIL
released. With num_workers > 0 every DataLoader worker runs its own reader on its share of
the shards (the reader starts inside the worker, so fork is safe). Rank and world size come
from torch.distributed when it is initialized (else $RANK / $WORLD_SIZE).

ShardLoader(ds, num_workers=..., **DataLoader options) is a DataLoader whose state_dict()
and load_state_dict() resume mid-epoch, on any number of ranks and workers (the state is
the job's: rank 0 saves it for all; formats/order.md):

    loader = ShardLoader(ds, num_workers=4, persistent_workers=True)
    loader.load_state_dict(torch.load("ckpt.pt")["data"])     # or nothing, to start
    for epoch in range(loader.epoch, epochs):
        loader.set_epoch(epoch)             # keeps a restored position in its own epoch
        for images, labels in loader:
            ...
            torch.save({"data": loader.state_dict(), ...}, "ckpt.pt")

device="cuda" delivers batches already on the GPU: the decoders write into pinned memory,
a copy stream uploads batch N+1 while the model computes on batch N, and the batch arrives
through DLPack on torch's current stream (the stream waits for the copy on the GPU, and the
buffer is reused only after the work queued on it when the tensor was freed). dtype
"float32", "float16" or "bfloat16" and layout "nchw", "nhwc" or "channels_last" are made on
the GPU, in one kernel, from uint8: the host never touches floats. With num_workers=0
libshard's threads do everything; with workers, ShardLoader(ds, num_workers=N) uploads in
the main process (a plain DataLoader refuses: its workers cannot hand out GPU memory).

The package has a module per part: dataset (ShardDataset: its settings and calls), plan
(placement, modes, len), epochs (each epoch's Loader), state (the position as a state),
loader (ShardLoader), indexed (IndexedShardDataset), show (a picture of a dataset's batch), upload (the GPU path both datasets'
batches take with device="cuda"), report (the periodic report), skips (what skip_errors
left out), split (rank, world size, worker), shared (what a dataset's processes share)
and counts (what len() says without a count). Settings, their checks and defaults are
libshard.settings'.
"""
from .dataset import ShardDataset, ShardSkipWarning, UnequalRanksWarning
from .indexed import IndexedShardDataset
from .loader import ShardLoader
from .show import show

__all__ = ["ShardDataset", "ShardLoader", "IndexedShardDataset", "ShardSkipWarning",
           "UnequalRanksWarning", "show"]
