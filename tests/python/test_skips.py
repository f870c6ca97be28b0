"""skip_errors never costs a neighbour: a sample that does not decode leaves its place in its
batch to a marked repeat of another sample of the same batch ("__pad__"), so every batch keeps
its planned size and order, drop_last drops only the epoch's last short batch, every good
sample is delivered once, the skipped ones are counted, ranks keep equal batch counts and a
resume in the middle goes on exactly.

The data set: 1,000 JPEGs in 4 plain tars (Python's tarfile), 10 of them (1%) cut short.
"""
import io
import random
import tarfile
from collections import Counter

import pytest

torch = pytest.importorskip("torch")

import libshard  # noqa: E402
from libshard.torch import ShardDataset, ShardLoader  # noqa: E402

from .conftest import SLOW, within, jpeg, textured  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

HANG = 30 * SLOW
N, BAD, BS = 1000, 10, 32


@pytest.fixture(scope="module")
def bad_set(tmp_path_factory):
    """(url pattern, good keys, bad keys)."""
    root = tmp_path_factory.mktemp("skips")
    rng = random.Random(3)
    bad = set(rng.sample(range(N), BAD))
    images = [jpeg(textured(24 + k % 5, 20, seed=k)) for k in range(16)]
    for shard in range(4):
        with tarfile.open(root / f"s-{shard}.tar", "w", format=tarfile.USTAR_FORMAT) as tf:
            for i in range(shard * N // 4, (shard + 1) * N // 4):
                data = images[i % 16]
                if i in bad:
                    data = data[: len(data) // 3]
                for name, x in ((f"k{i:05d}.jpg", data), (f"k{i:05d}.cls", b"%d" % (i % 7))):
                    ti = tarfile.TarInfo(name)
                    ti.size = len(x)
                    tf.addfile(ti, io.BytesIO(x))
    keys = [f"k{i:05d}" for i in range(N)]
    return (str(root / "s-{0..3}.tar"), {k for i, k in enumerate(keys) if i not in bad},
            {k for i, k in enumerate(keys) if i in bad})


def opts(**kw):
    return dict(dict(seed=2, batch_size=BS, image_size=16, shuffle=200, skip_errors=True,
                     raw_fields="__key__;__pad__;__index__"), **kw)


def rows(it):
    """[(keys, pads, labels, images)] of each batch of an iteration."""
    out = []
    for images, labels, f in it:
        out.append((list(f["__key__"]), f["__pad__"].tolist(), labels.tolist(), images.clone()))
    return out


def check_epoch(batches, good, bad, drop_last, planned=None, streams=1):
    """Every good sample once among the unmarked places, full batches but each stream's last
    (a DataLoader worker's share ends as an epoch does), each marked place a repeat (key,
    label, pixels) of an unmarked sample of its batch."""
    real = [k for keys, pads, _, _ in batches for k, p in zip(keys, pads) if not p]
    assert not set(real) & bad, "a sample that did not decode was delivered"
    assert len(real) == len(set(real)), "a good sample twice"
    sizes = [len(keys) for keys, _, _, _ in batches]
    short = sum(s < BS for s in sizes)
    assert short <= (0 if drop_last else streams), f"short batches: {sizes}"
    if streams == 1 and not drop_last:
        assert all(s == BS for s in sizes[:-1]), f"a short batch before the last: {sizes}"
    for keys, pads, labels, images in batches:
        for i, p in enumerate(pads):
            if not p:
                continue
            donors = [j for j, q in enumerate(pads) if not q and keys[j] == keys[i]]
            assert donors, f"place {i} holds {keys[i]}, no sample of its batch"
            j = donors[0]
            assert labels[i] == labels[j] and torch.equal(images[i], images[j])
    if planned is not None:
        assert sum(sizes) == planned
    return real


@pytest.mark.parametrize("drop_last", [False, True])
@pytest.mark.parametrize("workers", [0, 2])
def test_every_good_sample_once_in_full_batches(bad_set, workers, drop_last):
    url, good, bad = bad_set
    ds = ShardDataset(url, **opts(drop_last=drop_last))
    it = ShardLoader(ds, num_workers=workers, timeout=HANG) if workers else ds
    got = within(HANG, lambda: rows(it), "a skip_errors epoch")
    real = check_epoch(got, good, bad, drop_last, streams=max(1, workers),
                       planned=(N // BS * BS if drop_last else N) if not workers else None)
    if drop_last:  # the samples of each stream's short last batch are the only ones not there
        assert len(real) >= len(good) - max(1, workers) * BS and set(real) <= good
    else:
        assert set(real) == good
    pads = sum(sum(p) for _, p, _, _ in got)
    skipped = it.skipped
    assert skipped["image"] == skipped["total"] == pads and skipped["batches"] == 0, skipped
    assert 0 < pads <= BAD and (drop_last or pads == BAD)


def test_control_without_skip_errors_the_bad_sample_raises(bad_set):
    url, _, bad = bad_set
    ds = ShardDataset(url, **opts(skip_errors=False))
    with pytest.raises(libshard.ShardError) as e:
        within(HANG, lambda: rows(ds), "an epoch that fails")
    assert any(k in str(e.value) for k in bad), str(e.value)


def test_equal_mode_on_two_ranks_keeps_equal_batch_counts(bad_set):
    url, good, bad = bad_set
    per_rank = []
    for rank in range(2):
        ds = ShardDataset(url, **opts(rank=rank, world_size=2, mode="equal"))
        per_rank.append(within(HANG, lambda: rows(ds), f"rank {rank}"))
    counts = [len(b) for b in per_rank]
    assert counts[0] == counts[1], f"ranks took {counts} batches"
    real = [check_epoch(b, good, bad, False) for b in per_rank]
    assert not set(real[0]) & set(real[1]), "a good sample on both ranks"
    assert set(real[0]) | set(real[1]) == good


def test_a_batch_of_bad_samples_alone_is_dropped_and_counted(tmp_path):
    """A shard whose first 8 JPEGs are all cut short, batches of 8 in order: that batch goes
    (nothing to repeat), counted in skipped["batches"]; the next batches are whole."""
    src = textured(24, 20, seed=1)
    with tarfile.open(tmp_path / "b.tar", "w", format=tarfile.USTAR_FORMAT) as tf:
        for i in range(24):
            data = jpeg(src)
            if i < 8:
                data = data[:40]
            ti = tarfile.TarInfo(f"k{i:03d}.jpg")
            ti.size = len(data)
            tf.addfile(ti, io.BytesIO(data))
    ds = ShardDataset(str(tmp_path / "b.tar"), shuffle=False, shuffle_shards=False,
                      batch_size=8, image_size=16, skip_errors=True, label_field=None,
                      raw_fields="__key__;__pad__")
    got = within(HANG, lambda: rows(ds), "an epoch with a bad batch")
    assert [keys[0] for keys, _, _, _ in got] == ["k008", "k016"]
    assert all(not any(p) for _, p, _, _ in got)
    assert ds.skipped["batches"] == 1 and ds.skipped["image"] == 8, ds.skipped


def test_a_resume_in_the_middle_goes_on_exactly(bad_set):
    url, good, bad = bad_set
    full = within(HANG, lambda: rows(ShardLoader(ShardDataset(url, **opts()), num_workers=2,
                                                 timeout=HANG)), "the whole epoch")
    first = ShardLoader(ShardDataset(url, **opts()), num_workers=2, timeout=HANG)

    def head():
        out = []
        for b in first:
            out.append(b)
            if len(out) == 13:
                break
        return rows(out)

    got = within(HANG, head, "13 batches")
    state = first.state_dict()
    again = ShardLoader(ShardDataset(url, **opts()), num_workers=2, timeout=HANG)
    again.load_state_dict(state)
    got += within(HANG, lambda: rows(again), "the rest")
    assert [k for k, _, _, _ in got] == [k for k, _, _, _ in full]
    assert [p for _, p, _, _ in got] == [p for _, p, _, _ in full]
    assert Counter(k for keys, pads, _, _ in got for k, p in zip(keys, pads) if not p) == \
        Counter(good)
