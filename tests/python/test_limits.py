"""Limits that bound memory on the Python entry points: a sample's members added up
(max_sample_size) on the seek path, the reader's share of memory_budget, and an index line
checked against the tar header before its bytes are handed out."""
import os
import tarfile

import pytest

import libshard
from libshard.indexed import IndexedShards


def test_the_sample_limit_holds_by_index(tmp_path):
    """A seekable .tar.zst with its index, one sample of 2 x 200 MiB (each member under
    max_member_size): refused from the index line's sum as the index is read, before a frame is decompressed."""
    shard = tmp_path / "s-000000.tar.zst"
    big = b"\0" * (200 << 20)
    with libshard.ShardWriter(str(tmp_path / "s-%06d.tar.zst")) as w:
        w.write({"__key__": "k", "a": big, "b": big})
    del big
    with pytest.raises(Exception) as e:
        IndexedShards(str(shard))[0]
    msg = str(e.value)
    assert "s-000000.idx: line 2: member 'k.b'" in msg and "max_sample_size" in msg, msg


def sparse_samples(tmp_path, n, mib):
    """A tar of n samples of one mib MiB member each, written sparse (GNU tar -S)."""
    for i in range(n):
        with open(tmp_path / f"k{i}.bin", "wb") as f:
            f.truncate(mib << 20)
    names = [f"k{i}.bin" for i in range(n)]
    import subprocess
    subprocess.run(["tar", "-cSf", "s.tar", *names], cwd=tmp_path, check=True)
    for name in names:
        os.remove(tmp_path / name)
    return tmp_path / "s.tar"


def test_the_reader_holds_its_samples_to_its_memory_budget(tmp_path):
    """Samples of 48 MiB: over the share of the default budget (256 MiB over 2 x 4 streams),
    an error naming memory_budget; with a budget that holds them, read whole."""
    shard = sparse_samples(tmp_path, 3, 48)
    with pytest.raises(Exception) as e:
        list(libshard.Reader(str(shard)))
    msg = str(e.value)
    assert "s.tar" in msg and "max_sample_size" in msg and "raise memory_budget" in msg, msg
    got = [s["__key__"] for s in libshard.Reader(str(shard), memory_budget=1 << 30)]
    assert got == ["k0", "k1", "k2"]


def test_an_index_line_is_checked_against_the_header_it_points_after(tmp_path):
    """A middle line whose size differs from the tar's: the first and last lines hold (the
    index passes the check at open), the sample read by it is an error naming both."""
    path = tmp_path / "s.tar"
    _tar(path, [(f"s{i}.{f}", b"x" * 700) for i in range(5) for f in ("cls", "txt")])
    lines = [
        "v1.2 5",
        *(f"cls {512 + 3072 * i} 700 s{i}.cls txt {2048 + 3072 * i} "
          f"{600 if i == 2 else 700} s{i}.txt" for i in range(5)),
    ]
    (tmp_path / "s.idx").write_text("\n".join(lines) + "\n")
    shards = IndexedShards(str(path))
    assert shards[1]["txt"] == b"x" * 700 and shards[3]["cls"] == b"x" * 700
    with pytest.raises(Exception) as e:
        shards[2]
    msg = str(e.value)
    assert "index line 4: member 's2.txt' of 600 bytes" in msg and \
        "the tar header at offset 7680 is 's2.txt' of 700 bytes" in msg, msg


def _cli_helpers():
    import sys
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cli")
    if here not in sys.path:
        sys.path.insert(0, here)
    import jpegscans
    import test_limits as cli
    return jpegscans.many_scans, cli.png_of


def _tar(path, members):
    """A ustar tar of (name, bytes) members (the CLI tests' writer); its path."""
    _cli_helpers()
    from test_hostile import write_tar
    return str(write_tar(path, members, fmt=tarfile.USTAR_FORMAT))


def test_a_jpeg_of_many_scans_is_refused_on_every_decode_path(tmp_path):
    """200 scans: refused by max_scans by the C decoder and before PIL's (neither walks
    them); 99 scans decode on both paths."""
    from libshard.torch import ShardDataset
    import libshard.webdataset as wds
    many_scans, _ = _cli_helpers()
    bad = _tar(tmp_path / "bad.tar", [("a.jpg", many_scans(1000, 1000, 200))])
    good = _tar(tmp_path / "good.tar", [("b.jpg", many_scans(1024, 1024, 99))])
    kw = dict(batch_size=1, image_fields="jpg", label_field=None, image_size=32)
    with pytest.raises(Exception, match=r"sample 'a': a progressive JPEG of more than 100 "
                                        r"scans \(max_scans\)"):
        list(ShardDataset(bad, **kw))
    with pytest.raises(Exception, match=r"more than 100 scans \(max_scans\)"):
        list(wds.WebDataset(bad, shardshuffle=False).decode("pil"))
    assert len(list(ShardDataset(good, **kw))) == 1
    assert list(wds.WebDataset(good, shardshuffle=False).decode("pil"))[0]["jpg"].size == (1024, 1024)


