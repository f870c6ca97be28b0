"""`shardcat stream --mix W:SPEC`: several weighted sources, one of them a .tar.zst set, mixed
by the reader: exact shares per epoch, the consumers of a split partitioning the mix, and
resume from a printed state, as a user runs it from the shell."""
from collections import Counter

import pytest

from .conftest import consumers, split_args
from .test_resume import check_resume

SEED = 7


def mix_args(ds, ds_zst, wa="3", wb="1"):
    return ["--mix", f"{wa}:{ds.manifest}", "--mix", f"{wb}:{ds_zst.pattern}", "--seed", str(SEED)]


def test_every_epoch_holds_each_sources_share(stream, ds, ds_zst):
    total = ds.total + ds_zst.total
    for epoch in (0, 1):
        res = stream(*mix_args(ds, ds_zst), "--epoch", str(epoch), "--shuffle", "50").ok()
        urls = [u for _, u in res.samples]
        assert len(urls) == total
        from_zst = sum(u.endswith(".tar.zst") for u in urls)
        assert from_zst == total // 4, "a quarter of the epoch, exactly"


def test_epoch_samples_sets_the_size(stream, ds, ds_zst):
    res = stream(*mix_args(ds, ds_zst, "1", "1"), "--epoch-samples", "100").ok()
    assert len(res.samples) == 100
    assert sum(u.endswith(".tar.zst") for _, u in res.samples) == 50


@pytest.mark.parametrize("world,workers", [(2, 2), (3, 1)])
def test_consumers_partition_the_mix(stream, ds, ds_zst, world, workers):
    whole = Counter(stream(*mix_args(ds, ds_zst)).ok().samples)
    parts = Counter()
    for r, w in consumers(world, workers):
        parts.update(stream(*mix_args(ds, ds_zst), *split_args(r, world, w, workers)).ok().samples)
    assert parts == whole


@pytest.mark.parametrize("shuffle", [None, "30"])
def test_resume_in_a_mix(stream, ds, ds_zst, shuffle):
    args = mix_args(ds, ds_zst) + ["--rank", "1", "--world-size", "2", "--epoch", "2"]
    if shuffle:
        args += ["--shuffle", shuffle]
    check_resume(stream, args)


def test_mix_errors_are_named(stream, ds):
    res = stream("--mix", f"x:{ds.manifest}")
    assert res.rc == 2 and "WEIGHT:SPEC" in res.err
    res = stream("--mix", f"1:{ds.manifest}", str(ds.manifest))
    assert res.rc == 2 and "not both" in res.err
    res = stream("--mix", f"1:{ds.manifest}", "--mode", "resampled")
    assert res.rc == 1 and "exact or equal mode" in res.err


def test_a_state_taken_with_other_weights_or_sources_is_refused(stream, ds, ds_zst):
    head = stream(*mix_args(ds, ds_zst), "--samples", "20").ok()
    rest = stream(*mix_args(ds, ds_zst), "--state", head.state).ok()
    assert len(rest.keys) > 0  # the same mix resumes
    r = stream(*mix_args(ds, ds_zst, "1", "1"), "--state", head.state)
    assert r.rc == 1 and "the sources' weights (fingerprint) is " in r.err, r.err
    r = stream("--mix", f"1:{ds.manifest}", "--seed", str(SEED), "--state", head.state)
    assert r.rc == 1 and "the number of sources is 2 in the state and 1 here" in r.err, r.err
