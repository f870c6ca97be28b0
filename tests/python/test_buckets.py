"""Aspect-ratio buckets planned on the epoch's order (ShardReaderSettings.aspect_buckets):
every batch one bucket, each sample in its nearest bucket, every sample once, at most one
partial batch per bucket; the batches the same on any topology of the same partitions and
across an elastic resume (2x2 -> 3x1); settings it cannot honour refused, naming them."""
import io
import math
import shutil
from collections import Counter

import numpy as np
import pytest
from PIL import Image

import libshard
from libshard import _libshard

from .conftest import (absdiff, decode, make_imagefolder, pack, pil_rgb, psnr,
                       webdataset_samples)
from .test_pixels import pil_cover

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
    (dict(mode="resampled"), "exact or equal mode"),
    (dict(mode="equal", pad=True), "pad off"),
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
    got = batches(libshard.Reader(str(tmp_path / "s" / packed.manifest.name),
                                  index_cache=str(cache), **KW))
    assert got == batches(libshard.Reader(str(packed.manifest), **KW))
    assert [p.suffix for p in cache.rglob("*.cols")] == [".cols"], "made once, kept"




# ---- the loader: decoded batches of the bucket's size -----------------------------------


def loader_batches(loader, limit=None):
    """(keys, bucket, images as numpy, seeds) per batch."""
    out = []
    for b in loader:
        out.append((tuple(b.keys), b.bucket, np.asarray(memoryview(b)).copy(),
                    np.frombuffer(b.seeds, dtype=np.uint64).copy()))
        if limit is not None and len(out) == limit:
            break
    return out


LOADER = dict(KW, image_size=64)


@pytest.fixture(scope="module")
def photo_shards(photos, shardpack, tmp_path_factory):
    """The photographs cut to 4:3, 3:4, 16:9 and 1:1 (and near them), as JPEGs packed."""
    root = tmp_path_factory.mktemp("bucket-photos")
    aspects = [(4, 3), (3, 4), (16, 9), (1, 1), (5, 4), (2, 3)]
    for i, (name, arr) in enumerate(sorted(photos.items())):
        H, W = arr.shape[:2]
        for j, (aw, ah) in enumerate(aspects):
            s = min(W / aw, H / ah) * (0.6 + 0.08 * j)
            w, h = int(aw * s), int(ah * s)
            x, y = (W - w) // 2, (H - h) // 2
            p = root / "img" / f"c{j % 2}" / f"p{i}-{j}.jpg"
            p.parent.mkdir(parents=True, exist_ok=True)
            Image.fromarray(arr[y:y + h, x:x + w]).save(p, quality=92)
    return pack(shardpack, root / "img", root / "shards", maxcount=10)


def pil_draft_cover(data, ow, oh):
    """pil_cover of the image as PIL decodes it for a reduced size (Image.draft: libjpeg's
    DCT scaling, what the fast path does), for the cover's resized size."""
    im = Image.open(io.BytesIO(data))
    W, H = im.size
    s = max(ow / W, oh / H)
    im.draft("RGB", (max(ow, round(W * s)), max(oh, round(H * s))))
    return pil_cover(np.asarray(im.convert("RGB")), ow, oh)[0]


@pytest.mark.parametrize("fast", [False, True])
def test_the_loaders_batches_are_pil_resize_and_crop_of_their_bucket(photo_shards, fast):
    """Real photographs at test_pixels.py's tolerances: each image resized with PIL to cover
    its bucket, aspect kept, and its middle cropped. fast=True reduces by DCT scaling where
    the box allows, as PIL's Image.draft does: against that, mean abs <= 3 and PSNR >= 35
    dB. (Against PIL's full-size decode, DCT scaling, PIL's own included, differs more on
    dense detail: mean 4 on the motorcycle photograph reduced 2.2x.)"""
    jpgs = {s["__key__"]: s["jpg"] for p in sorted(photo_shards.parent.glob("*.tar"))
            for s in webdataset_samples(p)}
    got = loader_batches(_libshard.Loader(str(photo_shards), crop="center", fast=fast, seed=0,
                                          batch_size=4, image_size=224,
                                          aspect_buckets="192x256,256x192,144x256,224x224"))
    assert sorted(k for keys, *_ in got for k in keys) == sorted(jpgs)
    assert len({b for _, b, *_ in got}) == 4, "every bucket reached"
    worst_mean, worst_psnr = 0, 99
    for keys, (h, w), images, _ in got:
        assert images.shape == (len(keys), 3, h, w)
        for k, img in zip(keys, images):
            ours = img.transpose(1, 2, 0)
            if not fast:
                d = absdiff(ours, pil_cover(pil_rgb(jpgs[k]), w, h)[0])
                assert d.max() <= 1, (k, (h, w), d.max())
                continue
            theirs = pil_draft_cover(jpgs[k], w, h)
            worst_mean = max(worst_mean, absdiff(ours, theirs).mean())
            worst_psnr = min(worst_psnr, psnr(ours, theirs))
    if fast:
        assert worst_mean <= 3 and worst_psnr >= 35, (worst_mean, worst_psnr)


