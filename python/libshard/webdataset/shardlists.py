"""webdataset.shardlists as libshard writes it: the first stage of a pipeline, the shards
as {"url": ...} dicts: a brace pattern or list (SimpleShardList), drawn at random
(ResampledShards), taken from a folder as other processes drop them in
(DirectoryShardList), or from a YAML spec of several datasets (MultiShardSample); and the
splitters between nodes and DataLoader workers, which split the shards as WebDataset's do
(every world_size-th from the rank's, every num_workers-th from the worker's)."""
import glob
import os
import random
import re
import sys
import time
from dataclasses import dataclass, field
from itertools import islice
from typing import List

from . import utils
from .filters import pipelinefilter
from .pytorch import IterableDataset
from .utils import braceexpand, is_iterable, obsolete


def envlookup(m):
    """The value of $WDS_NAME for a ${NAME} match."""
    key = "WDS_" + m.group(1)
    assert key in os.environ, f"missing environment variable {key}"
    return os.environ[key]


def envsubst(s):
    """${NAME} in s replaced by $WDS_NAME."""
    return re.sub(r"\$\{(\w+)\}", envlookup, s)


def split_by_node(src, group=None):
    """Every world_size-th item, from this rank's on (all of them with one rank)."""
    rank, world_size, _, _ = utils.pytorch_worker_info(group=group)
    yield from islice(src, rank, None, world_size) if world_size > 1 else src


def single_node_only(src, group=None):
    """All items; a ValueError with more than one rank (WebDataset's default
    nodesplitter: a job of several nodes must say how it splits)."""
    if utils.pytorch_worker_info(group=group)[1] > 1:
        raise ValueError("you need to add an explicit nodesplitter to your input pipeline for "
                         "multi-node training")
    yield from src


def split_by_worker(src):
    """Every num_workers-th item, from this DataLoader worker's on."""
    _, _, worker, num_workers = utils.pytorch_worker_info()
    yield from islice(src, worker, None, num_workers) if num_workers > 1 else src


def expand_urls(urls):
    """A spec's URLs: parts separated by "::", ${NAME} from $WDS_NAME, braces expanded."""
    out = []
    for url in urls.split("::"):
        for _ in range(10):  # substitutions that name substitutions, ten deep at most
            last, url = url, envsubst(url)
            if url == last:
                break
        out.extend(braceexpand(url))
    return out


def expand_source(source, max_urls=int(1e9)):
    """A spec, a list or any iterable of URLs as a list (at most max_urls of an iterable)."""
    if isinstance(source, str):
        return expand_urls(source)
    if isinstance(source, list):
        return source
    if is_iterable(source):
        return list(islice(source, max_urls))
    raise ValueError(f"cannot handle {type(source)}")


class SimpleShardList(IterableDataset):
    """The shards of a spec or list, in order, or shuffled by seed (True: by the time)."""

    def __init__(self, urls, seed=None):
        super().__init__()
        self.urls = expand_urls(urls) if isinstance(urls, str) else list(urls)
        assert isinstance(self.urls[0], str)
        self.seed = time.time() if seed is True else seed

    def __len__(self):
        return len(self.urls)

    def __iter__(self):
        urls = list(self.urls)
        if self.seed is not None:
            random.Random(self.seed).shuffle(urls)
        for url in urls:
            yield dict(url=url)


def resampled_(src, n=sys.maxsize):
    """n items drawn with replacement from all of src's."""
    try:
        seed = open("/dev/random", "rb").read(20)
    except OSError:
        seed = time.time()
    rng = random.Random(seed)
    items = list(src)
    for _ in range(n):
        yield rng.choice(items)


resampled = pipelinefilter(resampled_)


def non_empty(src):
    """src, a ValueError when it gave nothing at all."""
    count = 0
    for item in src:
        yield item
        count += 1
    if count == 0:
        raise ValueError("pipeline stage received no data at all and this was declared as an error")


@dataclass
class MSSource:
    """One dataset of a MultiShardSample spec."""
    name: str = ""
    perepoch: int = -1
    resample: bool = False
    urls: List[str] = field(default_factory=list)


default_rng = random.Random()


def expand(s):
    """~ and $VARIABLES expanded."""
    return os.path.expanduser(os.path.expandvars(s))


class ResampledShards(IterableDataset):
    """nshards shards drawn with replacement each pass, seeded by worker_seed() (rank and
    worker), the pass, seed, and unless deterministic also the process and the time."""

    def __init__(self, urls, nshards=sys.maxsize, seed=0, worker_seed=None, deterministic=False,
                 max_urls=int(1e6), empty_check=True):
        super().__init__()
        self.urls = expand_source(urls, max_urls)
        if empty_check and not self.urls:
            raise ValueError("empty_check=True, but no shards found in ResampledShards")
        assert isinstance(self.urls[0], str)
        self.nshards = nshards
        self.worker_seed = utils.pytorch_worker_seed if worker_seed is None else worker_seed
        self.deterministic = deterministic
        self.seed = seed
        self.epoch = -1

    def __iter__(self):
        self.epoch += 1
        parts = [self.worker_seed(), self.epoch, self.seed]
        if not self.deterministic:
            parts += [os.getpid(), time.time_ns(), os.urandom(4)]
        seed = utils.make_seed(*parts)
        if os.environ.get("WDS_SHOW_SEED", "0") == "1":
            print(f"# ResampledShards seed {seed}")
        self.rng = random.Random(seed)
        for _ in range(self.nshards):
            yield dict(url=self.urls[self.rng.randint(0, len(self.urls) - 1)])


