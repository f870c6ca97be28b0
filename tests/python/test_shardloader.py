"""libshard.torch.ShardLoader: a DataLoader whose state_dict() / load_state_dict() resume
mid-epoch with any number of worker processes, through torch.save / torch.load, to exactly
the batches (keys, labels, pixels) of the uninterrupted run, and on another number of
workers and ranks to every sample not yet delivered, once, with the same pixels; set_epoch
reaching persistent workers; and the errors that replace silent loss (a dataset's own
state_dict after worker iteration, a state of other settings).

The data set is conftest.packed: 300 JPEGs in 8 shards with a manifest.
"""
import gc
import re
import io
from collections import Counter

import pytest

torch = pytest.importorskip("torch")
from torch.utils.data import DataLoader  # noqa: E402

from libshard.torch import ShardDataset, ShardLoader  # noqa: E402

from .conftest import SLOW, NSAMPLES, within  # noqa: E402

HANG = 20 * SLOW  # seconds for one epoch with workers, their start included


def settings(**kw):
    return dict(dict(seed=5, batch_size=32, image_size=40, shuffle=64, flip=True,
                     raw_fields="__key__"), **kw)


def batches(loader, limit=None, what="an epoch"):
    """[(keys, labels, images)] from loader, at most limit batches."""

    def run():
        out = []
        for images, labels, fields in loader:
            out.append((fields["__key__"], labels.tolist(), images.clone()))
            if limit is not None and len(out) == limit:
                break
        return out

    return within(HANG, run, what)


def same(a, b):
    assert [k for k, _, _ in a] == [k for k, _, _ in b], "keys differ"
    assert [y for _, y, _ in a] == [y for _, y, _ in b], "labels differ"
    for i, ((_, _, x), (_, _, y)) in enumerate(zip(a, b)):
        assert torch.equal(x, y), f"batch {i}: pixels differ"


def saved(state):
    """The state through torch.save and torch.load, as a checkpoint carries it."""
    buf = io.BytesIO()
    torch.save({"data": state}, buf)
    buf.seek(0)
    return torch.load(buf)["data"]


@pytest.mark.parametrize("workers,k", [(2, 1), (2, 4), (2, 7), (3, 5), (0, 3)])
def test_resume_after_k_batches_is_the_uninterrupted_epoch(packed, workers, k):
    url = str(packed.manifest)
    opts = dict(timeout=HANG) if workers else {}
    full = batches(ShardLoader(ShardDataset(url, **settings()), num_workers=workers, **opts))
    keys = [key for ks, _, _ in full for key in ks]
    assert sorted(keys) == sorted(packed.keys), "one epoch: every sample once"

    first = ShardLoader(ShardDataset(url, **settings()), num_workers=workers, **opts)
    head = batches(first, limit=k, what=f"the first {k} batches")
    state = saved(first.state_dict())
    assert set(state) == {"epoch", "seed", "state", "next"}
    assert state["next"] == k % max(1, workers)
    assert len(repr(state)) < 1000, "a small state"

    again = ShardLoader(ShardDataset(url, **settings()), num_workers=workers, **opts)
    again.load_state_dict(state)
    again.set_epoch(state["epoch"])  # the training loop's call keeps the restored position
    tail = batches(again, what="the rest of the epoch")
    same(head + tail, full)


def test_a_resumed_loader_can_be_checkpointed_again(packed):
    url = str(packed.manifest)
    full = batches(ShardLoader(ShardDataset(url, **settings()), num_workers=2, timeout=HANG))
    got, state = [], None
    for k in (2, 3, None):  # three runs, each resumed from the last one's checkpoint
        ld = ShardLoader(ShardDataset(url, **settings()), num_workers=2, timeout=HANG)
        if state is not None:
            ld.load_state_dict(state)
        got += batches(ld, limit=k)
        state = saved(ld.state_dict())
    same(got, full)


def test_persistent_workers_see_set_epoch(packed):
    url = str(packed.manifest)
    ld = ShardLoader(ShardDataset(url, **settings()), num_workers=2, persistent_workers=True,
                     timeout=HANG)
    e0 = batches(ld)
    ld.set_epoch(1)
    e1 = batches(ld)
    fresh = ShardDataset(url, **settings())
    fresh.set_epoch(1)
    want = batches(ShardLoader(fresh, num_workers=2, timeout=HANG))
    same(e1, want)
    assert [k for k, _, _ in e0] != [k for k, _, _ in e1], "epoch 1 has its own order"
    # a plain DataLoader with persistent workers: set_epoch reaches them too
    ds = ShardDataset(url, **settings())
    dl = DataLoader(ds, batch_size=None, num_workers=2, persistent_workers=True, timeout=HANG)
    batches(dl)
    ds.set_epoch(1)
    plain = batches(dl)
    assert Counter(k for ks, _, _ in plain for k in ks) == Counter(packed.keys)
    assert sorted(ks for ks, _, _ in plain) == sorted(ks for ks, _, _ in want), (
        "the workers read epoch 1's order")


