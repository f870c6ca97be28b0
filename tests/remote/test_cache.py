"""The local cache of remote shards: the next epoch reads from disk, the folder keeps its
size limit, processes share it, and nothing partial is ever left in it."""
import re
import os
import subprocess
from concurrent.futures import ThreadPoolExecutor

from conftest import CLEAN_ENV, TIMEOUT

SPEC = "data/d-{000..007}.tar"


def cached(d):
    return sorted(p for p in os.listdir(d) if not p.startswith("."))


def test_second_epoch_reads_from_disk(run, nginx, root, tmp_path):
    cache = tmp_path / "cache"
    args = ["stream", f"{nginx.url}/{SPEC}", "--seed", "8", "--shuffle", "50", "--stats",
            "--cache-dir", cache]
    first = run(*args)
    assert first.rc == 0, first.err
    assert first.stat("hits") == 0 and first.stat("misses") == 8
    assert len(cached(cache)) == 8
    shard_bytes = sum((root / "data" / f"d-{i:03d}.tar").stat().st_size for i in range(8))
    for name in cached(cache):  # whole shards, byte for byte
        shard = name.split("-", 1)[1]
        assert (cache / name).read_bytes() == (root / "data" / shard).read_bytes()
    second = run(*args)
    assert second.rc == 0, second.err
    assert second.lines == first.lines
    assert second.stat("hits") == 8 and second.stat("misses") == 0
    assert second.stat("bytes") < shard_bytes / 10  # only the indexes' first lines


def test_size_limit_evicts_least_recently_used(run, nginx, root, tmp_path):
    cache = tmp_path / "cache"
    biggest = max((root / "data" / f"d-{i:03d}.tar").stat().st_size for i in range(8))
    limit = biggest * 5 // 2  # two shards and a bit
    r = run("stream", f"{nginx.url}/{SPEC}", "--seed", "8", "--streams", "1", "--cache-dir", cache,
            "--cache-size", limit)
    assert r.rc == 0, r.err
    sizes = [(cache / n).stat().st_size for n in cached(cache)]
    assert 1 <= len(sizes) <= 2 and sum(sizes) <= limit, sizes


def test_processes_share_one_cache(shardcat, nginx, tmp_path):
    cache = tmp_path / "cache"
    cmd = [str(shardcat), "stream", f"{nginx.url}/{SPEC}", "--seed", "8", "--cache-dir", str(cache)]

    def one(_):
        cp = subprocess.run(cmd, capture_output=True, env=CLEAN_ENV, timeout=TIMEOUT)
        assert cp.returncode == 0, cp.stderr
        return cp.stdout

    with ThreadPoolExecutor(4) as ex:
        outs = list(ex.map(one, range(4)))
    assert all(o == outs[0] for o in outs) and outs[0].count(b"\n") == 320
    assert len(cached(cache)) == 8
    assert [p for p in os.listdir(cache) if p.startswith(".") and p != ".lock"] == []


def test_partial_reads_are_not_cached(run, nginx, tmp_path):
    cache = tmp_path / "cache"
    head = run("stream", f"{nginx.url}/{SPEC}", "--seed", "8", "--samples", "300")
    state = re.search(r"^state: (\S+)$", head.err, re.M).group(1)
    r = run("stream", f"{nginx.url}/{SPEC}", "--seed", "8", "--state", state,
            "--cache-dir", cache)
    assert r.rc == 0 and len(r.lines) == 20, r.err
    leftovers = os.listdir(cache) if cache.exists() else []
    assert [p for p in leftovers if p != ".lock"] == []


def test_dataset_cache_dir(nginx, root, tmp_path, ShardDataset):  # noqa: N803
    ds = ShardDataset(f"{nginx.url}/{SPEC}", decode=False, seed=1, cache_dir=str(tmp_path / "c"))
    first = [s["__key__"] for s in ds]
    assert ds.remote_stats()["cache_misses"] == 8
    second = [s["__key__"] for s in ds]
    st = ds.remote_stats()
    assert second == first and st["cache_hits"] == 8 and st["cache_misses"] == 0, st


def test_a_killed_readers_copies_are_swept_a_live_ones_are_not(run, nginx, tmp_path):
    """Copies in the making are temporaries a writer holds locked: one nobody holds (its
    process was killed) goes at the next fill; one held (a reader still copying) stays."""
    import fcntl
    cache = tmp_path / "cache"
    cache.mkdir()
    dead = cache / ".0123456789abcdef-d-000.tar.tmp-00000000deadbeef"
    dead.write_bytes(b"half a shard")
    held = cache / ".0123456789abcdef-d-001.tar.tmp-00000000cafef00d"
    held.write_bytes(b"being copied")
    with open(held, "rb") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        r = run("stream", f"{nginx.url}/{SPEC}", "--seed", "8", "--cache-dir", cache)
        assert r.rc == 0, r.err
        assert not dead.exists(), "the killed copy is swept"
        assert held.exists(), "the live copy is left alone"
    assert len(cached(cache)) == 8