def test_the_training_crop_is_a_random_crop_of_the_bucket(packed):
    """The default crop (random_resized) becomes cover_random: each image is its sample
    decoded alone with the batch's seed, and the crops move."""
    jpgs = {s["__key__"]: s["jpg"] for s in packed.samples}
    got = loader_batches(_libshard.Loader(str(packed.manifest), **LOADER), limit=6)
    moved = 0
    for keys, (h, w), images, seeds in got:
        for k, img, seed in zip(keys, images, seeds):
            alone = decode(jpgs[k], w, h, crop="cover_random", seed=int(seed))
            assert np.array_equal(img.transpose(1, 2, 0), alone), k
            moved += not np.array_equal(alone, decode(jpgs[k], w, h, crop="cover"))
    assert moved > 0, "a random crop somewhere"


def test_the_loader_resumes_2x2_on_3x1_with_the_planned_batches(packed):
    whole = [b[:2] for b in loader_batches(_libshard.Loader(str(packed.manifest), **LOADER))]
    got, states = [], []
    for c, k in enumerate((2, 0, 4, 3)):
        ld = _libshard.Loader(str(packed.manifest), rank=c // 2, world_size=2, worker=c % 2,
                              num_workers=2, **LOADER)
        got += [b[:2] for b in loader_batches(ld, k)] if k else []
        states.append(ld.state())
    job = _libshard.merge_states(states)
    for rank in range(3):
        ld = _libshard.Loader(str(packed.manifest), rank=rank, world_size=3, **LOADER)
        ld.restore(job)
        got += [b[:2] for b in loader_batches(ld)]
    assert not [b for b, n in Counter(got).items() if n > 1], "0 batches repeated"
    assert sorted(got) == sorted(whole), "0 lost"


def test_shard_dataset_batches_len_and_workers(packed):
    from libshard.torch import ShardDataset, ShardLoader
    ds = ShardDataset(str(packed.manifest), raw_fields="__key__", **LOADER)
    batches = [(x.shape, f["__bucket__"], len(f["__key__"])) for x, y, f in ds]
    assert len(ds) == len(batches)
    assert all(shape == (n, 3, *bucket) for shape, bucket, n in batches)
    per_bucket = Counter()
    for _, (h, w), n in batches:
        per_bucket[f"{h}x{w}"] += n
    assert ds.stats()["buckets"] == dict(per_bucket), "stats() counts samples per bucket"
    keys = [k for x, y, f in ShardLoader(ds, num_workers=2) for k in f["__key__"]]
    assert sorted(keys) == sorted(packed.keys)
    with pytest.raises(ValueError, match="decoder='gpu' with aspect_buckets"):
        ShardDataset(str(packed.manifest), device="cuda", decoder="gpu", **LOADER)


def test_equal_mode_gives_every_rank_as_many_batches(packed):
    from libshard.torch import ShardDataset
    seen, counts = [], []
    for rank in range(3):
        ds = ShardDataset(str(packed.manifest), rank=rank, world_size=3, raw_fields="__key__",
                          **LOADER)
        got = [f["__key__"] for x, y, f in ds]
        counts.append((len(ds), len(got)))
        seen += [k for keys in got for k in keys]
    assert len({n for pair in counts for n in pair}) == 1, counts
    assert len(seen) == len(set(seen)), "no sample twice"
    assert len(packed.keys) - len(seen) < 3 * 4 * 3, "the excess dropped: a few batches"
    # the negative control: exact mode leaves the ranks unequal here, and says so
    from libshard.torch import UnequalRanksWarning
    with pytest.warns(UnequalRanksWarning, match="rank 0 gets 36 batches"):
        exact = [sum(1 for _ in ShardDataset(str(packed.manifest), rank=r, world_size=3,
                                             mode="exact", **LOADER)) for r in range(3)]
    assert len(set(exact)) > 1, exact


