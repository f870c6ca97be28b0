"""Epoch plans through `shardcat stream`: the rank/worker split in exact and equal modes,
with sample counts known (manifest, or a .idx beside each shard) and unknown (a brace
pattern over shards one of which has no .idx), and determinism in (seed, epoch)."""
import math
import re
from collections import Counter

import pytest

from .conftest import consumers, dupes, parse_state, split_args

WORLDS = [1, 2, 3, 4]
WORKERS = [1, 2, 3]
SEED = 11


def run_split(stream, source, world, workers, *extra):
    """{(rank, worker): [key, ...]} for every consumer of the split."""
    cs = consumers(world, workers)
    res = stream.many([[source, "--seed", str(SEED), *split_args(r, world, w, workers), *extra]
                       for r, w in cs])
    out = {}
    for c, res_ in zip(cs, res):
        res_.ok()
        out[c] = res_.keys
    return out


def partitions(stream, source, world, workers, *extra):
    """The partition count the reader chooses for this split (from the state it prints)."""
    r = stream(source, "--seed", str(SEED), *split_args(0, world, 0, workers), *extra,
               "--samples", "0").ok()
    return int(parse_state(r.state)["pairs"]["partitions"])


def per_rank(split, world):
    return [sum(len(v) for (r, _), v in split.items() if r == rank) for rank in range(world)]


SOURCES = ["manifest", "indexes", "unknown"]


def source_of(kind, ds, ds_nocount):
    return {"manifest": str(ds.manifest), "indexes": ds.pattern,
            "unknown": ds_nocount.pattern}[kind]


@pytest.mark.parametrize("shuffle", [None, "20"], ids=["noshuffle", "shuffle20"])
@pytest.mark.parametrize("kind", SOURCES)
def test_exact_union_is_every_sample_once(stream, ds, ds_nocount, kind, shuffle):
    src = source_of(kind, ds, ds_nocount)
    extra = ["--shuffle", shuffle] if shuffle else []
    if kind == "unknown":  # read without counts (auto would index the plain tars)
        extra += ["--make-indexes", "never"]
    for world in WORLDS:
        for workers in WORKERS:
            split = run_split(stream, src, world, workers, "--mode", "exact", *extra)
            union = [k for v in split.values() for k in v]
            what = f"{kind}, world {world}, workers {workers}, shuffle {shuffle}"
            assert not dupes(union), f"{what}: samples seen twice: {dupes(union)}"
            assert Counter(union) == Counter(ds.all_keys), (
                f"{what}: missing {set(ds.all_keys) - set(union)}, extra {set(union) - set(ds.all_keys)}")
            counts = per_rank(split, world)
            if kind != "unknown":
                # Counts known: contiguous ranges of the epoch, sizes differ by at most one.
                assert max(counts) - min(counts) <= 1, f"{what}: per-rank counts {counts}"
                for rank in range(world):
                    ws = [len(split[(rank, w)]) for w in range(workers)]
                    assert max(ws) - min(ws) <= 1, f"{what}: rank {rank} worker counts {ws}"
            else:
                # Counts unknown: whole shards dealt round-robin, each to one consumer.
                owner = {}
                for c, keys in split.items():
                    for k in keys:
                        assert owner.setdefault(ds.shard_of[k], c) == c, (
                            f"{what}: shard {ds.shard_of[k]} split between {owner[ds.shard_of[k]]} and {c}")


@pytest.mark.parametrize("kind", ["manifest", "indexes"])
def test_unknown_counts_are_really_uneven(stream, ds, ds_nocount, kind):
    """Sanity check of the data: with whole shards dealt, rank counts are uneven, so the
    <=1 balance of the known-count tests is the plan's doing, not the data's."""
    split = run_split(stream, ds_nocount.pattern, 4, 1, "--mode", "exact", "--make-indexes",
                      "never")
    counts = per_rank(split, 4)
    assert max(counts) - min(counts) > 1, counts
    split = run_split(stream, source_of(kind, ds, ds_nocount), 4, 1, "--mode", "exact")
    counts = per_rank(split, 4)
    assert max(counts) - min(counts) <= 1, counts


def test_plain_local_tars_are_indexed_for_their_counts_by_default(stream, ds, ds_nocount, tmp_path):
    """Exact mode needs no counts, but a state moves to any topology only with them: local
    plain tars are indexed at open by default (a walk over their headers, kept in the index
    cache), so the ranks' counts are a sample apart as with a manifest."""
    cache = tmp_path / "cache"
    split = run_split(stream, ds_nocount.pattern, 4, 1, "--mode", "exact", "--index-cache",
                      str(cache))
    counts = per_rank(split, 4)
    assert max(counts) - min(counts) <= 1, counts
    assert list(cache.glob("*.idx")), "the index made for the shard without one is kept"


