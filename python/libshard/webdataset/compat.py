"""webdataset.compat as libshard writes it: the fluid interface (each method returns the
pipeline with one more stage), WebDataset (a DataPipeline of the shard list, the node and
worker splitters, the shard shuffle, the opener, the tar expander and the grouping, as
WebDataset builds it), FluidWrapper and WebLoader.

WebDataset(urls, image_size=..., ...) with libshard's own settings (libshard.settings'
reader and batch settings) is libshard's pipeline instead (fast.py): read, shuffled, split,
decoded, cropped and batched in C, with libshard's order and resume."""
import difflib
import inspect
import os
import random
import warnings
from types import SimpleNamespace
from urllib.parse import urlparse

from . import autodecode, cache, filters, shardlists, utils
from . import limits as _limits
from .filters import pipelinefilter, reraise_exception
from .pipeline import DataPipeline
from .pytorch import DataLoader
from .tariterators import group_by_keys, tar_file_expander


class FluidInterface:
    """The methods that add a stage to a pipeline (compose: a new pipeline each time)."""

    def batched(self, batchsize, collation_fn=filters.default_collation_fn, partial=True):
        """Batches of batchsize, collated; partial: the last one even when short."""
        return self.compose(filters.batched(batchsize, collation_fn=collation_fn, partial=partial))

    def unbatched(self):
        """Batches back into samples."""
        return self.compose(filters.unbatched())

    def listed(self, batchsize, partial=True):
        """Lists of batchsize samples, not collated."""
        return self.compose(filters.batched(batchsize=batchsize, collation_fn=None))

    def unlisted(self):
        """Lists back into samples."""
        return self.compose(filters.unlisted())

    def log_keys(self, logfile=None):
        """Each sample's key appended to logfile."""
        return self.compose(filters.log_keys(logfile))

    def shuffle(self, size, **kw):
        """A shuffle buffer of size samples (nothing when size < 1)."""
        return self if size < 1 else self.compose(filters.shuffle(size, **kw))

    def map(self, f, handler=reraise_exception):
        """f(sample) for each sample; None leaves it out; a dict keeps the __key__."""
        return self.compose(filters.map(f, handler=handler))

    def decode(self, *args, pre=None, post=None, only=None, partial=False,
               handler=reraise_exception, max_decode_memory=None):
        """Each field decoded: str arguments are image specs ("pil", "rgb8", ...), others
        handlers(key, data); the basic handlers after them. max_decode_memory: libshard's,
        the most decoding one image may take (limits.py)."""
        handlers = [autodecode.ImageHandler(x, max_decode_memory=max_decode_memory)
                    if isinstance(x, str) else x for x in args]
        decoder = autodecode.Decoder(handlers, pre=pre, post=post, only=only, partial=partial)
        return self.map(decoder, handler=handler)

    def map_dict(self, handler=reraise_exception, **kw):
        """field=f: each field through its function."""
        return self.compose(filters.map_dict(handler=handler, **kw))

    def select(self, predicate, **kw):
        """The samples for which predicate is true."""
        return self.compose(filters.select(predicate, **kw))

    def to_tuple(self, *args, **kw):
        """The named fields as a tuple ("jpg;png": the first present)."""
        return self.compose(filters.to_tuple(*args, **kw))

    def map_tuple(self, *args, handler=reraise_exception):
        """Each element of a tuple through the function at its position (None: kept)."""
        return self.compose(filters.map_tuple(*args, handler=handler))

    def slice(self, *args):
        """itertools.islice of the stream."""
        return self.compose(filters.slice(*args))

    def rename(self, **kw):
        """new=old ("a;b": the first present); keep=False drops the other fields."""
        return self.compose(filters.rename(**kw))

    def rsample(self, p=0.5):
        """Each sample kept with probability p."""
        return self.compose(filters.rsample(p))

    def rename_keys(self, *args, **kw):
        """Fields renamed by glob patterns of their names."""
        return self.compose(filters.rename_keys(*args, **kw))

    def extract_keys(self, *args, **kw):
        """Tuples of the fields that match each glob pattern."""
        return self.compose(filters.extract_keys(*args, **kw))

    def xdecode(self, *args, **kw):
        """Fields decoded by glob patterns of their names (functions of a stream)."""
        return self.compose(filters.xdecode(*args, **kw))

    def mcached(self):
        """The first pass kept in memory for the later ones."""
        return self.compose(filters.Cached())

    def lmdb_cached(self, *args, **kw):
        """The first pass kept in an LMDB database for the later ones."""
        return self.compose(filters.LMDBCached(*args, **kw))


