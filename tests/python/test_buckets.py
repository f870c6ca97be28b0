"""Aspect-ratio buckets planned on the epoch's order (ShardReaderSettings.aspect_buckets):
every batch one bucket, each sample in its nearest bucket, every sample once, at most one
partial batch per bucket; the batches the same on any topology of the same partitions and
across an elastic resume (2x2 -> 3x1); settings it cannot honour refused, naming them."""
import io
import math
import shutil
from collections import Counter

import pytest
from PIL import Image

import libshard
from libshard import _libshard

BUCKETS = "64x96,96x64,80x80"
SIZES = [(64, 96), (96, 64), (80, 80)]
KW = dict(seed=3, batch_size=4, aspect_buckets=BUCKETS, partitions=4)


def batches(reader, limit=None):
    """The reader's batches, each a tuple of (key, bucket), cut at __batch_end__."""
    out, cur = [], []
    for s in reader:
        cur.append((s["__key__"], s["__bucket__"]))
        if s["__batch_end__"]:
            out.append(tuple(cur))
            cur = []
            if limit is not None and len(out) == limit:
                break
    assert not cur, "a batch left open"
    return out


def nearest(w, h):
    """The bucket nearest in log aspect ratio, the first of equals."""
    d = [abs(math.log(w / h) - math.log(bw / bh)) for bh, bw in SIZES]
    return SIZES[d.index(min(d))]


@pytest.fixture(scope="module")
def sizes(packed):
    return {s["__key__"]: Image.open(io.BytesIO(s["jpg"])).size for s in packed.samples}


def check_epoch(got, packed, sizes, batch=4):
    keys = [k for b in got for k, _ in b]
    assert sorted(keys) == sorted(packed.keys), "every sample once"
    for b in got:
        assert len({bucket for _, bucket in b}) == 1, "one bucket a batch"
        for k, bucket in b:
            assert bucket == nearest(*sizes[k]), (k, sizes[k], bucket)
    partial = Counter(b[0][1] for b in got if len(b) < batch)
    assert all(n == 1 for n in partial.values()), partial
    return got


def test_every_batch_is_one_bucket_and_every_sample_is_in_its_nearest(packed, sizes):
    got = check_epoch(batches(libshard.Reader(str(packed.manifest), **KW)), packed, sizes)
    assert Counter(len(b) for b in got)[4] >= len(got) - 3
    assert {b[0][1] for b in got} == set(SIZES), "the data set reaches every bucket"
    with_drop = batches(libshard.Reader(str(packed.manifest), drop_last=True, **KW))
    assert with_drop == [b for b in got if len(b) == 4], "drop_last drops the partials alone"


def test_the_batches_are_planned_the_same_on_any_topology(packed, sizes):
    one = batches(libshard.Reader(str(packed.manifest), **KW))
    four = []
    for c in range(4):
        four += batches(libshard.Reader(str(packed.manifest), rank=c // 2, world_size=2,
                                        worker=c % 2, num_workers=2, **KW))
    check_epoch(four, packed, sizes)
    assert sorted(four) == sorted(one)
    # the negative control: another seed plans other batches
    other = batches(libshard.Reader(str(packed.manifest), **dict(KW, seed=4)))
    assert sorted(other) != sorted(one)


def test_an_elastic_resume_from_2x2_to_3x1_loses_and_repeats_nothing(packed, sizes):
    one = batches(libshard.Reader(str(packed.manifest), **KW))
    got, states = [], []
    for c, k in enumerate((3, 5, 0, 7)):
        rd = libshard.Reader(str(packed.manifest), rank=c // 2, world_size=2, worker=c % 2,
                             num_workers=2, **KW)
        got += batches(rd, k) if k else []
        states.append(rd.state())
    job = _libshard.merge_states(states)
    for rank in range(3):
        rd = libshard.Reader(str(packed.manifest), rank=rank, world_size=3, **KW)
        rd.restore(job)
        got += batches(rd)
    assert not [b for b, n in Counter(got).items() if n > 1], "0 batches repeated"
    assert sorted(got) == sorted(one), "0 lost, and the batches are the planned ones"
    check_epoch(got, packed, sizes)


def test_a_state_restores_only_into_the_same_buckets(packed):
    rd = libshard.Reader(str(packed.manifest), **KW)
    batches(rd, 2)
    state = rd.state()
    for other in (dict(KW, aspect_buckets=None), dict(KW, aspect_buckets="80x80"),
                  dict(KW, batch_size=8)):
        with pytest.raises(ValueError, match="aspect_buckets and batch_size"):
            libshard.Reader(str(packed.manifest), **other).restore(state)
    again = libshard.Reader(str(packed.manifest), **KW)
    again.restore(state)
    assert batches(again) == batches(libshard.Reader(str(packed.manifest), **KW))[2:]


@pytest.mark.parametrize("spec, n", [("sdxl", None), ("auto:3", 3)])
def test_named_sets_and_auto_buckets(packed, spec, n):
    got = batches(libshard.Reader(str(packed.manifest), seed=0, batch_size=4,
                                  aspect_buckets=spec, aspect_side=96))
    assert sorted(k for b in got for k, _ in b) == sorted(packed.keys)
    used = {b[0][1] for b in got}
    if n:
        assert len(used) <= n
    for h, w in used:
        assert h % 8 == 0 and w % 8 == 0


@pytest.mark.parametrize("setting, words", [
    (dict(mode="equal"), "exact mode"),
    (dict(skip_errors=True), "skip_errors"),
    (dict(epoch_samples=10), "epoch_samples"),
    (dict(make_indexes="never"), "make_indexes is 'never'.*shardcat index --geometry"),
])
def test_settings_it_cannot_honour_yet_are_refused_by_name(packed, setting, words):
    with pytest.raises(libshard.ShardError, match=words):
        libshard.Reader(str(packed.manifest), **dict(KW, **setting))


def test_shards_without_image_sizes_get_them_made_in_the_index_cache(packed, tmp_path):
    shutil.copytree(packed.manifest.parent, tmp_path / "s")
    (tmp_path / "s" / packed.shards[2].with_suffix(".cols").name).unlink()
    cache = tmp_path / "cache"
    got = batches(libshard.Reader(str(tmp_path / "s" / packed.manifest.name), index_cache=str(cache),
                                  **KW))
    assert got == batches(libshard.Reader(str(packed.manifest), **KW))
    assert [p.suffix for p in cache.rglob("*.cols")] == [".cols"], "made once, kept"


def test_the_loader_refuses_aspect_buckets_until_it_decodes_per_bucket(packed):
    with pytest.raises(libshard.ShardError, match="aspect_buckets"):
        libshard.Loader(str(packed.manifest), batch_size=4, image_size=64, aspect_buckets=BUCKETS)
