"""Resume: stop `shardcat stream` after N samples (--samples N prints the state on stderr),
start a new process with --state, and the two outputs concatenated must be exactly the
uninterrupted sequence; on another number of ranks and workers, every consumer's output
before and after together is the epoch, each sample once."""
import re

import pytest

from .conftest import dupes, parse_state, split_args

SEED = 7

SHUFFLES = [None, "30", "100:10"]
SPLITS = [(0, 1, 0, 1), (1, 3, 1, 2), (3, 4, 2, 3)]


def stop_points(n):
    """0, 1, a middle, last-1, last (and two arbitrary ones)."""
    pts = {0, 1, n // 2, max(n - 1, 0), n, n // 3, (2 * n) // 3 + 1}
    return sorted(p for p in pts if 0 <= p <= n)


def check_resume(stream, args, expect_len=None, points=None):
    """Runs args uninterrupted, then stopped and resumed at several points."""
    full = stream(*args).ok()
    seq = full.samples
    assert seq, f"empty sequence for {args}"
    if expect_len is not None:
        assert len(seq) == expect_len, (len(seq), expect_len)
    for n in points if points is not None else stop_points(len(seq)):
        head = stream(*args, "--samples", str(n)).ok()
        assert head.samples == seq[:n], f"--samples {n} is not a prefix of the sequence ({args})"
        state = head.state
        st = parse_state(state)
        assert int(st["pairs"]["delivered"]) == n, f"state {state} after {n} samples"
        assert st["seed"] == SEED, state
        tail = stream(*args, "--state", state).ok()
        assert head.samples + tail.samples == seq, (
            f"resume at {n} of {len(seq)} ({state}) differs from the uninterrupted run "
            f"for {args}: first difference at {first_diff(head.samples + tail.samples, seq)}")
    return seq


def first_diff(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i, x, y
    return min(len(a), len(b)), len(a), len(b)


@pytest.mark.parametrize("split", SPLITS, ids=lambda s: "r{}w{}-k{}n{}".format(*s))
@pytest.mark.parametrize("mode", ["exact", "equal"])
@pytest.mark.parametrize("shuffle", SHUFFLES, ids=lambda s: f"buf{s}")
def test_resume_counts_known(stream, ds, shuffle, mode, split):
    args = [ds.manifest, "--seed", str(SEED), *split_args(*split, mode=mode)]
    if shuffle:
        args += ["--shuffle", shuffle]
    check_resume(stream, args)


@pytest.mark.parametrize("shuffle", SHUFFLES, ids=lambda s: f"buf{s}")
def test_resume_equal_pad(stream, ds, shuffle):
    # The last rank's range wraps around to the start of the epoch's sequence.
    args = [ds.manifest, "--seed", str(SEED), "--mode", "equal", "--pad",
            *split_args(3, 4, 1, 2)]
    if shuffle:
        args += ["--shuffle", shuffle]
    check_resume(stream, args)


@pytest.mark.parametrize("split", SPLITS, ids=lambda s: "r{}w{}-k{}n{}".format(*s))
@pytest.mark.parametrize("shuffle", SHUFFLES, ids=lambda s: f"buf{s}")
def test_resume_counts_unknown(stream, ds_nocount, shuffle, split):
    args = [ds_nocount.pattern, "--seed", str(SEED), *split_args(*split)]
    if shuffle:
        args += ["--shuffle", shuffle]
    check_resume(stream, args)


@pytest.mark.parametrize("shuffle", SHUFFLES, ids=lambda s: f"buf{s}")
@pytest.mark.parametrize("source", ["manifest", "pattern", "unknown"])
def test_resume_zst(stream, ds_zst, ds_zst_nocount, source, shuffle):
    src = {"manifest": ds_zst.manifest, "pattern": ds_zst.pattern,
           "unknown": ds_zst_nocount.pattern}[source]
    for split in [(0, 1, 0, 1), (1, 2, 1, 2)]:
        args = [src, "--seed", str(SEED), *split_args(*split)]
        if shuffle:
            args += ["--shuffle", shuffle]
        seq = check_resume(stream, args)
        if split == (0, 1, 0, 1):
            assert sorted(k for k, _ in seq) == sorted(ds_zst.all_keys)


@pytest.mark.parametrize("streams", ["1", "3"])
def test_resume_other_epoch(stream, ds, streams):
    """The state carries the epoch: resuming continues epoch 2, not epoch 0."""
    args = [ds.manifest, "--seed", str(SEED), "--shuffle", "30", "--streams", streams]
    full = stream(*args, "--epoch", "2").ok().samples
    assert full != stream(*args).ok().samples
    head = stream(*args, "--epoch", "2", "--samples", "41").ok()
    assert head.state.split(":")[1] == "2"
    tail = stream(*args, "--state", head.state).ok()
    assert head.samples + tail.samples == full


def test_state_with_another_seed_is_refused(stream, ds):
    head = stream(ds.manifest, "--seed", str(SEED), "--samples", "10").ok()
    r = stream(ds.manifest, "--seed", str(SEED + 1), "--state", head.state)
    assert r.rc == 1, r
    assert "seed" in r.err, r.err
    assert r.lines == []


@pytest.mark.parametrize("change,named", [
    (["--shuffle", "31"], "shuffle_buffer (shuffle=) is 30 in the state and 31 here"),
    (["--world-size", "2", "--rank", "0", "--partitions", "8"],
     "partitions is 4 in the state and 8 here"),
    # with two ranks the default is equal
    (["--world-size", "2", "--rank", "0", "--mode", "exact"], "mode is equal in the state and exact here (--mode equal restores it)"),
    (["--world-size", "2", "--rank", "0", "--streams", "2"], "streams is 4 in the state and 2 here"),
])
def test_a_state_taken_with_other_settings_is_refused_naming_them(stream, ds, change, named):
    taken = [ds.manifest, "--seed", str(SEED), "--shuffle", "30", "--partitions", "4"]
    head = stream(*taken, "--world-size", "2", "--rank", "0", "--samples", "10").ok()
    r = stream(*taken, *change, "--state", head.state)
    assert r.rc == 1, r
    assert named in r.err, r.err
    assert r.lines == []


def test_a_state_taken_on_another_shard_list_is_refused(stream, ds):
    head = stream(ds.manifest, "--seed", str(SEED), "--samples", "10").ok()
    n = len(ds.shards)
    fewer = str(ds.dir / f"train-{{000000..{n - 2:06d}}}{ds.ext}")
    r = stream(fewer, "--seed", str(SEED), "--state", head.state)
    assert r.rc == 1, r
    assert f"the number of shards listed is {n} in the state and {n - 1} here" in r.err, r.err
    assert "the shard list (fingerprint of its shards' names and counts)" in r.err, r.err


def test_rank_0s_state_continues_rank_1(stream, ds):
    """A checkpoint written by rank 0 restores rank 1 where it stands: the same position."""
    args = [ds.manifest, "--seed", str(SEED), "--shuffle", "30", "--world-size", "2",
            "--mode", "equal"]
    state = stream(*args, "--rank", "0", "--samples", "17").ok().state
    whole = stream(*args, "--rank", "1").ok().samples
    rest = stream(*args, "--rank", "1", "--state", state).ok().samples
    assert rest == whole[17:] and rest


@pytest.mark.parametrize("mode", ["exact", "equal"])
def test_a_state_resumes_on_a_topology_its_partitions_do_not_fit(stream, ds, mode):
    """partitions=4 taken on 2 ranks goes on on 3 (and on 8 of 2 workers): what is left is
    spread over them, a partition split at a sample where it must; every sample once (equal
    mode: fewer than 4 dropped), the ranks a sample apart (equal: level, with repeats)."""
    taken = [ds.manifest, "--seed", str(SEED), "--shuffle", "30", "--partitions", "4",
             "--mode", mode]
    heads = [stream(*taken, "--world-size", "2", "--rank", str(r), "--samples", "10").ok()
             for r in range(2)]
    state = heads[0].state
    # the job's cut (what is left, its edges) alike on every rank; each state's seal its own
    assert state.split(";")[1:3] == heads[1].state.split(";")[1:3], "the job's cut"
    kept = ds.total - (ds.total % 4 if mode == "equal" else 0)
    for world, workers in ((3, 1), (8, 2)):
        tails = stream.many([taken + ["--world-size", str(world), "--rank", str(r),
                                      "--workers", str(workers), "--worker", str(w),
                                      "--state", state]
                             for r in range(world) for w in range(workers)])
        keys = [k for t in heads + tails for k in t.ok().keys]
        per_rank = [sum(len(tails[r * workers + w].keys) for w in range(workers))
                    for r in range(world)]
        if mode == "exact":
            assert sorted(keys) == sorted(ds.all_keys), (world, workers, dupes(keys))
            assert max(per_rank) - min(per_rank) <= 1, per_rank
        else:
            assert len(set(keys)) == kept, (world, workers, len(set(keys)), kept)
            assert len(set(per_rank)) == 1 and len(keys) - kept <= world, per_rank


def v3_of(state, partitions):
    """libshard 0.4's form of a v4 state taken in a fresh epoch's blocks (every partition
    delivered from its start): the runs of each partition's count delivered."""
    head, left, _edges, _sum = state.split(";")
    total = int(re.search(r"[,:]total=(\d+)", head).group(1))
    q, r = divmod(total, partitions)
    starts = [i * q + i * r // partitions for i in range(partitions + 1)]
    spans = [tuple(map(int, x.split("-"))) for x in left[len("left="):].split(",") if x]
    runs = []
    for p in range(partitions):
        a, b = starts[p], starts[p + 1]
        first = min([max(x, a) for x, y in spans if y > a and x < b] + [b])
        runs.append(f"{p}:{first - a}" if first < b else f"{p}:d")
    return "v3" + head[2:] + ";" + ",".join(runs)


def test_a_state_of_libshard_0_4_resumes_as_its_own_form_does(stream, ds):
    """A v3 state (runs of partitions) reads as the v4 one: the same rest of the epoch, on
    the topology it was taken on and on another."""
    taken = [ds.manifest, "--seed", str(SEED), "--shuffle", "30", "--partitions", "4",
             "--mode", "exact"]
    head = stream(*taken, "--world-size", "2", "--rank", "0", "--samples", "17").ok()
    old = v3_of(head.state, 4)
    assert old.startswith("v3:") and ";0:17,1:0,2:17,3:0" in old, old
    for world in (2, 3):
        for r in range(world):
            args = [*taken, "--world-size", str(world), "--rank", str(r)]
            new_tail = stream(*args, "--state", head.state).ok().keys
            assert stream(*args, "--state", old).ok().keys == new_tail, (world, r)


def test_states_of_the_order_before_partitions_say_how_to_go_on(stream, ds):
    r = stream(ds.manifest, "--seed", str(SEED), "--state", "v2:3:10:7:world_size=1,rank=0")
    assert r.rc == 1 and r.lines == [], r
    assert "before canonical partitions" in r.err and "set_epoch(4)" in r.err, r.err


@pytest.mark.parametrize("bad", ["v1:0:5", "v2:0:5:7", "v1:0:x:7", "v1:0:5:7:9", "", "v1:0:100000:7",
                                 "v3:0:7", "v3:0:7:mode=exact", "v3:0:7:partitions=x;0:0",
                                 "v3:0:7:mode=exact,partitions=1,total=307;0:5000",
                                 "v3:0:7:mode=exact,partitions=1,total=307;0:d,1:0",
                                 "v4:0:7:mode=exact,partitions=1,total=307;left=0-5000;edges=",
                                 "v4:0:7:mode=exact,partitions=1,total=307;left=9-3;edges=",
                                 "v4:0:7:mode=exact,partitions=1,total=307;left=0-307;edges=5",
                                 "v4:0:7:mode=exact,partitions=1,total=307;0:0"])
def test_malformed_or_impossible_state_is_refused(stream, ds, bad):
    r = stream(ds.manifest, "--seed", str(SEED), "--state", bad)
    assert r.rc == 1, (bad, r)
    assert r.lines == [], bad
    assert r.err.strip(), bad


@pytest.mark.parametrize("shuffle", [None, "30"], ids=lambda s: f"buf{s}")
@pytest.mark.parametrize("split", [(0, 1, 0, 1), (2, 3, 1, 2)], ids=lambda s: "r{}w{}-k{}n{}".format(*s))
def test_resume_resampled(stream, ds, split, shuffle):
    args = [ds.manifest, "--seed", str(SEED), "--mode", "resampled", "--epoch-samples", "90",
            *split_args(*split)]
    if shuffle:
        args += ["--shuffle", shuffle]
    seq = check_resume(stream, args, expect_len=90)
    assert set(k for k, _ in seq) <= set(ds.all_keys)


def test_resume_resampled_counts_unknown(stream, ds_nocount):
    args = [ds_nocount.pattern, "--seed", str(SEED), "--mode", "resampled",
            "--epoch-samples", "70", "--shuffle", "20"]
    check_resume(stream, args, expect_len=70, points=[0, 1, 33, 69, 70])


def test_resampled_draws_with_replacement(stream, ds):
    """Resampled epochs: the length asked for, consumers differ, shards drawn with replacement."""
    n = 3 * ds.total
    a = stream(ds.manifest, "--seed", "9", "--mode", "resampled", "--epoch-samples", str(n),
               "--streams", "1").ok()
    assert len(a.keys) == n
    # Three epochs' worth of whole-shard draws from ~20 shards: some shard comes twice.
    assert len(set(a.keys)) < len(a.keys)
    b = stream(ds.manifest, "--seed", "9", "--mode", "resampled", "--epoch-samples", str(n),
               "--streams", "1", "--rank", "1", "--world-size", "2").ok()
    assert len(b.keys) == n and b.keys != a.keys


@pytest.mark.parametrize("shuffle", [None, "25"], ids=lambda s: f"buf{s}")
def test_resume_resampled_endless(stream, ds, shuffle):
    """No --epoch-samples: an endless stream; --samples cuts it, the state continues it."""
    args = [ds.manifest, "--seed", str(SEED), "--mode", "resampled", "--rank", "1",
            "--world-size", "2"]
    if shuffle:
        args += ["--shuffle", shuffle]
    full = stream(*args, "--samples", "400").ok()
    assert len(full.samples) == 400  # more than the data set: it goes on
    for n in (0, 1, 150, 399):
        head = stream(*args, "--samples", str(n)).ok()
        tail = stream(*args, "--state", head.state, "--samples", str(400 - n)).ok()
        assert head.samples + tail.samples == full.samples, n


def opens(err):
    m = re.search(r"(\d+) shard opens", err)
    assert m, err
    return int(m.group(1))


def test_resume_seeks_instead_of_reading(stream, ds):
    """With counts known, restoring skips the consumed samples by index: resuming at the
    epoch's last sample opens only the shard that holds it."""
    args = [ds.manifest, "--seed", str(SEED), "--streams", "1", "--partitions", "1"]
    whole = stream(*args).ok().samples
    state = stream(*args, "--samples", str(ds.total - 1)).ok().state
    r = stream(*args, "--state", state, "--stats").ok()
    assert r.samples == [whole[-1]]
    assert opens(r.err) == 1, r.err
    args += ["--shuffle", "30"]
    state = stream(*args, "--samples", str(ds.total - 40)).ok().state
    r = stream(*args, "--state", state, "--stats").ok()
    assert len(r.samples) == 40
    assert re.search(r"\b40 samples", r.err), r.err


ELASTIC = [((2, 1), (3, 1)), ((1, 1), (2, 2)), ((2, 2), (1, 3)), ((3, 2), (2, 3)), ((4, 1), (1, 1))]


@pytest.mark.parametrize("shuffle", [None, "30"], ids=lambda s: f"buf{s}")
@pytest.mark.parametrize("before,after", ELASTIC, ids=lambda t: "{}x{}".format(*t))
def test_a_state_resumes_on_another_topology_every_sample_once(stream, ds, before, after,
                                                                shuffle):
    """Every consumer of W x K stops after 23 samples; rank 0's state restores the W' x K'
    consumers of the new job; before and after together: the epoch, each sample once."""
    base = [ds.manifest, "--seed", str(SEED), "--mode", "exact", "--partitions", "12"]
    if shuffle:
        base += ["--shuffle", shuffle]
    (w, k), (w2, k2) = before, after
    heads = stream.many([base + split_args(r, w, i, k) + ["--samples", "23"]
                         for r in range(w) for i in range(k)])
    state = heads[0].ok().state
    tails = stream.many([base + split_args(r, w2, i, k2) + ["--state", state]
                         for r in range(w2) for i in range(k2)])
    seen = [key for res in heads + tails for key in res.ok().keys]
    assert not dupes(seen), f"{before} -> {after}: twice: {dupes(seen)}"
    assert sorted(seen) == sorted(ds.all_keys), f"{before} -> {after}: missing " \
        f"{set(ds.all_keys) - set(seen)}"


def test_the_control_a_state_of_another_cut_loses_or_repeats(stream, ds):
    """The same resume from a state taken after 10 samples instead of 23: the check above
    sees the difference."""
    base = [ds.manifest, "--seed", str(SEED), "--mode", "exact", "--partitions", "12"]
    heads = stream.many([base + split_args(r, 2, 0, 1) + ["--samples", "23"] for r in range(2)])
    early = stream(*base, *split_args(0, 2, 0, 1), "--samples", "10").ok().state
    tails = stream.many([base + split_args(r, 3, 0, 1) + ["--state", early] for r in range(3)])
    seen = [key for res in heads + tails for key in res.ok().keys]
    assert dupes(seen)


def test_a_resampled_state_draws_on_on_another_topology(stream, ds):
    """Resampled mode has no exactly-once: a state taken on one consumer restores 2 ranks,
    each going on from its partitions' next draws for the rest of epoch_samples."""
    args = [ds.manifest, "--seed", str(SEED), "--mode", "resampled", "--epoch-samples", "120",
            "--partitions", "4", "--shuffle", "10"]
    head = stream(*args, "--samples", "50").ok()
    st = parse_state(head.state)
    assert int(st["pairs"]["draws"]) >= 1 and st["pairs"]["delivered"] == "50", head.state
    tails = [stream(*args, *split_args(r, 2, 0, 1, mode="resampled"), "--state", head.state).ok()
             for r in (0, 1)]
    for t in tails:
        assert len(t.keys) == 70 and set(t.keys) <= set(ds.all_keys)
    fresh = stream(*args, *split_args(0, 2, 0, 1, mode="resampled")).ok()
    assert tails[0].keys != fresh.keys[:70], "rank 0 went on, not from the epoch's first draws"
