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
    (JPEGs re-encoded for resize=) with resized_bytes (their bytes before, after), kept (of
    shards, those a resume kept from the interrupted run), duplicates (dedup=True: the inputs
    left out, (path, the path kept, sha256))."""

    def __init__(self, manifest, shards, samples, skipped, ignored, undecoded=(), resized=0,
                 resized_bytes=(0, 0), kept=0, duplicates=()):
        self.manifest = manifest
        self.shards = shards
        self.samples = samples
        self.skipped = skipped
        self.ignored = ignored
        self.undecoded = list(undecoded)
        self.resized = resized
        self.resized_bytes = tuple(resized_bytes)
        self.kept = kept
        self.duplicates = list(duplicates)

    def __repr__(self):
        return (f"PackResult(manifest={shown_repr(self.manifest)}, shards={self.shards}, samples={self.samples}, "
                f"skipped={len(self.skipped)}, ignored={self.ignored}, "
                f"undecoded={len(self.undecoded)}, resized={self.resized}, kept={self.kept})")


def _plan_kwargs(list, on_error, maxcount, maxsize, level, frame_size, shuffle, verify, mtime, checksums, sync,
                 resize, quality, resume, dedup):
    return dict(list=list, on_error=on_error, maxcount=maxcount, maxsize=maxsize, level=level,
                frame_size=frame_size, shuffle=shuffle, verify=verify, mtime=mtime, checksums=checksums,
                sync=sync, resize=resize, quality=quality, resume=resume, dedup=dedup)


@functools.lru_cache(maxsize=2)
def _worker_plan(source, pattern, items):
    """The plan, built once per worker process for a run's tasks, writing for the run the
    client prepared (each shard it finishes recorded for a resume)."""
    plan = PackPlan(source, pattern, **dict(items))
    plan.attach()
    return plan


def _write_shards(source, pattern, items, fingerprint, lo, hi, stop=None):
    """Shards [lo, hi) of the plan (a list of shard numbers), written on a worker; none once the
    run's stop event is set (another task failed)."""
    plan = _worker_plan(source, pattern, items)
    if plan.fingerprint() != fingerprint:
        _worker_plan.cache_clear()
        raise RuntimeError(f"{shown(source)}: this worker's plan differs from the client's (the input changed "
                           f"since it was planned, or the worker sees another folder at this path)")
    if stop is not None:
        from distributed import Event
        stop = Event(stop)
    out = []
    for j in (range(lo, hi) if hi is not None else lo):
        if stop is not None and stop.is_set():
            break
        out.append(plan.write_shard(j))
    return out


def pack(source, pattern, *, client, list=False, on_error="fail", maxcount=100000, maxsize=3e9, level=3,
         frame_size=4 << 20, shuffle=None, verify=False, mtime=None, checksums="sha256", sync=True,
         resize=None, quality=95, manifest=None, shards_per_task=1, resume=False, dedup=False,
         **remote):
    """Packs source (an ImageFolder tree, or with list=True a TSV/JSONL list file) into shards
    named by pattern on the Dask client's cluster, as shardpack does; returns a PackResult.

    The options are shardpack's: maxcount, maxsize, level and frame_size (.tar.zst), shuffle
    (a seed: shuffle the samples across the whole set), verify (decode every JPEG), on_error
    ("fail", or "skip": leave bad inputs out, named in the result), mtime (default
    SOURCE_DATE_EPOCH or 0), checksums, sync, resize and quality (re-encode JPEGs whose
    longer side exceeds resize pixels), manifest (default: the pattern's stem + .json),
    resume (keep what an interrupted run of the same input and options finished, pack the
    rest: the set is what an uninterrupted run writes; a changed input or option is refused,
    naming it), dedup (pack each distinct image once; PackResult.duplicates lists the rest).
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
                      checksums, sync, resize, quality, bool(resume), bool(dedup))
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
    kept = {j: plan.kept(j) for j in range(plan.shards)}
    todo = [j for j in range(plan.shards) if kept[j] is None]
    ranges = [(todo[i:i + step], None) for i in range(0, len(todo), step)]
    from distributed import Event, wait
    run = uuid.uuid4().hex[:12]
    stop = f"libshard-pack-{run}-stop"
    stop_event = Event(stop, client=client)
    futures = [client.submit(_write_shards, source, pattern, items, fingerprint, lo, hi, stop, pure=False,
                             key=f"libshard-pack-{run}-{lo[0]}")
               for lo, hi in ranges]
    try:
        packed = {}
        for (js, _), f in zip(ranges, futures):
            packed.update(zip(js, f.result()))
        infos = [kept[j] if kept[j] is not None else packed[j] for j in range(plan.shards)]
    except BaseException:
        # tasks not started return at once; those writing a shard finish it: when pack
        # raises, nothing is being written any more
        stop_event.set()
        wait(futures)
        raise
    path = plan.write_manifest(infos, manifest)
    skipped = plan.scan_skipped + [s for info in infos if info for s in info.get("skipped", ())]
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
                      (sum(r[1] for r in resized), sum(r[2] for r in resized)),
                      sum(1 for k in kept.values() if k is not None), plan.duplicates())
