"""Indexed access: libshard.torch.IndexedShardDataset (len, ds[i], ds.raw(i)) against a
streaming read of the same shards, DistributedSampler over two ranks, DataLoader workers,
and libshard.wids.ShardListDataset's sample layout as wids's source defines it.

The data set is conftest.packed: 300 JPEGs in 8 shards (7 x 40 + 20) with a manifest.
"""
import io
import json
import os
from collections import Counter

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from torch.utils.data import DataLoader, DistributedSampler  # noqa: E402

import libshard  # noqa: E402
from libshard.torch import IndexedShardDataset  # noqa: E402
from libshard.wids import ShardListDataset, ShardListSampler, ChunkedSampler  # noqa: E402

from .conftest import SLOW, NSAMPLES, webdataset_samples, within  # noqa: E402

HANG = 20 * SLOW


def streamed(packed):
    """Every sample in shard order, read with Python's tarfile (WebDataset's grouping)."""
    out = []
    for shard in packed.shards:
        out += webdataset_samples(shard)
    return out


def test_every_index_is_the_streamed_sample(packed):
    ds = IndexedShardDataset(str(packed.manifest), image_size=32, crop="center")
    want = streamed(packed)
    assert len(ds) == len(want) == NSAMPLES
    for i, s in enumerate(want):
        raw = ds.raw(i)
        assert raw["__key__"] == s["__key__"] and raw["__index__"] == i
        assert raw["jpg"] == s["jpg"] and raw["cls"] == s["cls"], s["__key__"]
        assert os.path.samefile(raw["__shard__"], packed.shards[i // 40])
        assert raw["__shardindex__"] == i % 40
    # the last one by a negative index, and past the end
    assert ds.raw(-1)["__key__"] == want[-1]["__key__"]
    with pytest.raises(IndexError):
        ds.raw(NSAMPLES)


def test_items_are_decoded_images_and_labels(packed):
    ds = IndexedShardDataset(str(packed.manifest), image_size=(24, 32), crop="center")
    want = streamed(packed)
    for i in (0, 41, 299):
        x, y = ds[i]
        assert tuple(x.shape) == (3, 24, 32) and x.dtype == torch.uint8
        assert y == int(want[i]["cls"]) == packed.class_label(want[i]["__key__"])
        alone = libshard.decode(want[i]["jpg"], 32, 24, crop="center", layout="nchw")
        assert x.numpy().tobytes() == alone
    f = IndexedShardDataset(str(packed.manifest), image_size=24, dtype="float32")
    assert f[3][0].dtype == torch.float32


def test_augmentation_follows_seed_epoch_and_index(packed):
    ds = IndexedShardDataset(str(packed.manifest), image_size=32, flip=True, seed=4)
    a, b = ds[10][0], ds[10][0]
    assert torch.equal(a, b), "the same index in the same epoch: the same draws"
    ds.set_epoch(1)
    assert not torch.equal(a, ds[10][0]), "another epoch: other draws"
    other = IndexedShardDataset(str(packed.manifest), image_size=32, flip=True, seed=4)
    other.set_epoch(1)
    assert torch.equal(other[10][0], ds[10][0])


def test_distributed_sampler_over_two_ranks_sees_each_sample_once(packed):
    ds = IndexedShardDataset(str(packed.manifest), image_size=16, crop="center")
    keys = []
    for rank in range(2):
        sampler = DistributedSampler(ds, num_replicas=2, rank=rank, shuffle=True, seed=3)
        sampler.set_epoch(1)
        keys += [ds.raw(i)["__key__"] for i in sampler]
    assert Counter(keys) == Counter(packed.keys), "every sample once over the two ranks"


def test_dataloader_workers_read_their_own_shards(packed):
    ds = IndexedShardDataset(str(packed.manifest), image_size=16, crop="center", open_files=2)
    dl = DataLoader(ds, batch_size=32, shuffle=True, num_workers=2, timeout=HANG,
                    generator=torch.Generator().manual_seed(0))
    labels = within(HANG + 5, lambda: torch.cat([y for _, y in dl]).tolist(), "an epoch")
    assert Counter(labels) == packed.label_counts()


def test_a_shard_without_an_index_is_indexed_in_the_cache(packed, tmp_path):
    lone = tmp_path / "lone.tar"
    lone.write_bytes(packed.shards[0].read_bytes())  # no .idx beside it
    ds = IndexedShardDataset(str(lone), index_cache=tmp_path / "ix", decode=False)
    assert len(ds) == 40 and ds[39]["__key__"] == streamed(packed)[39]["__key__"]
    assert sorted(os.listdir(tmp_path)) == ["ix", "lone.tar"], "nothing beside the shard"


# ---- libshard.wids ---------------------------------------------------------------------------


def test_wids_sample_layout(packed):
    """wids's ShardListDataset.__getitem__: each field keyed by its extension with the
    leading dot, plus __key__, __dataset__, __index__, __shard__, __shardindex__; with no
    transformation the fields are streams, with "PIL" images are PIL images and .cls ints."""
    manifest = json.loads(packed.manifest.read_text())
    assert "shardlist" in manifest and all("nsamples" in s for s in manifest["shardlist"])
    raw = ShardListDataset(str(packed.manifest), transformations=[])
    want = streamed(packed)
    assert len(raw) == NSAMPLES and raw.lengths == [40] * 7 + [20]
    s = raw[45]
    assert set(s) == {".jpg", ".cls", ".json", "__key__", "__dataset__", "__index__", "__shard__",
                      "__shardindex__"}
    assert s["__key__"] == want[45]["__key__"] and s["__index__"] == 45
    assert s["__shardindex__"] == 5 and s["__shard__"].endswith("train-000001.tar")
    assert isinstance(s[".jpg"], io.IOBase) and s[".jpg"].read() == want[45]["jpg"]
    pil = ShardListDataset(str(packed.manifest))[45]
    assert pil[".jpg"].size[0] > 0 and pil[".cls"] == int(want[45]["cls"])
    assert np.asarray(pil[".jpg"]).shape[2] == 3
    arr = ShardListDataset(str(packed.manifest), transformations="numpy")[45]
    assert isinstance(arr[".jpg"], np.ndarray)
    assert ShardListDataset(str(packed.manifest)).add_transform(lambda d: d["__key__"])[45] == \
        want[45]["__key__"]


def test_wids_list_of_shards_and_samplers(packed):
    shards = [{"url": str(p), "nsamples": n} for p, n in zip(packed.shards, [40] * 7 + [20])]
    ds = ShardListDataset(shards, transformations=[])
    assert len(ds) == NSAMPLES and ds[299]["__key__"] == streamed(packed)[299]["__key__"]
    order = list(ShardListSampler(ds, seed=1))
    assert sorted(order) == list(range(NSAMPLES))
    # the first epoch keeps shard order (wids shuffles shards from the second), each shard's
    # indexes shuffled within it
    assert sorted(order[:40]) == list(range(40)) and order[:40] != list(range(40))
    chunks = list(ChunkedSampler(ds, chunksize=100, seed=2))
    assert sorted(chunks) == list(range(NSAMPLES)) and sorted(chunks[:100]) == list(range(100))
    with pytest.raises(NotImplementedError, match="localname"):
        ShardListDataset(shards, localname=lambda u: u)
