"""A remote plain tar read from a sample on (a rank's range starting inside a shard, a resumed
stream) streams from that sample's headers in one Range request, where reading by index asks
for every member: the same samples as from local files, in a handful of requests. Tars with
extended (pax) headers, long names and directory entries, made by GNU tar, start right too."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, CLEAN_ENV  # noqa: F401

sys.path.insert(0, os.environ.get("LIBSHARD_PYTHONPATH", str(REPO / "build" / "python")))
import libshard  # noqa: E402


def read(url, **kw):
    r = libshard.Reader(url, seed=0, shuffle_shards=False, streams=1, **kw)
    got = [(s["__key__"], {k: v for k, v in s.items() if not k.startswith("__")}) for s in r]
    return got, r.remote_stats()["requests"]


def test_a_rank_starting_inside_a_shard_streams_it(root, nginx):
    local, _ = read(str(root / "data" / "d.json"), rank=1, world_size=3)
    remote, requests = read(f"{nginx.url}/data/d.json", rank=1, world_size=3)
    assert remote == local and len(local) == 107
    # rank 1's 107 samples start at sample 27 of d-002 and span four shards: a request each
    # (and the manifest), where one per member would be over 200
    assert requests <= 6, requests
    # the control: .tar.zst shards are read by index from inside a frame on, a request per
    # frame range, and the count says so
    _, zreq = read(f"{nginx.url}/data/z.json", rank=1, world_size=3)
    assert zreq > requests, (zreq, requests)


def test_extended_headers_long_names_and_folders_start_right(root, nginx, shardcat, tmp_path):
    """GNU tar with --format=pax and names over 100 bytes, and folder entries between the
    samples: streaming from sample i starts at the end of sample i - 1, before sample i's
    extended headers."""
    src = tmp_path / "src"
    deep = "a" * 60 + "/" + "b" * 60
    names = []
    for i in range(30):
        d = src / deep / f"part{i // 10}"
        d.mkdir(parents=True, exist_ok=True)
        for ext, data in (("cls", str(i % 3).encode()), ("txt", os.urandom(700 + i))):
            (d / f"sample{i:03d}.{ext}").write_bytes(data)
            names.append(f"{deep}/part{i // 10}/sample{i:03d}.{ext}")
    out = root / "data" / "pax-000.tar"
    subprocess.run(["tar", "--format=pax", "--sort=name", "-cf", str(out), "-C", str(src), "."],
                   check=True)
    subprocess.run([str(shardcat), "index", str(out)], check=True, capture_output=True,
                   env=CLEAN_ENV)
    try:
        whole, _ = read(str(out))
        assert len(whole) == 30
        for rank in range(3):  # ranks start at samples 0, 10 and 20, after folder entries
            local, _ = read(str(out), rank=rank, world_size=3)
            remote, requests = read(f"{nginx.url}/data/pax-000.tar", rank=rank, world_size=3)
            assert remote == local == whole[rank * 10:(rank + 1) * 10], rank
            assert requests <= 4, (rank, requests)
    finally:
        out.unlink()
        Path(str(out)[:-4] + ".idx").unlink()