def test_a_decode_over_max_decode_memory_is_refused(tmp_path):
    """A 4000 x 4000 progressive JPEG keeps 32 MB of coefficients: refused under a 16 MiB
    max_decode_memory, naming it, and decoded under the default."""
    from libshard.torch import ShardDataset
    many_scans, _ = _cli_helpers()
    shard = _tar(tmp_path / "p.tar", [("a.jpg", many_scans(4000, 4000, 2))])
    kw = dict(batch_size=1, image_fields="jpg", label_field=None, image_size=32)
    with pytest.raises(Exception, match=r"a JPEG of 4000x4000 pixels needs \d+ bytes to decode, "
                                        r"more than the limit of 16777216 \(max_decode_memory\)"):
        list(ShardDataset(shard, max_decode_memory=16 << 20, **kw))
    assert len(list(ShardDataset(shard, **kw))) == 1


def test_decodes_wait_for_room_in_decode_memory(tmp_path):
    """Four 4000 x 4000 PNGs (64 MB of RGBA each) on four threads: with decode_memory of
    100 MB they decode one at a time (decodes waited); with no bound, none waits."""
    from libshard.torch import ShardDataset
    _, png_of = _cli_helpers()
    png = png_of(4000, 4000, 9)
    shard = _tar(tmp_path / "p.tar", [(f"k{i}.png", png) for i in range(8)])

    def waits(memory):
        ds = ShardDataset(shard, batch_size=8, image_fields="png", label_field=None,
                          image_size=32, threads=4, decode_memory=memory)
        batches = list(ds)
        x = batches[0][0]
        assert len(batches) == 1 and x.shape[0] == 8 and int(x.float().mean()) == 9
        return ds.stats()["stages"]["decode"]["memory_waits"]

    assert waits(100 << 20) > 0
    assert waits(0) == 0


def test_wids_and_indexed_name_the_manifest_they_cannot_take(tmp_path):
    """Counts adding up past what an index addresses, and nesting past any parser's depth:
    errors naming the file (not OverflowError or RecursionError)."""
    import json
    from libshard.wids import ShardListDataset
    shard = _tar(tmp_path / "s.tar", [("a.txt", b"1")])
    huge = tmp_path / "huge.json"
    huge.write_text(json.dumps({"shardlist": [{"url": "s.tar", "nsamples": (1 << 63) - 1}] * 2}))
    deep = tmp_path / "deep.json"
    deep.write_text('{"shardlist": [{"url": "s.tar", "nsamples": 1}], "x": ' + "[" * 200000 +
                    "]" * 200000 + "}")
    for make in (IndexedShards, ShardListDataset):
        with pytest.raises(Exception, match=r"huge.json|s.tar: has 1 samples, and its manifest "
                                            r"says 9223372036854775807"):
            make(str(huge))
        with pytest.raises(Exception, match=r"deep.json.*nested more than 256 deep"):
            make(str(deep))
    assert shard


