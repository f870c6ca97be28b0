"""Crash-safe packing: shardpack killed with SIGKILL at random points (plain, .tar.zst, with
--jobs) leaves only complete shards, each with its index but those being finished, never an
index without its shard or beside another run's, and no manifest; the run again
gives output byte-identical to an uninterrupted one, with no temporary file left. A failed
run into a folder leaves no manifest from before; shards of an earlier, larger run are named.
"""
import os
import random
import signal
import subprocess
import time

import pytest

from conftest import BASE_ENV, bulk_tree, out_text

IMAGES = 360  # 3 classes x 120: about 40 shards of 9


@pytest.fixture(scope="module")
def src(tmp_path_factory):
    root = tmp_path_factory.mktemp("crash-src")
    bulk_tree(root, per_class=IMAGES // 3, sizes=[(64, 48), (80, 60), (48, 64)])
    return root


def files(d):
    """{name: bytes} of a folder's visible files, and the hidden ones' names (but the pack's
    record, .train.pack/, whose own hidden ones are temporaries too)."""
    visible = {p.name: p.read_bytes() for p in sorted(d.iterdir()) if not p.name.startswith(".")}
    hidden = sorted(p.name for p in d.iterdir() if p.name.startswith(".") and p.name != ".train.pack")
    record = d / ".train.pack"
    hidden += sorted(f".train.pack/{p.name}" for p in record.iterdir() if p.name.startswith(".")) \
        if record.exists() else []
    return visible, hidden


def pack_cmd(shardpack, src, out, ext, extra):
    return [str(shardpack), str(src), "-o", str(out / f"train-%03d{ext}"), "-c", "9", "-q",
            "--shuffle", "3", *extra]


@pytest.mark.parametrize("ext,extra", [(".tar", []), (".tar.zst", []), (".tar", ["-j", "2"]),
                                       (".tar.zst", ["-j", "2"])],
                         ids=["tar", "zst", "tar-jobs", "zst-jobs"])
def test_killed_runs_leave_complete_shards_and_rerun_identically(shardpack, run_sc, src, tmp_path,
                                                                  ext, extra):
    ref = tmp_path / "ref"
    ref.mkdir()
    t0 = time.monotonic()
    cp = subprocess.run(pack_cmd(shardpack, src, ref, ext, extra), capture_output=True,
                        env=BASE_ENV, timeout=120)
    took = time.monotonic() - t0
    assert cp.returncode == 0, out_text(cp)
    want, _ = files(ref)
    assert "train.json" in want and sum(n.endswith(ext) for n in want) > 30
    out = tmp_path / "out"
    out.mkdir()
    rng = random.Random(f"{ext}{extra}")
    for attempt in range(6):
        p = subprocess.Popen(pack_cmd(shardpack, src, out, ext, extra), env=BASE_ENV,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        time.sleep(rng.uniform(0.02, 0.9) * took)
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=60)
        got, hidden = files(out)
        if "train.json" in got:  # killed after its very end: then the run is all there
            assert got == want, f"attempt {attempt}: a manifest beside an unfinished run"
        shards = [n for n in got if n.endswith(ext)]
        for n in shards:
            assert got[n] == want[n], f"attempt {attempt}: {n} differs from the uninterrupted run's"
        # the shard, then its index: a kill leaves a shard without one (those being
        # finished, in this attempt or one before), never an index without its shard
        for n in got:
            if n.endswith(".idx"):
                assert n.replace(".idx", ext) in got, f"attempt {attempt}: {n} without its shard"
                assert got[n] == want[n], f"attempt {attempt}: {n} differs"
        if shards:
            cp = run_sc("verify", *[out / n for n in shards])
            assert cp.returncode == 0, out_text(cp)
    cp = subprocess.run(pack_cmd(shardpack, src, out, ext, extra), capture_output=True,
                        env=BASE_ENV, timeout=120)
    assert cp.returncode == 0, out_text(cp)
    got, hidden = files(out)
    assert hidden == [], f"temporaries left: {hidden}"
    assert got.keys() == want.keys() and all(got[n] == want[n] for n in want), "not identical"


def test_a_rerun_removes_the_temporaries_of_a_killed_run(shardpack, src, tmp_path):
    # a kill lands between a temporary's creation and its rename: the manifest's as well as
    # a shard's; another job's or another dataset's temporaries stay
    out = tmp_path / "out"
    out.mkdir()
    left = [".train.json.tmp-0123456789abcdef", ".train-004.tar.tmp-0123456789abcdef",
            ".train-004.idx.tmp-0123456789abcdef"]
    kept = [".val.json.tmp-0123456789abcdef", ".train-999.tar.tmp-0123456789abcdef"]
    for n in left + kept:
        (out / n).write_bytes(b"half written")
    cp = subprocess.run(pack_cmd(shardpack, src, out, ".tar", []), env=BASE_ENV,
                        capture_output=True)
    assert cp.returncode == 0, out_text(cp)
    assert files(out)[1] == sorted(kept)


def test_a_failed_rerun_leaves_no_manifest_from_before(shardpack, src, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    cmd = pack_cmd(shardpack, src, out, ".tar", [])
    assert subprocess.run(cmd, env=BASE_ENV, capture_output=True).returncode == 0
    assert (out / "train.json").exists()
    bad = src / "bee" / "img051.jpg"
    data = bad.read_bytes()
    try:
        bad.write_bytes(b"not an image any more")
        cp = subprocess.run(cmd, env=BASE_ENV, capture_output=True)
        assert cp.returncode == 1 and "img051.jpg" in out_text(cp)
        assert not (out / "train.json").exists(), "the earlier run's manifest survived"
    finally:
        bad.write_bytes(data)


def test_an_earlier_larger_set_is_replaced_whole(shardpack, src, tmp_path):
    """A run into a folder holding a larger set removes the earlier set's shards past its
    own (which a brace pattern or a prefix would read with the new set), and says so."""
    out = tmp_path / "out"
    out.mkdir()
    small = [str(shardpack), str(src), "-o", str(out / "train-%03d.tar")]
    assert subprocess.run(small + ["-c", "9", "-q"], env=BASE_ENV, capture_output=True).returncode == 0
    assert (out / "train-039.tar").exists()
    cp = subprocess.run(small + ["-c", "100"], env=BASE_ENV, capture_output=True)
    err = out_text(cp)
    assert cp.returncode == 0, err
    assert "an earlier set was here: its 120 files (shards, indexes, columns, manifests) removed" in err, err
    assert sorted(p.name for p in out.iterdir()) == [".train.pack",  # its plan, that it finished
                                                     *[f"train-00{i}.{ext}" for i in range(4)
                                                       for ext in ("cols", "idx", "tar")],
                                                     "train.json"], sorted(out.iterdir())


def stopped_run(cmd, lock):
    """A pack run stopped (SIGSTOP) once it holds its lock (the lock file names it, or, for a
    part, exists): the first writer, held in the middle of its run."""
    p = subprocess.Popen(cmd, env=BASE_ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while not (lock.exists() and lock.stat().st_size) and time.monotonic() < deadline:
        time.sleep(0.002)
    p.send_signal(signal.SIGSTOP)
    assert lock.exists() and lock.stat().st_size, "the run took no lock"
    return p


def test_one_writer_per_output(shardpack, run_sc, src, tmp_path):
    """A second run into a set being written is refused, naming the first (its pid and the
    lock file) and touching nothing; once the first ends (or is killed), a run goes ahead.
    The runs of one --part set write together; the same part twice, or a whole run beside
    the parts, is refused."""
    out = tmp_path / "out"
    out.mkdir()
    cmd = pack_cmd(shardpack, src, out, ".tar", [])
    first = stopped_run(cmd, out / ".train.lock")
    second = subprocess.run(cmd, capture_output=True, env=BASE_ENV, timeout=120)
    err = out_text(second)
    assert second.returncode == 1 and f"pid {first.pid} on " in err and \
        "another run is writing it" in err and ".train.lock" in err, err
    first.send_signal(signal.SIGCONT)
    assert first.wait(timeout=120) == 0
    cp = run_sc("verify", out / "train.json")
    assert cp.returncode == 0, out_text(cp)
    assert sorted(p.name for p in out.iterdir() if p.name.startswith(".")) == [".train.pack"], \
        "lock left"
    # killed while it holds the lock: the kernel lets go, the next run writes
    killed = stopped_run(cmd, out / ".train.lock")
    killed.kill()
    killed.wait(timeout=60)
    cp = subprocess.run(cmd, capture_output=True, env=BASE_ENV, timeout=120)
    assert cp.returncode == 0, out_text(cp)
    # parts of one set write side by side
    parts = tmp_path / "parts"
    parts.mkdir()
    part = [pack_cmd(shardpack, src, parts, ".tar", ["--part", f"{i}/2"]) for i in range(2)]
    p0 = stopped_run(part[0], parts / ".train.part-0-of-2.lock")
    cp = subprocess.run(part[1], capture_output=True, env=BASE_ENV, timeout=120)
    assert cp.returncode == 0, out_text(cp)
    for cmd2 in (part[0], pack_cmd(shardpack, src, parts, ".tar", [])):
        cp = subprocess.run(cmd2, capture_output=True, env=BASE_ENV, timeout=120)
        assert cp.returncode == 1 and "another run is writing it" in out_text(cp)
    p0.send_signal(signal.SIGCONT)
    assert p0.wait(timeout=120) == 0, p0.stderr.read().decode()


def test_a_killed_rerun_over_another_runs_output_pairs_no_index_with_the_wrong_shard(
        shardpack, run_sc, src, tmp_path):
    """A complete run, then runs of other input (another shuffle: every shard's bytes
    differ) into the same folder, killed at random points: each index there is its own
    shard's, the earlier run's or the new one's, never one beside the other run's shard."""
    out = tmp_path / "out"
    out.mkdir()
    first = pack_cmd(shardpack, src, out, ".tar", [])
    assert subprocess.run(first, env=BASE_ENV, capture_output=True, timeout=120).returncode == 0
    t0 = time.monotonic()
    other = pack_cmd(shardpack, src, tmp_path / "ref", ".tar", [])
    (tmp_path / "ref").mkdir()
    other[other.index("--shuffle") + 1] = "4"
    subprocess.run(other, env=BASE_ENV, capture_output=True, timeout=120, check=True)
    took = time.monotonic() - t0
    other = pack_cmd(shardpack, src, out, ".tar", [])
    other[other.index("--shuffle") + 1] = "4"
    rng = random.Random(5)
    for attempt in range(6):
        p = subprocess.Popen(other, env=BASE_ENV, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.05, 0.9) * took)
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=60)
        pairs = [out / n.name.replace(".idx", ".tar") for n in sorted(out.glob("train-*.idx"))]
        assert all(s.exists() for s in pairs), f"attempt {attempt}: an index without its shard"
        if not pairs:  # no pair there at that moment: nothing to pair wrongly
            continue
        cp = run_sc("verify", *pairs)
        assert cp.returncode == 0, f"attempt {attempt}: {out_text(cp)}"


def test_a_lock_is_never_written_through_a_link(shardpack, src, tmp_path):
    """A hard link at the lock's name (to a file of the user's) or a FIFO there: the run is
    refused, naming the lock, and the linked file keeps its bytes; a symlink is refused as
    ever (O_NOFOLLOW)."""
    victim = tmp_path / "victim"
    victim.write_text("precious data of the user\n")
    for kind in ("hardlink", "fifo", "symlink"):
        out = tmp_path / kind
        out.mkdir()
        lock = out / ".train.lock"
        if kind == "hardlink":
            os.link(victim, lock)
        elif kind == "fifo":
            os.mkfifo(lock)
        else:
            lock.symlink_to(victim)
        cp = subprocess.run(pack_cmd(shardpack, src, out, ".tar", []), capture_output=True,
                            env=BASE_ENV, timeout=60)
        assert cp.returncode == 1 and ".train.lock" in out_text(cp), (kind, out_text(cp))
        assert victim.read_text() == "precious data of the user\n", kind
        assert not (out / "train.json").exists(), kind
