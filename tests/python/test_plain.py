"""Plain WebDataset tars, as users bring them: written by GNU tar, bsdtar, Python's tarfile
and WebDataset's TarWriter API (libshard.webdataset's, index=False as WebDataset's), with no
.idx and no manifest. Every mode that needs counts or offsets works on
them: libshard indexes each shard once (a pass over its headers), keeps the index in its
cache folder (never beside the shard), finds it there on the next open (counted in the
list stage), and makes it again when the shard changes.

Data: source a, 4 shards (7, 11, 5, 9 samples) of key.txt + key.cls; source b, 2 shards of
6 samples each; shards of a written by four different tar writers.
"""
import glob
import io
import json
import os
import shutil
import subprocess
import tarfile
from collections import Counter

import pytest

import libshard

torch = pytest.importorskip("torch")
from torch.utils.data import DistributedSampler  # noqa: E402

from libshard.indexed import IndexedShards  # noqa: E402
from libshard.torch import IndexedShardDataset, ShardDataset  # noqa: E402
from libshard.wids import ShardListDataset  # noqa: E402

COUNTS_A = [7, 11, 5, 9]
COUNTS_B = [6, 6]


def members(prefix, shard, n):
    """(name, bytes) of a shard's samples, in WebDataset's order (a sample's members
    together)."""
    out = []
    for i in range(n):
        key = f"{prefix}{shard}_{i:03d}"
        out += [(f"{key}.cls", str(i % 3).encode()), (f"{key}.txt", f"{key} text".encode() * 9)]
    return out


def write_tarfile(path, items):
    with tarfile.open(path, "w", format=tarfile.USTAR_FORMAT) as tf:
        for name, data in items:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))


def write_with(tool, path, items, tmp):
    """The shard written by a tar program from files in a scratch folder."""
    work = tmp / f"scratch-{path.name}"
    work.mkdir()
    for name, data in items:
        (work / name).write_bytes(data)
    names = [n for n, _ in items]
    if tool == "gnu":
        cmd = ["tar", "--format=gnu", "-cf", str(path), "-C", str(work), *names]
    else:
        cmd = ["bsdtar", "--format=pax", "-cf", str(path), "-C", str(work), *names]
    subprocess.run(cmd, check=True)
    shutil.rmtree(work)


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    top = tmp_path_factory.mktemp("plain")
    writers = ["gnu", "bsdtar", "tarfile", "TarWriter"]
    for s, n in enumerate(COUNTS_A):
        path = top / f"a-{s:06d}.tar"
        items = members("a", s, n)
        if writers[s] == "tarfile":
            write_tarfile(path, items)
        elif writers[s] == "TarWriter":
            import libshard.webdataset as wds
            with wds.TarWriter(str(path)) as w:
                for i in range(0, len(items), 2):
                    key = items[i][0].rsplit(".", 1)[0]
                    w.write({"__key__": key, "cls": items[i][1], "txt": items[i + 1][1]})
        else:
            write_with(writers[s], path, items, top)
    for s, n in enumerate(COUNTS_B):
        write_tarfile(top / f"b-{s:06d}.tar", members("b", s, n))
    assert not [p for p in os.listdir(top) if not p.endswith(".tar")]
    return top


def spec_a(top):
    return str(top / "a-{000000..000003}.tar")


def spec_b(top):
    return str(top / "b-{000000..000001}.tar")


def keys_a():
    return {f"a{s}_{i:03d}" for s, n in enumerate(COUNTS_A) for i in range(n)}


def no_index_beside(top):
    return not [p for p in os.listdir(top) if p.endswith(".idx")]


def test_a_mix_of_plain_tars_has_exact_shares(plain, tmp_path):
    cache = tmp_path / "ix"
    total = sum(COUNTS_A) + sum(COUNTS_B)
    mix = [(spec_a(plain), 0.75), (spec_b(plain), 0.25)]
    for epoch in range(2):
        ds = ShardDataset(mix, decode=False, seed=4, index_cache=str(cache), rank=0,
                          world_size=1)
        ds.set_epoch(epoch)
        got = [s["__key__"] for s in ds]
        assert len(got) == total
        from_b = Counter(k for k in got if k.startswith("b"))
        assert sum(from_b.values()) == round(0.25 * total) == 11
        assert len([k for k in got if k.startswith("a")]) == 33
    assert no_index_beside(plain)


