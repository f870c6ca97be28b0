"""Elastic resume with the defaults, in one process: ShardLoader on simulated ranks (rank=,
world_size=) with real DataLoader workers, a checkpoint on one topology (rank 0's
state_dict, through torch.save) and the rest of the epoch on another, no setting chosen in
advance. Every sample of the epoch exactly once (equal mode: fewer than `partitions`
dropped, the repeats marked), repeats fewer than a batch a rank, the ranks' batch counts
equal in equal mode and within one in exact mode, the warning where they differ and none
where they do not, len() the batches each rank then delivers. The data: a manifest, a mix,
and plain tars (no manifest, no .idx: libshard indexes them in its cache)."""
import io
import shutil
import warnings

import pytest
import torch

from libshard.torch import ShardDataset, ShardLoader, UnequalRanksWarning

from .conftest import SLOW, within

HANG = 20 * SLOW  # seconds for one epoch with workers, their start included

BS = 4
TOPOLOGIES = [(1, 1), (2, 2), (3, 1), (2, 1), (4, 2)]
PAIRS = [(a, b) for a in TOPOLOGIES for b in TOPOLOGIES if a != b] + [((2, 2), (8, 4))]


@pytest.fixture(scope="module")
def plain(packed, tmp_path_factory):
    """The packed shards as WebDataset leaves them: tars alone, named by a brace pattern."""
    root = tmp_path_factory.mktemp("plain")
    for shard in packed.shards:
        shutil.copy(shard, root / shard.name)
    return str(root / f"train-{{000000..{len(packed.shards) - 1:06d}}}.tar")


@pytest.fixture(scope="module")
def sources(packed, plain):
    return {"manifest": str(packed.manifest), "plain": plain,
            "mix": [(str(packed.manifest), 1), (plain, 1)]}  # each read once an epoch


def dataset(url, mode, rank, world, bs=BS):
    return ShardDataset(url, seed=3, batch_size=bs, image_size=16, shuffle=20, mode=mode,
                        rank=rank, world_size=world, raw_fields="__key__;__url__;__pad__")


def ids(fields):
    """The samples' identities: the mix reads the same keys from two folders."""
    return [f"{u.rsplit('/', 2)[-2]}/{k}" for k, u in zip(fields["__key__"], fields["__url__"])]


def saved(state):
    buf = io.BytesIO()
    torch.save({"data": state}, buf)
    buf.seek(0)
    return torch.load(buf)["data"]


def run(url, mode, topo, state=None, steps=None, bs=BS):
    """Each rank of topo (world, workers) from state for `steps` batches (None: to the end):
    {"keys": [(key, pad)], "batches": [per rank], "len": [per rank], "warned": [messages],
    "state": rank 0's state_dict after its batches}."""
    world, workers = topo
    out = {"keys": [], "batches": [], "len": [], "warned": [], "state": None}
    for rank in range(world):
        loader = ShardLoader(dataset(url, mode, rank, world, bs),
                             num_workers=workers if workers > 1 else 0,
                             timeout=HANG if workers > 1 else 0)
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always", UnequalRanksWarning)
            if state is not None:
                loader.load_state_dict(saved(state))
            out["len"].append(len(loader))

            def take():
                n = 0
                for _, _, fields in loader:
                    out["keys"] += zip(ids(fields), fields["__pad__"].tolist())
                    n += 1
                    if steps is not None and n == steps:
                        break
                return n

            out["batches"].append(within(HANG * 4, take, f"rank {rank} of {topo}"))
        out["warned"] += [str(w.message) for w in said if w.category is UnequalRanksWarning]
        if rank == 0 and steps is not None:
            out["state"] = loader.state_dict()
        del loader
    return out


def epoch_keys(url, mode, partitions):
    """The epoch's samples, each once: what one consumer reads with the state's partitions
    (equal mode drops the same fewer-than-partitions on any topology)."""
    ds = ShardDataset(url, seed=3, batch_size=BS, image_size=16, shuffle=20, mode=mode,
                      rank=0, world_size=1, partitions=partitions, raw_fields="__key__;__url__")
    return sorted(k for _, _, f in ds for k in ids(f))


def partitions_of(state):
    return int(dict(p.split("=", 1) for p in state["state"].split(";")[0].split(",")
                    if "=" in p)["partitions"])