def test_resume_with_persistent_workers_then_the_next_epoch(packed):
    url = str(packed.manifest)
    ref = ShardLoader(ShardDataset(url, **settings()), num_workers=2, persistent_workers=True,
                      timeout=HANG)
    full0 = batches(ref)
    ref.set_epoch(1)
    full1 = batches(ref)

    first = ShardLoader(ShardDataset(url, **settings()), num_workers=2, timeout=HANG)
    head = batches(first, limit=3)
    ld = ShardLoader(ShardDataset(url, **settings()), num_workers=2, persistent_workers=True,
                     timeout=HANG)
    ld.load_state_dict(saved(first.state_dict()))
    same(head + batches(ld), full0)
    ld.set_epoch(1)  # another epoch: from its beginning
    same(batches(ld), full1)


def test_set_epoch_to_another_epoch_drops_a_restored_position(packed):
    url = str(packed.manifest)
    first = ShardLoader(ShardDataset(url, **settings()), num_workers=0)
    batches(first, limit=2)
    state = first.state_dict()
    ld = ShardLoader(ShardDataset(url, **settings()), num_workers=0)
    ld.load_state_dict(state)
    ld.set_epoch(1)
    n = sum(len(ks) for ks, _, _ in batches(ld))
    assert n == NSAMPLES, "epoch 1 from its start"
    # the dataset alone (num_workers=0) keeps its restored position through set_epoch too
    ds = ShardDataset(url, **settings())
    it = iter(ds)
    for _ in range(3):
        next(it)
    st = ds.state_dict()
    ds2 = ShardDataset(url, **settings())
    ds2.load_state_dict(st)
    ds2.set_epoch(0)
    rest = within(HANG, lambda: sum(len(y) for _, y, _ in ds2), "the rest")
    assert rest == NSAMPLES - 3 * 32


def test_dataset_state_dict_after_workers_says_to_use_shardloader(packed):
    ds = ShardDataset(str(packed.manifest), **settings())
    dl = DataLoader(ds, batch_size=None, num_workers=2, timeout=HANG)
    batches(dl, limit=2)
    with pytest.raises(RuntimeError, match="ShardLoader"):
        ds.state_dict()


def samples(batches_):
    """{key: pixels} of batches, and the keys in order."""
    keys = [k for ks, _, _ in batches_ for k in ks]
    return {k: x[i] for ks, _, x in batches_ for i, k in enumerate(ks)}, keys


@pytest.mark.parametrize("before,after", [(0, 2), (2, 3), (3, 0)])
def test_a_state_resumes_on_another_worker_count_every_sample_once(packed, before, after):
    """Taken with `before` workers, loaded with `after`: the rest of the epoch is every
    sample not yet delivered, once, each with the pixels (crop, flip) of the uninterrupted
    run."""
    url = str(packed.manifest)
    opts = lambda n: dict(timeout=HANG) if n else {}
    kw = settings(partitions=12)  # 300 samples: the automatic count would be 1
    full = batches(ShardLoader(ShardDataset(url, **kw), num_workers=before, **opts(before)))
    first = ShardLoader(ShardDataset(url, **kw), num_workers=before, **opts(before))
    head = batches(first, limit=3)
    again = ShardLoader(ShardDataset(url, **kw), num_workers=after, **opts(after))
    again.load_state_dict(saved(first.state_dict()))
    tail = batches(again)
    want, order = samples(full)
    got, keys = samples(head + tail)
    assert Counter(keys) == Counter(order), "every sample once"
    for k in keys:
        assert torch.equal(got[k], want[k]), f"{k}: other pixels than the uninterrupted run's"


def test_a_state_of_another_seed_or_of_0_3_is_refused(packed):
    url = str(packed.manifest)
    first = ShardLoader(ShardDataset(url, **settings()), num_workers=0)
    batches(first, limit=1)
    state = first.state_dict()
    with pytest.raises(ValueError, match="this dataset was given seed=6"):
        ShardLoader(ShardDataset(url, **settings(seed=6))).load_state_dict(state)
    old = {"epoch": 2, "seed": 5, "workers": 2, "states": ["v2:2:64:5:world_size=1", None],
           "next": 0, "batches": 2}
    for target in (ShardLoader(ShardDataset(url, **settings())),
                   ShardDataset(url, **settings())):
        with pytest.raises(ValueError, match=r"before canonical partitions.*set_epoch\(3\)"):
            target.load_state_dict(old)
    with pytest.raises(ValueError, match="batch_size"):
        ShardLoader(ShardDataset(url, **settings()), batch_size=8)
    with pytest.raises(TypeError, match="ShardDataset"):
        ShardLoader([1, 2, 3])