def test_the_index_is_kept_reused_and_rebuilt_when_the_shard_changes(plain, tmp_path):
    top = tmp_path / "copy"
    shutil.copytree(plain, top)
    cache = tmp_path / "ix"

    def opened():
        r = libshard.Reader([spec_a(top)], seed=1, mode="equal", rank=0, world_size=1,
                            index_cache=str(cache))
        st = r.stats()
        return r.epoch_length, st["indexes_built"], st["indexes_cached"]

    assert opened() == (32, 4, 0)
    assert len(glob.glob(os.path.join(cache, "*.idx"))) == 4
    assert opened() == (32, 0, 4), "the second open finds every index in the cache"
    # a shard rewritten with more samples: its index is made again, the old one removed
    write_tarfile(top / "a-000002.tar", members("a", 2, 8))
    assert opened() == (35, 1, 3)
    assert len(glob.glob(os.path.join(cache, "*.idx"))) == 4
    assert no_index_beside(top)


def test_equal_mode_under_three_ranks(plain, tmp_path):
    seen = []
    for rank in range(3):
        ds = ShardDataset(spec_a(plain), decode=False, mode="equal", seed=2, rank=rank,
                          world_size=3, index_cache=str(tmp_path / "ix"))
        got = [s["__key__"] for s in ds]
        assert len(got) == 32 // 3
        seen += got
    assert len(set(seen)) == len(seen) and set(seen) <= keys_a()


def test_len_counts_plain_tars(plain, tmp_path):
    ds = ShardDataset(spec_a(plain), decode=False, index_cache=str(tmp_path / "ix"))
    assert len(ds) == 32
    never = ShardDataset(spec_a(plain), decode=False, make_indexes="never")
    with pytest.raises(TypeError, match="a-000000.tar"):
        len(never)


def test_never_refuses_a_mode_that_needs_counts_naming_the_shard(plain):
    with pytest.raises(libshard.ShardError, match="a-00000[0-3].tar has none.*never"):
        libshard.Reader([(spec_a(plain), 1), (spec_b(plain), 1)], make_indexes="never")


def test_indexed_dataset_with_a_distributed_sampler_reads_each_sample_once(plain, tmp_path):
    ds = IndexedShardDataset(spec_a(plain), decode=False, index_cache=tmp_path / "ix")
    assert len(ds) == 32
    seen = []
    for rank in range(2):
        for i in DistributedSampler(ds, num_replicas=2, rank=rank, shuffle=True, seed=5):
            d = ds[i]
            assert d["txt"] == f"{d['__key__']} text".encode() * 9
            seen.append(d["__key__"])
    assert Counter(seen) == Counter(keys_a())
    assert no_index_beside(plain)


def test_wids_manifest_over_plain_tars(plain, tmp_path):
    manifest = plain / "wids.json"
    manifest.write_text(json.dumps({
        "__kind__": "wids-shard-index-v1", "name": "a",
        "shardlist": [{"url": f"a-{s:06d}.tar", "nsamples": n} for s, n in enumerate(COUNTS_A)]}))
    try:
        ds = ShardListDataset(str(manifest))
        assert len(ds) == 32
        assert ds[7]["__key__"] == "a1_000" and ds[31]["__key__"] == "a3_008"
        assert ds[7][".txt"] == "a1_000 text" * 9  # wids's "PIL" transformations decode text
    finally:
        manifest.unlink()


def test_a_wrong_count_in_a_shard_list_is_named(plain):
    with pytest.raises(ValueError, match="a-000001.tar: the shard list says 12 samples, the "
                                         "shard has 11"):
        IndexedShards(None, entries=[(str(plain / "a-000001.tar"), 12)])


def test_a_damaged_plain_tar_is_named_with_its_offset(plain, tmp_path):
    bad = tmp_path / "bad.tar"
    data = bytearray((plain / "a-000001.tar").read_bytes())
    data[2048 + 148:2048 + 156] = b"9999999\0"  # the third header's checksum
    bad.write_bytes(bytes(data))
    with pytest.raises(libshard.ShardError, match=r"bad.tar: offset \d+: the header after member"):
        IndexedShards(str(bad), index_cache=tmp_path / "ix")


def test_indexing_shows_progress_on_a_terminal_only(plain, tmp_path):
    import pty
    import sys
    code = ("import sys; sys.path.insert(0, {p!r}); import libshard; "
            "r = libshard.Reader([{s!r}], mode='equal', rank=0, world_size=1, "
            "index_cache={c!r}); print(r.epoch_length)")

    def run(cache, tty):
        cmd = [sys.executable, "-c", code.format(p=os.path.dirname(os.path.dirname(
            libshard.__file__)), s=spec_a(plain), c=str(tmp_path / cache))]
        if not tty:
            cp = subprocess.run(cmd, capture_output=True, timeout=60)
            return cp.stdout.decode(), cp.stderr.decode()
        main, sub = pty.openpty()
        cp = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=sub, timeout=60)
        os.close(sub)
        err = b""
        try:
            while chunk := os.read(main, 4096):
                err += chunk
        except OSError:
            pass
        os.close(main)
        return cp.stdout.decode(), err.decode()

    out, err = run("tty", True)
    assert out.strip() == "32" and "indexing shards that have no index: 4 of 4" in err
    out, err = run("pipe", False)
    assert out.strip() == "32" and err == "", "no progress line into a pipe or a log"