CASES = [(a, b, mode, data, cut) for i, (a, b) in enumerate(PAIRS)
         for mode in ("exact", "equal")
         for data, cut in [(("manifest", "plain", "mix")[(i + (mode == "equal")) % 3],
                            ("first", "middle")[(i // 3 + (mode == "equal")) % 2])]]


@pytest.mark.parametrize("a,b,mode,data,cut", CASES,
                         ids=[f"{a[0]}x{a[1]}-{b[0]}x{b[1]}-{m}-{d}-{c}" for a, b, m, d, c in CASES])
def test_a_checkpoint_resumes_on_another_topology(sources, a, b, mode, data, cut):
    url = sources[data]
    steps = 1 if cut == "first" else 3
    before = run(url, mode, a, steps=steps)
    assert before["batches"] == [steps] * a[0], before["batches"]
    state = before["state"]
    after = run(url, mode, b, state=state)
    what = f"{a} -> {b}, {mode}, {data}, at batch {steps}"
    # len() is what each rank then delivers
    assert after["len"] == after["batches"], f"{what}: len {after['len']}, got {after['batches']}"
    firsts = [k for k, pad in before["keys"] + after["keys"] if not pad]
    want = epoch_keys(url, mode, partitions_of(state))
    twice = sorted({k for k in firsts if firsts.count(k) > 1})
    assert not twice, f"{what}: delivered twice: {twice[:10]}"
    assert sorted(firsts) == want, f"{what}: missing {sorted(set(want) - set(firsts))[:10]}"
    pads = sum(pad for _, pad in after["keys"])
    assert pads <= BS * b[0], f"{what}: {pads} repeats over {b[0]} ranks"
    counts = after["batches"]
    if mode == "equal":
        assert len(set(counts)) == 1, f"{what}: ranks got {counts} batches"
        assert not after["warned"], after["warned"]
    else:
        assert max(counts) - min(counts) <= 1, f"{what}: ranks got {counts} batches"
        # the warning exactly when the counts differ (the negative control: none otherwise)
        unequal = len(set(counts)) > 1 and b[0] > 1
        assert bool(after["warned"]) == unequal, f"{what}: {counts}, warned {after['warned']}"
        if unequal:
            said = after["warned"][0]
            assert "mode='equal'" in said and "model.join()" in said, said
            assert f"get {max(counts)} batch" in said and f"s {min(counts)} batch" in said, said


def test_a_model_state_dict_or_an_empty_dict_is_refused_naming_what_was_expected(packed):
    loader = ShardLoader(dataset(str(packed.manifest), "exact", 0, 1))
    model = torch.nn.Linear(2, 2)
    for wrong in (model.state_dict(), {}, {"epoch": 0}, {"epoch": -1, "state": None},
                  {"epoch": 0, "state": "garbage"}, [1, 2]):
        with pytest.raises(ValueError) as e:
            loader.load_state_dict(wrong)
        assert "load_state_dict" in str(e.value), str(e.value)
    with pytest.raises(ValueError, match="expected what ShardLoader.state_dict.. returns"):
        loader.load_state_dict(model.state_dict())
    ds = dataset(str(packed.manifest), "exact", 0, 1)
    with pytest.raises(ValueError, match="not a libshard state"):
        ds.load_state_dict({})
    # a state of other settings is refused when loaded, not at the first batch
    other = dataset(str(packed.manifest), "exact", 0, 1)
    it = iter(other)
    next(it)
    state = other.state_dict()
    del it
    again = ShardDataset(str(packed.manifest), seed=3, batch_size=BS, image_size=16,
                         shuffle=21, mode="exact", rank=0, world_size=1)
    with pytest.raises(ValueError, match="shuffle_buffer"):
        again.load_state_dict(state)


def test_a_state_taken_before_every_worker_delivered_restores_on_plain_tars(sources):
    """Plain tars read without counts (make_indexes='never'): a state taken at the first
    batch, when the other workers have handed out none, restores; the rest of the epoch
    delivers every sample once."""
    url = sources["plain"]

    def ds():
        return ShardDataset(url, seed=3, batch_size=BS, image_size=16, shuffle=20,
                            mode="exact", make_indexes="never", raw_fields="__key__")
    for workers in (2, 4):
        for k in (1, 2, 3):
            if k >= workers and k > 1:
                continue
            first = ShardLoader(ds(), num_workers=workers, timeout=HANG)
            head = []
            for _, _, f in first:
                head += f["__key__"]
                if len(head) == k * BS:
                    break
            state = saved(first.state_dict())
            del first
            rest = ShardLoader(ds(), num_workers=workers, timeout=HANG)
            rest.load_state_dict(state)
            tail = [key for _, _, f in within(HANG * 4, lambda: list(rest), "the rest")
                    for key in f["__key__"]]
            keys = head + tail
            assert len(keys) == len(set(keys)) == 300, (workers, k, len(keys), len(set(keys)))


def test_the_warning_names_each_ranks_count_when_they_differ_and_is_silent_when_not(sources):
    """300 samples, batches of 9, one taken on 1 x 1: the 291 left on 4 ranks are 73, 73, 73
    and 72 samples, 9, 9, 9 and 8 batches, which a DDP job cannot take in step: the warning
    says so, once, on rank 0 (naming every rank's count); on 3 ranks (97 each, 11 batches)
    nothing is said."""
    url = sources["manifest"]
    state = run(url, "exact", (1, 1), steps=1, bs=9)["state"]
    four = run(url, "exact", (4, 1), state=state, bs=9)
    assert four["batches"] == four["len"] == [9, 9, 9, 8], four["batches"]
    assert len(four["warned"]) == 1, four["warned"]
    said = four["warned"][0]
    assert "resumed from a state taken on 1 x 1" in said, said
    assert "ranks 0, 1, 2 get 9 batches; rank 3 gets 8 batches" in said, said
    three = run(url, "exact", (3, 1), state=state, bs=9)
    assert three["batches"] == [11, 11, 11] and not three["warned"], three
