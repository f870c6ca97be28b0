"""WebDataset 1.0's API over libshard, so that a project ports by changing its import:

    import libshard.webdataset as wds
    dataset = wds.DataPipeline(
        wds.SimpleShardList("shards/train-{000000..000099}.tar"),
        wds.split_by_node, wds.split_by_worker,
        wds.tarfile_to_samples(handler=wds.warn_and_continue),
        wds.shuffle(1000), wds.decode("pil"), wds.to_tuple("jpg;png", "cls"),
        wds.map_tuple(preprocess, None), wds.batched(64))
    dataset = wds.WebDataset(urls, shardshuffle=100).shuffle(1000).decode("rgb8").to_tuple("jpg cls")

Each module has WebDataset's name and its names (autodecode, cache, compat, extradatasets,
filters, gopen, handlers, mix, multi, pipeline, pytorch, shardlists, tariterators, tenbin,
typecheck, utils, writer), with WebDataset's semantics: the same samples in the same order
for unshuffled pipelines, nodes and DataLoader workers splitting the shards as its splitters
do, its errors and exception types. Shuffles draw their own random numbers (as WebDataset's
do, from the time unless a seed is given). What libshard adds underneath: remote shards
(http, https, gs, s3) read through libshard's sources (retries, resumes, credentials from
the environment, its cache); libshard manifests, folders and bucket prefixes as urls; the
decode limits of libshard's decoders held on PIL's; and with libshard's own settings
(WebDataset(urls, image_size=224, ...)) a pipeline read, decoded, cropped and batched in C
(fast.py). docs/webdataset.md says what changes and what differs.
"""
import sys

from . import (autodecode, cache, compat, extradatasets, filters, gopen, handlers, mix, pipeline,
               pytorch, shardlists, tariterators, tenbin, typecheck, utils, writer)
from .autodecode import (Continue, Decoder, DecodingError, gzfilter, handle_extension,
                         imagehandler, pytorch_weights_only, torch_audio, torch_loads,
                         torch_video)
from .cache import LRUCleanup, pipe_cleaner
from .compat import FluidInterface, FluidWrapper, WebDataset, WebLoader
from .extradatasets import MockDataset, with_epoch, with_length
from .filters import (Cached, LMDBCached, associate, batched, decode, default_collation_fn,
                      detshuffle, extract_keys, getfirst, info, map, map_dict, map_tuple,
                      pipelinefilter, rename, rename_keys, rsample, select, shuffle, slice,
                      to_tuple, transform_with, unbatched, xdecode)
from .gopen import gopen, gopen_schemes
from .handlers import (ignore_and_continue, ignore_and_stop, reraise_exception,
                       warn_and_continue, warn_and_stop)
from .mix import RandomMix, RoundRobin
from .pipeline import DataPipeline
from .shardlists import (MultiShardSample, ResampledShards, SimpleShardList, non_empty,
                         resampled, shardspec, single_node_only, split_by_node, split_by_worker)
from .tariterators import tarfile_samples, tarfile_to_samples
from .utils import PipelineStage, repeatedly
from .writer import ShardWriter, TarWriter, numpy_dumps, torch_dumps

#: the version of WebDataset's API this implements (libshard's own: libshard.version)
__version__ = "1.0.2"


def as_webdataset():
    """Makes `import webdataset` (and `from webdataset.filters import ...`) this package: the
    one line of an alias module named webdataset.py,

        from libshard.webdataset import as_webdataset; as_webdataset()

    registers it and each of its modules under WebDataset's names."""
    try:
        from . import multi  # noqa: F401 (needs ZeroMQ: registered where it imports)
    except ImportError:
        pass
    for name, module in list(sys.modules.items()):
        if name == __name__ or name.startswith(__name__ + "."):
            sys.modules["webdataset" + name[len(__name__):]] = module

__all__ = [
    "Cached", "Continue", "DataPipeline", "Decoder", "DecodingError", "FluidInterface",
    "FluidWrapper", "LMDBCached", "LRUCleanup", "MockDataset", "MultiShardSample", "PipelineStage",
    "RandomMix", "ResampledShards", "RoundRobin", "ShardWriter", "SimpleShardList", "TarWriter",
    "WebDataset", "WebLoader", "as_webdataset", "associate", "autodecode", "batched", "cache", "compat", "decode",
    "default_collation_fn", "detshuffle", "extract_keys", "filters", "getfirst", "gopen",
    "gopen_schemes", "gzfilter", "handle_extension", "ignore_and_continue", "ignore_and_stop",
    "imagehandler", "info", "map", "map_dict", "map_tuple", "non_empty", "numpy_dumps",
    "pipe_cleaner", "pipelinefilter", "pytorch_weights_only", "rename", "rename_keys",
    "repeatedly", "reraise_exception", "resampled", "rsample", "select", "shardlists",
    "shardspec", "shuffle", "single_node_only", "slice", "split_by_node", "split_by_worker",
    "tarfile_samples", "tarfile_to_samples", "tariterators", "tenbin", "to_tuple",
    "torch_audio", "torch_dumps", "torch_loads", "torch_video", "transform_with", "unbatched",
    "utils", "warn_and_continue", "warn_and_stop", "with_epoch", "with_length", "xdecode",
]