def test_a_shard_skipped_without_a_count_is_warned_of(tmp_path):
    """skip_errors: a plain tar (no index, no manifest) cut in half is skipped after its
    error; no sample count names the loss, and the warning comes all the same."""
    import warnings
    from libshard.torch import ShardDataset
    from libshard.torch.skips import ShardSkipWarning
    _, png_of = _cli_helpers()
    png = png_of(8, 8, 3)
    for s in range(4):
        _tar(tmp_path / f"s-{s}.tar", [(f"k{s}_{i}.{f}", png if f == "png" else b"1")
                                       for i in range(20) for f in ("cls", "png")])
    cut = tmp_path / "s-3.tar"
    cut.write_bytes(cut.read_bytes()[:cut.stat().st_size // 2 + 100])  # inside a member
    ds = ShardDataset(str(tmp_path / "s-{0..3}.tar"), batch_size=10, image_fields="png",
                      image_size=8, skip_errors=True, make_indexes="never", shuffle_shards=False)
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        n = sum(len(y) for _, y in ds)
    assert 60 <= n < 80 and ds.skipped["shards"] == 1, (n, ds.skipped)
    assert any(issubclass(w.category, ShardSkipWarning) and "1 shards after errors" in
               str(w.message) for w in got), [str(w.message) for w in got]


def test_the_shuffle_buffer_is_held_to_its_own_limit(tmp_path):
    """The shuffle buffer's memory is counted apart from the streams' budget and follows the
    shuffle asked for: 100 samples of 1 MiB in a buffer of 100 over a 64 MiB memory_budget
    read every sample (100 x 4 MiB allowed); its own limit is shown with 20 samples of 5 MiB
    in tests/python/test_limits.py's face test and tests/unit/test_reader.c."""
    shard = sparse_samples(tmp_path, 100, 1)
    got = [s["__key__"] for s in libshard.Reader(str(shard), shuffle=100, seed=1,
                                                 memory_budget=64 << 20)]
    assert sorted(got) == sorted(f"k{i}" for i in range(100)) and got != sorted(got)


def test_a_shard_cut_short_names_the_sample_on_the_indexed_path(tmp_path):
    """A shard truncated after its index was written: the samples before the cut read by
    index, the ones past it an error naming the index line, member and offset."""
    path = tmp_path / "s.tar"
    _tar(path, [(f"s{i}.txt", bytes([65 + i]) * 3000) for i in range(6)])
    (tmp_path / "s.idx").write_text("v1.2 6\n" + "".join(f"txt {512 + 3584 * i} 3000 s{i}.txt\n"
                                                           for i in range(6)))
    path.write_bytes(path.read_bytes()[:3 * 3584 + 1000])
    shards = IndexedShards(str(path))
    assert shards[1]["txt"] == b"B" * 3000
    with pytest.raises(Exception, match=r"s.tar: index line 6: member 's4.txt' at offset \d+ "
                                        r"size 3000 lies past the end of the shard"):
        shards[4]


def test_a_lossless_webp_counts_its_huffman_tables(tmp_path):
    """A lossless WebP may declare a group of Huffman tables for every 4 x 4 pixels, which
    libwebp reserves before a pixel is decoded: the estimate counts them as the file's size
    allows (a 295 KB file took 363 MiB), so a 1024 x 1024 one is refused at the default
    limit, naming it, and decodes under raised limits; a 256 x 256 one decodes as is."""
    import io
    from PIL import Image
    from libshard.torch import ShardDataset

    def lossless(n):
        out = io.BytesIO()
        Image.effect_noise((n, n), 40).convert("RGB").save(out, "WEBP", lossless=True)
        return out.getvalue()

    assert len(libshard.decode(lossless(256), 32, 32)) == 32 * 32 * 3
    shard = tmp_path / "w.tar"
    _tar(shard, [("s0.webp", lossless(1024)), ("s0.cls", b"1")])
    opts = dict(image_size=32, batch_size=1, seed=1)
    with pytest.raises(Exception, match=r"a lossless WebP of 1024x1024 pixels needs \d+ bytes "
                                        r"to decode, more than the limit of 536870912 "
                                        r"\(max_decode_memory\)"):
        list(ShardDataset(str(shard), **opts))
    raised = ShardDataset(str(shard), max_decode_memory=2 << 30, decode_memory=2 << 30, **opts)
    assert [len(y) for _, y in raised] == [1]


def test_a_shuffle_past_its_limit_names_the_keywords_of_the_face_that_was_called(tmp_path):
    """20 samples of 5 MiB, a shuffle buffer of 16 over a 64 MiB budget: refused naming
    Python's keywords (shuffle=, memory_budget=) with the sizes that would fit; shardcat
    names its options (--shuffle, --memory-budget); the C message names the C fields
    (tests/unit/test_reader.c: the control)."""
    import subprocess
    from pathlib import Path
    shard = sparse_samples(tmp_path, 20, 5)
    from libshard.torch import ShardDataset
    ds = ShardDataset(str(shard), decode=False, shuffle=16, seed=0, streams=1,
                      memory_budget=64 << 20)
    with pytest.raises(ValueError) as e:
        for _ in ds:
            pass
    msg = str(e.value)
    assert "set shuffle=11 or less, or memory_budget=" in msg and "shuffle_buffer" not in msg, msg
    shardcat = os.environ.get("SHARDCAT") or str(Path(__file__).resolve().parents[2] / "build" /
                                                  "tools" / "shardcat")
    cp = subprocess.run([shardcat, "stream", str(shard), "--shuffle", "16", "--seed", "0",
                         "--streams", "1", "--memory-budget", "64M"], capture_output=True,
                        text=True, timeout=120)
    assert cp.returncode == 1 and "set --shuffle 11 or less, or --memory-budget " in cp.stderr, \
        cp.stderr
    assert "shuffle_buffer" not in cp.stderr
    # a C field's name given to Python: did you mean its keyword
    with pytest.raises(TypeError, match="'shuffle_buffer' \\(did you mean 'shuffle'\\?"):
        ShardDataset(str(shard), shuffle_buffer=16)
