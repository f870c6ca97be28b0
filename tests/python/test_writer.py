"""libshard.ShardWriter and TarWriter: WebDataset's sample dicts in, shards out, read back by
Python's tarfile, grouped as WebDataset groups members, and by libshard's own reader."""
import gzip
import io
import json
import os
import pickle
import re
import tarfile

import numpy as np
import pytest
from PIL import Image

import libshard
import libshard.webdataset as wds

from .conftest import jpeg, textured


def wds_groups(path):
    """A tar's samples as WebDataset's tar_file_expander + group_by_keys make them: the key is
    the member name up to the first dot of its last path component."""
    out = []
    with tarfile.open(path) as tf:
        for m in tf:
            prefix, suffix = re.match(r"^((?:.*/|)[^.]+)[.]([^/]*)$", m.name).groups()
            if not out or out[-1]["__key__"] != prefix:
                out.append({"__key__": prefix})
            out[-1][suffix] = tf.extractfile(m).read()
    return out


def test_samples_encode_as_webdataset_encodes_them(tmp_path):
    img = textured(40, 30)
    arr = np.arange(12, dtype=np.float32).reshape(3, 4)
    with libshard.ShardWriter(str(tmp_path / "s-%06d.tar"), maxcount=100) as sink:
        sink.write({"__key__": "a/x0", "jpg": b"\xff\xd8raw", "cls": 3, "txt": "héllo",
                    "json": {"w": 40, "caption": "a cat"}, "npy": arr, "pyd": {"k": [1, 2]},
                    "png": img, "txt.gz": "zipped", "__url__": "ignored", "_meta": "dropped"})
        sink.write({"__key__": "a/x1", "cls": 0, "seg.png": Image.fromarray(img)})
    (s0, s1) = wds_groups(tmp_path / "s-000000.tar")
    assert s0["__key__"] == "a/x0" and s1["__key__"] == "a/x1"
    assert sorted(s0) == ["__key__", "cls", "jpg", "json", "npy", "png", "pyd", "txt", "txt.gz"]
    assert s0["jpg"] == b"\xff\xd8raw", "bytes are written as they are"
    assert s0["cls"] == b"3" and s0["txt"] == "héllo".encode()
    assert json.loads(s0["json"]) == {"w": 40, "caption": "a cat"}
    assert s0["json"] == json.dumps({"w": 40, "caption": "a cat"}).encode(), "json.dumps, as WebDataset"
    assert np.array_equal(np.load(io.BytesIO(s0["npy"])), arr)
    assert pickle.loads(s0["pyd"]) == {"k": [1, 2]}
    assert np.array_equal(np.asarray(Image.open(io.BytesIO(s0["png"]))), img), "PNG is lossless"
    assert gzip.decompress(s0["txt.gz"]) == b"zipped"
    assert np.array_equal(np.asarray(Image.open(io.BytesIO(s1["seg.png"]))), img)
    with tarfile.open(tmp_path / "s-000000.tar") as tf:
        names = tf.getnames()
    assert names[:3] == ["a/x0.cls", "a/x0.jpg", "a/x0.json"], "members sorted by field, as WebDataset writes"
    # libshard reads it back: the same samples, the index beside the shard
    got = list(libshard.Reader(str(tmp_path / "s-000000.tar")))
    assert [g["__key__"] for g in got] == ["a/x0", "a/x1"]
    assert got[0]["cls"] == b"3" and got[1]["seg.png"] == s1["seg.png"]
    assert (tmp_path / "s-000000.idx").exists()


