"""Packing on a Dask cluster: shardpack's plan, its shards written by the cluster's workers.

    from distributed import Client
    from libshard.distributed import pack
    with Client("tcp://scheduler:8786") as client:
        result = pack("/data/imagenet/train", "/data/shards/train-%06d.tar", client=client,
                      maxcount=1000, shuffle=0)
    print(result.manifest, result.shards, result.samples)

The client scans the input and builds the library's pack plan (shard/pack.h); each task
writes whole shards of that plan through the C library on a worker; the client writes the
manifest last, from the shards' infos in shard order. Shards, indexes and manifest are
byte-identical to what `shardpack SOURCE -o PATTERN` writes with the same options, whatever
the number of workers.

Workers plan from the same source (once per worker process) and must see it, and the
output folder, at the same paths as the client: a shared filesystem. A worker whose plan
differs from the client's (the input changed, or another folder is mounted there) fails its
task with an error that says so, rather than write different shards.
"""
import functools
import os
import uuid
import warnings

from ._libshard import PackPlan
from .settings import BUCKET_KEYS
from .redact import shown, shown_repr

__all__ = ["pack", "PackResult"]


class PackResult:
    """What pack wrote: manifest (its path), shards and samples written, skipped (bad
    inputs left out with on_error="skip": (path, reason, what)), ignored (files without an
    image extension), undecoded (images packed that the loader does not decode, GIF, BMP,
    TIFF, PNM: (path, reason, what); on_error="skip" leaves them out, into skipped), resized
    (JPEGs re-encoded for resize=) with resized_bytes (their bytes before, after)."""

    def __init__(self, manifest, shards, samples, skipped, ignored, undecoded=(), resized=0,
                 resized_bytes=(0, 0)):
        self.manifest = manifest
        self.shards = shards
        self.samples = samples
        self.skipped = skipped
        self.ignored = ignored
        self.undecoded = list(undecoded)
        self.resized = resized
        self.resized_bytes = tuple(resized_bytes)

    def __repr__(self):
        return (f"PackResult(manifest={shown_repr(self.manifest)}, shards={self.shards}, samples={self.samples}, "
                f"skipped={len(self.skipped)}, ignored={self.ignored}, "
                f"undecoded={len(self.undecoded)}, resized={self.resized})")


def _plan_kwargs(list, on_error, maxcount, maxsize, level, frame_size, shuffle, verify, mtime, checksums, sync,
                 resize, quality):
    return dict(list=list, on_error=on_error, maxcount=maxcount, maxsize=maxsize, level=level,
                frame_size=frame_size, shuffle=shuffle, verify=verify, mtime=mtime, checksums=checksums,
                sync=sync, resize=resize, quality=quality)


@functools.lru_cache(maxsize=2)
def _worker_plan(source, pattern, items):
    """The plan, built once per worker process for a run's tasks."""
    return PackPlan(source, pattern, **dict(items))


def _write_shards(source, pattern, items, fingerprint, lo, hi, stop=None):
    """Shards [lo, hi) of the plan, written on a worker; none once the run's stop event is set
    (another task failed)."""
    plan = _worker_plan(source, pattern, items)
    if plan.fingerprint() != fingerprint:
        _worker_plan.cache_clear()
        raise RuntimeError(f"{shown(source)}: this worker's plan differs from the client's (the input changed "
                           f"since it was planned, or the worker sees another folder at this path)")
    if stop is not None:
        from distributed import Event
        stop = Event(stop)
    out = []
    for j in range(lo, hi):
        if stop is not None and stop.is_set():
            break
        out.append(plan.write_shard(j))
    return out


def pack(source, pattern, *, client, list=False, on_error="fail", maxcount=100000, maxsize=3e9, level=3,
         frame_size=4 << 20, shuffle=None, verify=False, mtime=None, checksums="sha256", sync=True,
         resize=None, quality=95, manifest=None, shards_per_task=1, **remote):
    """Packs source (an ImageFolder tree, or with list=True a TSV/JSONL list file) into shards
    named by pattern on the Dask client's cluster, as shardpack does; returns a PackResult.

    The options are shardpack's: maxcount, maxsize, level and frame_size (.tar.zst), shuffle
    (a seed: shuffle the samples across the whole set), verify (decode every JPEG), on_error
    ("fail", or "skip": leave bad inputs out, named in the result), mtime (default
    SOURCE_DATE_EPOCH or 0), checksums, sync, resize and quality (re-encode JPEGs whose
    longer side exceeds resize pixels), manifest (default: the pattern's stem + .json).
    Into gs:// or s3://, remote takes the settings of libshard.settings.BUCKET_KEYS (retries,
    upload_part, ca_bundle, ...): the client and every worker write with them.
    Each task writes shards_per_task consecutive shards. A failed task fails the run: tasks
    not started do nothing, the shards being written are finished, then the error is raised
    and no manifest is written (complete shards stay).
    """
    source, pattern = os.fspath(source), os.fspath(pattern)
    if mtime is None:
        mtime = int(os.environ.get("SOURCE_DATE_EPOCH") or 0)
    if int(shards_per_task) < 1:
        raise ValueError(f"shards_per_task: at least 1, not {shards_per_task!r}")
    kw = _plan_kwargs(list, on_error, maxcount, maxsize, level, frame_size, shuffle, verify, mtime,
                      checksums, sync, resize, quality)
    unknown = sorted(set(remote) - set(BUCKET_KEYS))
    if unknown:
        raise TypeError(f"pack: unexpected arguments {unknown}")
    kw.update(remote)
    plan = PackPlan(source, pattern, **kw)
    fingerprint = plan.fingerprint()
    manifest = os.fspath(manifest) if manifest is not None else plan.manifest
    plan.prepare(manifest)
    items = tuple(sorted(kw.items()))
    step = int(shards_per_task)
    ranges = [(lo, min(lo + step, plan.shards)) for lo in range(0, plan.shards, step)]
    from distributed import Event, wait
    run = uuid.uuid4().hex[:12]
    stop = f"libshard-pack-{run}-stop"
    stop_event = Event(stop, client=client)
    futures = [client.submit(_write_shards, source, pattern, items, fingerprint, lo, hi, stop, pure=False,
                             key=f"libshard-pack-{run}-{lo}")
               for lo, hi in ranges]
    try:
        infos = []
        for f in futures:
            infos.extend(f.result())
    except BaseException:
        # tasks not started return at once; those writing a shard finish it: when pack
        # raises, nothing is being written any more
        stop_event.set()
        wait(futures)
        raise
    path = plan.write_manifest(infos, manifest)
    skipped = plan.scan_skipped + [s for info in infos if info for s in info["skipped"]]
    leftovers = plan.leftovers()
    if leftovers:
        warnings.warn(f"{len(leftovers)} shards or indexes from an earlier run into the same folder are not in "
                      f"the manifest: remove them ({', '.join(map(shown, leftovers[:3]))}{', ...' if len(leftovers) > 3 else ''})")
    written = [info for info in infos if info]
    undecoded = [u for info in written for u in info.get("undecoded", ())]
    if undecoded:
        warnings.warn(f"{len(undecoded)} images packed that the loader does not decode (JPEG, PNG "
                      f"and WebP are), e.g. {shown(undecoded[0][0])}: {undecoded[0][2]}; "
                      f"on_error='skip' leaves them out")
    resized = [i.get("resized", (0, 0, 0)) for i in written]
    return PackResult(path, len(written), sum(i["nsamples"] for i in written), skipped, plan.ignored,
                      undecoded, sum(r[0] for r in resized),
                      (sum(r[1] for r in resized), sum(r[2] for r in resized)))
