"""libshard's Python side on shards made by shardpack: raw mode against Python's tarfile and
WebDataset's grouping rule, the C Loader's batches, libshard.torch.ShardDataset with torch's
DataLoader (0 and 2 workers), labels against the manifest's classes, resume, determinism,
error policy, and the WebDataset-style builder.

The data set (conftest.packed): 300 JPEGs of 48..120 pixels in 5 ImageFolder classes, packed
with `shardpack -c 40` into 8 shards (7 x 40 + 20) with a manifest.
"""
import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path
from collections import Counter

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from torch.utils.data import DataLoader  # noqa: E402

import libshard  # noqa: E402
import libshard.webdataset as lwds  # noqa: E402
from libshard.torch import ShardDataset, ShardLoader, ShardSkipWarning  # noqa: E402

from PIL import Image  # noqa: E402

from .conftest import SLOW, NSAMPLES, encode, jpeg, textured, webdataset_samples, within  # noqa: E402

HANG = 10 * SLOW  # seconds: any one epoch here takes well under 1 s (DataLoader timeout, watchdogs)

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


def same_sample(ours, theirs):
    """Field by field: the same key, fields and bytes; __url__ names the same shard."""
    assert ours["__key__"] == theirs["__key__"]
    assert set(ours) == set(theirs), (ours["__key__"], sorted(ours), sorted(theirs))
    for k, v in theirs.items():
        if k == "__url__":
            assert os.path.samefile(ours[k], v), (ours[k], v)
        elif k != "__key__":
            assert isinstance(ours[k], bytes) and ours[k] == v, (ours["__key__"], k)


def write_tar(path, members, dirs=()):
    """A tar written by Python's tarfile: the folders named, then (name, bytes) members."""
    with tarfile.open(path, "w") as tf:
        for name in dirs:
            d = tarfile.TarInfo(name)
            d.type = tarfile.DIRTYPE
            tf.addfile(d)
        for name, data in members:
            ti = tarfile.TarInfo(name)
            ti.size = len(data)
            tf.addfile(ti, io.BytesIO(data))


def loader_epoch(manifest, **kw):
    """(keys, labels, batch sizes, batch indexes) of one C Loader epoch."""
    keys, labels, sizes, index = [], [], [], []

    def run():
        for b in libshard.Loader(str(manifest), **kw):
            keys.extend(b.keys)
            labels.extend(np.frombuffer(b.labels, np.int64).tolist())
            sizes.append(b.size)
            index.append(b.index)
            assert memoryview(b).shape[0] == b.size

    within(HANG, run, "a Loader epoch")
    return keys, labels, sizes, index


def dataset_epoch(ds, num_workers=0, clone=True):
    """[(images, labels)] of one epoch through torch's DataLoader (batch_size=None)."""
    kw = dict(timeout=HANG) if num_workers else {}
    dl = DataLoader(ds, batch_size=None, num_workers=num_workers, **kw)

    def run():
        return [(x.clone() if clone else x.shape, y.clone()) for x, y in dl]

    return within(HANG + 5, run, f"a DataLoader epoch with {num_workers} workers")


def labels_of(batches):
    return torch.cat([y for _, y in batches]).tolist()


# ---- raw mode ------------------------------------------------------------------------------


def test_raw_reader_equals_tarfile_in_order(packed):
    """One stream, no shard shuffle, no shuffle buffer: exactly WebDataset's sequence."""
    ours = within(HANG, lambda: list(libshard.Reader(str(packed.manifest), seed=0,
                                                     shuffle_shards=False, streams=1)),
                  "a raw epoch")
    assert [s["__key__"] for s in ours] == packed.keys
    for a, b in zip(ours, packed.samples):
        same_sample(a, b)


def test_raw_reader_interleaved_streams_keep_each_shard_in_order(packed):
    """The default reads 4 shards at once and interleaves them: every sample once, equal to
    tarfile's, and each shard's samples still in their tar order."""
    ours = within(HANG, lambda: list(libshard.Reader(str(packed.manifest), seed=0,
                                                     shuffle_shards=False)),
                  "a raw epoch")
    assert sorted(s["__key__"] for s in ours) == sorted(packed.keys)
    by_key = {s["__key__"]: s for s in packed.samples}
    for s in ours:
        same_sample(s, by_key[s["__key__"]])
    for shard, samples in zip(packed.shards, packed.by_shard):
        seq = [s["__key__"] for s in ours if os.path.samefile(s["__url__"], shard)]
        assert seq == [s["__key__"] for s in samples], f"{shard.name} out of order"


def test_raw_grouping_rule_on_a_handmade_tar(tmp_path):
    """WebDataset's rule on names shardpack would never write: a dotted directory,
    multi-dot and upper-case suffixes, entries that are not sample fields."""
    path = tmp_path / "hand.tar"
    members = [("a.b/s1.JPG", b"jpeg bytes"), ("a.b/s1.Seg.PNG", b"png bytes"),
               ("a.b/s1.cls", b"3"), ("README", b"no dot: skipped"),
               ("__meta__", b"skipped"), ("s2.txt", b"text"), ("s2.json", b"{}"),
               ("d/s3.tar.gz", b"gz"), ("d/s3.cls", b"1"), ("d/s4.cls", b"")]
    write_tar(path, members, dirs=["a.b"])
    expected = webdataset_samples(path)
    assert [s["__key__"] for s in expected] == ["a.b/s1", "s2", "d/s3", "d/s4"]
    assert set(expected[0]) == {"__key__", "__url__", "jpg", "seg.png", "cls"}
    ours = within(HANG, lambda: list(libshard.Reader(str(path), seed=0)), "a raw epoch")
    assert [s["__key__"] for s in ours] == [s["__key__"] for s in expected]
    for a, b in zip(ours, expected):
        same_sample(a, b)


@pytest.mark.parametrize("num_workers", [0, 2])
def test_raw_mode_through_dataloader_covers_every_sample_once(packed, num_workers):
    ds = ShardDataset(str(packed.manifest), decode=False, seed=0, shuffle=50)
    kw = dict(timeout=HANG) if num_workers else {}
    dl = DataLoader(ds, batch_size=None, num_workers=num_workers, **kw)
    samples = within(HANG + 5, lambda: list(dl), "a raw DataLoader epoch")
    keys = [s["__key__"] for s in samples]
    assert Counter(keys) == Counter(packed.keys), "every key exactly once"
    by_key = {s["__key__"]: s for s in packed.samples}
    for s in samples:
        same_sample(s, by_key[s["__key__"]])
    assert len(ds) == NSAMPLES


def mapped_shards(paths):
    names = {str(p) for p in paths}
    with open("/proc/self/maps") as f:
        return {line.split(None, 5)[-1].strip() for line in f} & names