def test_compressed_plain_tars_are_counted_and_a_gzip_one_is_not_seeked(plain, tmp_path):
    import gzip
    gz = tmp_path / "a-000001.tar.gz"
    gz.write_bytes(gzip.compress((plain / "a-000001.tar").read_bytes()))
    zst = tmp_path / "a-000002.tar.zst"
    subprocess.run(["zstd", "-q", str(plain / "a-000002.tar"), "-o", str(zst)], check=True)
    r = libshard.Reader([str(gz), str(zst)], mode="equal", rank=0, world_size=1,
                        index_cache=str(tmp_path / "ix"))
    assert r.epoch_length == 11 + 5 and r.stats()["indexes_built"] == 2
    with pytest.raises(ValueError, match="a-000001.tar.gz: indexed access seeks, and a gzip "
                                         "stream cannot"):
        IndexedShards(str(gz), index_cache=tmp_path / "ix")


def test_indexed_dataset_takes_shard_datasets_options_or_names_why_not(plain, tmp_path):
    spec = spec_a(plain)
    with pytest.raises(TypeError, match="'batch_size' is a streaming setting: DataLoader"):
        IndexedShardDataset(spec, batch_size=8)
    with pytest.raises(TypeError, match="'streams' is ShardDataset's"):
        IndexedShardDataset(spec, streams=2)
    with pytest.raises(ValueError, match="a-000000.tar: indexed access needs each shard's index"):
        IndexedShardDataset(spec, make_indexes="never")
    ds = IndexedShardDataset(spec, decode=False, index_cache=tmp_path / "ix", seed=3)
    assert ds[0]["__key__"] == "a0_000"


def test_the_list_stage_counts_the_indexes(packed, tmp_path):
    """ds.stats(): the list stage says how many indexes it made and found in the cache."""
    for p in packed.shards:  # the shards alone: no .idx, no manifest
        shutil.copy(p, tmp_path / p.name)
    spec = [str(tmp_path / p.name) for p in packed.shards]

    def stats():
        ds = ShardDataset(spec, mode="equal", rank=0, world_size=1, batch_size=100,
                          image_size=16, index_cache=str(tmp_path / "ix"))
        assert sum(len(y) for _, y in ds) == 300
        return ds.stats()["stages"]["list"]

    first, second = stats(), stats()
    assert (first["indexes_built"], first["indexes_cached"]) == (len(spec), 0)
    assert (second["indexes_built"], second["indexes_cached"]) == (0, len(spec))


def test_processes_indexing_at_once_make_each_index_once(tmp_path):
    """Four processes open readers on the same plain shards at once (as DataLoader workers
    do): each index is made by one of them, the others wait for it and find it."""
    import sys
    top = tmp_path / "big"
    top.mkdir()
    for s in range(6):
        write_tarfile(top / f"c-{s}.tar", [(f"c{s}_{i:05d}.bin", os.urandom(512))
                                          for i in range(4000)])
    code = ("import sys; sys.path.insert(0, {p!r}); import libshard; "
            "r = libshard.Reader([{s!r}], mode='equal', rank=0, world_size=1, streams=3, "
            "index_cache={c!r}); st = r.stats(); "
            "print(r.epoch_length, st['indexes_built'], st['indexes_cached'])")
    cmd = [sys.executable, "-c", code.format(p=os.path.dirname(os.path.dirname(libshard.__file__)),
                                             s=str(top / "c-{0..5}.tar"), c=str(tmp_path / "ix"))]
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True) for _ in range(4)]
    outs = [p.communicate(timeout=120)[0].split() for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert all(int(o[0]) == 24000 for o in outs)
    assert sum(int(o[1]) for o in outs) == 6, outs
    assert sum(int(o[2]) for o in outs) == 18, outs


def test_a_local_folder_names_its_shards(plain, tmp_path):
    """A folder as the spec lists its shards in name order, as a gs:// or s3:// prefix does
    (the index files, manifests and anything else in it left out)."""
    ds = ShardDataset(str(plain) + "/", decode=False, mode="equal", rank=0, world_size=1,
                      index_cache=str(tmp_path / "ix"))
    assert len(ds) == sum(COUNTS_A) + sum(COUNTS_B)
    urls = [u for u, *_ in libshard._libshard.list_shards([str(plain)])]
    assert urls == sorted(str(p) for p in plain.glob("*.tar"))
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(FileNotFoundError, match="empty: no shards in this folder"):
        libshard.Reader([str(empty)])
