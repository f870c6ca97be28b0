"""Error policy of the streaming reader: a missing, truncated or damaged shard is named in
the error (with the byte offset where one applies); the default policy fails (exit 1), and
--skip-errors goes on with the other shards and reports what it skipped. Never a crash or a
hang: every run has a timeout (a hang fails the test)."""
import re
import shutil
import tarfile
from collections import Counter
from pathlib import Path

import pytest

from .conftest import split_args

HANG = 30  # seconds: these runs read a few hundred tiny samples


@pytest.fixture
def broken(ds, tmp_path):
    """A private copy of the .tar data set to damage."""
    return ds.copy(tmp_path / "ds")


def no_crash(r):
    assert r.rc in (0, 1), f"exit {r.rc} (crash?): {r}"
    assert "Segmentation" not in r.err and "Aborted" not in r.err and "AddressSanitizer" not in r.err


# ---- a missing shard --------------------------------------------------------------------


def test_missing_shard_in_list_fails_naming_it(stream, ds, tmp_path):
    missing = tmp_path / "gone-000123.tar"
    urls = [str(ds.shards[0]), str(missing), str(ds.shards[1])]
    r = stream(*urls, "--seed", "1", timeout=HANG)
    no_crash(r)
    assert r.rc == 1, r
    assert str(missing) in r.err, r.err
    assert re.search(r"No such file|cannot open", r.err), r.err


def test_missing_shard_in_list_skipped(stream, ds, tmp_path):
    missing = tmp_path / "gone-000123.tar"
    urls = [str(ds.shards[0]), str(missing), str(ds.shards[1]), str(ds.shards[2])]
    r = stream(*urls, "--seed", "1", "--skip-errors", "--shuffle", "10", "--stats", timeout=HANG)
    no_crash(r)
    assert r.rc == 0, r
    want = [k for s in ds.shards[:3] for k in ds.keys_by_shard[str(s)]]
    assert Counter(r.keys) == Counter(want)
    skipped = [l for l in r.err.split("\n") if "skipped" in l and str(missing) in l]
    assert skipped, f"the skipped error is not reported:\n{r.err}"
    assert re.search(r"1 errors skipped \(1 shards", r.err), r.err


@pytest.mark.parametrize("shuffle", [None, "30"])
def test_missing_shard_from_manifest(stream, broken, shuffle):
    gone = broken.shards[4]
    gone.unlink()
    extra = ["--shuffle", shuffle] if shuffle else []
    r = stream(broken.manifest, "--seed", "2", *extra, timeout=HANG)
    no_crash(r)
    assert r.rc == 1, r
    assert gone.name in r.err, r.err

    r = stream(broken.manifest, "--seed", "2", "--skip-errors", "--stats", *extra, timeout=HANG)
    no_crash(r)
    assert r.rc == 0, r
    lost = broken.keys_by_shard[str(gone)]
    want = Counter(k for k in broken.all_keys if k not in lost)
    assert Counter(r.keys) == want
    assert re.search(r"skipped: .*" + re.escape(gone.name), r.err), r.err
    # The counts are known (manifest): the samples lost with it are counted.
    assert f"(1 shards, {len(lost)} samples lost)" in r.err, r.err


def test_missing_shard_skipped_over_ranks_and_workers(stream, broken):
    gone = broken.shards[3]
    gone.unlink()
    lost = set(broken.keys_by_shard[str(gone)])
    union = []
    for rank in range(3):
        for worker in range(2):
            r = stream(broken.manifest, "--seed", "3", "--skip-errors", "--shuffle", "20",
                       *split_args(rank, 3, worker, 2), timeout=HANG)
            no_crash(r)
            assert r.rc == 0, r
            union += r.keys
    assert Counter(union) == Counter(k for k in broken.all_keys if k not in lost)


def test_missing_shard_does_not_hang_when_stopping_early(stream, ds, tmp_path):
    missing = str(tmp_path / "nope.tar")
    for extra in (["--samples", "1"], ["--samples", "0"], ["--streams", "1", "--samples", "5"],
                  ["--shuffle", "200", "--samples", "2"], ["--streams", "16"]):
        r = stream(str(ds.shards[0]), missing, *[str(s) for s in ds.shards[1:6]], "--seed", "1",
                   *extra, timeout=HANG)
        no_crash(r)


def test_all_shards_missing(stream, tmp_path):
    urls = [str(tmp_path / f"none-{i}.tar") for i in range(5)]
    r = stream(*urls, "--seed", "1", timeout=HANG)
    assert r.rc == 1 and "none-" in r.err, r
    r = stream(*urls, "--seed", "1", "--skip-errors", timeout=HANG)
    no_crash(r)
    assert r.rc == 0 and r.lines == [], r
    assert r.err.count("skipped:") == 5, r.err


def test_missing_manifest(stream, tmp_path):
    r = stream(tmp_path / "nothere.json", "--seed", "1", timeout=HANG)
    assert r.rc == 1 and "nothere.json" in r.err, r


# ---- a truncated or damaged shard ---------------------------------------------------------


def members(path):
    with tarfile.open(path) as tf:
        return tf.getmembers()


