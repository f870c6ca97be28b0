"""What libshard trusts, and what it proves first (hardening, round three): an index is
taken only once whole (what lies between its members read where there is room for a member);
the index cache serves only plain files of its own, bound to what a rewrite in place changes,
in a folder of this user's alone, its locks made without following links; a manifest's count
is checked against the shard's index on every path; a state's numbers are bounded by what
a job can have, its text sealed by a checksum, every compared setting required. Each case
ends in a named error or exact data, within seconds (a hang is the failure)."""
import hashlib
import json
import os
import stat
import subprocess
import time
from pathlib import Path


from conftest import BASE_ENV, REPO
from test_hostile import write_tar

PYPATH = os.environ.get("LIBSHARD_PYTHONPATH", str(REPO / "build" / "python"))
TIMEOUT = 30


def out_text(cp):
    """stdout and stderr of a run, as text."""
    text = lambda b: b.decode("utf-8", "replace") if isinstance(b, bytes) else b  # noqa: E731
    return text(cp.stdout) + text(cp.stderr)


def lines(cp):
    return out_text(type("R", (), {"stdout": cp.stdout, "stderr": b""})).splitlines()


def py(code, *args, env=None):
    return subprocess.run(["/usr/bin/python3", "-c", f"import sys; sys.path.insert(0, {PYPATH!r})\n"
                           + code, *map(str, args)], capture_output=True, text=True,
                          timeout=TIMEOUT, env={**BASE_ENV, **(env or {})})


def samples(n, stem="s"):
    return [m for i in range(n) for m in ((f"{stem}{i:03d}.cls", b"%d" % (i % 7)),
                                          (f"{stem}{i:03d}.txt", b"x" * (100 + i)))]


def drop_middle(idx, keep_first, keep_last):
    """The index with its middle samples' lines dropped and its header's count fixed."""
    lines = idx.read_text().splitlines()
    body = lines[1:1 + keep_first] + lines[len(lines) - keep_last:]
    idx.write_text(f"{lines[0].split()[0]} {len(body)}\n" + "\n".join(body) + "\n")


def test_an_index_missing_middle_samples_is_refused_on_every_path(run_sc, tmp_path):
    """First and last lines right, the archive's end right, the count fixed: what lies
    between the members is read, and the member the index leaves out is named."""
    shard = write_tar(tmp_path / "s.tar", samples(10))
    assert run_sc("index", shard).returncode == 0
    drop_middle(tmp_path / "s.idx", 2, 3)
    for args in (["ls", shard], ["info", shard], ["stream", shard, "--seed", "1"],
                 ["cat", shard, "s008.txt"]):
        cp = run_sc(*args, timeout=TIMEOUT)
        assert cp.returncode != 0 and "member 's002.cls'" in out_text(cp) and \
            "the index leaves it out" in out_text(cp), (args, out_text(cp))
    cp = py("from libshard.indexed import IndexedShards\nprint(IndexedShards(sys.argv[1])[3])",
            shard)
    assert cp.returncode != 0 and "the index leaves it out" in cp.stderr, cp.stderr[-500:]
    # the streaming path, partitions splitting a shard of four
    for i in range(4):
        write_tar(tmp_path / f"p-{i}.tar", samples(25, f"p{i}_"))
        assert run_sc("index", tmp_path / f"p-{i}.tar").returncode == 0
    drop_middle(tmp_path / "p-2.idx", 5, 10)
    for p in ("4", "8"):
        cp = run_sc("stream", str(tmp_path / "p-{0..3}.tar"), "--seed", "0", "--partitions", p,
                    "--mode", "exact", timeout=TIMEOUT)
        assert cp.returncode != 0 and ("leaves it out" in out_text(cp) or
                                       "its index" in out_text(cp)), (p, out_text(cp)[-600:])


def test_an_index_whole_is_taken_as_before(run_sc, tmp_path):
    """The control: GNU tar with long names (a header before each member's) and Python's
    tarfile, whole indexes: everything reads, nothing is refused."""
    members = tmp_path / "m"
    members.mkdir()
    long = "k" * 120
    for i in range(6):
        (members / f"{long}{i}.txt").write_text("t" * i)
    subprocess.run(["tar", "-cf", str(tmp_path / "gnu.tar"), "-C", str(members), "."],
                   check=True)
    write_tar(tmp_path / "py.tar", samples(6))
    for name, n in (("gnu.tar", 6), ("py.tar", 6)):
        assert run_sc("index", tmp_path / name).returncode == 0
        cp = run_sc("ls", tmp_path / name, timeout=TIMEOUT)
        assert cp.returncode == 0 and len(lines(cp)) == n, out_text(cp)


