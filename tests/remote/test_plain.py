"""Plain tars (no .idx, no manifest) over HTTP from nginx: a mix, equal mode and indexed
access index each shard once (the shard streamed once), keep the index in the cache, find it
there on the next open without reading the shards again, and make it again when the served
shard changes (its ETag does)."""
import glob
import io
import os
import tarfile
from collections import Counter

import pytest

COUNTS = [9, 4, 12]


def write_plain(path, prefix, n):
    with tarfile.open(path, "w", format=tarfile.GNU_FORMAT) as tf:
        for i in range(n):
            for ext, data in (("cls", str(i % 2).encode()), ("bin", os.urandom(3000 + i))):
                info = tarfile.TarInfo(f"{prefix}_{i:03d}.{ext}")
                info.size = len(data)
                tf.addfile(info, io.BytesIO(data))


@pytest.fixture(scope="module")
def plain(root):
    top = root / "plain"
    top.mkdir(exist_ok=True)
    for s, n in enumerate(COUNTS):
        write_plain(top / f"p-{s:03d}.tar", f"p{s}", n)
    write_plain(top / "q-000.tar", "q0", 6)
    return top


@pytest.fixture
def lib(ShardDataset):  # noqa: N803 (puts libshard on sys.path)
    import libshard
    return libshard


def test_a_mix_over_http_indexes_once_then_reads_the_cache(lib, nginx, plain, tmp_path):
    mix = [(f"{nginx.url}/plain/p-{{000..002}}.tar", 0.5), (f"{nginx.url}/plain/q-000.tar", 0.5)]
    cache = str(tmp_path / "ix")

    def epoch():
        r = lib.Reader(mix, seed=3, rank=0, world_size=1, index_cache=cache)
        got = [s["__key__"] for s in r]
        st = r.stats()
        return got, st["indexes_built"], st["indexes_cached"], r.remote_stats()

    got, built, cached, _ = epoch()
    total = sum(COUNTS) + 6
    assert len(got) == total and (built, cached) == (4, 0)
    assert sum(1 for k in got if k.startswith("q")) == total // 2
    again, built, cached, _ = epoch()
    assert (built, cached) == (0, 4) and Counter(again) == Counter(got)
    assert len(glob.glob(os.path.join(cache, "*.idx"))) == 4 and not list(plain.glob("*.idx"))
    # opening alone: indexing streams each shard once; the cache asks only for versions
    size = sum(p.stat().st_size for p in plain.glob("[pq]-*.tar"))
    cold = lib.Reader(mix, seed=3, rank=0, world_size=1, index_cache=str(tmp_path / "cold"))
    warm = lib.Reader(mix, seed=3, rank=0, world_size=1, index_cache=cache)
    assert cold.remote_stats()["bytes"] >= size
    assert warm.remote_stats()["bytes"] < 4096


def test_indexed_access_over_http_reads_by_range(lib, nginx, plain, tmp_path):
    from libshard.indexed import IndexedShards
    shards = IndexedShards(f"{nginx.url}/plain/p-{{000..002}}.tar", index_cache=tmp_path / "ix")
    assert len(shards) == sum(COUNTS)
    d = shards[9 + 4 + 11]
    assert d["__key__"] == "p2_011" and len(d["bin"]) == 3011
    local = IndexedShards(str(plain / "p-{000..002}.tar"), index_cache=tmp_path / "ix2")
    assert local[20]["bin"] == shards[20]["bin"]


def test_a_changed_remote_shard_is_indexed_again(lib, nginx, plain, tmp_path):
    url = f"{nginx.url}/plain/r-000.tar"
    write_plain(plain / "r-000.tar", "r0", 5)
    cache = str(tmp_path / "ix")

    def opened():
        r = lib.Reader([url], mode="equal", rank=0, world_size=1, index_cache=cache)
        st = r.stats()
        return r.epoch_length, st["indexes_built"], st["indexes_cached"]

    assert opened() == (5, 1, 0)
    assert opened() == (5, 0, 1)
    write_plain(plain / "r-000.tar", "r0", 7)  # a new ETag (size and mtime)
    assert opened() == (7, 1, 0)
    assert len(glob.glob(os.path.join(cache, "*.idx"))) == 1, "the old version's index removed"


def test_wids_over_http_on_plain_tars(lib, nginx, plain, tmp_path):
    import json
    from libshard.wids import ShardListDataset
    (plain / "wids.json").write_text(json.dumps({
        "__kind__": "wids-shard-index-v1", "name": "p",
        "shardlist": [{"url": f"p-{s:03d}.tar", "nsamples": n} for s, n in enumerate(COUNTS)]}))
    ds = ShardListDataset(f"{nginx.url}/plain/wids.json", cache_dir=str(tmp_path / "cache"))
    assert len(ds) == sum(COUNTS)
    d = ds[9 + 3]
    assert d["__key__"] == "p1_003" and len(d[".bin"].read()) == 3003  # wids gives streams
    assert os.listdir(tmp_path / "cache" / "index"), "the indexes under cache_dir/index"