def check_empty(source):
    """source, a ValueError when it gave nothing (more workers than shards, most often)."""
    count = 0
    for sample in source:
        yield sample
        count += 1
    if count == 0:
        raise ValueError("No samples found in dataset; perhaps you have fewer shards than workers.\n"
                         "Turn off using empty_check=False in the WebDataset constructor.")


#: WebDataset's own keywords, for the suggestion a misspelt one gets
WEBDATASET_KEYWORDS = ("handler", "mode", "resampled", "repeat", "shardshuffle", "cache_size",
                       "cache_dir", "url_to_name", "detshuffle", "nodesplitter",
                       "workersplitter", "select_files", "rename_files", "empty_check",
                       "verbose", "seed", "max_member_size", "max_sample_size")


def _libshard_settings(owner, settings):
    """settings checked: each a libshard reader or batch setting, else a TypeError naming
    owner and offering the closest of WebDataset's own names (then libshard's)."""
    from .. import settings as _settings
    known = set(_settings.READER_KEYS) | set(_settings.LOADER_KEYS)
    unknown = sorted(set(settings) - known)
    if unknown:
        parts = []
        for n in unknown:
            near = (difflib.get_close_matches(n, WEBDATASET_KEYWORDS, n=1, cutoff=0.7)
                    or difflib.get_close_matches(n, sorted(known), n=1, cutoff=0.75))
            parts.append(f"{n!r} (did you mean {near[0]!r}?)" if near else repr(n))
        raise TypeError(f"{owner}: unknown keyword {', '.join(parts)}; WebDataset's keywords are "
                        f"{', '.join(WEBDATASET_KEYWORDS)}, and libshard's own settings "
                        f"(libshard.settings) run the pipeline in C")


