"""Weighted mixing from Python: libshard.Reader and ShardDataset take a list of (spec, weight)
pairs. Each epoch holds every source's share exactly, a small source repeated evenly, each
sample's __url__ naming its source; ranks x workers partition the mix; equal mode gives every
rank the same count; ShardLoader resumes inside a mix; bad mixes fail in the constructor.

Sources: conftest.packed (300 JPEGs in 8 shards) and a second set of 50 in 3 shards.
"""
from collections import Counter

import pytest

import libshard

from .conftest import NSAMPLES, Packed, make_imagefolder, pack

torch = pytest.importorskip("torch")
from libshard.torch import ShardDataset, ShardLoader  # noqa: E402

from .test_shardloader import HANG, batches, same, saved  # noqa: E402

SMALL = 50


@pytest.fixture(scope="module")
def small(shardpack, data_root):
    root = data_root / "mix-small-images"
    make_imagefolder(root, n=SMALL, classes=["x", "y"], seed=2)
    ds = Packed(pack(shardpack, root, data_root / "mix-small", maxcount=20))
    assert len(ds.samples) == SMALL
    return ds


def mix(packed, small, wa=0.8, wb=0.2):
    return [(str(packed.manifest), wa), ([str(small.manifest)], wb)]


def read(urls, **kw):
    r = libshard.Reader(urls, **dict(dict(seed=3, rank=0, world_size=1), **kw))
    return [(s["__url__"], s["__key__"]) for s in r]


def test_each_epoch_has_every_sources_share(packed, small):
    total = NSAMPLES + SMALL
    for epoch in range(3):
        got = read(mix(packed, small), epoch=epoch, shuffle=100)
        assert len(got) == total
        from_small = [k for u, k in got if u.startswith(str(small.manifest.parent))]
        from_big = [k for u, k in got if u.startswith(str(packed.manifest.parent))]
        assert len(from_small) == round(0.2 * total) == 70
        assert len(from_big) == 280 and len(set(from_big)) == 280, "a subset, no repeats"
        counts = Counter(from_small)
        assert set(counts) == set(small.keys) and set(counts.values()) == {1, 2}, (
            "the small source repeated as evenly as it can be")


def test_a_mix_is_deterministic_and_epochs_differ(packed, small):
    a = read(mix(packed, small), epoch=1, shuffle=50)
    assert a == read(mix(packed, small), epoch=1, shuffle=50)
    assert a != read(mix(packed, small), epoch=2, shuffle=50)


def test_ranks_and_workers_partition_the_mix(packed, small):
    whole = Counter(read(mix(packed, small, 1, 1), epoch=4))
    parts = Counter()
    for rank in range(2):
        for worker in range(3):
            parts.update(read(mix(packed, small, 1, 1), epoch=4, rank=rank, world_size=2,
                              worker=worker, num_workers=3))
    assert parts == whole


def test_equal_mode_gives_every_rank_the_same_count(packed, small):
    sizes = [len(read(mix(packed, small), mode="equal", pad=True, rank=r, world_size=3))
             for r in range(3)]
    assert sizes == [117] * 3, "350 samples padded to 351 over 3 ranks"


def test_a_shard_dataset_over_a_mix(packed, small):
    ds = ShardDataset(mix(packed, small, 3, 1), seed=1, batch_size=50, image_size=32,
                      raw_fields="__key__")
    assert len(ds) == 7
    keys = [k for _, labels, f in ds for k in f["__key__"]]
    small_keys = set(small.keys)
    assert len(keys) == NSAMPLES + SMALL
    # 0.25 of 350 is 87.5: largest remainder, ties to the first source, gives 263 and 87
    assert sum(k in small_keys for k in keys) == 87


def test_every_sample_of_a_mixed_batch_names_its_source_and_shard(packed, small):
    ds = ShardDataset(mix(packed, small, 3, 1), seed=1, batch_size=50, image_size=32,
                      raw_fields=["__key__", "__source__", "__url__"])
    small_keys = set(small.keys)
    sources = Counter()
    for _, _, f in ds:
        assert f["__source__"].dtype == torch.int64 and len(f["__url__"]) == len(f["__key__"])
        for key, src, url in zip(f["__key__"], f["__source__"].tolist(), f["__url__"]):
            assert src == (1 if key in small_keys else 0), key
            assert url.startswith(str((small if src else packed).manifest.parent)), url
            sources[src] += 1
    assert sources == {0: 263, 1: 87}
    # one source: every sample's source is 0
    one = ShardDataset(str(small.manifest), seed=1, batch_size=50, image_size=32,
                       raw_fields="__source__")
    assert [s for _, _, f in one for s in f["__source__"].tolist()] == [0] * SMALL


def test_a_raw_field_no_sample_has_is_warned_of_once(packed):
    ds = ShardDataset(str(packed.manifest), seed=1, batch_size=50, image_size=32,
                      raw_fields="jpeg;cls")
    with pytest.warns(UserWarning, match="raw_fields: no sample of the first batch has a "
                                         "field 'jpeg'") as seen:
        n = sum(1 for _ in ds)
    assert n == 6 and len([w for w in seen if "raw_fields" in str(w.message)]) == 1
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the control: a field every sample has is not
        ok = ShardDataset(str(packed.manifest), seed=1, batch_size=50, image_size=32,
                          raw_fields="cls")
        assert sum(1 for _ in ok) == 6


def test_shardloader_resumes_inside_a_mix(packed, small):
    opts = dict(seed=9, batch_size=32, image_size=32, shuffle=40, flip=True,
                raw_fields="__key__")
    full = batches(ShardLoader(ShardDataset(mix(packed, small), **opts), num_workers=2,
                               timeout=HANG))
    first = ShardLoader(ShardDataset(mix(packed, small), **opts), num_workers=2, timeout=HANG)
    head = batches(first, limit=4)
    again = ShardLoader(ShardDataset(mix(packed, small), **opts), num_workers=2, timeout=HANG)
    again.load_state_dict(saved(first.state_dict()))
    same(head + batches(again), full)


@pytest.mark.parametrize("urls,error,text", [
    ([("a.json", 0)], ValueError, "weight of source 0"),
    ([("a.json", "1")], ValueError, "weight of source 0"),
    ([("a.json", 1), "b.json"], TypeError, "item 1"),
    ([("a.json", 1, 2)], TypeError, "item 0"),
    ([(3, 1)], TypeError, "source 0"),
])
def test_bad_mixes_are_refused_by_the_constructor(urls, error, text):
    with pytest.raises(error, match=text):
        ShardDataset(urls)


def test_the_c_layer_names_what_a_mix_needs(packed, small, tmp_path):
    with pytest.raises(libshard.ShardError, match="exact or equal mode"):
        libshard.Reader(mix(packed, small), mode="resampled")
    bare = tmp_path / "bare.tar"
    bare.write_bytes(packed.shards[0].read_bytes())  # no index, no manifest: no count
    with pytest.raises(libshard.ShardError, match="sample count.*bare.tar has none"):
        libshard.Reader([(str(bare), 1), (str(small.manifest), 1)], make_indexes="never")
    # by default it is counted (indexed into the cache)
    r = libshard.Reader([(str(bare), 1), (str(small.manifest), 1)], seed=1,
                        index_cache=str(tmp_path / "ix"))
    assert r.epoch_length == 40 + SMALL
