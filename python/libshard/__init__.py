"""libshard: WebDataset-style sharded datasets, read and decoded in C.

    from libshard import Reader, Loader
    for sample in Reader("shards/train-{000000..000009}.tar", shuffle=1000, seed=0):
        sample["__key__"], sample["jpg"]        # raw bytes, WebDataset's sample dicts

    from libshard.torch import ShardDataset    # batches as torch tensors

    with libshard.ShardWriter("out/train-%06d.tar", maxcount=10000) as sink:
        sink.write({"__key__": "x0", "jpg": jpeg_bytes, "cls": 3})
"""
from ._libshard import (Batch, Loader, Reader, ShardError, ShardNotFoundError, crop_box, decode,
                        decode_rgb, merge_states, resize_rgb, version)
from .writer import ShardWriter, TarWriter

__all__ = ["Reader", "Loader", "Batch", "ShardError", "ShardNotFoundError", "ShardWriter",
           "TarWriter", "crop_box", "decode", "decode_rgb", "merge_states", "resize_rgb",
           "version"]
__version__ = version

