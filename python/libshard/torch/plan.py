"""A ShardDataset's planning: where a reader stands in the job (rank, world, worker), the
mode a world size gets, what a step delivers, the Readers that plan an epoch without
reading it (for len() and states), and the warning when mode='exact' leaves the ranks
unequal counts."""
from .. import _libshard
from .. import settings as _settings
from . import counts, split
from .warn import warn
from ..redact import shown


class KeysWarning(UserWarning):
    """keys= lists keys that choose no sample of the shards (counted, never an error)."""


class UnequalRanksWarning(UserWarning):
    """mode='exact' leaves the ranks different numbers of batches this epoch."""


def placement(ds, worker=None):
    """Where this iteration's reader is: rank, world_size, worker, num_workers."""
    rank, world = split.rank_world(ds.rank, ds.world_size)
    w, workers = split.worker() if ds.by_worker else (0, 1)
    return dict(rank=rank, world_size=world, worker=w if worker is None else worker,
                num_workers=workers)


def mode(ds, world):
    """The mode in use for world ranks: the given one, else 'equal' with several ranks
    (each the same number of batches: DDP's collectives wait on every rank)."""
    return ds.settings.get("mode") or ("equal" if world > 1 else "exact")


def reader_args(ds, world):
    """The Reader's settings of ds for world ranks: with aspect_buckets, the loader's
    batches and the area its named sets keep (the image size's)."""
    args = {k: v for k, v in ds.settings.items() if k in _settings.READER_KEYS}
    args["mode"] = mode(ds, world)
    if args.get("aspect_buckets"):
        size = ds.setting("image_size")
        h, w = (size, size) if isinstance(size, int) else size
        args.update(batch_size=ds.setting("batch_size"), drop_last=bool(drop(ds)),
                    aspect_side=int((h * w) ** 0.5 + 0.5))
    return args


def unit(ds):
    """What a step delivers: batch_size samples, or one with decode=False."""
    return ds.setting("batch_size") if ds.decode else 1


def drop(ds):
    """Whether a short last batch is dropped."""
    return bool(ds.settings.get("drop_last")) if ds.decode else False


def planner(ds, rank, world, workers, make_indexes=None, epoch=None, worker=0):
    """A Reader of an epoch's order (None: the next iteration's) for worker `worker` of rank
    `rank` that reads nothing (until iterated): for counts and states."""
    args = reader_args(ds, world)
    if make_indexes:
        args["make_indexes"] = make_indexes
    r = _libshard.Reader(ds.urls, epoch=ds.epoch if epoch is None else epoch,
                         rank=rank, world_size=world, worker=worker, num_workers=workers,
                         queue_depth=1, **args)
    if args.get("keys"):
        ds.warn_keys(r)
    return r


def warn_keys(reader):
    """The keys of keys= that chose no sample, counted (a planning reader's view)."""
    st = reader.stats()
    if st["keys_missing"]:
        warn(f"keys: {st['keys_missing']} of the {st['keys_given']} keys chose no sample "
             f"({st['keys_chosen']} samples chosen)", KeysWarning)


def steps_of(ds, workers, state=None):
    """A StepPlan of ds's job with `workers` DataLoader workers per rank, resumed from state
    (the one its epoch began from, or None): its steps named from the order alone
    (batch_keys, where_is)."""
    if ds.settings.get("mode") == "resampled":
        raise ValueError("batch_keys and where_is name an epoch's order, and mode='resampled' "
                         "draws shards without one")
    ds.agree_seed()
    if ds.seed is None:
        raise ValueError("batch_keys and where_is need the job's seed: give seed=")
    rank, world = split.rank_world(ds.rank, ds.world_size)
    keys = set(_settings.READER_KEYS) | set(_settings.LOADER_KEYS)
    args = {k: v for k, v in ds.settings.items() if k in keys and k not in ("trace", "layout")}
    args.update(mode=mode(ds, world), batch_size=unit(ds))
    return rank, world, _libshard.StepPlan(ds.urls, state=state, world_size=world,
                                           num_workers=workers, **args)