@pytest.mark.parametrize("streams", [1, 2])
def test_shuffle_buffer_does_not_keep_every_shard_mapped(packed, streams):
    """Samples wait in the shuffle buffer long after their shard was read; they must not
    keep the shard mapped (and resident) meanwhile: at most the shards being read stay
    open, whatever the number of shards in the epoch, and no sample is lost."""
    r = libshard.Reader(str(packed.manifest), seed=0, shuffle=200, streams=streams, queue_depth=8)
    most, keys = 0, []
    for s in r:
        keys.append(s["__key__"])
        most = max(most, len(mapped_shards(packed.shards)))
    assert Counter(keys) == Counter(packed.keys)
    # per stream: the shard it reads and the one its last pulled sample came from (the
    # queue of 8 is shorter than a shard), plus up to `streams` shards already passed
    assert most <= 3 * streams, f"{most} of {len(packed.shards)} shards mapped at once"
    del r


# ---- the C Loader: keys and labels -------------------------------------------------------


def test_loader_covers_every_sample_once(packed):
    keys, labels, sizes, index = loader_epoch(packed.manifest, seed=0, batch_size=32,
                                              image_size=64, shuffle=100)
    assert Counter(keys) == Counter(packed.keys), "every sample exactly once per epoch"
    assert sizes == [32] * 9 + [12]
    assert index == list(range(10))
    assert keys != packed.keys, "shuffled: shard order and buffer"
    l = libshard.Loader(str(packed.manifest), seed=0, batch_size=32, image_size=64)
    assert l.epoch_batches == 10
    del l


def test_loader_worker_split_is_a_partition(packed):
    """What each DataLoader worker reads (worker=w of num_workers=2): disjoint, complete, and
    even (each as many partitions, within a sample of each other)."""
    parts = [loader_epoch(packed.manifest, seed=0, batch_size=32, image_size=48,
                          worker=w, num_workers=2)[0] for w in range(2)]
    assert not set(parts[0]) & set(parts[1])
    assert Counter(parts[0] + parts[1]) == Counter(packed.keys)
    assert abs(len(parts[0]) - len(parts[1])) <= 1, [len(p) for p in parts]


def test_labels_match_the_manifests_classes(packed, imagefolder):
    classes = packed.classes
    # shardpack's class list is torchvision ImageFolder's: the folder names, sorted
    assert classes == sorted(p.name for p in imagefolder.iterdir() if p.is_dir())
    assert classes != ["zebra", "Apple", "mango", "banana", "cherry"], "the test needs a reorder"
    keys, labels, _, _ = loader_epoch(packed.manifest, seed=1, batch_size=50, image_size=32,
                                      shuffle=64, flip=True)
    assert len(keys) == NSAMPLES
    for k, y in zip(keys, labels):
        assert y == packed.class_label(k), f"{k}: label {y}, class list says {packed.class_label(k)}"
        assert y == packed.label_of[k], f"{k}: label {y}, its .cls member says {packed.label_of[k]}"


# ---- ShardDataset with torch's DataLoader --------------------------------------------------


@pytest.mark.parametrize("num_workers", [0, 2])
def test_dataset_covers_every_sample_once(packed, num_workers):
    ds = ShardDataset(str(packed.manifest), seed=0, batch_size=32, image_size=64)
    batches = dataset_epoch(ds, num_workers, clone=False)
    labels = labels_of(batches)
    assert len(labels) == NSAMPLES
    assert Counter(labels) == packed.label_counts()
    assert len(ds) == len(batches), f"len(ds) {len(ds)}, yielded {len(batches)} batches"
    for shape, y in batches:
        assert tuple(shape) == (len(y), 3, 64, 64) and y.dtype == torch.int64
    if num_workers == 0:
        # the same sequence as the C Loader, whose keys say which sample each label is
        keys, loader_labels, _, _ = loader_epoch(packed.manifest, seed=0, batch_size=32,
                                                 image_size=64)
        assert labels == loader_labels
        assert labels == [packed.class_label(k) for k in keys]