def test_rotation_post_manifest_and_reproducibility(tmp_path):
    posted = []
    samples = [{"__key__": f"k{i:03d}", "jpg": jpeg(textured(16, 16, seed=i)), "cls": i % 5} for i in range(23)]
    for run in ("a", "b"):
        (tmp_path / run).mkdir()
        with libshard.ShardWriter(str(tmp_path / run / "t-%04d.tar"), maxcount=5, post=posted.append,
                                  manifest=str(tmp_path / run / "t.json"), checksums="md5,sha256") as sink:
            for s in samples:
                sink.write(s)
        shards = sink.shards
    assert [os.path.basename(p) for p in posted[:5]] == [f"t-{j:04d}.tar" for j in range(5)], \
        "post sees each shard once it is complete, in order"
    assert [s["nsamples"] for s in shards] == [5, 5, 5, 5, 3]
    for j in range(5):
        a, b = (tmp_path / r / f"t-{j:04d}.tar" for r in "ab")
        assert a.read_bytes() == b.read_bytes(), "the same samples give the same bytes"
    man = json.loads((tmp_path / "a" / "t.json").read_text())
    assert [e["url"] for e in man["shardlist"]] == [f"t-{j:04d}.tar" for j in range(5)]
    assert all("md5sum" in e and "sha256" in e for e in man["shardlist"])
    keys = [s["__key__"] for s in libshard.Reader(str(tmp_path / "a" / "t.json"))]
    assert sorted(keys) == [s["__key__"] for s in samples]


def test_maxsize_is_never_exceeded_by_a_shard_of_several_samples(tmp_path):
    with libshard.ShardWriter(str(tmp_path / "m-%d.tar"), maxsize=10_000) as sink:
        for i in range(10):
            sink.write({"__key__": f"s{i}", "bin": os.urandom(3000)})
    sizes = [s["filesize"] for s in sink.shards]
    assert len(sizes) > 2 and all(n <= 10_000 for n in sizes), sizes


def test_zstd_shards_and_webdataset_names(tmp_path):
    lines = []
    with wds.ShardWriter(str(tmp_path / "z-%06d.tar.zst"), maxcount=3, post=lines.append) as sink:
        for i in range(7):
            sink.write({"__key__": f"z{i}", "txt": f"sample {i}"})
    assert len(lines) == 3
    got = sorted(s["txt"] for s in libshard.Reader(str(tmp_path / "z-{000000..000002}.tar.zst")))
    assert got == [f"sample {i}".encode() for i in range(7)]


def test_bad_samples_are_refused_and_an_exception_leaves_no_partial_shard(tmp_path):
    pattern = str(tmp_path / "b-%d.tar")
    with pytest.raises(ValueError, match="__key__"):
        with libshard.ShardWriter(pattern) as sink:
            sink.write({"jpg": b"x"})
    with pytest.raises(ValueError, match="no encoder"):
        with libshard.ShardWriter(pattern) as sink:
            sink.write({"__key__": "a", "weird": object()})
    with pytest.raises(ValueError, match="doesn't map to bytes"):
        with libshard.ShardWriter(pattern, encoder=False) as sink:
            sink.write({"__key__": "a", "cls": 3})
    with pytest.raises(ValueError, match="metadata"):
        with libshard.ShardWriter(pattern) as sink:
            sink.write({"__key__": "a", "_m": 3})
    with pytest.raises(ValueError, match=r"\.\./x"):
        with libshard.ShardWriter(pattern) as sink:
            sink.write({"__key__": "../x", "txt": "a key that breaks the key rules"})
    with pytest.raises(RuntimeError):
        with libshard.ShardWriter(pattern, manifest=str(tmp_path / "b.json")) as sink:
            sink.write({"__key__": "ok", "txt": "half a shard"})
            raise RuntimeError("the producer failed")
    assert sorted(os.listdir(tmp_path)) == [], "nothing half-written, no manifest"


def test_tarwriter_to_a_path_and_to_a_stream(tmp_path):
    path = tmp_path / "one.tar"
    with libshard.TarWriter(str(path)) as tw:
        for i in range(4):
            tw.write({"__key__": f"k{i}", "cls": i, "txt": "x" * i})
    assert [s["__key__"] for s in wds_groups(path)] == ["k0", "k1", "k2", "k3"]
    assert sorted(os.listdir(tmp_path)) == ["one.tar"], "no temporary left"
    buf = io.BytesIO()
    with wds.TarWriter(buf) as tw:
        tw.write({"__key__": "only", "txt": "in memory"})
    with tarfile.open(fileobj=io.BytesIO(buf.getvalue())) as tf:
        assert tf.getnames() == ["only.txt"]
        assert tf.extractfile("only.txt").read() == b"in memory"
    with pytest.raises(ValueError, match="gzip"):
        libshard.TarWriter(str(tmp_path / "x.tar.gz"))