def batch_keys(ds, workers, state, epoch, step, rank):
    """The samples of step `step` of epoch `epoch` (dicts: __key__, __url__, index, rank,
    worker, step, slot, position, pad) on rank (None: this one; "all": every rank's), the
    epoch resumed from state (None: read from its start)."""
    mine, world, p = steps_of(ds, workers, state)
    if rank is None:
        rank = mine
    elif rank == "all":
        rank = -1
    return p.keys(int(epoch), int(step), int(rank))


def where_is(ds, workers, state, key, epoch):
    """Every place (dicts as batch_keys') of key in epoch `epoch`, every rank's."""
    return steps_of(ds, workers, state)[2].where(str(key), int(epoch))


def resumed(ds):
    """The state the next (or the running) iteration of ds's epoch begins from; None: its
    start."""
    started = ds.started
    return started[1] if started is not None and started[0] == ds.epoch else None


def batches_per_epoch(ds, workers):
    """Batches per epoch for this rank read by `workers` DataLoader workers (1 for
    num_workers=0); samples with decode=False; after a resume, those from the state on.
    Raises when the counts are not known."""
    rank, world = split.rank_world(ds.rank, ds.world_size)
    make = None if ds.settings.get("make_indexes") == "never" else "always"
    r = planner(ds, rank, world, max(1, int(workers)), make)  # plain tars: counted once
    start = resumed(ds)
    if start:
        r.restore(start)
    n = r.rank_batches(unit(ds), drop(ds))
    del r
    if n is None:
        raise counts.no_count(ds.urls, ds.settings)
    missing = counts.missing_shard(ds.urls, ds.settings)
    if missing:  # a manifest counts it, but the epoch would fail at it
        raise FileNotFoundError(f"len(): shard {shown(missing)} does not exist"
                                f"{counts.moved_hint(ds.urls)}")
    return n


def _taken_on(state):
    """ "W x K", the topology a state was taken on, from its text."""
    pairs = dict(p.split("=", 1) for p in state.split(";", 1)[0].split(":", 3)[-1].split(",")
                 if "=" in p)
    return f"{pairs.get('world_size', '?')} x {pairs.get('num_workers', '?')}"


def warn_unequal(ds, world, workers, resume=None):
    """The warning, on rank 0 alone, when mode='exact' leaves this epoch's ranks unequal
    batch counts (ShardDataset.warn_unequal asks once per dataset), from its start or from the state it resumes from (a DDP job would wait
    forever for the ranks that have finished)."""
    if split.rank_world(ds.rank, ds.world_size)[0] != 0:
        return  # said once for the job, by rank 0: it names every rank's count
    try:
        plan = planner(ds, 0, world, workers)
        if resume:
            plan.restore(resume)
        counted = [plan.rank_batches(unit(ds), drop(ds), rank=r) for r in range(world)]
    except (ValueError, OSError, _libshard.ShardError):
        return  # the epoch says what is wrong
    if None in counted:
        why = "shards without a sample count are dealt whole to the ranks"
    elif len(set(counted)) == 1:
        return
    else:
        by = {}
        for r, n in enumerate(counted):
            by.setdefault(n, []).append(r)
        why = "; ".join(f"rank{'s' if len(rs) > 1 else ''} {', '.join(map(str, rs[:8]))}"
                        f"{', ...' if len(rs) > 8 else ''} get{'' if len(rs) > 1 else 's'} "
                        f"{n} batch{'' if n == 1 else 'es'}"
                        for n, rs in sorted(by.items(), reverse=True))
    after = f" resumed from a state taken on {_taken_on(resume)}" if resume else ""
    warn(f"ShardDataset(mode='exact') with world size {world}{after}: {why}; a DDP job waits "
         f"forever for the ranks that have finished. mode='equal' (the default with several "
         f"ranks) gives every rank the same count (a resume pads the short ranks with at "
         f"most a batch of marked repeats), or join the uneven inputs: with "
         f"model.join(): ... (torch.distributed.algorithms.Join)", UnequalRanksWarning)
