"""Shared fixtures and helpers for the shardpack and shardcat CLI tests.

Run with Debian's interpreter:  /usr/bin/python3 -m pytest tests/cli -q
The tools are found through $SHARDPACK and $SHARDCAT (default: build/tools/shardpack and
build/tools/shardcat under the repo root).
Everything is real: shardpack, GNU tar, bsdtar, Python's tarfile and the zstd CLI.
"""
import hashlib
import io
import json
import os
import random
import shutil
import struct
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from testtools import tool_path  # noqa: E402
from PIL import Image

REPO = Path(__file__).resolve().parents[2]
NOBODY = 65534

# Environment for every child process: a UTF-8 locale (so tar tools print non-ASCII names
# as they are), no SOURCE_DATE_EPOCH unless a test sets it.
BASE_ENV = {k: v for k, v in os.environ.items() if k != "SOURCE_DATE_EPOCH"}
BASE_ENV["LC_ALL"] = "C.UTF-8"




def _shardpack_path():
    return tool_path("SHARDPACK", "shardpack")


@pytest.fixture(scope="session")
def shardpack():
    return _shardpack_path()


@pytest.fixture(scope="session")
def shardcat():
    """The shardcat binary: $SHARDCAT, default build/tools/shardcat."""
    return tool_path("SHARDCAT", "shardcat")


class Runner:
    """Runs a tool (shardpack or shardcat); returns CompletedProcess with text stdout/stderr."""

    def __init__(self, exe):
        self.exe = str(exe)

    def __call__(self, *args, cwd=None, env=None, as_nobody=False, prefix=(), timeout=120):
        cmd = [self.exe, *[os.fspath(a) for a in args]]
        if as_nobody:
            cmd = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", *cmd]
        cmd = [*prefix, *cmd]
        e = dict(BASE_ENV)
        if env:
            e.update(env)
        return subprocess.run(cmd, cwd=cwd, env=e, capture_output=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)


@pytest.fixture(scope="session")
def run_sp(shardpack):
    return Runner(shardpack)


@pytest.fixture(scope="session")
def run_sc(shardcat):
    """Runs shardcat (same interface as run_sp)."""
    return Runner(shardcat)


def out_text(cp):
    return cp.stderr.decode("utf-8", "replace")


def ok(cp):
    """Asserts a successful run and returns its stderr text."""
    err = out_text(cp)
    assert cp.returncode == 0, f"shardpack failed ({cp.returncode}):\n{err}"
    return err


def summary_line(err):
    lines = [l for l in err.split("\n") if l.strip()]
    assert lines, "no summary line on stderr"
    return lines[-1]


# ---- images -----------------------------------------------------------------------------


def noise_image(seed, size=(24, 24), mode="RGB"):
    r = random.Random(seed)
    nch = {"RGB": 3, "L": 1}[mode]
    return Image.frombytes(mode, size, r.randbytes(size[0] * size[1] * nch))


def image_bytes(seed, fmt="JPEG", size=(24, 24), mode="RGB", **kw):
    buf = io.BytesIO()
    img = noise_image(seed, size, mode)
    if fmt == "JPEG":
        kw.setdefault("quality", 85)
    img.save(buf, format=fmt, **kw)
    return buf.getvalue()


FMT_BY_EXT = {"jpg": "JPEG", "jpeg": "JPEG", "png": "PNG", "ppm": "PPM", "pgm": "PPM",
              "bmp": "BMP", "tif": "TIFF", "tiff": "TIFF", "webp": "WEBP"}


def write_image(path, seed, size=(24, 24)):
    """Writes a deterministic noise image whose format follows the extension."""
    path = Path(os.fsdecode(path)) if isinstance(path, bytes) else Path(path)
    ext = path.suffix[1:].lower()
    mode = "L" if ext == "pgm" else "RGB"
    data = image_bytes(seed, FMT_BY_EXT[ext], size, mode)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return data


def make_tree(root, files):
    """files: {relpath: seed or bytes or (seed, size)}; returns {relpath: bytes}."""
    out = {}
    for rel, spec in files.items():
        p = Path(root) / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(spec, bytes):
            p.write_bytes(spec)
            out[rel] = spec
        elif isinstance(spec, tuple):
            out[rel] = write_image(p, spec[0], spec[1])
        else:
            out[rel] = write_image(p, spec)
    return out


def bulk_tree(root, per_class=8, classes=("ant", "bee", "cow"), seed=0, sizes=None):
    """A simple ImageFolder tree of small JPEG/PNG files; returns {relpath: bytes}."""
    files = {}
    k = seed
    for c in classes:
        for i in range(per_class):
            ext = "png" if i % 3 == 2 else "jpg"
            size = sizes[k % len(sizes)] if sizes else (16 + (k % 5) * 4, 16)
            files[f"{c}/img{i:03d}.{ext}"] = (k, size)
            k += 1
    return make_tree(root, files)