ResampledShardList = ResampledShards


def check_pid_is_running(pid):
    """Whether a process pid exists."""
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True


def without_last_extension(fname):
    """fname without its last extension."""
    return re.sub(r"\.[^.]*$", "", fname)


def get_pid_from_filename(fname):
    """The pid in a name "NAME._PID_", or None."""
    m = re.match(r"^(.*)\._(\d+)_$", fname)
    return int(m.group(2)) if m else None


class DirectoryShardList(IterableDataset):
    """Shards taken from a folder as they appear: each renamed NAME._PID_ while this process
    reads it, then (mode) removed ("unlink"), renamed NAME._done_ ("keep") or put back
    ("resample"); select "random" or "oldest"; poll seconds between looks at an empty
    folder (None: stop), until timeout."""

    def __init__(self, path, pattern="*.{tar,tgz,tar.tgz}", poll=1, timeout=1e12,
                 mode="resample", select="random", fate=None):
        assert path.endswith("/")
        assert os.path.isdir(path)
        self.path = path
        self.poll = poll
        self.pattern = pattern
        self.mode = mode
        self.select = select
        self.fate = fate
        self.timeout = timeout

    def recycle(self, activename):
        """What becomes of a shard read: removed, kept as done, or put back."""
        if self.mode == "unlink":
            os.unlink(activename)
        elif self.mode == "keep":
            os.rename(activename, without_last_extension(activename) + "._done_")
        elif self.mode == "resample":
            os.rename(activename, without_last_extension(activename))

    def cleanup_files_without_processes(self):
        """Shards held by processes that no longer run, recycled."""
        for fname in glob.glob(os.path.join(self.path, "*._*_")):
            pid = get_pid_from_filename(fname)
            if pid is not None and not check_pid_is_running(pid):
                self.recycle(fname)

    def __iter__(self):
        start = time.time()
        while time.time() - start < self.timeout:
            candidates = sorted(utils.glob_with_braces(self.path + self.pattern))
            if not candidates:
                if self.poll is None:
                    return
                time.sleep(self.poll)
                continue
            if self.select == "oldest":
                candidate = min(candidates, key=lambda f: os.stat(f).st_mtime)
            elif self.select == "random":
                candidate = random.choice(candidates)
            else:
                raise ValueError(f"unknown selection strategy {self.select}")
            active = candidate + f"._{os.getpid()}_"
            try:
                os.rename(candidate, active)
            except FileNotFoundError:  # another process took it first
                time.sleep(self.poll or 0)
                continue
            yield dict(url=active)
            self.recycle(active)
            self.cleanup_files_without_processes()


class MultiShardSample(IterableDataset):
    """The shards of a YAML spec (or its dict): {prefix, buckets, datasets: [{name,
    buckets, shards, resample, choose}]}; each pass every dataset's shards (resample: that
    many drawn, choose: that many of them), shuffled together."""

    @obsolete(reason="this is going to be replaced with the WIDS JSON format")
    def __init__(self, fname):
        self.epoch = -1
        self.parse_spec(fname)

    def parse_spec(self, fname):
        """Reads the spec into self.sources."""
        import yaml
        self.rng = default_rng
        if isinstance(fname, dict):
            spec = fname
        else:
            with open(fname) as stream:
                spec = yaml.safe_load(stream)
        assert set(spec.keys()) <= {"prefix", "datasets", "buckets"}, list(spec.keys())
        prefix = expand(spec.get("prefix", ""))
        self.sources = []
        for ds in spec["datasets"]:
            assert set(ds.keys()) <= {"buckets", "name", "shards", "resample", "choose"}, list(ds)
            buckets = ds.get("buckets", spec.get("buckets", []))
            buckets = [expand(b) for b in ([buckets] if isinstance(buckets, str) else buckets)]
            buckets = buckets or [""]
            assert len(buckets) == 1, f"{buckets}: FIXME support for multiple buckets unimplemented"
            bucket = buckets[0]
            name = ds.get("name", "@" + bucket)
            shards = [ds["shards"]] if isinstance(ds["shards"], str) else ds["shards"]
            urls = [prefix + os.path.join(bucket, u) for s in shards for u in braceexpand(expand(s))]
            resample, nsample = ds.get("resample", -1), ds.get("choose", -1)
            if nsample > len(urls):
                raise ValueError(f"perepoch {nsample} must be no greater than the number of shards")
            if nsample > 0 and resample > 0:
                raise ValueError("specify only one of perepoch or choose")
            self.sources.append(MSSource(name=name, urls=urls, perepoch=nsample, resample=resample))
            print(f"# {name} {len(urls)} {nsample}", file=sys.stderr)

    def set_epoch(self, seed):
        """Draws from seed from now on."""
        self.rng = random.Random(seed)

    def get_shards_for_epoch(self):
        """This pass's shards."""
        out = []
        for source in self.sources:
            if source.resample > 0:
                out += self.rng.choices(source.urls, k=source.resample)
            elif source.perepoch > 0:
                urls = list(source.urls)
                self.rng.shuffle(urls)
                out += urls[:source.perepoch]
            else:
                out += list(source.urls)
        self.rng.shuffle(out)
        return out

    def __iter__(self):
        for shard in self.get_shards_for_epoch():
            yield dict(url=shard)


def shardspec(spec):
    """A .yaml spec's MultiShardSample, else a SimpleShardList."""
    return MultiShardSample(spec) if spec.endswith(".yaml") else SimpleShardList(spec)
