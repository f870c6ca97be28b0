"""Limits that bound memory on the Python entry points: a sample's members added up
(max_sample_size) on the seek path, the reader's share of memory_budget, and an index line
checked against the tar header before its bytes are handed out."""
import io
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
    with tarfile.open(path, "w", format=tarfile.USTAR_FORMAT) as tf:
        for i in range(5):
            for f in ("cls", "txt"):
                ti = tarfile.TarInfo(f"s{i}.{f}")
                ti.size = 700
                tf.addfile(ti, io.BytesIO(b"x" * 700))
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
