"""WebDataset's API over libshard, so a pipeline ports by changing its import:

    import libshard.webdataset as wds
    ds = (wds.WebDataset("shards/train-{000000..000099}.tar", shardshuffle=100, seed=0,
                         nodesplitter=wds.split_by_node)
          .shuffle(5000).decode("torchrgb8").to_tuple("jpg;png", "cls").batched(256))
    fast = wds.WebDataset(urls, image_size=224, ...).decode("torchrgb8")...  # in C, cropped

Each pass over a pipeline (an iteration of it, of a WebLoader or of a DataLoader over it,
in each worker) is the next epoch, as WebDataset reshuffles on every pass: a new shard
order, shuffle buffer and crops, the same again from the same seed; set_epoch(n) makes the
next pass epoch n.

A pipeline runs one of two ways, as it allows:
- In C, when it is the common one and asks for a crop: shuffles, then decode with one of
  "torchrgb8", "rgb8", "torchrgb", "torch", "rgb", then to_tuple(image, label, other
  fields...), then batched(n), with libshard's image_size (and crop, flip, ...) given to
  WebDataset(...). Shard shuffle, the rank and worker split, the shuffle buffer, decode,
  crop and resize and batching run in libshard's threads. The batch is what WebDataset's
  collation gives: images as the decoder says (numpy for "rgb8"/"rgb", torch tensors for
  the others; floats from 0 to 1), labels a numpy int64 array, other fields decoded by the
  basic handlers.
- In Python, stage by stage as WebDataset runs them, for anything else (a pipeline without
  image_size gets its images whole, as WebDataset's decoders give them): libshard reads the
  samples (shard shuffle, split, a leading shuffle buffer) and the stages are WebDataset's:
  decode with its handlers ("pil" gives PIL images, "rgb8" numpy, "torchrgb" tensors, ...,
  callables, and the basic ones for txt, cls, json, npy, ...), map, select, rename,
  map_dict, to_tuple, map_tuple, batched with its collation, unbatched, slice, shuffle.

Writing: ShardWriter and TarWriter are libshard's (libshard.writer), written by the C writer;
ShardWriter prints a line per finished shard, as WebDataset's does (verbose=0: none).

with_epoch(n) counts what the pipeline yields (batches after batched), per DataLoader
worker, as WebDataset's. RandomMix maps onto libshard's weighted mixing (pipelines that
differ only in the seeds they drew mix; the mix takes a seed one was given). What has no
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