# ---- keys (an independent model of formats/shard.md section 1.6) ---------------------

WHITESPACE = {chr(c) for c in [*range(0x09, 0x0E), 0x20, 0x85, 0xA0, 0x1680, *range(0x2000, 0x200B),
                               0x2028, 0x2029, 0x202F, 0x205F, 0x3000]}


def spec_order(paths):
    return sorted(paths, key=lambda s: s.encode("utf-8"))


def expected_keys(relpaths):
    """{relpath: key} following the spec: sorted order, '.'/whitespace -> '_', _N on clashes."""
    taken, out = set(), {}
    for p in spec_order(relpaths):
        d, _, base = p.rpartition("/")
        comps = (d.split("/") if d else []) + [base[: base.rfind(".")]]
        comps = ["".join("_" if (ch == "." or ch in WHITESPACE) else ch for ch in c) for c in comps]
        key = "/".join(comps)
        if key in taken:
            n = 1
            while f"{key}_{n}" in taken:
                n += 1
            key = f"{key}_{n}"
        taken.add(key)
        out[p] = key
    return out


def sample_json(path, label=None, cls=None, extra=None):
    obj = dict(extra or {})
    obj["path"] = path
    if label is not None:
        obj["label"] = label
    if cls is not None:
        obj["class"] = cls
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


# ---- reading shards ------------------------------------------------------------------


def zstd_decompress(data):
    cp = subprocess.run(["zstd", "-dc"], input=data, capture_output=True, env=BASE_ENV)
    assert cp.returncode == 0, cp.stderr.decode(errors="replace")
    return cp.stdout


def tar_bytes(path):
    data = Path(path).read_bytes()
    return zstd_decompress(data) if str(path).endswith(".zst") else data


def split_name(name):
    d, slash, base = name.rpartition("/")
    i = base.index(".")
    return d + slash + base[:i], base[i + 1:]


def read_members(tb):
    """Members of tar bytes: list of dicts (name, key, field, offset, offset_data, size, data, info)."""
    out = []
    with tarfile.open(fileobj=io.BytesIO(tb), mode="r:") as tf:
        for m in tf.getmembers():
            key, field = split_name(m.name)
            out.append(dict(name=m.name, key=key, field=field, offset=m.offset,
                            offset_data=m.offset_data, size=m.size, info=m,
                            data=tf.extractfile(m).read() if m.isreg() else None))
    return out


def group_samples(members):
    """[(key, [member, ...]), ...] from consecutive runs of equal keys."""
    samples = []
    for m in members:
        if samples and samples[-1][0] == m["key"]:
            samples[-1][1].append(m)
        else:
            samples.append((m["key"], [m]))
    return samples


def shard_paths(outdir, ext=".tar"):
    return sorted(p for p in Path(outdir).iterdir() if p.name.endswith(ext) and not p.name.startswith("."))


def idx_path(shard):
    s = str(shard)
    for suf in (".tar.zst", ".tar"):
        if s.endswith(suf):
            return Path(s[: -len(suf)] + ".idx")
    raise ValueError(s)


def parse_idx(path):
    """Parses a v1.2 index strictly; returns [[(field, offset, size, name), ...], ...]."""
    raw = Path(path).read_bytes()
    assert raw.endswith(b"\n") and b"\r" not in raw, f"{path}: lines must end in LF"
    lines = raw.decode("utf-8").split("\n")[:-1]
    head = lines[0].split(" ")
    assert head[0] == "v1.2" and len(head) == 2, lines[0]
    n = int(head[1])
    assert str(n) == head[1]
    assert len(lines) == n + 1, f"{path}: header says {n} samples, found {len(lines) - 1} lines"
    samples = []
    for line in lines[1:]:
        toks = line.split(" ")
        assert "" not in toks, f"runs of spaces or trailing space in {line!r}"
        assert len(toks) % 4 == 0, line
        comps = []
        for i in range(0, len(toks), 4):
            f, off, size, name = toks[i:i + 4]
            assert str(int(off)) == off and str(int(size)) == size, line
            comps.append((f, int(off), int(size), name))
        samples.append(comps)
    return samples


def load_manifest(path):
    return json.loads(Path(path).read_text("utf-8"))


def all_keys_in_order(outdir, ext=".tar"):
    keys = []
    for s in shard_paths(outdir, ext):
        keys += [k for k, _ in group_samples(read_members(tar_bytes(s)))]
    return keys


def is_record(p, d):
    """Whether p, under d, is in a finished pack's record (.STEM.pack/: its plan, which
    names the run's paths, and its completion marker): a run's note of what it packed, kept
    so that --resume knows the set complete, not part of the set."""
    parts = Path(p).relative_to(d).parts
    return bool(parts) and parts[0].startswith(".") and parts[0].endswith(".pack")