def test_a_state_whose_epoch_was_edited_is_refused(packed):
    """{"epoch": 3} around a state taken in epoch 0 would resume epoch 0's order as epoch 3:
    refused, naming both; the control: the state as saved loads."""
    url = str(packed.manifest)
    first = ShardLoader(ShardDataset(url, **settings()), num_workers=0)
    batches(first, limit=1)
    state = first.state_dict()
    assert state["epoch"] == 0 and state["state"].startswith("v4:0:")
    for target in (ShardLoader(ShardDataset(url, **settings())), ShardDataset(url, **settings())):
        with pytest.raises(ValueError, match="'epoch' is 3 and 'state' was taken in epoch 0"):
            target.load_state_dict(dict(state, epoch=3))
        target.load_state_dict(state)


def test_a_loaders_state_and_a_datasets_state_are_one_form(packed):
    """A ShardLoader's state loads into a ShardDataset (num_workers=0) and the other way."""
    url = str(packed.manifest)
    first = ShardLoader(ShardDataset(url, **settings()), num_workers=2, timeout=HANG)
    head = batches(first, limit=3)
    ds = ShardDataset(url, **settings())
    ds.load_state_dict(saved(first.state_dict()))
    rest = [k for _, _, f in ds for k in f["__key__"]]
    assert Counter([k for ks, _, _ in head for k in ks] + rest) == Counter(packed.keys)


def test_a_dataset_made_without_a_seed_takes_the_states(packed):
    """A checkpoint's state loads into a dataset made without seed= (a new process draws
    its own): the rest of the epoch is the uninterrupted one's."""
    url = str(packed.manifest)
    opts = {k: v for k, v in settings().items() if k != "seed"}
    first = ShardLoader(ShardDataset(url, **opts), num_workers=2, timeout=HANG)
    head = batches(first, limit=3)
    state = saved(first.state_dict())
    full = batches(ShardLoader(ShardDataset(url, **opts, seed=state["seed"]), num_workers=2,
                               timeout=HANG))
    again = ShardLoader(ShardDataset(url, **opts), num_workers=2, timeout=HANG)
    again.load_state_dict(state)
    same(head + batches(again), full)
    ds = ShardDataset(url, **opts)
    ds.load_state_dict({"epoch": 0, "state": None, "seed": state["seed"]})
    assert ds.seed == state["seed"]


def test_spawned_workers_share_the_plan(packed):
    """Workers started with spawn get the dataset pickled: the epoch and the resume plan
    still reach them (shared memory, not a copy)."""
    url = str(packed.manifest)
    opts = dict(num_workers=2, timeout=60, multiprocessing_context="spawn",
                persistent_workers=True)
    full = batches(ShardLoader(ShardDataset(url, **settings()), num_workers=2, timeout=HANG))
    first = ShardLoader(ShardDataset(url, **settings()), num_workers=2, timeout=HANG)
    head = batches(first, limit=3)
    ld = ShardLoader(ShardDataset(url, **settings()), **opts)
    try:
        ld.load_state_dict(saved(first.state_dict()))
        tail = within(60, lambda: batches(ld), "the rest, spawned")
        same(head + tail, full)
        ld.set_epoch(1)
        e1 = within(60, lambda: batches(ld), "epoch 1, spawned")
        assert [k for k, _, _ in e1] != [k for k, _, _ in full]
        assert sum(len(k) for k, _, _ in e1) == NSAMPLES
    finally:
        # persistent workers and their queues' feeder threads go now, not at some later
        # collection: a later DataLoader forks this process
        del ld
        gc.collect()


def _refusal(url, taken, here):
    """The error a ShardDataset(url, **here) gives loading the state of a
    ShardDataset(url, **taken) after two batches: at once, not at the first batch."""
    first = ShardDataset(url, **settings(**taken))
    it = iter(first)
    next(it), next(it)
    state = saved(first.state_dict())
    again = ShardDataset(url, **settings(**here))
    with pytest.raises(ValueError) as e:
        again.load_state_dict(state)
    return str(e.value)


