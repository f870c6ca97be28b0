"""One listing of the Hugging Face Hub per job. A ShardDataset, a libshard.webdataset pipeline
or IndexedShards given an hf:// folder lists it once, whatever its ranks and DataLoader
workers, and reads the manifest that listing wrote (every shard pinned to the revision's
commit, and counted): the processes that read it make no Hub API call. Under torch.distributed rank 0 lists and broadcasts the manifest to the
other ranks; otherwise the first process of the machine lists into the listing cache
(~/.cache/libshard/listings, under a lock) and the others read what it wrote, for the run
(TORCHELASTIC_RUN_ID, which torchrun sets) or else for an hour."""
import fcntl
import hashlib
import json
import os
import sys
import time

from . import _libshard

FRESH = 3600  # seconds a listing serves processes of no known run


def is_listing(spec):
    """Whether spec names a folder of the Hub (hf://datasets/OWNER/NAME[@REV]/DIR/)."""
    return isinstance(spec, str) and spec.startswith("hf://") and spec.endswith("/")


def listed_once(urls, remote):
    """urls (a ShardDataset's specs: a list of str, or a mix of (list, weight) pairs) with
    each folder of the Hub replaced by the manifest of its one listing; remote: the
    dataset's remote settings."""
    if urls and isinstance(urls[0], tuple):
        return [(listed_once(spec, remote), w) for spec, w in urls]
    return [manifest_of(u, remote) if is_listing(u) else u for u in urls]


def _folder():
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "libshard", "listings")


def _fresh(path, run):
    try:
        age = time.time() - os.stat(path).st_mtime
    except FileNotFoundError:
        return False
    return bool(run) or age < FRESH


def _list(spec, path, remote):
    _libshard.list_shards([spec], write_manifest=path, **remote)


def manifest_of(spec, remote):
    """The path of the manifest of spec's listing, listed once for the job."""
    run = os.environ.get("TORCHELASTIC_RUN_ID", "")
    key = hashlib.sha256(json.dumps([spec, os.environ.get("HF_ENDPOINT", ""), run])
                         .encode()).hexdigest()[:24]
    folder = _folder()
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"{key}.json")
    torch = sys.modules.get("torch")  # a job under torch.distributed has imported it
    dist = getattr(torch, "distributed", None)
    if dist and dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        text = [None]
        if dist.get_rank() == 0:
            _list(spec, path, remote)
            with open(path) as f:
                text[0] = f.read()
        dist.broadcast_object_list(text, src=0)  # the other machines' caches are their own
        if dist.get_rank() != 0:
            tmp = f"{path}.{os.getpid()}.tmp"
            with open(tmp, "w") as f:
                f.write(text[0])
            os.replace(tmp, path)
        return path
    with open(path + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one lister; the others wait, then read
        if not _fresh(path, run):
            _list(spec, path, remote)
    return path