def snapshot(d):
    """{relative name: bytes} for every file under d (hidden ones included, the pack's
    record aside: is_record)."""
    d = Path(d)
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*"))
            if p.is_file() and not is_record(p, d)}


def hidden_files(d):
    """The hidden files and folders under d (temporaries, locks), the pack's record aside."""
    return [str(p) for p in Path(d).rglob(".*") if not is_record(p, d)]


def visible_names(d):
    """The names in folder d but the pack's record."""
    return sorted(n for n in os.listdir(d) if not is_record(Path(d) / n, d))


def md5(b):
    return hashlib.md5(b).hexdigest()


def sha256(b):
    return hashlib.sha256(b).hexdigest()


# ---- zstd seekable format ----------------------------------------------------------------

SKIPPABLE_MAGIC = 0x184D2A5E
SEEKABLE_MAGIC = 0x8F92EAB1
ZSTD_MAGIC = 0xFD2FB528


def parse_seek_table(data):
    """Returns [(csize, dsize, checksum), ...] after checking the table's framing."""
    assert len(data) >= 17
    nframes, desc, magic = struct.unpack_from("<IBI", data, len(data) - 9)
    assert magic == SEEKABLE_MAGIC, hex(magic)
    assert desc == 0x80, hex(desc)
    tsize = 17 + 12 * nframes
    start = len(data) - tsize
    assert start >= 0
    smagic, fsize = struct.unpack_from("<II", data, start)
    assert smagic == SKIPPABLE_MAGIC, hex(smagic)
    assert fsize + 8 == tsize
    return [struct.unpack_from("<III", data, start + 8 + 12 * i) for i in range(nframes)], start


def zstd_frame_header(frame):
    """(content_size or None, checksum_flag, dict_id_flag) of a zstd frame."""
    magic, fhd = struct.unpack_from("<IB", frame, 0)
    assert magic == ZSTD_MAGIC, hex(magic)
    fcs_flag, single, checksum, dict_flag = fhd >> 6, (fhd >> 5) & 1, (fhd >> 2) & 1, fhd & 3
    pos = 5 + (0 if single else 1) + [0, 1, 2, 4][dict_flag]
    fcs_len = [1 if single else 0, 2, 4, 8][fcs_flag]
    if fcs_len == 0:
        return None, checksum, dict_flag
    v = int.from_bytes(frame[pos:pos + fcs_len], "little")
    if fcs_len == 2:
        v += 256
    return v, checksum, dict_flag


_P1, _P2, _P3, _P4, _P5 = (0x9E3779B185EBCA87, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9,
                           0x85EBCA77C2B2AE63, 0x27D4EB2F165667C5)
_M = (1 << 64) - 1


def _rotl(x, r):
    return ((x << r) | (x >> (64 - r))) & _M


def _round(acc, v):
    return (_rotl((acc + v * _P2) & _M, 31) * _P1) & _M


def xxh64(data, seed=0):
    """Pure-Python XXH64 (used to check zstd content checksums)."""
    n, i = len(data), 0
    if n >= 32:
        v = [(seed + _P1 + _P2) & _M, (seed + _P2) & _M, seed & _M, (seed - _P1) & _M]
        while i + 32 <= n:
            a = struct.unpack_from("<4Q", data, i)
            v = [_round(v[j], a[j]) for j in range(4)]
            i += 32
        h = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & _M
        for x in v:
            h = ((h ^ _round(0, x)) * _P1 + _P4) & _M
    else:
        h = (seed + _P5) & _M
    h = (h + n) & _M
    while i + 8 <= n:
        h ^= _round(0, struct.unpack_from("<Q", data, i)[0])
        h = (_rotl(h, 27) * _P1 + _P4) & _M
        i += 8
    if i + 4 <= n:
        h ^= (struct.unpack_from("<I", data, i)[0] * _P1) & _M
        h = (_rotl(h, 23) * _P2 + _P3) & _M
        i += 4
    while i < n:
        h ^= (data[i] * _P5) & _M
        h = (_rotl(h, 11) * _P1) & _M
        i += 1
    h ^= h >> 33
    h = (h * _P2) & _M
    h ^= h >> 29
    h = (h * _P3) & _M
    h ^= h >> 32
    return h


# ---- a folder nobody (uid 65534) can reach ------------------------------------------------


@pytest.fixture
def world_tmp():
    """A fresh folder under /tmp that other users can traverse (pytest's tmp_path is 0700)."""
    d = Path(tempfile.mkdtemp(prefix="shardpack-cli-", dir="/tmp"))
    d.chmod(0o755)
    yield d
    for p in [d, *d.rglob("*")]:
        try:
            if not p.is_symlink():
                p.chmod(0o755 if p.is_dir() else 0o644)
        except OSError:
            pass
    shutil.rmtree(d, ignore_errors=True)


def is_root():
    return os.geteuid() == 0
