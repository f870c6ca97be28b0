"""WebDataset's API over libshard, so a pipeline ports by changing its import:

    import libshard.webdataset as wds
    ds = (wds.WebDataset("shards/train-{000000..000099}.tar", shardshuffle=100, seed=0,
                         nodesplitter=wds.split_by_node)
          .shuffle(5000).decode("torchrgb8").to_tuple("jpg;png", "cls").batched(256))

A pipeline runs one of two ways, as it allows:
- In C, when it is the common one: shuffles, then decode with one of "torchrgb8", "rgb8",
  "torchrgb", "torch", "rgb", then to_tuple(image, label, other fields...), then
  batched(n). Shard shuffle, the rank and worker split, the shuffle buffer, decode, crop and
  resize (ShardDataset's image_size, crop, flip, ...) and batching run in libshard's
  threads. Images come cropped to image_size; labels as an int64 tensor; "torchrgb"/
  "torch"/"rgb" give floats from 0 to 1 as in WebDataset.
- In Python, stage by stage as WebDataset runs them, for anything else: libshard reads the
  samples (shard shuffle, split, a leading shuffle buffer) and the stages are WebDataset's:
  decode with its handlers ("pil" gives PIL images, "rgb8" numpy, "torchrgb" tensors, ...,
  callables, and the basic ones for txt, cls, json, npy, ...), map, select, rename,
  map_dict, to_tuple, map_tuple, batched with its collation, unbatched, slice, shuffle.

Writing: ShardWriter and TarWriter are libshard's (libshard.writer), written by the C writer;
ShardWriter prints a line per finished shard, as WebDataset's does (verbose=0: none).

with_epoch(n) counts what the pipeline yields (batches after batched), per DataLoader
worker, as WebDataset's. RandomMix maps onto libshard's weighted mixing. What has no
equivalent raises NotImplementedError naming the method.
"""
from .autodecode import Decoder, DecodingError, basichandlers, gzfilter, imagehandler
from .dataset import RandomMix, WebDataset, WebLoader
from .filters import default_collation_fn, getfirst
from .handlers import (ignore_and_continue, ignore_and_stop, reraise_exception,
                       warn_and_continue, warn_and_stop)
from .splitters import single_node_only, split_by_node, split_by_worker
from .writer import ShardWriter, TarWriter

__all__ = ["WebDataset", "WebLoader", "RandomMix", "split_by_node", "split_by_worker",
           "single_node_only", "reraise_exception", "ignore_and_continue", "warn_and_continue",
           "ignore_and_stop", "warn_and_stop", "default_collation_fn", "Decoder",
           "DecodingError", "imagehandler", "basichandlers", "gzfilter", "getfirst", "ShardWriter",
           "TarWriter"]