def test_len_names_a_missing_shard_or_those_without_counts(packed, tmp_path):
    shards = [str(p) for p in packed.shards[:2]] + [str(tmp_path / "gone-000.tar")]
    with pytest.raises(FileNotFoundError, match="gone-000.tar"):
        len(ShardDataset(shards, batch_size=32))
    bare = tmp_path / "bare.tar"
    bare.write_bytes(packed.shards[0].read_bytes())  # no .idx beside it
    with pytest.raises(TypeError, match="1 shard.s. have none: .*bare.tar"):
        len(ShardDataset([str(packed.shards[1]), str(bare)], batch_size=32,
                         make_indexes="never"))
    assert len(ShardDataset([str(packed.shards[1]), str(bare)], batch_size=32)) == 3
    assert len(ShardDataset(str(packed.manifest), batch_size=32)) == -(-NSAMPLES // 32)
    with pytest.raises(FileNotFoundError, match="gone-000.tar"):
        len(ShardDataset(f"file://{tmp_path}/gone-000.tar", batch_size=32))
    # a manifest counts its shards, but one of them is gone: named, not counted
    import shutil
    copy = tmp_path / "copy"
    shutil.copytree(packed.manifest.parent, copy)
    (copy / packed.shards[3].name).unlink()
    with pytest.raises(FileNotFoundError, match=packed.shards[3].name + " does not exist"):
        len(ShardDataset(str(copy / packed.manifest.name), batch_size=32))
    # a manifest copied away from its shards: where its names lead is said
    away = tmp_path / "away"
    away.mkdir()
    (away / packed.manifest.name).write_bytes(packed.manifest.read_bytes())
    with pytest.raises(FileNotFoundError, match="resolve against the manifest's own folder"):
        len(ShardDataset(str(away / packed.manifest.name), batch_size=32))


def test_len_counts_each_workers_partial_batch(packed):
    """With 2 workers each worker yields its own partial last batch: 300 samples in batches
    of 64 are 150 + 150 per worker, 3 + 3 = 6 batches; len(ds) (which DataLoader reports as
    len(loader)) must say so, not ceil(300 / 64) = 5."""
    ds = ShardDataset(str(packed.manifest), seed=0, batch_size=64, image_size=32)
    dl = DataLoader(ds, batch_size=None, num_workers=2, timeout=HANG)
    n = within(HANG + 5, lambda: sum(1 for _ in dl), "a DataLoader epoch with 2 workers")
    assert len(dl) == n, f"len(DataLoader) = len(ds) = {len(dl)}, but it yielded {n} batches"


def test_workers_after_an_epoch_in_the_main_process(packed):
    """A validation pass in the main process (num_workers=0), then training with workers on
    the same dataset object: the workers are forked from a process that has a Loader."""
    ds = ShardDataset(str(packed.manifest), seed=0, batch_size=32, image_size=48)
    first = labels_of(dataset_epoch(ds, 0, clone=False))
    assert len(first) == NSAMPLES
    again = labels_of(dataset_epoch(ds, 2, clone=False))
    assert Counter(again) == Counter(first)


def _resume_settings():
    return dict(seed=5, batch_size=32, image_size=48, shuffle=100, flip=True)


@pytest.mark.parametrize("k", [1, 4])
def test_resume_with_state_dict(packed, k):
    """Stop after k batches, state_dict(), a new dataset, load_state_dict(), the rest: the
    same labels and the same uint8 images as one uninterrupted epoch (each sample's crop and
    flip come from its position in the epoch)."""
    full = dataset_epoch(ShardDataset(str(packed.manifest), **_resume_settings()))
    assert len(full) == 10

    ds = ShardDataset(str(packed.manifest), **_resume_settings())
    head = []

    def take_head():
        it = iter(ds)
        for _ in range(k):
            x, y = next(it)
            head.append((x.clone(), y.clone()))
        return ds.state_dict()

    state = within(HANG, take_head, f"the first {k} batches")
    assert state["seed"] == 5 and state["epoch"] == 0 and state["state"]

    ds2 = ShardDataset(str(packed.manifest), **_resume_settings())
    ds2.load_state_dict(state)
    tail = dataset_epoch(ds2)
    got = head + tail
    assert labels_of(got) == labels_of(full)
    assert len(got) == len(full)
    for i, ((a, _), (b, _)) in enumerate(zip(got, full)):
        assert torch.equal(a, b), f"batch {i}: images differ after resuming at {k}"


def test_resume_refuses_a_state_from_another_seed(packed):
    ds = ShardDataset(str(packed.manifest), **_resume_settings())
    st = ds.state_dict()
    other = ShardDataset(str(packed.manifest), **dict(_resume_settings(), seed=6))
    with pytest.raises(ValueError):
        other.load_state_dict(st)


def test_raw_resume_with_state_dict(packed):
    full = [s["__key__"] for s in within(HANG, lambda: list(ShardDataset(
        str(packed.manifest), decode=False, seed=3, shuffle=64)), "a raw epoch")]
    ds = ShardDataset(str(packed.manifest), decode=False, seed=3, shuffle=64)

    def head():
        it = iter(ds)
        return [next(it)["__key__"] for _ in range(111)], ds.state_dict()

    keys, state = within(HANG, head, "111 raw samples")
    ds2 = ShardDataset(str(packed.manifest), decode=False, seed=3, shuffle=64)
    ds2.load_state_dict(state)
    keys += [s["__key__"] for s in within(HANG, lambda: list(ds2), "the rest")]
    assert keys == full


@pytest.mark.parametrize("op", ["restore", "set_epoch"])
def test_loader_restore_and_set_epoch_right_after_open(packed, op):
    """Loader.restore / set_epoch while the loader is already decoding ahead (it starts at
    open) must not lose its decode threads: the next epoch still completes."""
    first = libshard.Loader(str(packed.manifest), seed=0, batch_size=32, image_size=64, threads=2)
    for _ in range(3):
        next(first)
    state = first.state()
    del first
    for attempt in range(4):
        l = libshard.Loader(str(packed.manifest), seed=0, batch_size=32, image_size=64, threads=2)
        if op == "restore":
            l.restore(state)
            expect = NSAMPLES - 96
        else:
            l.set_epoch(1)
            expect = NSAMPLES
        n = within(5, lambda: sum(b.size for b in l), f"attempt {attempt}: an epoch after {op}")
        assert n == expect
        del l


# ---- determinism, epochs, dtypes, layouts, batch sizes ------------------------------------


def test_same_seed_same_tensors_set_epoch_changes_order(packed):
    kw = dict(seed=11, batch_size=32, image_size=48, shuffle=100, flip=True)
    a = dataset_epoch(ShardDataset(str(packed.manifest), **kw))
    b = dataset_epoch(ShardDataset(str(packed.manifest), **kw))
    assert labels_of(a) == labels_of(b)
    assert all(torch.equal(x, y) for (x, _), (y, _) in zip(a, b))
    other = dataset_epoch(ShardDataset(str(packed.manifest), **dict(kw, seed=12)))
    assert labels_of(other) != labels_of(a)
    ds = ShardDataset(str(packed.manifest), **kw)
    ds.set_epoch(1)
    e1 = dataset_epoch(ds)
    assert labels_of(e1) != labels_of(a), "epoch 1 must be another order"
    assert Counter(labels_of(e1)) == Counter(labels_of(a))
    ds.set_epoch(0)
    assert labels_of(dataset_epoch(ds)) == labels_of(a), "set_epoch(0) replays epoch 0"


def test_uint8_and_float32(packed):
    kw = dict(seed=2, batch_size=25, image_size=(40, 56), crop="center", shuffle_shards=False)
    u8 = dataset_epoch(ShardDataset(str(packed.manifest), **kw))
    x, y = u8[0]
    assert x.dtype == torch.uint8 and tuple(x.shape) == (25, 3, 40, 56)
    assert y.dtype == torch.int64 and tuple(y.shape) == (25,)
    assert x.float().std() > 10, "real pixels, not a blank buffer"
    f32 = dataset_epoch(ShardDataset(str(packed.manifest), dtype="float32", **kw))
    mean = torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1)
    std = torch.tensor(IMAGENET_STD).view(1, 3, 1, 1)
    for (a, la), (b, lb) in zip(u8, f32):
        assert b.dtype == torch.float32 and b.shape == a.shape
        assert torch.equal(la, lb)
        assert torch.allclose(b, (a.float() / 255 - mean) / std, atol=1e-5)
    mine_m, mine_s = (0.5, 0.25, 0.0), (0.5, 2.0, 1.0)
    f32b = dataset_epoch(ShardDataset(str(packed.manifest), dtype="float32", mean=mine_m,
                                      std=mine_s, **kw))
    m, s = torch.tensor(mine_m).view(1, 3, 1, 1), torch.tensor(mine_s).view(1, 3, 1, 1)
    assert torch.allclose(f32b[0][0], (u8[0][0].float() / 255 - m) / s, atol=1e-5)


def test_nhwc_is_nchw_transposed(packed):
    kw = dict(seed=4, batch_size=32, image_size=(40, 56), flip=True)
    nchw = dataset_epoch(ShardDataset(str(packed.manifest), **kw))
    nhwc = dataset_epoch(ShardDataset(str(packed.manifest), layout="nhwc", **kw))
    for (a, _), (b, _) in zip(nchw, nhwc):
        assert tuple(b.shape) == (a.shape[0], 40, 56, 3)
        assert torch.equal(a.permute(0, 2, 3, 1), b)


@pytest.mark.parametrize("drop_last,sizes", [(False, [64, 64, 64, 64, 44]), (True, [64] * 4)])
def test_partial_last_batch(packed, drop_last, sizes):
    ds = ShardDataset(str(packed.manifest), seed=0, batch_size=64, image_size=32,
                      drop_last=drop_last)
    got = [len(y) for _, y in dataset_epoch(ds, clone=False)]
    assert got == sizes
    assert len(ds) == len(sizes)


# ---- error policy --------------------------------------------------------------------------


def test_corrupt_jpeg_raises_naming_sample_and_shard(packed_bad):
    ds = ShardDataset(str(packed_bad.manifest), seed=0, batch_size=8, image_size=32)
    with pytest.raises(libshard.ShardError) as e:
        dataset_epoch(ds, clone=False)
    msg = str(e.value)
    assert packed_bad.bad_key in msg and packed_bad.bad_shard.name in msg, msg
    assert "corrupt JPEG" in msg, msg