class WebDataset(DataPipeline, FluidInterface):
    """WebDataset(urls, ...): the shards' samples as dicts, a pipeline built on with the
    fluid methods, as WebDataset 1.0 builds it: the shard list (a brace pattern, a list, a
    .yaml spec; resampled=True draws shards at random), nodesplitter (single_node_only: an
    error with several ranks), workersplitter (split_by_worker), a shard shuffle buffer of
    shardshuffle shards (seeded by seed), the opener (cache_dir: through downloaded copies),
    the tar expander and the grouping by key, and with empty_check a ValueError when a
    worker gets no sample. libshard adds: a libshard manifest (.json) or a gs://, s3://, hf://
    prefix as urls; a local folder reads its shards in name order; max_member_size and
    max_sample_size, the limits a hostile shard is refused at (limits.py). With libshard's settings
    (image_size=..., ...) it is libshard's C pipeline (see the module's documentation)."""

    def __new__(cls, urls=None, *args, **kw):
        extra = {k: v for k, v in kw.items() if k not in WEBDATASET_KEYWORDS}
        if extra and cls is WebDataset:
            _libshard_settings("libshard.webdataset.WebDataset", extra)
            from .fast import FastWebDataset
            return FastWebDataset(urls, *args, **kw)
        return super().__new__(cls)

    def __init__(self, urls, handler=reraise_exception, mode=None, resampled=False, repeat=False,
                 shardshuffle=None, cache_size=-1, cache_dir=None, url_to_name=cache.pipe_cleaner,
                 detshuffle=False, nodesplitter=shardlists.single_node_only,
                 workersplitter=shardlists.split_by_worker, select_files=None, rename_files=None,
                 empty_check=True, verbose=False, seed=None, max_member_size=None,
                 max_sample_size=None):
        super().__init__()
        # resolved here, so that DataLoader workers, spawned ones too, read under the same
        limits = _limits.resolved(max_member_size=max_member_size, max_sample_size=max_sample_size)
        if resampled:
            mode = "resampled"
        if mode == "resampled" and shardshuffle not in (False, None):
            warnings.warn("WebDataset(shardshuffle=...) is ignored for resampled datasets")
        elif shardshuffle is None:
            warnings.warn("WebDataset(shardshuffle=...) is None; set explicitly to False or a number")
        if shardshuffle is True:
            warnings.warn("set WebDataset(shardshuffle=...) to a positive integer or 0 or False")
            shardshuffle = 100
        args = SimpleNamespace(urls=urls, mode=mode, cache_size=cache_size, cache_dir=cache_dir)
        self.seed = os.environ.get("WDS_SEED", random.randint(0, 1000000)) if seed is None else seed
        self.update_cache_info(args)
        self.create_url_iterator(args)
        if nodesplitter is not None:
            self.append(nodesplitter)
        if workersplitter:
            self.append(workersplitter)
        if shardshuffle is not None:
            self.append(filters.detshuffle(shardshuffle, seed=self.seed) if detshuffle
                        else filters.shuffle(shardshuffle, seed=self.seed))
        if args.cache_dir is None or args.cache_size == 0:
            self.append(cache.StreamingOpen(handler=handler))
        else:
            self.append(cache.FileCache(cache_dir=args.cache_dir, cache_size=args.cache_size,
                                        handler=handler))
        self.append(pipelinefilter(tar_file_expander)(handler=handler, select_files=select_files,
                                                      rename_files=rename_files, **limits))
        self.append(pipelinefilter(group_by_keys)(handler=handler))
        if empty_check:
            self.append(check_empty)
        if repeat:
            self.repeat()

    def update_cache_info(self, args):
        """The cache's folder and size: $WDS_CACHE and $WDS_CACHE_SIZE over the arguments;
        the folder must exist."""
        args.cache_size = int(os.environ.get("WDS_CACHE_SIZE", args.cache_size))
        args.cache_dir = os.environ.get("WDS_CACHE", args.cache_dir)
        if args.cache_dir is not None:
            args.cache_dir = os.path.expanduser(os.fspath(args.cache_dir))
            if not os.path.exists(args.cache_dir):
                raise ValueError(f"cache directory {args.cache_dir} does not exist")

    def create_url_iterator(self, args):
        """The pipeline's first stage, from urls."""
        urls = args.urls
        if isinstance(urls, os.PathLike):
            urls = os.fspath(urls)
        if isinstance(urls, str) and urls.endswith((".yaml", ".yml")):
            import yaml
            with open(urls) as stream:
                spec = yaml.safe_load(stream)
            assert "datasets" in spec
            self.append(shardlists.MultiShardSample(spec))
            return
        if isinstance(urls, dict):
            assert "datasets" in urls
            self.append(shardlists.MultiShardSample(urls))
            return
        if isinstance(urls, str) and (urls.endswith(".json") or _listed(urls)):
            urls = _libshard_list(urls)  # a manifest, a folder or a bucket's prefix
        if isinstance(urls, str) or utils.is_iterable(urls):
            if args.mode == "resampled":
                self.append(shardlists.ResampledShardList(urls))
            else:
                self.append(shardlists.SimpleShardList(urls))
            return
        raise ValueError(f"cannot handle urls of type {type(urls)}")

    def __enter__(self):
        return self

    def __exit__(self, *args):
        self.close()


def _listed(urls):
    """Whether urls names a folder or a bucket's prefix (listed by libshard)."""
    if "{" in urls:
        return False
    if urlparse(urls).scheme in ("gs", "s3", "hf"):
        return urls.endswith("/")
    return os.path.isdir(urls)


def _libshard_list(spec):
    """The shards a manifest, folder or prefix lists, through libshard's shard lists."""
    from .._libshard import list_shards
    from ..hublist import is_listing, manifest_of
    if is_listing(spec):  # listed once for the job: ranks and the runs of one job share it
        spec = manifest_of(spec, {})
    return [url for url, _count, _index in list_shards([spec])]


class FluidWrapper(DataPipeline, FluidInterface):
    """Any iterable (a RandomMix, a DataLoader) as the start of a fluid pipeline."""

    def __init__(self, initial):
        super().__init__()
        self.append(initial)


class WebLoader(DataPipeline, FluidInterface):
    """A DataLoader(*args, **kw) with the fluid interface: the stages run in this process
    on what the loader yields (e.g. .unbatched().shuffle(1000).batched(64) to mix the
    workers' batches)."""

    def __init__(self, *args, **kw):
        super().__init__(DataLoader(*args, **kw))
        dataset = args[0] if args else kw.get("dataset")
        if getattr(dataset, "views_buffers", False) and not kw.get("num_workers"):
            from .fast import owned_all
            self.append(owned_all)  # batches kept by later stages: copies, not views


# WebDataset(urls, ...) says its keywords (not __new__'s (urls=None, *args, **kw)): help(),
# IPython's ? and inspect.signature; compat.pyi gives IDEs the same with types
_init = inspect.signature(WebDataset.__init__)
WebDataset.__signature__ = _init.replace(parameters=list(_init.parameters.values())[1:])