@pytest.mark.parametrize("taken,here,named", [
    (dict(partitions=4), dict(partitions=8), "partitions is 4 in the state and 8 here"),
    ({}, dict(shuffle=32), "shuffle_buffer (shuffle=) is 64 in the state and 32 here"),
    (dict(mode="exact"), dict(mode="equal"), "mode is exact in the state and equal here"),
    ({}, dict(shuffle_shards=False), "shuffle_shards is 1 in the state and 0 here"),
    ({}, dict(epoch_samples=100), "epoch_samples is 0 in the state and 100 here"),
    ({}, dict(streams=2), "streams is 4 in the state and 2 here"),
])
def test_a_state_is_refused_where_a_setting_differs_naming_it(packed, taken, here, named):
    why = _refusal(str(packed.manifest), taken, here)
    assert named in why, why
    assert "would repeat some samples and skip others" in why
    assert "or go on from the next epoch's start with these: set_epoch(1), no state" in why, why


def test_a_state_is_refused_by_another_shard_list_or_mix(packed, tmp_path):
    url = str(packed.manifest)
    fewer = [str(p) for p in packed.shards[:-1]]
    first = ShardDataset(url, **settings())
    it = iter(first)
    next(it)
    state = first.state_dict()
    again = ShardDataset(fewer, **settings())
    with pytest.raises(ValueError, match=r"the number of shards listed is 8 in the state and 7 "
                                         r"here.*the shard list \(fingerprint"):
        again.load_state_dict(state)
    half = [str(p) for p in packed.shards]
    mixed = [(half[:4], 0.5), (half[4:], 0.5)]
    first = ShardDataset(mixed, **settings())
    it = iter(first)
    next(it)
    state = first.state_dict()
    again = ShardDataset([(half[:4], 0.7), (half[4:], 0.3)], **settings())
    with pytest.raises(ValueError, match=r"the sources' weights \(fingerprint\) is"):
        again.load_state_dict(state)
    again = ShardDataset(url, **settings())
    with pytest.raises(ValueError, match="the number of sources is 2 in the state and 1 here"):
        again.load_state_dict(state)


def test_a_state_follows_its_shards_to_another_folder_but_not_to_other_shards(packed, tmp_path):
    """The list's fingerprint is of the shards' names and counts: the same shards copied
    elsewhere (or served over HTTP, or from a bucket) continue the epoch; the same files
    under each other's names are another list."""
    import json
    import shutil
    moved = tmp_path / "moved"
    moved.mkdir()
    for f in packed.manifest.parent.iterdir():
        if f.is_file():  # the set, not the pack's record
            shutil.copy(f, moved / f.name)
    first = ShardDataset(str(packed.manifest), **settings())
    it = iter(first)
    head = [k for _, _, fields in (next(it), next(it)) for k in fields["__key__"]]
    state = saved(first.state_dict())
    again = ShardDataset(str(moved / packed.manifest.name), **settings())
    again.load_state_dict(state)
    rest = [k for _, _, fields in again for k in fields["__key__"]]
    assert Counter(head + rest) == Counter(packed.keys)
    meta = json.loads(packed.manifest.read_text())  # two shards' names swapped
    a, b = meta["shardlist"][0], meta["shardlist"][1]
    a["url"], b["url"] = b["url"], a["url"]
    a["nsamples"], b["nsamples"] = b["nsamples"], a["nsamples"]
    (moved / "swapped.json").write_text(json.dumps(meta))
    again = ShardDataset(str(moved / "swapped.json"), **settings())
    with pytest.raises(ValueError, match=r"the shard list \(fingerprint of its shards' names"):
        again.load_state_dict(state)


def test_rank_0s_state_continues_every_rank(packed):
    """The common checkpoint: rank 0 saves, every rank loads it; each goes on from its own
    position, which agrees with rank 0's."""
    url = str(packed.manifest)
    place = dict(world_size=2, mode="equal")
    rank0 = ShardDataset(url, **settings(rank=0, **place))
    it = iter(rank0)
    next(it), next(it)
    state = saved(rank0.state_dict())
    whole = [k for _, _, f in ShardDataset(url, **settings(rank=1, **place)) for k in f["__key__"]]
    rank1 = ShardDataset(url, **settings(rank=1, **place))
    rank1.load_state_dict(state)
    rest = [k for _, _, f in rank1 for k in f["__key__"]]
    assert rest == whole[64:] and len(rest) > 0


def test_a_state_written_by_0_2_says_how_to_go_on(packed):
    url = str(packed.manifest)
    ds = ShardDataset(url, **settings())
    with pytest.raises(ValueError, match=r"before canonical partitions.*set_epoch\(1\)"):
        ds.load_state_dict({"epoch": 0, "state": "v1:0:32:5", "seed": 5})