@pytest.mark.parametrize("drop_last", [False, True])
def test_a_skipped_sample_leaves_its_batch_whole(packed_bad, drop_last):
    """40 samples, one of them bad, in batches of 8: the batch that held it keeps 8, the bad
    one's place a marked repeat; drop_last drops nothing (no batch is short) where it once
    dropped that batch's 7 good samples."""
    ds = ShardDataset(str(packed_bad.manifest), seed=0, batch_size=8, image_size=32,
                      skip_errors=True, drop_last=drop_last, raw_fields="__pad__")
    got = within(HANG, lambda: [(len(y), int(f["__pad__"].sum())) for _, y, f in ds], "an epoch")
    assert [n for n, _ in got] == [8] * 5
    assert sum(p for _, p in got) == 1


def test_corrupt_jpeg_skipped_with_skip_errors(packed_bad):
    ds = ShardDataset(str(packed_bad.manifest), seed=0, batch_size=8, image_size=32,
                      skip_errors=True, raw_fields="__pad__")
    got = within(HANG, lambda: [(y.tolist(), f["__pad__"].tolist()) for _, y, f in ds], "an epoch")
    labels = [y for ys, pads in got for y, p in zip(ys, pads) if not p]
    assert len(labels) == 39 and sum(len(ys) for ys, _ in got) == 40
    expect = Counter(packed_bad.label_of.values())
    expect[packed_bad.label_of[packed_bad.bad_key]] -= 1
    assert Counter(labels) == expect
    keys = []
    l = libshard.Loader(str(packed_bad.manifest), seed=0, batch_size=8, image_size=32,
                        skip_errors=True)

    def run():
        for b in l:
            keys.extend(k for k, r in zip(b.keys, b.repeats) if not r)

    within(HANG, run, "a skip_errors epoch")
    assert Counter(keys) == Counter(k for k in packed_bad.keys if k != packed_bad.bad_key)
    assert l.skipped == 1
    assert l.skipped_by == {"image": 1, "no_image": 0, "label": 0, "no_size": 0, "shards": 0,
                            "shard_samples": 0, "batches": 0, "total": 1}


def test_skips_are_counted_by_reason_warned_once_and_summed(packed_bad, unlabelled, caplog):
    ds = ShardDataset(str(packed_bad.manifest), seed=0, batch_size=8, image_size=32,
                      skip_errors=True)
    assert ds.skipped["total"] == 0
    with pytest.warns(ShardSkipWarning, match="1 images that did not decode") as seen:
        with caplog.at_level("WARNING", logger="libshard"):
            n = sum(len(y) for _, y in ds)  # in this thread: the warning is caught here
    assert n == 40 and len(seen) == 1, "one warning, at the first skip"
    assert ds.skipped == {"image": 1, "no_image": 0, "label": 0, "no_size": 0, "shards": 0,
                          "shard_samples": 0, "batches": 0, "total": 1}
    assert "epoch 0 left out 1 images that did not decode" in caplog.text
    # a missing shard and samples without labels, through 2 workers: the loader sums them
    url = [str(packed_bad.manifest), unlabelled, "/nonexistent/gone.tar"]
    ld = ShardLoader(ShardDataset(url, seed=0, batch_size=4, image_size=32, skip_errors=True),
                     num_workers=2, timeout=HANG)
    n = within(HANG, lambda: sum(len(y) for _, y in ld), "an epoch skipping three ways")
    assert ld.skipped["image"] == 1 and ld.skipped["label"] == 2 and ld.skipped["shards"] == 1
    assert n == 40 + 6 - 0 if not ld.skipped["batches"] else n < 46  # marked repeats fill the places


# ---- raw fields in batches -----------------------------------------------------------------