def cache_env(tmp_path):
    return {"XDG_CACHE_HOME": str(tmp_path / "cache")}


def test_the_index_cache_follows_a_rewrite_in_place(run_sc, tmp_path):
    """A shard rewritten in place keeping its size, its mtime and its inode (other members of
    the same sizes): the cached index is bound to the ctime too, and the new samples come."""
    shard = write_tar(tmp_path / "r.tar", samples(25, "a"))
    env = cache_env(tmp_path)
    args = ("stream", shard, "--seed", "1", "--mode", "exact", "--make-indexes", "always")
    first = run_sc(*args, env=env, timeout=TIMEOUT)
    assert first.returncode == 0 and b"a000" in first.stdout, out_text(first)
    st = shard.stat()
    new = write_tar(tmp_path / "new.tar", samples(25, "b"))
    assert new.stat().st_size == st.st_size
    with open(shard, "r+b") as f:  # in place: the same inode
        f.write(new.read_bytes())
    os.utime(shard, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert shard.stat().st_ino == st.st_ino and shard.stat().st_mtime_ns == st.st_mtime_ns
    again = run_sc(*args, env=env, timeout=TIMEOUT)
    assert again.returncode == 0 and b"b000" in again.stdout and b"a000" not in again.stdout, \
        out_text(again)


def test_the_index_cache_trusts_nothing_in_its_folder(run_sc, tmp_path):
    """A FIFO at a cached index's name is not waited on (the index is made anew); a lock
    planted as a symlink creates nothing; a cache folder others can write is refused, naming
    it; without $HOME the cache is a folder of this user's, 0700."""
    shard = write_tar(tmp_path / "f.tar", samples(5))
    env = cache_env(tmp_path)
    args = ("stream", shard, "--seed", "1", "--make-indexes", "always")
    assert run_sc(*args, env=env, timeout=TIMEOUT).returncode == 0
    folder = tmp_path / "cache" / "libshard" / "index"
    cached = [p for p in folder.iterdir() if p.suffix == ".idx"]
    locks = [p for p in folder.iterdir() if p.name.endswith(".lock")]
    assert len(cached) == 1, list(folder.iterdir())
    cached[0].unlink()
    os.mkfifo(cached[0])
    for lock in locks:
        lock.unlink()
    victim = tmp_path / "created-through-the-lock"
    (folder / f".{cached[0].name.split('-')[0]}.lock").symlink_to(victim)
    t = time.time()
    cp = run_sc(*args, env=env, timeout=TIMEOUT)
    assert cp.returncode == 0 and len(lines(cp)) == 5, out_text(cp)
    assert time.time() - t < TIMEOUT and not victim.exists()
    assert stat.S_ISREG(cached[0].stat().st_mode), "the FIFO made way for a plain file"
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    cp = run_sc(*args, "--index-cache", shared, timeout=TIMEOUT)
    assert cp.returncode != 0 and "others can write it" in out_text(cp) and \
        str(shared) in out_text(cp), out_text(cp)
    home = {k: v for k, v in BASE_ENV.items() if k not in ("HOME", "XDG_CACHE_HOME")}
    cp = subprocess.run([str(run_sc.exe), *map(str, args)], capture_output=True, text=True,
                        env=home, timeout=TIMEOUT)
    assert cp.returncode == 0, out_text(cp)
    own = Path(f"/tmp/libshard-index-{os.geteuid()}")
    assert own.is_dir() and stat.S_IMODE(own.stat().st_mode) == 0o700, oct(own.stat().st_mode)


def test_a_manifest_count_is_checked_against_the_index_on_every_path(run_sc, tmp_path):
    """A manifest saying 4 of a shard whose .idx (and tar) say 5: IndexedShards, wids and
    the stream reading it by index refuse it, naming both counts."""
    shard = write_tar(tmp_path / "five.tar", samples(5))
    assert run_sc("index", shard).returncode == 0
    m = tmp_path / "m.json"
    m.write_text(json.dumps({"shardlist": [{"url": "five.tar", "nsamples": 4}]}))
    for code in ("from libshard.indexed import IndexedShards\nprint(len(IndexedShards(sys.argv[1])))",
                 "from libshard.wids import ShardListDataset\nprint(len(ShardListDataset(sys.argv[1])))"):
        cp = py(code, m)
        assert cp.returncode != 0 and "manifest says 4 samples and its index 5" in cp.stderr, \
            cp.stderr[-600:]
    cp = run_sc("stream", m, "--seed", "1", "--partitions", "2", "--mode", "exact",
                timeout=TIMEOUT)
    assert cp.returncode != 0 and ("its index 5" in out_text(cp) or
                                   "more than 4 samples" in out_text(cp)), out_text(cp)


def state_of(run_sc, *args):
    cp = run_sc("stream", *args, "--samples", "10", timeout=TIMEOUT)
    assert cp.returncode == 0, out_text(cp)
    return [l[len("state: "):] for l in cp.stderr.decode().splitlines()
            if l.startswith("state: ")][0]


def test_a_state_cut_short_edited_or_out_of_bounds_is_refused_at_once(run_sc, tmp_path):
    shard = write_tar(tmp_path / "s.tar", samples(40))
    assert run_sc("index", shard).returncode == 0
    base = [shard, "--seed", "3", "--shuffle", "10", "--mode", "exact"]
    state = state_of(run_sc, *base)
    cases = {
        "cut short": state[:-1],
        "cut short in the middle": state[: len(state) // 2],
        "edited": state.replace("delivered=10", "delivered=11"),
        "no checksum": state.rsplit(";sum=", 1)[0],
        "a compared setting left out": state.replace("shuffle_buffer=10,", ""),
    }
    for why, bad in cases.items():
        t = time.time()
        cp = run_sc("stream", *base, "--state", bad, timeout=TIMEOUT)
        assert cp.returncode == 1 and not cp.stdout, (why, out_text(cp))
        assert time.time() - t < 5, why
    assert "does not match its checksum" in out_text(run_sc("stream", *base, "--state",
                                                            cases["edited"]))
    # numbers past any job, with a checksum made for them: refused by their bounds
    body = state.rsplit(";sum=", 1)[0]
    head, cut = body.split(";", 1)
    version, epoch, seed, pairs = head.split(":", 3)
    for key, value in (("world_size", 1 << 30), ("num_workers", 1 << 30),
                       ("partitions", 1 << 40)):
        kv = dict(p.split("=", 1) for p in pairs.split(","))
        kv[key] = str(value)
        forged = (f"{version}:{epoch}:{seed}:" + ",".join(f"{k}={v}" for k, v in kv.items()) +
                  ";" + cut)
        sealed = forged + ";sum=" + hashlib.sha256(forged.encode()).hexdigest()[:16]
        t = time.time()
        cp = run_sc("stream", *base, "--state", sealed, timeout=TIMEOUT)
        assert cp.returncode == 1 and "refused" in out_text(cp), (key, out_text(cp)[-400:])
        assert time.time() - t < 5, key


def test_merge_states_refuses_disagreeing_states_and_is_exported(tmp_path):
    cp = py("""
import libshard
assert libshard.merge_states is libshard._libshard.merge_states
r = libshard.Reader(sys.argv[1], seed=3, mode="exact", make_indexes="never", world_size=1, rank=0,
                    num_workers=2, worker=0, shuffle=0)
it = iter(r)
next(it)
one = r.state()
next(it)
two = r.state()
try:
    libshard.merge_states([one, two])
    print("merged")
except Exception as e:
    print("refused:", e)
""", write_tar(tmp_path / "s.tar", samples(8)))
    assert "refused:" in cp.stdout and "disagree" in cp.stdout, cp.stdout + cp.stderr


def test_a_restore_refused_after_its_check_leaves_a_reader_that_goes_on(tmp_path):
    """A state whose seal and settings hold but whose cut does not fit the epoch passes the
    check and is refused by the restore itself (the reader already reset): the reader keeps
    the refusal (reading says it again rather than reading from anywhere), its state is
    whole, and a good state restores it; the control: before the refusal it read."""
    cp = py("""
import hashlib, libshard
r = libshard.Reader(sys.argv[1], seed=3, mode="exact", shuffle=0, make_indexes="always")
it = iter(r)
first = [next(it)["__key__"] for _ in range(5)]
good = r.state()
body = good.rsplit(";sum=", 1)[0]
forged = body.split(";", 1)[0] + ";left=0-999999;edges="
bad = forged + ";sum=" + hashlib.sha256(forged.encode()).hexdigest()[:16]
try:
    r.restore(bad)
    print("restored")
except Exception as e:
    print("refused:", e)
print("state:", r.state()[:3])
try:
    print("read:", len([s for s in r]))
except Exception as e:
    print("again:", e)
r.restore(good)
print("good:", len([s for s in r]))
""", write_tar(tmp_path / "s.tar", samples(12)))
    out = cp.stdout
    assert "refused:" in out and "state: v4:" in out, out + cp.stderr
    assert "again: reader: the cut's span 0-999999" in out, out + cp.stderr
    assert "good: 7" in out and len(out.split("refused:")[0]) == 0, out + cp.stderr