def big_member(path):
    """Index of the largest member in the second half of the shard (an image)."""
    ms = members(path)
    return max(range(len(ms) // 2, len(ms)), key=lambda i: ms[i].size)


def truncate_mid_member(path, i):
    """Cuts the file in the middle of member i's data; returns the member."""
    m = members(path)[i]
    assert m.size > 20
    data = Path(path).read_bytes()
    Path(path).write_bytes(data[: m.offset_data + m.size // 2])
    return m


def offsets_in(err):
    return [int(x) for x in re.findall(r"offset (\d+)", err)]


@pytest.mark.parametrize("with_index", [True, False], ids=["idx", "noidx"])
def test_truncated_shard_named_with_offset(stream, broken, with_index):
    shard = broken.shards[5]
    m = truncate_mid_member(shard, big_member(shard))
    if not with_index:
        broken.idx(shard).unlink()
    keys = broken.keys_by_shard[str(shard)]
    before = keys[: keys.index(m.name[: m.name.index(".")])]

    r = stream(shard, "--seed", "1", timeout=HANG)
    no_crash(r)
    assert r.rc == 1, r
    assert str(shard) in r.err or shard.name in r.err, r.err
    offs = offsets_in(r.err)
    assert offs, f"no byte offset in the error:\n{r.err}"
    assert any(o > 0 and abs(o - m.offset) <= 1024 for o in offs), (
        f"offset {offs} is not where member {m.name} (header at {m.offset}) was cut:\n{r.err}")
    assert r.keys == before, "the samples before the cut are yielded, in order"

    r = stream(shard, "--seed", "1", "--skip-errors", "--stats", timeout=HANG)
    no_crash(r)
    assert r.rc == 0, r
    assert r.keys == before
    assert "skipped:" in r.err and offsets_in(r.err), r.err


def test_truncated_shard_among_others_skipped(stream, broken):
    shard = broken.shards[2]
    truncate_mid_member(shard, big_member(shard))
    r = stream(broken.manifest, "--seed", "4", "--shuffle", "25", timeout=HANG)
    no_crash(r)
    assert r.rc == 1 and shard.name in r.err and offsets_in(r.err), r
    r = stream(broken.manifest, "--seed", "4", "--shuffle", "25", "--skip-errors", timeout=HANG)
    no_crash(r)
    assert r.rc == 0, r
    others = [k for k in broken.all_keys if broken.shard_of[k] != str(broken.dir / shard.name)]
    got = Counter(r.keys)
    assert all(got[k] == 1 for k in others), "every sample of the intact shards, once"
    assert not [k for k, c in got.items() if c > 1]
    assert re.search(r"skipped: .*" + re.escape(shard.name) + r".*offset \d+", r.err), r.err


def test_truncated_at_member_boundary_with_index(stream, broken):
    """The tar ends cleanly on a header boundary but the .idx (and manifest) promise more:
    the shortfall is an error naming the shard."""
    shard = broken.shards[6]
    ms = members(shard)
    cut = ms[len(ms) // 2 - (len(ms) // 2) % 3].offset  # a sample's first member (3 per sample)
    Path(shard).write_bytes(Path(shard).read_bytes()[:cut])
    for src in (shard, broken.manifest):
        r = stream(src, "--seed", "1", timeout=HANG)
        no_crash(r)
        assert r.rc == 1, (src, r)
        assert shard.name in r.err, r.err


def test_damaged_header_named_with_offset(stream, broken):
    shard = broken.shards[7]
    m = members(shard)[10]
    data = bytearray(Path(shard).read_bytes())
    data[m.offset + 148: m.offset + 156] = b"0000000\0"  # a wrong header checksum
    Path(shard).write_bytes(bytes(data))
    r = stream(shard, "--seed", "1", timeout=HANG)
    no_crash(r)
    assert r.rc == 1, r
    assert shard.name in r.err and m.offset in offsets_in(r.err), r.err
    r = stream(shard, "--seed", "1", "--skip-errors", timeout=HANG)
    no_crash(r)
    assert r.rc == 0 and "skipped:" in r.err, r


def test_truncated_zst_shard(stream, ds_zst, tmp_path):
    src = ds_zst.shards[3]
    shard = tmp_path / src.name
    data = src.read_bytes()
    shard.write_bytes(data[: len(data) * 2 // 3])
    shutil.copy(ds_zst.idx(src), tmp_path / ds_zst.idx(src).name)
    r = stream(shard, "--seed", "1", timeout=HANG)
    no_crash(r)
    assert r.rc == 1, r
    assert shard.name in r.err and offsets_in(r.err), r.err
    r = stream(shard, str(ds_zst.shards[0]), "--seed", "1", "--skip-errors", timeout=HANG)
    no_crash(r)
    assert r.rc == 0, r
    assert set(ds_zst.keys_by_shard[str(ds_zst.shards[0])]) <= set(r.keys)
    assert "skipped:" in r.err


def test_failing_pipe_does_not_hang(stream, ds):
    for urls in (["pipe:false"], [f"pipe:cat {ds.shards[0]}", "pipe:false"],
                 [f"pipe:head -c 20000 {ds.shards[1]}"], ["pipe:cat /nonexistent/x.tar"]):
        r = stream(*urls, "--seed", "1", timeout=HANG)
        no_crash(r)
        assert r.rc == 1, (urls, r)
        assert "pipe:" in r.err, r.err
        r = stream(*urls, "--seed", "1", "--skip-errors", timeout=HANG)
        no_crash(r)
        assert r.rc == 0, (urls, r)


@pytest.mark.parametrize("shuffle", [None, "20"])
def test_resume_after_skipped_error(stream, broken, shuffle):
    broken.shards[1].unlink()
    args = [broken.manifest, "--seed", "5", "--skip-errors"]
    if shuffle:
        args += ["--shuffle", shuffle]
    full = stream(*args, timeout=HANG)
    assert full.rc == 0
    n = len(full.keys) // 2
    head = stream(*args, "--samples", str(n), timeout=HANG)
    tail = stream(*args, "--state", head.state, timeout=HANG)
    assert tail.rc == 0, tail
    assert head.keys + tail.keys == full.keys