@pytest.fixture(scope="module")
def with_fields(tmp_path_factory):
    """4 shards of 12 samples written by Python's tarfile: jpg, cls, json on every sample,
    txt on two of three; one sample's JPEG cut short. Returns (url pattern, {key: fields},
    bad key)."""
    root = tmp_path_factory.mktemp("fields")
    expect, bad = {}, "s0017"
    for shard in range(4):
        members = []
        for j in range(12):
            i = shard * 12 + j
            key = f"s{i:04d}"
            img = jpeg(textured(40 + i % 7, 36, seed=i))
            fields = {"jpg": img[: len(img) // 2] if key == bad else img,
                      "cls": str(i % 3).encode(),
                      "json": b'{"i": %d, "pad": "%s"}' % (i, b"x" * (i * 5))}
            if i % 3:
                fields["txt"] = f"caption {i}".encode()
            expect[key] = fields
            members += [(f"{key}.{name}", data) for name, data in fields.items()]
        write_tar(root / f"f-{shard:02d}.tar", members)
    return str(root / "f-{00..03}.tar"), expect, bad


def fields_epoch(url, **kw):
    """[(keys, labels, fields)] of one Loader epoch."""
    def run():
        return [(b.keys, np.frombuffer(b.labels, np.int64).tolist(), b.fields)
                for b in libshard.Loader(url, **kw)]
    return within(HANG, run, "a Loader epoch with raw fields")


def check_fields(batches, expect, names):
    seen = []
    for keys, labels, fields in batches:
        assert set(fields) <= set(names), sorted(fields)
        for name, values in fields.items():
            assert len(values) == len(keys)
            for key, v in zip(keys, values):
                assert v == expect[key].get(name), (key, name)
        for key, label in zip(keys, labels):
            assert label == int(expect[key]["cls"])
        seen += keys
    return seen


def test_batches_carry_every_other_field_raw_by_default(with_fields):
    url, expect, bad = with_fields
    # in file order the bad sample (the 18th) is mid-batch: its place takes a repeat of
    # another of its batch, whose fields (of other sizes) must come with it, and the
    # samples after it keep theirs
    for order in (dict(seed=0, shuffle=20), dict(seed=0, shuffle=0, shuffle_shards=False)):
        batches = fields_epoch(url, batch_size=5, image_size=32, skip_errors=True, **order)
        keys = check_fields(batches, expect, {"json", "txt"})
        assert set(keys) == set(expect) - {bad} and len(keys) == len(expect), "the bad one out"
        assert all(len(k) == 5 for k, _, _ in batches[:-1])
        assert all("json" in f for _, _, f in batches)
        assert any(None in f.get("txt", []) for _, _, f in batches)


def test_raw_fields_of_the_wrong_type_are_refused_by_name(with_fields):
    with pytest.raises(TypeError, match="raw_fields"):
        ShardDataset(with_fields[0], raw_fields=3)
    with pytest.raises(TypeError, match="raw_fields"):
        ShardDataset(with_fields[0], raw_fields=["json", 3])


def test_named_raw_fields_are_in_every_batch_present_or_not(with_fields):
    url, expect, bad = with_fields
    batches = fields_epoch(url, seed=1, batch_size=7, image_size=32, skip_errors=True,
                           raw_fields="txt;nowhere")
    check_fields(batches, expect, {"txt", "nowhere"})
    for keys, _, fields in batches:
        assert list(fields) == ["txt", "nowhere"]
        assert fields["nowhere"] == [None] * len(keys)
    assert fields_epoch(url, seed=1, batch_size=7, image_size=32, skip_errors=True,
                        raw_fields="")[0][2] == {}


@pytest.mark.parametrize("num_workers", [0, 2])
def test_dataset_yields_raw_fields(with_fields, num_workers):
    url, expect, bad = with_fields
    ds = ShardDataset(url, seed=0, batch_size=6, image_size=32, skip_errors=True,
                      raw_fields=["json", "txt", "__pad__"])
    kw = dict(timeout=HANG) if num_workers else {}
    dl = DataLoader(ds, batch_size=None, num_workers=num_workers, **kw)
    batches = within(HANG + 5, lambda: [(x.shape[0], y.tolist(), f) for x, y, f in dl],
                     "a DataLoader epoch with raw fields")
    seen = []
    for n, labels, fields in batches:
        assert len(fields["json"]) == n == len(labels)
        for js, label, pad in zip(fields["json"], labels, fields["__pad__"].tolist()):
            key = "s%04d" % int(js.split(b":")[1].split(b",")[0])
            assert js == expect[key]["json"] and label == int(expect[key]["cls"])
            if not pad:  # a repeat in the bad one's place
                seen.append(key)
    assert sorted(seen) == sorted(k for k in expect if k != bad)


@pytest.mark.parametrize("fast", [True, False])
def test_one_decode_thread_through_mixed_images_equals_decoding_each_alone(tmp_path, fast):
    """A decode thread keeps its libjpeg decompressor and buffers from sample to sample:
    after colour, grey, CMYK, PNG, large and small images, a JPEG cut in its headers (an
    error inside libjpeg) and a non-image, every image must come out as a fresh decode of
    it alone gives it."""
    rng = np.random.default_rng(9)
    cmyk = np.concatenate([textured(90, 70, seed=2), rng.integers(0, 256, (70, 90, 1), np.uint8)], -1)
    images = [jpeg(textured(120, 90, seed=1)), jpeg(textured(640, 480, seed=3), subsampling=0),
              encode(Image.fromarray(textured(80, 60, seed=4)[..., 0], "L"), "JPEG", quality=85),
              encode(Image.fromarray(cmyk, "CMYK"), "JPEG", quality=90),
              encode(Image.fromarray(textured(50, 70, seed=5)), "PNG"),
              jpeg(textured(300, 200, seed=6))[:300] + b"\xff\xd9", b"not an image",
              jpeg(textured(33, 47, seed=7)), jpeg(textured(1000, 700, seed=8), subsampling=2),
              jpeg(textured(64, 64, seed=10))]
    write_tar(tmp_path / "mixed.tar",
              [m for i, data in enumerate(images * 2)
               for m in ((f"m{i:03d}.jpg", data), (f"m{i:03d}.cls", b"1"))])
    kw = dict(crop="center", fast=fast, layout="nhwc")
    got = []

    def run():
        for b in libshard.Loader(str(tmp_path / "mixed.tar"), seed=0, shuffle=0, threads=1,
                                 batch_size=3, image_size=(40, 56), skip_errors=True, **kw):
            got.extend((k, x) for k, x, r in zip(b.keys, np.array(memoryview(b)), b.repeats)
                       if not r)  # repeats hold the bad ones' places
    within(HANG, run, "a mixed epoch on one decode thread")
    assert [k for k, _ in got] == [f"m{i:03d}" for i in range(20) if i % 10 not in (5, 6)]
    for key, img in got:
        alone = libshard.decode(images[int(key[1:]) % 10], 56, 40, **kw)
        assert img.tobytes() == alone, key


# ---- the WebDataset-style builder ----------------------------------------------------------


def test_webdataset_builder_decoded_batches(packed):
    ds = (lwds.WebDataset(str(packed.manifest), seed=0, image_size=224).shuffle(100)
          .decode("torchrgb8").to_tuple("jpg;png", "cls").batched(16))
    batches = within(HANG, lambda: [(x.shape, x.dtype, y.copy()) for x, y in ds],
                     "a builder epoch")
    assert [len(y) for _, _, y in batches] == [16] * 18 + [12]
    for shape, dtype, y in batches:
        assert dtype == torch.uint8 and tuple(shape) == (len(y), 3, 224, 224)
        assert isinstance(y, np.ndarray) and y.dtype == np.int64  # WebDataset's collation
    assert Counter(np.concatenate([y for _, _, y in batches]).tolist()) == packed.label_counts()


def test_webdataset_builder_to_tuple_with_raw_fields(with_fields):
    url, expect, bad = with_fields
    ds = (lwds.WebDataset(url, seed=0, skip_errors=True, image_size=224).decode("torchrgb8")
          .to_tuple("jpg", "cls", "txt;json", "json").batched(8))
    assert ds._fast()[2] is not None, "runs in C"
    # (images are views of the ring's buffers: keep the other fields, not the batches)
    batches = within(HANG, lambda: [(x.shape[0], y.tolist(), a, b) for x, y, a, b in ds],
                     "a builder epoch")
    n = 0
    for size, labels, first, js in batches:
        assert len(first) == len(js) == len(labels) == size
        for f, j in zip(first, js):  # decoded as WebDataset's basic handlers do
            key = "s%04d" % j["i"]
            want = expect[key]
            assert f == (want["txt"].decode() if "txt" in want else json.loads(want["json"]))
            n += 1
    assert n == len(expect) - 1


def test_webdataset_builder_raw_dicts(packed):
    """As WebDataset's: every sample's fields, and a local shard's path as __local_path__."""
    ds = lwds.WebDataset(str(packed.manifest), shardshuffle=False, seed=0)
    samples = within(HANG, lambda: list(ds), "a raw builder epoch")
    assert Counter(s["__key__"] for s in samples) == Counter(packed.keys)
    by_key = {s["__key__"]: s for s in packed.samples}
    for s in samples:
        assert os.path.samefile(s.pop("__local_path__"), s["__url__"])
        same_sample(s, by_key[s["__key__"]])


@pytest.mark.parametrize("cls,calls", [
    (libshard.Reader, ["__next__", "state", "set_epoch", "stats"]),
    (libshard.Loader, ["__next__", "state", "set_epoch"]),
])
def test_objects_whose_init_never_ran_raise_instead_of_crashing(cls, calls):
    obj = cls.__new__(cls)
    for name in calls:
        args = (0,) if name == "set_epoch" else ()
        with pytest.raises(libshard.ShardError, match="not open"):
            getattr(obj, name)(*args)
    with pytest.raises(libshard.ShardError, match="not open"):
        obj.seed


_SAME_BYTES = """
import hashlib, os, sys
os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})  # one CPU: threads interleave
import libshard
h = hashlib.md5()
for i, b in enumerate(libshard.Loader(sys.argv[1], seed=5, batch_size=32, image_size=40, shuffle=64,
                                      flip=True, threads=2, worker=1, num_workers=3)):
    h.update(bytes(memoryview(b)))
    if i == 2:
        break
print(h.hexdigest())
"""


def test_two_decode_threads_give_the_same_bytes_run_after_run(packed):
    """Regression: libjpeg-turbo 2.1's jpeg_skip_scanlines, ending inside a row group of the
    merged upsampler (the fast path's decode), handed out a row of stale bytes, different
    from run to run; with two decode threads interleaving on one CPU, about half the runs
    differed. The fast path now skips whole iMCU rows only."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    runs = [subprocess.run([sys.executable, "-c", _SAME_BYTES, str(packed.manifest)], env=env,
                           capture_output=True, text=True, timeout=60) for _ in range(8)]
    for r in runs:
        assert r.returncode == 0, r.stderr
    digests = Counter(r.stdout.strip() for r in runs)
    assert len(digests) == 1, f"the same epoch decoded to {len(digests)} different byte streams"


@pytest.fixture()
def unlabelled(tmp_path):
    """6 samples: s000-s002 labelled, s003 without a cls member, s004 with cls 'cat', s005
    labelled."""
    img = jpeg(textured(48, 40, seed=3))
    members = []
    for i in range(6):
        members.append((f"s{i:03d}.jpg", img))
        if i == 3:
            continue
        members.append((f"s{i:03d}.cls", b"cat" if i == 4 else str(i % 2).encode()))
    write_tar(tmp_path / "u.tar", members)
    return str(tmp_path / "u.tar")


def test_a_missing_label_is_an_error_naming_the_sample(unlabelled, tmp_path):
    def epoch(url):
        return within(HANG, lambda: [b.size for b in libshard.Loader(url, batch_size=6,
                                                                      image_size=32, shuffle=0)],
                      "an epoch with a bad label")
    with pytest.raises(libshard.ShardError, match=r"u.tar: sample 's003': .*no field 'cls'"):
        epoch(unlabelled)
    write_tar(tmp_path / "v.tar", [("a.jpg", jpeg(textured(48, 40, seed=3))), ("a.cls", b"cat\x1b[2J")])
    with pytest.raises(libshard.ShardError,
                       match=r"v.tar: sample 'a': label field 'cls' is not a decimal class index: 'cat\?\[2J'"):
        epoch(str(tmp_path / "v.tar"))


def test_missing_labels_skipped_or_minus_one_when_asked(unlabelled):
    def labels(**kw):
        out = []
        for b in libshard.Loader(unlabelled, batch_size=6, image_size=32, shuffle=0, **kw):
            out += [(k, y) for k, y, r in zip(b.keys, np.frombuffer(b.labels, np.int64).tolist(),
                                              b.repeats) if not r]
        return out
    kept = within(HANG, lambda: labels(skip_errors=True), "skip")
    assert [k for k, _ in kept] == ["s000", "s001", "s002", "s005"]  # repeats in s003, s004
    minus = within(HANG, lambda: labels(missing_label=-1), "-1")
    assert minus == [("s000", 0), ("s001", 1), ("s002", 0), ("s003", -1), ("s004", -1),
                     ("s005", 1)]
    with pytest.raises(ValueError, match="missing_label"):
        libshard.Loader(unlabelled, missing_label="ignore")
    ds = ShardDataset(unlabelled, batch_size=6, image_size=32, missing_label=-1)
    (_, y), = within(HANG, lambda: [(x.shape, y.tolist()) for x, y in ds], "a dataset epoch")
    assert sorted(y) == [-1, -1, 0, 0, 1, 1]


@pytest.mark.parametrize("kw,err,match", [
    (dict(image_size="224"), TypeError, "image_size: an int or a pair"),
    (dict(image_size=(224,)), TypeError, "image_size"),
    (dict(batch_size="32"), TypeError, "batch_size: an int"),
    (dict(batch_size=0), ValueError, "batch_size: at least 1"),
    (dict(crop="centre"), ValueError, "crop: one of 'random_resized', 'center', 'none'"),
    (dict(mean=[0.5, 0.5]), TypeError, "mean: three numbers"),
    (dict(dtype=torch.float64), ValueError, "dtype: one of 'uint8', 'float32', 'float16'"),
    (dict(dtype=torch.float16), ValueError, "made on the GPU .device='cuda'.; on the CPU"),
    (dict(layout="chw"), ValueError, "layout: one of 'nchw', 'nhwc', 'channels_last'"),
    (dict(device_buffers=1), ValueError, "device_buffers: at least 2"),
    (dict(device="mps"), ValueError, "device: 'cpu' or 'cuda'.*no mps path"),
    (dict(mode="fair"), ValueError, "mode: one of 'exact', 'equal', 'resampled'"),
    (dict(missing_label=0), ValueError, "missing_label"),
    (dict(flip="yes"), TypeError, "flip: True or False"),
])
def test_options_are_checked_when_the_dataset_is_made(packed, kw, err, match):
    with pytest.raises(err, match=match):
        ShardDataset(str(packed.manifest), **kw)


def test_sequences_and_torch_dtypes_are_taken(packed):
    ds = ShardDataset(str(packed.manifest), seed=0, batch_size=32, image_size=[32, 40],
                      mean=[0.5, 0.5, 0.5], std=torch.tensor([0.25, 0.25, 0.25]),
                      dtype=torch.float32, scale=[0.5, 1.0])
    x, _ = within(HANG, lambda: next(iter(ds)), "a batch")
    assert x.dtype == torch.float32 and tuple(x.shape) == (32, 3, 32, 40)
    assert -2.01 <= float(x.min()) and float(x.max()) <= 2.01  # (v - 0.5) / 0.25


def test_objects_inherited_through_fork_are_let_go_not_freed(packed):
    """A DataLoader worker forked from a process holding a Loader (a batch tensor still
    alive, say) must not free it when the copy's last reference goes: its threads are in
    the parent, and joining them crashed the worker. In the child it raises if used."""
    import gc
    l = libshard.Loader(str(packed.manifest), seed=0, batch_size=32, image_size=32)
    b = next(iter(l))
    r = libshard.Reader(str(packed.manifest), seed=0)
    next(r)
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            try:
                next(l)
                code |= 1
            except libshard.ShardError as e:
                code |= 0 if "another process" in str(e) else 2
            del b, l, r
            gc.collect()
        except BaseException:
            code |= 4
        os._exit(code)
    import time
    deadline = time.monotonic() + 20
    while (done := os.waitpid(pid, os.WNOHANG))[0] == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    if done[0] == 0:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        pytest.fail("the child hung letting go of what it inherited")
    status = done[1]
    assert os.WIFEXITED(status), f"the child died: {status}"
    assert os.WEXITSTATUS(status) == 0, os.WEXITSTATUS(status)
    assert b.size == 32 and next(r)["__key__"]  # the parent's are untouched


def test_the_type_stub_names_what_the_extension_has():
    """python/libshard/_libshard.pyi against the extension: the same public functions,
    classes, methods and properties, so type checkers and editors see the real API."""
    import ast
    from pathlib import Path
    from libshard import _libshard
    stub = ast.parse((Path(libshard.__file__).parent / "_libshard.pyi").read_text())
    funcs = {n.name for n in stub.body if isinstance(n, ast.FunctionDef)}
    classes = {n.name: {m.name for m in n.body if isinstance(m, ast.FunctionDef)
                        and not m.name.startswith("__")}
               for n in stub.body if isinstance(n, ast.ClassDef)}
    public = {n for n in dir(_libshard) if not n.startswith("_")}
    constants = {"version", "gpu_kernels"}
    assert public == funcs | set(classes) | constants, public ^ (funcs | set(classes) | constants)
    for name, members in classes.items():
        cls = getattr(_libshard, name)
        real = {m for m in vars(cls) if not m.startswith("__")}
        if issubclass(cls, Exception):
            continue
        assert real == members, (name, real ^ members)


def test_distributed_evaluation_in_dataset_order_with_padding(packed):
    """Evaluation over 7 ranks: shuffle off, equal mode with pad, so no rank waits on
    another. Each rank gets the same number of samples (300 = 6 x 43 + 42, so one repeat),
    in dataset order; each batch carries the samples' dataset indices and which are padding,
    so gathered results de-duplicate to every sample once."""
    order = [s["__key__"] for shard in packed.shards for s in webdataset_samples(shard)]
    got, sizes = [], []
    for rank in range(7):
        ds = ShardDataset(str(packed.manifest), seed=0, rank=rank, world_size=7, mode="equal",
                          pad=True, shuffle=False, batch_size=16, image_size=32,
                          crop="center", raw_fields="__key__;__index__;__pad__")
        mine = []
        for x, y, f in within(HANG, lambda: list(ds), f"rank {rank}"):
            assert f["__index__"].dtype == torch.int64 and f["__pad__"].dtype == torch.bool
            assert len(f["__index__"]) == len(y) == x.shape[0]
            mine += zip(f["__index__"].tolist(), f["__key__"], f["__pad__"].tolist(),
                        y.tolist())
        sizes.append(len(mine))
        idx = [i for i, _, pad, _ in mine if not pad]
        assert idx == sorted(idx) and idx == list(range(idx[0], idx[0] + len(idx))), \
            f"rank {rank}: dataset order"
        got += mine
    assert sizes == [43] * 7, "equal: every rank the same count"
    for i, key, _, label in got:
        assert order[i] == key and packed.class_label(key) == label
    real = [i for i, _, pad, _ in got if not pad]
    assert sorted(real) == list(range(NSAMPLES)), "without the padding: every sample once"
    assert sum(pad for _, _, pad, _ in got) == 1


def test_webdataset_port_is_faithful_where_it_runs(packed):
    """As WebDataset: an IterableDataset for a DataLoader with .with_length (and its
    warning); "torchrgb" gives floats from 0 to 1 (the uint8 values / 255);
    shardshuffle=False keeps the shards' order; WebDataset's other stages run on libshard's
    pipeline too, but caching its passes is refused, naming the stage."""
    url = str(packed.manifest)

    def pipe(decoder, **kw):
        return (lwds.WebDataset(url, seed=0, image_size=224, **kw).decode(decoder)
                .to_tuple("jpg", "cls").batched(50))

    u8 = within(HANG, lambda: [next(iter(pipe("torchrgb8")))[0].clone()], "torchrgb8")
    f = within(HANG, lambda: [next(iter(pipe("torchrgb")))[0].clone()], "torchrgb")
    assert f[0].dtype == torch.float32 and 0.0 <= float(f[0].min()) and float(f[0].max()) <= 1.0
    assert torch.allclose(f[0], u8[0].float() / 255)
    with pytest.warns(UserWarning, match="does not change the number of samples"):
        ds = pipe("torchrgb8").with_length(6)
    assert isinstance(ds, torch.utils.data.IterableDataset) and len(ds) == 6
    dl = DataLoader(ds, batch_size=None, num_workers=0)
    assert len(dl) == 6 and sum(len(y) for _, y in dl) == NSAMPLES
    with pytest.raises(TypeError, match="has no len"):  # as WebDataset's
        len(lwds.WebDataset(url))
    order = [s["__key__"] for s in within(HANG, lambda: list(lwds.WebDataset(url, shardshuffle=False)),
                                          "raw in shard order")]
    assert order == [s["__key__"] for p in packed.shards for s in webdataset_samples(p)]
    kept = within(HANG, lambda: list(lwds.WebDataset(url, seed=0, image_size=16).rsample(0.5)),
                  "rsample")
    assert 0 < len(kept) < NSAMPLES
    for method in ("mcached", "lmdb_cached"):
        with pytest.raises(NotImplementedError, match="cache"):
            getattr(lwds.WebDataset(url, image_size=16), method)()


def test_a_manifest_runs_no_command_unless_allowed(packed, tmp_path):
    """manifest_commands=True lets a manifest list pipe: shards; without it, refused."""
    marker = tmp_path / "ran"
    m = tmp_path / "m.json"
    m.write_text(json.dumps({"shardlist": [{"url": f"pipe:touch {marker}; cat {packed.shards[0]}",
                                            "nsamples": 40}]}))
    with pytest.raises(ValueError, match="runs commands only when allowed"):
        libshard.Reader(str(m), seed=0)
    assert not marker.exists()
    ds = ShardDataset(str(m), decode=False, seed=0, manifest_commands=True)
    assert len(list(ds)) == 40 and marker.exists()


def test_an_image_declaring_too_many_pixels_is_refused_before_memory_goes_to_it():
    """A JPEG whose header claims 65500 x 65500 pixels (12 GB of RGB): an error naming the
    size and the limit, fast path or not, in a process capped at 1.5 GB of address space."""
    data = bytearray(jpeg(textured(16, 16)))
    i = next(k for k in range(len(data) - 9) if data[k] == 0xFF and data[k + 1] in (0xC0, 0xC2))
    data[i + 5:i + 9] = bytes([0xFF, 0xDC, 0xFF, 0xDC])
    code = (
        "import os, resource, sys\n"
        "if 'ASAN_OPTIONS' not in os.environ:  # ASan's shadow needs terabytes of space\n"
        "    resource.setrlimit(resource.RLIMIT_AS, (1536 << 20, 1536 << 20))\n"
        f"sys.path.insert(0, {str(Path(libshard.__file__).parents[1])!r})\n"
        "import libshard\n"
        "data = sys.stdin.buffer.read()\n"
        "for fast in (True, False):\n"
        "    try:\n"
        "        libshard.decode(data, fast=fast)\n"
        "    except libshard.ShardError as e:\n"
        "        print(e)\n")
    cp = subprocess.run([sys.executable, "-c", code], input=bytes(data), capture_output=True,
                        timeout=60)
    out = cp.stdout.decode()
    assert cp.returncode == 0, cp.stderr.decode()
    assert out.count("65500x65500 pixels, more than the limit of 178956970") == 2, out


def test_a_shard_cut_while_it_is_read_is_an_error_not_a_crash(packed, tmp_path):
    """Truncating a shard in place under a running reader (as a sync job or a full disk
    might) reports a truncated shard; a mapped file would have been SIGBUS."""
    shard = tmp_path / "s.tar"
    shard.write_bytes(b"".join(p.read_bytes()[:-1024] for p in packed.shards))  # one long tar
    code = (
        "import os, sys\n"
        f"sys.path.insert(0, {str(Path(libshard.__file__).parents[1])!r})\n"
        "import libshard\n"
        f"path = {str(shard)!r}\n"
        "r = libshard.Reader(path, seed=0, rank=0, world_size=1, streams=1, queue_depth=1)\n"
        "it = iter(r)\n"
        "n = 0\n"
        "try:\n"
        "    for s in it:\n"
        "        n += 1\n"
        "        if n == 5:\n"
        "            os.truncate(path, os.path.getsize(path) // 3)\n"
        "except libshard.ShardError as e:\n"
        "    print('error after', n, ':', e)\n"
        "else:\n"
        "    print('no error after', n)\n")
    cp = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60)
    out = cp.stdout.decode()
    assert cp.returncode == 0, f"exit {cp.returncode}: {cp.stderr.decode()[-500:]}"
    assert "error after" in out and "s.tar" in out and "Truncated" in out, out


def test_a_shard_deleted_mid_epoch_is_skipped_and_counted(packed, tmp_path):
    """A shard removed while the epoch runs (a cleanup job, a lost disk): with skip_errors
    every other sample arrives exactly once, and the loss is counted by shard and samples."""
    import shutil
    for p in [packed.manifest, *packed.shards]:
        shutil.copy(p, tmp_path / p.name)
        idx = p.with_suffix(".idx")
        if idx.exists():
            shutil.copy(idx, tmp_path / idx.name)
    gone = tmp_path / packed.shards[5].name
    r = libshard.Reader(str(tmp_path / packed.manifest.name), seed=0, rank=0, world_size=1,
                        shuffle_shards=False, streams=1, queue_depth=1, skip_errors=True)
    keys = []
    for s in r:
        keys.append(s["__key__"])
        if len(keys) == 10:
            gone.unlink()
    lost = {s["__key__"] for s in packed.by_shard[5]}
    assert Counter(keys) == Counter(k for k in packed.keys if k not in lost)
    st = r.stats()
    assert st["skipped_shards"] == 1 and st["skipped_samples"] == len(lost)
    assert any(gone.name in e and "cannot open" in e for e in st["kept_errors"]), st


def test_a_batch_seeds_redo_its_images(packed):
    """Each sample's seed (batch.seeds) with libshard.decode redoes the batch's image: the same
    crop, scale and flip, as shardcat bench's ceiling relies on."""
    n = 0
    for b in libshard.Loader(str(packed.manifest), seed=4, batch_size=16, image_size=40,
                             flip=True, raw_fields="jpg", layout="nhwc"):
        if n == 32:
            break
        seeds = np.frombuffer(b.seeds, np.uint64)
        images = np.frombuffer(b, np.uint8).reshape(b.size, 40, 40, 3)
        for i, jpg in enumerate(b.fields["jpg"]):
            again = libshard.decode(jpg, 40, 40, flip=True, seed=int(seeds[i]), layout="nhwc")
            assert again == images[i].tobytes(), (b.keys[i], int(seeds[i]))
            n += 1
    assert n == 32


def _pixels(urls, world, workers, epoch=1, seed=4, **kw):
    """{(key, reading): image bytes} over every consumer of a world x workers split, with
    random crops and flips; a key read more than once in the epoch counts its readings."""
    out = {}
    for rank in range(world):
        for worker in range(workers):
            for b in libshard.Loader(urls, seed=seed, epoch=epoch, rank=rank, world_size=world,
                                     worker=worker, num_workers=workers, batch_size=8,
                                     image_size=24, flip=True, layout="nhwc", mode="exact",
                                     shuffle=16, **kw):
                images = np.frombuffer(b, np.uint8).reshape(b.size, -1)
                for i, key in enumerate(b.keys):
                    n = sum(1 for k in out if k[0] == key)
                    out[(key, n)] = images[i].tobytes()
    return out


def test_a_samples_crop_follows_the_sample_not_the_consumer(packed):
    """The same pixels for every sample on 1 x 1, 2 x 1, 1 x 3 and 2 x 2 consumers: the
    crop, scale and flip follow the sample, not the rank or worker that reads it or when.
    The control: another epoch crops most samples otherwise."""
    one = _pixels(str(packed.manifest), 1, 1)
    assert len(one) == len(packed.keys)
    for world, workers in ((2, 1), (1, 3), (2, 2)):
        other = _pixels(str(packed.manifest), world, workers)
        assert other.keys() == one.keys(), (world, workers)
        moved = [k for k in one if other[k] != one[k]]
        assert moved == [], f"{world} x {workers}: {len(moved)} samples cropped otherwise"
    later = _pixels(str(packed.manifest), 1, 1, epoch=2)
    assert sum(later[k] != one[k] for k in one) > len(one) * 0.8, "the epoch changes crops"


def test_a_sample_read_twice_in_an_epoch_gets_a_crop_each_time(packed):
    """A small source mixed with a large weight is read several times in an epoch: each
    reading gets its own crop and flip (they follow the reading, not only the key)."""
    small, big = [str(packed.shards[0])], [str(p) for p in packed.shards[1:]]
    got = _pixels([(small, 0.5), (big, 0.5)], 1, 1)
    again = [k for k, n in got if n == 1]
    assert len(again) >= 10, "the small source is read more than once"
    same = [k for k in again if got[(k, 0)] == got[(k, 1)]]
    assert len(same) <= len(again) // 10, f"{len(same)} of {len(again)} readings alike"
    # and on two ranks, the readings are the same ones
    split = _pixels([(small, 0.5), (big, 0.5)], 2, 1)
    assert sorted(split.values()) == sorted(got.values())


def test_errors_say_where_as_attributes_and_a_missing_shard_is_both_kinds(packed, tmp_path):
    """ShardError carries url, offset and member (None where the message has none) and the
    code; a missing shard, found mid-epoch, is a ShardNotFoundError: a ShardError and a
    FileNotFoundError, as a missing manifest is."""
    cut = tmp_path / "cut.tar"
    data = packed.shards[0].read_bytes()
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(libshard.ShardError) as e:
        list(libshard.Reader([str(cut)], seed=0, rank=0, world_size=1))
    assert e.value.url == str(cut), str(e.value)
    assert isinstance(e.value.offset, int) and e.value.offset > 0, str(e.value)
    assert e.value.code < 0
    gone = str(tmp_path / "gone-000000.tar")
    for make in (lambda: list(libshard.Reader([str(packed.shards[1]), gone], seed=0, rank=0,
                                              world_size=1, streams=1, shuffle_shards=False)),
                 lambda: list(ShardDataset([str(packed.shards[1]), gone], seed=0, image_size=16,
                                           shuffle_shards=False, streams=1))):
        with pytest.raises(libshard.ShardNotFoundError) as e:
            make()
        assert isinstance(e.value, libshard.ShardError) and isinstance(e.value, FileNotFoundError)
        assert e.value.url == gone, str(e.value)
    with pytest.raises(FileNotFoundError):
        libshard.Reader([str(tmp_path / "nothing.json")], seed=0)