def test_shardcat_show_draws_a_batch_of_each_bucket(packed, tmp_path):
    import subprocess
    from .conftest import tool_path
    png = tmp_path / "buckets.png"
    cp = subprocess.run([tool_path("SHARDCAT", "shardcat"), "show", str(packed.manifest), "-o",
                         str(png), "--seed", "3", "--count", "4", "--image-size", "64",
                         "--aspect-buckets", BUCKETS], capture_output=True, text=True,
                        timeout=300)
    assert cp.returncode == 0, cp.stderr
    firsts = {}
    for b in _libshard.Loader(str(packed.manifest), seed=3, batch_size=4, image_size=64,
                              aspect_buckets=BUCKETS, layout="nhwc"):
        firsts.setdefault(b.bucket, np.asarray(memoryview(b)).copy())
    px = np.asarray(Image.open(png).convert("RGB"))
    gap, top, caption = 6, 8 + 2 + 2, 2 + 2 * (8 + 2)
    y0 = 0
    for (h, w), images in firsts.items():  # in the order their first batches came
        for i, img in enumerate(images):  # 4 tiles: 2 columns
            x = gap + (i % 2) * (w + gap)
            y = y0 + gap + top + (i // 2) * (h + caption + gap)
            assert np.array_equal(px[y:y + h, x:x + w], img), ((h, w), i)
        y0 += gap + top + 2 * (h + caption + gap)
    assert y0 == px.shape[0] and len(firsts) == 3
    assert "12 samples of epoch 0, seed 3" in cp.stderr


@pytest.mark.parametrize("rank", [0, 1])
def test_shardcat_stream_gives_the_readers_bucketed_batches(packed, rank):
    import json
    import subprocess
    from .conftest import tool_path
    cmd = [tool_path("SHARDCAT", "shardcat"), "stream", str(packed.manifest), "--seed", "3",
           "--partitions", "4", "--rank", str(rank), "--world-size", "2", "--mode", "exact",
           "--aspect-buckets", BUCKETS]
    cp = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert cp.returncode == 2 and "wants --batch-size" in cp.stderr, cp.stderr
    cp = subprocess.run(cmd + ["--batch-size", "4", "--json"], capture_output=True, text=True,
                        timeout=300)
    assert cp.returncode == 0, cp.stderr
    got, cur = [], []
    for line in cp.stdout.splitlines():
        s = json.loads(line)
        cur.append((s["__key__"], tuple(s["__bucket__"])))
        if s["__batch_end__"]:
            got.append(tuple(cur))
            cur = []
    assert not cur and got
    assert got == batches(libshard.Reader(str(packed.manifest), rank=rank, world_size=2,
                                          mode="exact", **KW))


@pytest.mark.filterwarnings("ignore::libshard.torch.UnequalRanksWarning")
@pytest.mark.parametrize("mode", ["exact", "equal"])
def test_shard_loader_state_dict_resumes_2x2_on_3x1(packed, mode):
    """The job's state from a rank's count of batches (state_after): the batches each
    worker delivered found on the planned line. Equal mode drops a few batches to even the
    ranks: what it delivers is the planned batches less those, every rank as many."""
    from libshard.torch import ShardDataset, ShardLoader
    opts = dict(LOADER, mode=mode, raw_fields="__key__")
    whole = sorted(tuple(f["__key__"]) for _, _, f in
                   ShardDataset(str(packed.manifest), **dict(opts, mode="exact")))
    got, state = [], None
    for rank in range(2):
        loader = ShardLoader(ShardDataset(str(packed.manifest), rank=rank, world_size=2, **opts),
                             num_workers=2)
        for i, (_, _, f) in enumerate(loader):
            got.append(tuple(f["__key__"]))
            if i == 6:  # 7 batches a rank, in step
                break
        state = state or loader.state_dict()
        del loader
    counts = []
    for rank in range(3):
        ds = ShardDataset(str(packed.manifest), rank=rank, world_size=3, **opts)
        loader = ShardLoader(ds, num_workers=1)
        loader.load_state_dict(state)
        rest = [tuple(f["__key__"]) for _, _, f in loader]
        counts.append((len(loader), len(rest)))
        got += rest
    assert not [b for b, n in Counter(got).items() if n > 1], "0 batches repeated"
    if mode == "exact":
        assert sorted(got) == whole, "0 lost"
    else:
        assert set(got) <= set(whole) and len(got) >= len(whole) - 2 * 3, (len(got), len(whole))
        assert len({n for pair in counts for n in pair}) == 1, counts


def test_a_mix_is_bucketed_on_its_line_too(packed):
    """Two sources mixed by weight: the mix's line is bucketed as one source's is: the same
    batches on 2x2 and after an elastic resume onto 3x1."""
    shards = [str(p) for p in packed.shards]
    mix = [(shards[:4], 1.0), (shards[4:], 2.0)]
    one = batches(libshard.Reader(mix, **KW))
    assert sum(len(b) for b in one) == len(packed.keys), "the mix's epoch: the sources' sizes"
    got, states = [], []
    for c, k in enumerate((3, 5, 0, 7)):
        rd = libshard.Reader(mix, rank=c // 2, world_size=2, worker=c % 2, num_workers=2, **KW)
        got += batches(rd, k) if k else []
        states.append(rd.state())
    job = _libshard.merge_states(states)
    for rank in range(3):
        rd = libshard.Reader(mix, rank=rank, world_size=3, **KW)
        rd.restore(job)
        got += batches(rd)
    assert sorted(got) == sorted(one)


@pytest.fixture(scope="module")
def flawed(shardpack, tmp_path_factory):
    """48 JPEGs in 6 shards of 8: two whose header does not parse (no size beside the
    index), one cut in half (its size known, its pixels not)."""
    root = tmp_path_factory.mktemp("flawed")
    make_imagefolder(root / "img", n=48, classes=["a", "b"], seed=2)
    unsized = {"a/img0004", "b/img0031"}
    for k in unsized:
        (root / "img" / f"{k}.jpg").write_bytes(b"\xff\xd8\xff\xfe\x00\x08no SOF" + bytes(300))
    cut = root / "img" / "b" / "img0017.jpg"
    cut.write_bytes(cut.read_bytes()[: cut.stat().st_size // 2])
    manifest = pack(shardpack, root / "img", root / "shards", maxcount=8)
    keys = {f"{'ab'[i % 2]}/img{i:04d}" for i in range(48)}
    return manifest, keys, unsized, "b/img0017"


def test_a_sample_without_an_image_size_is_refused_or_skipped_and_counted(flawed):
    """Without skip_errors the first sample with no size stops the epoch, named; with it,
    such samples are in no batch on any topology (the plan skips them alike everywhere),
    counted and named in stats(), and every other sample comes once."""
    manifest, keys, unsized, _ = flawed
    with pytest.raises(libshard.ShardError, match=r"sample \d+ of .*train-\d+\.tar has no "
                       r"image size in .*train-\d+\.cols"):
        batches(libshard.Reader(str(manifest), **KW))
    one = None
    for world, workers in [(1, 1), (2, 2)]:
        got, skipped, named = [], 0, []
        for rank in range(world):
            for w in range(workers):
                r = libshard.Reader(str(manifest), rank=rank, world_size=world, worker=w,
                                    num_workers=workers, mode="exact", skip_errors=True, **KW)
                got += batches(r)
                st = r.stats()
                skipped += st["skipped_unsized"]
                assert st["skipped_samples"] == 0, "no shard's samples lost"
                named += st["kept_errors"]
        flat = [k for b in got for k, _ in b]
        assert sorted(flat) == sorted(keys - unsized)
        assert skipped == 2 and len(named) == 2 and all("no image size" in m for m in named)
        assert all(len({bk for _, bk in b}) == 1 for b in got)
        if one is None:
            one = sorted(got)
        assert sorted(got) == one, "the same batches on 1x1 and 2x2"


def test_a_shards_rest_lost_under_skip_errors_stops_the_bucketed_epoch(flawed, tmp_path):
    """A shard cut short moves every later sample's place on the line the batches are
    planned on: skip_errors skips samples, and the shard's loss stops the epoch, named."""
    import os
    manifest, *_ = flawed
    shutil.copytree(manifest.parent, tmp_path / "s")
    cut = tmp_path / "s" / "train-000002.tar"
    os.truncate(cut, cut.stat().st_size // 2)
    with pytest.raises(libshard.ShardError, match=r"train-000002\.tar: offset \d+.*skip_errors "
                       r"skips samples, not a shard's rest"):
        batches(libshard.Reader(str(tmp_path / "s" / manifest.name), skip_errors=True, **KW))


@pytest.mark.parametrize("workers", [0, 2])
def test_skip_errors_fills_a_bad_images_place_from_its_own_batch(flawed, workers):
    """A JPEG that does not decode leaves its place to a repeat of another sample of its
    batch (marked in __pad__), as on the fixed-size path: every batch keeps its bucket's
    shape and its planned size, every good sample comes once."""
    from libshard.torch import ShardDataset, ShardLoader, ShardSkipWarning
    manifest, keys, unsized, cut = flawed
    ds = ShardDataset(str(manifest), seed=3, batch_size=4, image_size=64,
                      aspect_buckets=BUCKETS, skip_errors=True, crop="center",
                      raw_fields="__key__;__pad__;__bucket__")
    loader = ShardLoader(ds, num_workers=workers)
    real, sizes = [], []
    if workers:  # warned in the worker's process
        got = list(loader)
    else:
        with pytest.warns(ShardSkipWarning, match="samples without an image size"):
            got = list(loader)
    for images, _, f in got:
        h, w = f["__bucket__"]
        assert images.shape[1:] == (3, h, w)
        pads = f["__pad__"].tolist()
        sizes.append(len(pads))
        for i, (k, p) in enumerate(zip(f["__key__"], pads)):
            if p:
                j = [j for j, q in enumerate(pads) if not q and f["__key__"][j] == k]
                assert j and bool((images[i] == images[j[0]]).all()), (k, i)
            else:
                real.append(k)
    assert sorted(real) == sorted(keys - unsized - {cut})
    assert sum(sizes) == len(keys) - len(unsized), "the bad image's place kept"
    assert dict(loader.skipped, batches=0) == {"image": 1, "no_image": 0, "label": 0,
                                               "no_size": 2, "shards": 0, "shard_samples": 0,
                                               "batches": 0, "total": 3}



def test_the_gpus_finish_of_a_bucketed_batch_is_the_cpu_paths(packed):
    """device="cuda" sends bucketed batches as uint8 NHWC by torch's pinned copy and makes
    dtype, normalization and layout on the GPU (torch/shapedupload.py): the same arithmetic,
    here on the CPU, gives the CPU path's batches exactly (float32), and their rounding
    (float16, bfloat16)."""
    from libshard.torch import ShardDataset
    from libshard.torch.shapedupload import constants, finish
    import torch
    kw = dict(LOADER, crop="center")
    u8 = [b[0] for b in ShardDataset(str(packed.manifest), dtype="uint8", layout="nhwc", **kw)]
    assert len({tuple(x.shape[1:3]) for x in u8}) == 3, "batches of every bucket"
    mean, std = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
    scale, bias = constants(mean, std)
    for layout in ("nchw", "channels_last", "nhwc"):
        want = [b[0] for b in ShardDataset(str(packed.manifest), dtype="float32", layout=layout,
                                           mean=mean, std=std, **kw)]
        assert len(want) == len(u8)
        for x, w in zip(u8, want):
            got = finish(x, torch.float32, layout, scale, bias)
            assert got.shape == w.shape and got.stride() == w.stride()
            assert torch.equal(got, w), (layout, (got - w).abs().max())
            for half in (torch.float16, torch.bfloat16):
                assert torch.equal(finish(x, half, layout, scale, bias), w.to(half))
    for x in u8:  # uint8 keeps its values, in the layout asked
        assert torch.equal(finish(x, torch.uint8, "nchw", scale, bias), x.permute(0, 3, 1, 2))