def test_state_dict_raises_once_workers_iterated_after_a_look_in_this_process(packed):
    """A first look in the main process, then an epoch in DataLoader workers: the old
    position would be a wrong answer."""
    ds = ShardDataset(str(packed.manifest), **settings())
    next(iter(ds))
    assert ds.state_dict()["state"]
    batches(DataLoader(ds, batch_size=None, num_workers=2, timeout=HANG), limit=2)
    with pytest.raises(RuntimeError, match="last iterated in DataLoader worker processes"):
        ds.state_dict()
    next(iter(ds))  # back in this process: its own position again
    assert ds.state_dict()["state"]


def test_several_ranks_get_equal_batch_counts_by_default_and_exact_warns(packed):
    """300 samples over 7 ranks in batches of 42 (exact: 6 ranks 43 samples, 1 rank 42): by
    default each rank the same number of batches; mode='exact' gives them 1 and 2 and says
    so once."""
    import warnings
    from libshard.torch import UnequalRanksWarning
    url = str(packed.manifest)
    opts = dict(seed=1, batch_size=42, image_size=16, shuffle=0)
    counts, lengths = [], []
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnequalRanksWarning)
        for rank in range(7):
            ds = ShardDataset(url, rank=rank, world_size=7, **opts)
            counts.append(sum(1 for _ in ds))
            lengths.append(len(ds))
    assert counts == lengths == [1] * 7  # 42 samples each, the remainder dropped
    exact = []
    for rank in range(7):
        ds = ShardDataset(url, rank=rank, world_size=7, mode="exact", **opts)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            exact.append(sum(1 for _ in ds))
            sum(1 for _ in ds)  # a second epoch: said once
        said = [x for x in w if issubclass(x.category, UnequalRanksWarning)]
        assert len(said) == (rank == 0), [str(x.message) for x in w]
        if said:
            assert re.search(r"ranks( \d,){5} \d get 2 batches; rank \d gets 1 batch",
                             str(said[0].message)), said[0].message
            assert "mode='equal'" in str(said[0].message)
    assert sorted(exact) == [1] + [2] * 6, exact  # the negative control: unequal
    one = ShardDataset(url, rank=0, world_size=1, **opts)
    assert one.setting("mode") is None and sum(1 for _ in one) == len(one) == 8  # exact: 300


def test_batches_kept_with_num_workers_0_stay_right_over_three_epochs(packed):
    """list(ds) and outputs gathered across epochs: the batches the caller keeps are copied
    out before the ring runs dry, and each keeps its own pixels."""
    url = str(packed.manifest)
    opts = settings(batch_size=16, batches=4)
    ds = ShardDataset(url, **opts)
    kept = []
    for epoch in range(3):
        ds.set_epoch(epoch)
        kept.append(list(DataLoader(ds, batch_size=None, num_workers=0)))
    fresh = ShardDataset(url, **opts)
    for epoch in range(3):
        fresh.set_epoch(epoch)
        want = [(f["__key__"], y.clone(), x.clone()) for x, y, f in fresh]
        got = kept[epoch]
        assert len(got) == len(want) == -(-NSAMPLES // 16)
        for (x, y, f), (k, y2, x2) in zip(got, want):
            assert f["__key__"] == k and torch.equal(y, y2) and torch.equal(x, x2)
    assert len({x.data_ptr() for e in kept for x, _, _ in e}) == 3 * len(kept[0])


def test_batches_let_go_are_views_of_the_ring_not_copies(packed):
    """The control of the test above: a loop that keeps nothing gets views into the ring's
    buffers (at most batches= distinct addresses), no copy."""
    ds = ShardDataset(str(packed.manifest), **settings(batch_size=16, batches=4))
    ptrs = {x.data_ptr() for x, _, _ in ds}
    assert 1 <= len(ptrs) <= 4, len(ptrs)


@pytest.mark.parametrize("workers", [0, 2])
def test_a_dataloader_that_batches_the_batches_again_is_refused(packed, workers):
    """DataLoader(ds) without batch_size=None would stack them into (1, B, ...) tensors."""
    ds = ShardDataset(str(packed.manifest), **settings())
    it = iter(DataLoader(ds, num_workers=workers, timeout=HANG if workers else 0))
    with pytest.raises(ValueError, match="batch_size=None"):
        next(it)
    del it  # its workers end here, not in a later test's collection
    gc.collect()
    images, labels, _ = next(iter(DataLoader(ds, batch_size=None)))
    assert images.shape[0] == 32  # the control: batch_size=None gives libshard's batches