@pytest.mark.parametrize("shuffle", [None, "20"], ids=["noshuffle", "shuffle20"])
@pytest.mark.parametrize("kind", SOURCES)  # "unknown": plain tars, indexed on demand
def test_equal_drop(stream, ds, ds_nocount, kind, shuffle):
    src = source_of(kind, ds, ds_nocount)
    extra = ["--shuffle", shuffle] if shuffle else []
    total = ds.total
    for world in WORLDS:
        for workers in WORKERS:
            split = run_split(stream, src, world, workers, "--mode", "equal", *extra)
            what = f"{kind}, world {world}, workers {workers}"
            # every partition the same length: fewer than P samples dropped
            p = partitions(stream, src, world, workers, "--mode", "equal", *extra)
            assert p % (world * workers) == 0, f"{what}: {p} partitions"
            kept = total - total % p
            counts = per_rank(split, world)
            assert counts == [kept // world] * world, f"{what}: per-rank counts {counts}"
            union = [k for v in split.values() for k in v]
            assert not dupes(union), f"{what}: duplicates without --pad: {dupes(union)}"
            assert set(union) <= set(ds.all_keys)
            assert len(union) == kept


def test_several_ranks_default_to_equal(stream, ds):
    """No --mode: with several ranks every rank gets the same count, as the Python dataset
    gives; --mode exact (the control) gives every sample once, ranks unequal."""
    world = next(w for w in (3, 4, 5, 7) if ds.total % w)

    def counts(*mode):
        return [len(stream(ds.manifest, "--seed", str(SEED), "--rank", str(r), "--world-size",
                           str(world), *mode).ok().keys) for r in range(world)]
    p = partitions(stream, ds.manifest, world, 1, "--mode", "equal")
    assert counts() == [(ds.total - ds.total % p) // world] * world
    exact = counts("--mode", "exact")
    assert sum(exact) == ds.total and len(set(exact)) > 1, exact
    one = stream(ds.manifest, "--seed", str(SEED)).ok().keys
    assert sorted(one) == sorted(ds.all_keys), "one rank: every sample"


def epoch_sequence(stream, src, *extra):
    """The epoch's whole sample sequence in plan order: one consumer, one stream, no buffer."""
    return stream(src, "--seed", str(SEED), "--streams", "1", *extra).ok().keys


@pytest.mark.parametrize("kind", ["manifest", "indexes"])
def test_equal_pad(stream, ds, ds_nocount, kind):
    src = source_of(kind, ds, ds_nocount)
    total = ds.total
    seq = epoch_sequence(stream, src)
    assert sorted(seq) == sorted(ds.all_keys)
    for world in WORLDS:
        for workers in WORKERS:
            split = run_split(stream, src, world, workers, "--mode", "equal", "--pad",
                              "--shuffle", "20")
            what = f"{kind}, world {world}, workers {workers}, --pad"
            p = partitions(stream, src, world, workers, "--mode", "equal", "--pad", "--shuffle",
                           "20")
            per = math.ceil(total / p) * p // world
            counts = per_rank(split, world)
            assert counts == [per] * world, f"{what}: per-rank counts {counts}"
            union = Counter(k for v in split.values() for k in v)
            assert set(union) == set(ds.all_keys), f"{what}: samples missing"
            extra = union - Counter(ds.all_keys)
            npad = per * world - total
            assert sum(extra.values()) == npad
            # The padding repeats samples from the start of the epoch's sequence, once each.
            assert all(c == 1 for c in extra.values()), f"{what}: {extra}"
            assert set(extra) == set(seq[:npad]), f"{what}: padded with {extra}, not the epoch's first {npad}"


def test_equal_without_counts_fails_clearly_when_indexes_are_not_made(stream, ds_nocount):
    for extra in ([], ["--pad"], ["--rank", "1", "--world-size", "2"]):
        r = stream(ds_nocount.pattern, "--seed", "1", "--mode", "equal", "--make-indexes",
                   "never", *extra)
        assert r.rc == 1, r
        assert r.lines == [], "no samples before the error"
        assert "equal mode" in r.err and "count" in r.err and ".tar has none" in r.err, r.err
        assert "Segmentation" not in r.err


def test_exact_without_counts_still_works_with_brace_pattern(stream, ds_nocount):
    r = stream(ds_nocount.pattern, "--seed", "1").ok()
    assert sorted(r.keys) == sorted(ds_nocount.all_keys)


@pytest.mark.parametrize("shuffle", [None, "50"], ids=["noshuffle", "shuffle50"])
def test_epochs_differ_same_multiset(stream, ds, shuffle):
    extra = ["--shuffle", shuffle] if shuffle else []
    seqs = [stream(ds.manifest, "--seed", "5", "--epoch", str(e), *extra).ok().keys
            for e in range(3)]
    for s in seqs:
        assert sorted(s) == sorted(ds.all_keys)
    assert seqs[0] != seqs[1] and seqs[1] != seqs[2] and seqs[0] != seqs[2]
    # Shard order itself changes between epochs (not only the buffer's draws).
    firsts = [[ds.shard_of[k] for k in s] for s in seqs]
    assert len({tuple(dict.fromkeys(f)) for f in firsts}) == 3
    # Split over ranks, the union per epoch is still the whole set, but ranks' shares move.
    for e in range(2):
        split = run_split(stream, ds.manifest, 2, 2, "--epoch", str(e), *extra)
        assert Counter(k for v in split.values() for k in v) == Counter(ds.all_keys)
    a = run_split(stream, ds.manifest, 2, 1, "--epoch", "0", *extra)
    b = run_split(stream, ds.manifest, 2, 1, "--epoch", "1", *extra)
    assert set(a[(0, 0)]) != set(b[(0, 0)])


@pytest.mark.parametrize("kind", SOURCES)
def test_same_seed_same_order(stream, ds, ds_nocount, kind):
    src = source_of(kind, ds, ds_nocount)
    for extra in ([], ["--shuffle", "40"], ["--shuffle", "40:5", "--rank", "1", "--world-size", "3",
                                            "--worker", "1", "--workers", "2"],
                  ["--shuffle", "40", "--streams", "7"]):
        runs = stream.many([[src, "--seed", "123", *extra]] * 4)
        seqs = [r.ok().samples for r in runs]
        assert seqs[0], extra
        assert all(s == seqs[0] for s in seqs), f"order changed between runs with {extra}"


@pytest.mark.parametrize("kind", SOURCES)
def test_different_seeds_differ(stream, ds, ds_nocount, kind):
    src = source_of(kind, ds, ds_nocount)
    for extra in ([], ["--shuffle", "40"]):
        seqs = [stream(src, "--seed", str(s), *extra).ok().keys for s in (1, 2, 3)]
        assert seqs[0] != seqs[1] and seqs[0] != seqs[2] and seqs[1] != seqs[2], extra
        assert all(sorted(s) == sorted(ds.all_keys) for s in seqs)


def test_random_seed_logged_and_reproducible(stream, ds):
    a = stream(ds.manifest, "--shuffle", "30").ok()
    b = stream(ds.manifest, "--shuffle", "30").ok()
    seeds = []
    for r in (a, b):
        m = re.findall(r"seed (\d+)", r.err)
        assert len(m) == 1, f"the random seed is not logged once on stderr:\n{r.err}"
        seeds.append(m[0])
    assert seeds[0] != seeds[1], "two runs without --seed picked the same seed"
    assert a.keys != b.keys
    again = stream(ds.manifest, "--shuffle", "30", "--seed", seeds[0]).ok()
    assert again.samples == a.samples
    assert "random" not in again.err and not re.search(r"seed \d+", again.err), again.err


def test_rank_and_world_from_environment(stream, ds):
    for rank, world in [(0, 3), (2, 3), (1, 2)]:
        via_env = stream(ds.manifest, "--seed", "4", "--shuffle", "10",
                         env={"RANK": str(rank), "WORLD_SIZE": str(world)}).ok()
        via_args = stream(ds.manifest, "--seed", "4", "--shuffle", "10",
                          "--rank", str(rank), "--world-size", str(world)).ok()
        assert via_env.keys == via_args.keys
        assert len(via_env.keys) in (ds.total // world, ds.total // world + 1)
    r = stream(ds.manifest, "--seed", "4", env={"RANK": "3", "WORLD_SIZE": "2"})
    assert r.rc == 2 and "$RANK=3 is not below $WORLD_SIZE=2" in r.err, r


def test_bad_split_arguments_rejected(stream, ds):
    for extra in (["--rank", "2", "--world-size", "2"], ["--worker", "3", "--workers", "3"],
                  ["--world-size", "0"], ["--workers", "0"]):
        r = stream(ds.manifest, "--seed", "1", *extra)
        assert r.rc == 2, (extra, r)  # usage errors
        assert r.lines == [], extra
        assert any(f"{flag}=" in r.err for flag in extra if flag.startswith("--")), r.err


def test_equal_mode_refuses_more_partitions_than_samples(stream, ds):
    """Every partition the same length: more partitions than samples would leave none (with
    --pad, only repeats), refused by name; as many as the samples read every one."""
    n = ds.total
    for extra in ([], ["--pad"]):
        r = stream(ds.manifest, "--seed", "1", "--mode", "equal", "--partitions", str(n + 1),
                   *extra)
        assert r.rc == 1 and r.lines == [], r
        assert f"{n} samples in partitions={n + 1} leave none" in r.err, r.err
    r = stream(ds.manifest, "--seed", "1", "--mode", "equal", "--partitions", str(n)).ok()
    assert sorted(r.keys) == sorted(ds.all_keys)
