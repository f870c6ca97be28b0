"""Fixtures and helpers for the streaming reader's tests (`shardcat stream`).

Run with Debian's interpreter:  /usr/bin/python3 -m pytest tests/stream -q
The tools come from $SHARDCAT and $SHARDPACK (default build/tools/shardcat and
build/tools/shardpack under the repo root). The data sets are small (a few hundred tiny
PNG images packed by shardpack into uneven shards) and made once per session.
"""
import os
import random
import re
import shutil
import subprocess
import sys
import tarfile
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from testtools import shardcat, shardpack, tool_path  # noqa: E402,F401 (fixtures)
from PIL import Image

REPO = Path(__file__).resolve().parents[2]

# 307 is prime: no world size 2..4 divides it, so equal mode always has a remainder.
NSAMPLES = 307
CLASSES = 5

# Child processes: no distributed variables leaking in from the environment.
BASE_ENV = {k: v for k, v in os.environ.items()
            if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE")}
BASE_ENV["LC_ALL"] = "C.UTF-8"

TIMEOUT = 60  # seconds for any one shardcat run: a hang fails the test instead of the suite




class Result:
    """A finished `shardcat stream` run: rc, stdout lines, stderr text, parsed samples."""

    def __init__(self, cp, cmd):
        self.cmd = cmd
        self.rc = cp.returncode
        self.out = cp.stdout.decode("utf-8", "replace")
        self.err = cp.stderr.decode("utf-8", "replace")
        self.lines = [l for l in self.out.split("\n") if l]

    @property
    def samples(self):
        """[(key, url), ...] in the order printed."""
        out = []
        for l in self.lines:
            key, tab, url = l.partition("\t")
            assert tab, f"not KEY<TAB>URL: {l!r}"
            out.append((key, url))
        return out

    @property
    def keys(self):
        return [k for k, _ in self.samples]

    @property
    def state(self):
        m = re.findall(r"^state: (\S+)$", self.err, re.M)
        assert len(m) == 1, f"expected one state line on stderr:\n{self.err}"
        return m[0]

    def ok(self):
        assert self.rc == 0, f"{' '.join(self.cmd)} exited {self.rc}:\n{self.err}"
        return self

    def __repr__(self):
        return f"Result(rc={self.rc}, {len(self.lines)} lines, err={self.err[-500:]!r})"


class Stream:
    """Runs `shardcat stream ARGS...` and returns a Result."""

    def __init__(self, exe):
        self.exe = str(exe)

    def __call__(self, *args, env=None, cwd=None, timeout=TIMEOUT):
        cmd = [self.exe, "stream", *[os.fspath(a) for a in args]]
        e = dict(BASE_ENV)
        if env:
            e.update(env)
        try:
            cp = subprocess.run(cmd, cwd=cwd, env=e, capture_output=True, timeout=timeout,
                                stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            pytest.fail(f"hang: {' '.join(cmd)} still running after {timeout} s")
        return Result(cp, cmd)

    def many(self, arglists, **kw):
        """Runs several streams concurrently (the machine has 2 cores); Results in order."""
        with ThreadPoolExecutor(max_workers=3) as ex:
            return list(ex.map(lambda a: self(*a, **kw), arglists))


@pytest.fixture(scope="session")
def stream(shardcat):
    return Stream(shardcat)


# ---- data --------------------------------------------------------------------------------


def make_images(root, n=NSAMPLES, classes=CLASSES, seed=0):
    """An ImageFolder tree of n tiny PNGs of varied sizes (so --maxsize cuts uneven shards)."""
    r = random.Random(seed)
    for i in range(n):
        p = Path(root) / f"class{i % classes}" / f"img{i:04d}.png"
        p.parent.mkdir(parents=True, exist_ok=True)
        w = r.choice([8, 16, 32, 48])
        Image.frombytes("RGB", (w, w), r.randbytes(w * w * 3)).save(p)


def shard_keys(path):
    """Sample keys of a shard in order, read with Python's tarfile (independent of libshard)."""
    data = Path(path).read_bytes()
    if str(path).endswith(".zst"):
        cp = subprocess.run(["zstd", "-dc"], input=data, capture_output=True)
        assert cp.returncode == 0, cp.stderr
        data = cp.stdout
    import io
    keys = []
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tf:
        for m in tf.getmembers():
            d, slash, base = m.name.rpartition("/")
            key = d + slash + base[: base.index(".")]
            if not keys or keys[-1] != key:
                keys.append(key)
    return keys


class Dataset:
    """A packed data set: dir, shard paths, manifest, brace pattern, keys per shard."""

    def __init__(self, d, ext):
        self.dir = Path(d)
        self.ext = ext
        self.shards = sorted(p for p in self.dir.iterdir() if p.name.endswith(ext))
        self.manifest = self.dir / "train.json"
        n = len(self.shards)
        self.pattern = str(self.dir / f"train-{{000000..{n - 1:06d}}}{ext}")
        self.keys_by_shard = {str(p): shard_keys(p) for p in self.shards}
        self.all_keys = [k for p in self.shards for k in self.keys_by_shard[str(p)]]
        self.shard_of = {k: str(p) for p in self.shards for k in self.keys_by_shard[str(p)]}

    @property
    def total(self):
        return len(self.all_keys)

    def copy(self, dest):
        shutil.copytree(self.dir, dest)
        return Dataset(dest, self.ext)

    def idx(self, shard):
        s = str(shard)
        return Path(s[: -len(self.ext)] + ".idx")


def _pack(shardpack, tmp, ext, name):
    img = tmp / "images"
    if not img.exists():
        make_images(img)
    out = tmp / name
    out.mkdir()
    cp = subprocess.run([str(shardpack), str(img), "-o", str(out / f"train-%06d{ext}"),
                         "--maxsize", "90KB", "--no-fsync", "-q"],
                        capture_output=True, env=BASE_ENV, timeout=120)
    assert cp.returncode == 0, cp.stderr.decode(errors="replace")
    ds = Dataset(out, ext)
    assert ds.total == NSAMPLES
    assert len(set(ds.all_keys)) == NSAMPLES
    sizes = {len(v) for v in ds.keys_by_shard.values()}
    assert len(ds.shards) >= 8 and len(sizes) >= 3, f"want uneven shards, got {sizes}"
    return ds


@pytest.fixture(scope="session")
def data_root(tmp_path_factory):
    return tmp_path_factory.mktemp("stream-data")


@pytest.fixture(scope="session")
def ds(shardpack, data_root):
    """The .tar data set: every count known (manifest, and a .idx beside each shard)."""
    return _pack(shardpack, data_root, ".tar", "tar")


@pytest.fixture(scope="session")
def ds_zst(shardpack, data_root):
    """The same images as .tar.zst shards."""
    return _pack(shardpack, data_root, ".tar.zst", "zst")


@pytest.fixture(scope="session")
def ds_nocount(ds, data_root):
    """A copy of ds with one shard's .idx removed: a brace pattern then has no counts."""
    c = ds.copy(data_root / "nocount")
    c.idx(c.shards[2]).unlink()
    return c


@pytest.fixture(scope="session")
def ds_zst_nocount(ds_zst, data_root):
    c = ds_zst.copy(data_root / "zst-nocount")
    c.idx(c.shards[1]).unlink()
    return c


def consumers(world, workers):
    return [(r, w) for r in range(world) for w in range(workers)]


def parse_state(state):
    """A reader state (v4:EPOCH:SEED:PAIRS;CUT) as a dict: epoch, seed, pairs (dict), cut."""
    assert state.startswith("v4:"), state
    head, _, cut = state.partition(";")
    _, epoch, seed, pairs = head.split(":", 3)
    return {"epoch": int(epoch), "seed": int(seed), "cut": cut,
            "pairs": dict(p.split("=", 1) for p in pairs.split(","))}


def split_args(rank, world, worker, workers, mode="exact"):
    """A consumer's placement; mode exact by default here (every sample once over the
    consumers, what these tests check), where shardcat's own default with several ranks is
    equal."""
    return ["--rank", str(rank), "--world-size", str(world), "--worker", str(worker),
            "--workers", str(workers), "--mode", mode]


def dupes(keys):
    return {k: c for k, c in Counter(keys).items() if c > 1}
