"""shardcat against shards made elsewhere (GNU tar, bsdtar, Python's tarfile, the zstd CLI) and
by shardpack: every listing compared field by field with WebDataset's grouping rule, indexes
checked against the bytes, planted defects found at the right offset, safe extraction, shard
lists and exit statuses.

WebDataset's rule is modelled here, independently of libshard, by `wds_reference`.
"""
import gzip
import io
import json
import os
import re
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from conftest import (BASE_ENV, bulk_tree, image_bytes, load_manifest, make_tree, parse_idx,
                      parse_seek_table, shard_paths, snapshot, zstd_decompress)

# ---- running shardcat -----------------------------------------------------------------


def err_text(cp):
    return cp.stderr.decode("utf-8", "replace")


def out_lines(cp):
    return cp.stdout.decode("utf-8", "replace").splitlines()


def sc_ok(cp):
    """Asserts shardcat succeeded with exit 0; returns stdout as text."""
    assert cp.returncode == 0, f"shardcat failed ({cp.returncode}):\n{err_text(cp)}"
    return cp.stdout.decode("utf-8")


def ls_json(run_sc, *shards):
    cp = run_sc("ls", "--json", *shards)
    return [json.loads(line) for line in sc_ok(cp).splitlines()]


def info_json(run_sc, shard):
    lines = sc_ok(run_sc("info", "--json", shard)).splitlines()
    assert len(lines) == 1, lines
    return json.loads(lines[0])


def defects(cp):
    """stderr lines of a failed verify, with the 'shardcat: ' prefix removed."""
    return [l[len("shardcat: "):] if l.startswith("shardcat: ") else l for l in err_text(cp).splitlines()]


def assert_failed(cp, url):
    """verify exited 1 and reported URL as FAILED on stdout."""
    assert cp.returncode == 1, f"verify should fail ({cp.returncode}):\n{cp.stdout!r}\n{err_text(cp)}"
    assert re.search(rf"^{re.escape(str(url))}: FAILED \(\d+ defects?\)$", cp.stdout.decode(), re.M), \
        cp.stdout.decode()


def tool(*cmd, cwd=None):
    cp = subprocess.run(list(map(os.fspath, cmd)), capture_output=True, cwd=cwd,
                        env={**BASE_ENV, "TZ": "UTC"})
    assert cp.returncode == 0, f"{cmd}: {cp.stderr.decode(errors='replace')}"
    return cp.stdout


# ---- WebDataset's grouping, modelled over Python's tarfile ---------------------------

# webdataset/tariterators.py, base_plus_ext
WDS_RE = re.compile(r"^((?:.*/|)[^.]+)[.]([^/]*)$")


def strip_dot_slash(name):
    while name.startswith("./"):
        name = name[2:]
    return name


def tar_of(path):
    """The uncompressed tar bytes of a shard (.tar, .tar.gz/.tgz, .tar.zst)."""
    data = Path(path).read_bytes()
    if data[:2] == b"\x1f\x8b":
        return gzip.decompress(data)
    if data[:4] == b"\x28\xb5\x2f\xfd":
        return zstd_decompress(data)
    return data


class Member:
    """A TarInfo (its attributes and methods are reachable here) plus .data for regular files."""

    def __init__(self, info, data):
        self.info = info
        self.data = data

    def __getattr__(self, name):
        return getattr(self.info, name)


def tar_members(tb):
    """Every tar entry tarfile sees, in order, as Members."""
    with tarfile.open(fileobj=io.BytesIO(tb), mode="r:", encoding="utf-8") as tf:
        return [Member(m, tf.extractfile(m).read() if m.isreg() else None) for m in tf]


def wds_reference(tb, url):
    """Samples as WebDataset groups them (tar_file_iterator + group_by_keys, lcase=True), with
    libshard's documented differences (formats/shard.md 2.3): a leading './' is removed from the
    key, a basename starting with '__' or '.' is skipped, a key that comes back after other keys
    and a field repeated in a sample are errors. Returns (samples, members) where samples are
    the objects `ls --json` prints plus '_members' (the TarInfos, in order)."""
    samples, seen = [], set()
    for m in tar_members(tb):
        if not m.isreg():                      # WebDataset: tarinfo.isreg() only
            continue
        name = strip_dot_slash(m.name)
        base = name.rsplit("/", 1)[-1]
        # WebDataset skips '__*__' meta names and names the regex does not match; libshard
        # skips every basename starting with '__' and, for a nested hidden file such as
        # 'd/.x.txt' (which WebDataset's regex splits into key 'd/' and field 'x.txt'),
        # every basename starting with '.'.
        if base.startswith("__") or base.startswith("."):
            continue
        mt = WDS_RE.match(name)
        if not mt:
            continue
        key, field = mt.group(1), mt.group(2).lower()
        if samples and samples[-1]["__key__"] == key:
            s = samples[-1]
            assert field not in s["fields"], f"reference: {key}.{field} twice"
        else:
            assert key not in seen, f"reference: key {key} appears again"
            seen.add(key)
            s = {"__key__": key, "__url__": str(url), "fields": {}, "_members": []}
            samples.append(s)
        s["fields"][field] = m.size
        s["_members"].append(m)
    return samples


def public(samples):
    return [{k: v for k, v in s.items() if k != "_members"} for s in samples]


def idx_of(shard):
    """shardcat's index path: the shard's name without .tar/.tar.gz/.tgz/.tar.zst, plus .idx."""
    s = str(shard)
    for suf in (".tar.zst", ".tar.gz", ".tgz", ".tar", ".zst"):
        if s.endswith(suf):
            return Path(s[: -len(suf)] + ".idx")
    return Path(s + ".idx")


# ---- foreign shards ---------------------------------------------------------------------

LONG_DIR = "dog/" + "d" * 70 + "/" + "e" * 40          # > 100 bytes: ustar prefix + name
LONG_BASE = "long/" + "g" * 20 + "/" + "h" * 110        # basename > 100: pax or GNU 'L' only
BASE_FILES = {
    "top.txt": b"top level\n",
    "cat/a.jpg": 1,
    "cat/a.TXT": b"upper-case suffix\n",
    "cat/a.seg.png": 2,
    "cat/b.jpg": 3,
    "cat/b.json": b'{"x": 1}',
    "cat/c.txt": b"",
    "dog/README": b"no dot in the basename: skipped\n",
    "dog/.hidden.txt": b"hidden: skipped\n",
    "dog/__meta__.json": b"{}",
    LONG_DIR + ".jpg": 4,
    LONG_DIR + ".cls": b"7",
    "emu/e1.jpg": (5, (40, 40)),
    "emu/e1.cls": b"2",
}
LONG_FILES = {LONG_BASE + ".jpg": 6, LONG_BASE + ".txt": b"long name\n"}
NON_ASCII = {"ünï/çødé.jpg": 7, "ünï/çødé.txt": "ça va".encode(), "日本/画像.JPG": 8}
SYMLINK = "dog/link.jpg"          # -> ../cat/a.jpg
HARDLINK = "emu/e2.jpg"           # second name of emu/e1.jpg


def bytewise(names):
    return sorted(names, key=lambda s: s.encode("utf-8"))


@pytest.fixture(scope="module")
def trees(tmp_path_factory):
    """Two source folders: 'base' (ustar-safe names) and 'full' (plus > 100-byte basenames),
    each with a symbolic link and a hard link."""
    root = tmp_path_factory.mktemp("foreign-src")
    out = {}
    for name, files in (("base", BASE_FILES), ("full", {**BASE_FILES, **LONG_FILES})):
        d = root / name
        make_tree(d, files)
        os.symlink("../cat/a.jpg", d / SYMLINK)
        os.link(d / "emu/e1.jpg", d / HARDLINK)
        out[name] = (d, bytewise([*files, SYMLINK, HARDLINK]))
    return out


@pytest.fixture(scope="module")
def pack_src(tmp_path_factory):
    d = tmp_path_factory.mktemp("pack-src")
    bulk_tree(d, per_class=4, sizes=[(48, 40), (32, 32)])
    return d


def _tinfo(name, data=None, type=tarfile.REGTYPE, linkname=""):
    ti = tarfile.TarInfo(name)
    ti.type = type
    ti.linkname = linkname
    ti.mtime = 1_700_000_000
    ti.mode = 0o755 if type == tarfile.DIRTYPE else 0o644
    if data is not None:
        ti.size = len(data)
    return ti


def py_tar(path, entries, fmt):
    """entries: [(name, bytes)] regular files, or (name, None, type, linkname) for others."""
    with tarfile.open(path, "w", format=fmt, encoding="utf-8") as tf:
        for e in entries:
            if len(e) == 2:
                tf.addfile(_tinfo(e[0], e[1]), io.BytesIO(e[1]))
            else:
                tf.addfile(_tinfo(e[0], None, e[2], e[3]))
    return path


def py_entries(files):
    """Sorted regular entries from {name: seed|bytes|(seed,size)} plus a folder and links."""
    data = {}
    for name, spec in files.items():
        if isinstance(spec, bytes):
            data[name] = spec
        elif isinstance(spec, tuple):
            data[name] = image_bytes(spec[0], "PNG" if name.endswith("png") else "JPEG", spec[1])
        else:
            data[name] = image_bytes(spec, "PNG" if name.endswith("png") else "JPEG")
    entries = [("cat", None, tarfile.DIRTYPE, "")]
    for name in bytewise(data):
        entries.append((name, data[name]))
        if name == "emu/e1.jpg":
            entries.append((HARDLINK, None, tarfile.LNKTYPE, "emu/e1.jpg"))
        if name == "dog/README":
            entries.append((SYMLINK, None, tarfile.SYMTYPE, "../cat/a.jpg"))
    return entries


FOREIGN = ["gnu-ustar", "gnu-ustar-dot", "gnu-pax", "gnu-gnu-dot", "gnu-gzip-dot", "bsdtar",
           "bsdtar-pax", "bsdtar-ustar", "bsdtar-tgz", "py-ustar", "py-pax", "py-gnu",
           "zstd-no-seek-table", "shardpack-tar", "shardpack-zst"]


def make_foreign(kind, trees, pack_src, out, run_sp):
    """Builds one shard of the given kind in folder out; returns its path."""
    out.mkdir(parents=True, exist_ok=True)
    base, base_list = trees["base"]
    full, full_list = trees["full"]
    gnu = ["tar", "--sort=name", "--owner=0", "--group=0"]
    if kind == "gnu-ustar":
        p = out / "s.tar"
        tool(*gnu, "--format=ustar", "-cf", p, "-C", base, "top.txt", "cat", "dog", "emu")
    elif kind == "gnu-ustar-dot":
        p = out / "s.tar"
        tool(*gnu, "--format=ustar", "-cf", p, "-C", base, ".")
    elif kind == "gnu-pax":
        p = out / "s.tar"
        tool(*gnu, "--format=pax", "-cf", p, "-C", full, "top.txt", "cat", "dog", "emu", "long")
    elif kind == "gnu-gnu-dot":
        p = out / "s.tar"
        tool(*gnu, "--format=gnu", "-cf", p, "-C", full, ".")
    elif kind == "gnu-gzip-dot":
        p = out / "s.tar.gz"
        tool(*gnu, "--format=pax", "-czf", p, "-C", full, ".")
    elif kind == "bsdtar":
        p = out / "s.tar"
        tool("bsdtar", "-cf", p, "-C", full, *full_list)
    elif kind == "bsdtar-pax":
        p = out / "s.tar"
        tool("bsdtar", "--format", "pax", "-cf", p, "-C", full, *full_list)
    elif kind == "bsdtar-ustar":
        p = out / "s.tar"
        tool("bsdtar", "--format", "ustar", "-cf", p, "-C", base, *base_list)
    elif kind == "bsdtar-tgz":
        p = out / "s.tgz"
        tool("bsdtar", "-czf", p, "-C", full, *full_list)
    elif kind == "py-ustar":
        p = py_tar(out / "s.tar", py_entries(BASE_FILES), tarfile.USTAR_FORMAT)
    elif kind == "py-pax":
        p = py_tar(out / "s.tar", py_entries({**BASE_FILES, **LONG_FILES, **NON_ASCII}), tarfile.PAX_FORMAT)
    elif kind == "py-gnu":
        p = py_tar(out / "s.tar", py_entries({**BASE_FILES, **LONG_FILES, **NON_ASCII}), tarfile.GNU_FORMAT)
    elif kind == "zstd-no-seek-table":
        t = out / "plain.tar"
        tool(*gnu, "--format=pax", "-cf", t, "-C", full, ".")
        p = out / "s.tar.zst"
        tool("zstd", "-q", t, "-o", p)
        t.unlink()
    elif kind == "shardpack-tar":
        run_ok_sp(run_sp, pack_src, "-o", out / "sp-%06d.tar")
        p = out / "sp-000000.tar"
    elif kind == "shardpack-zst":
        run_ok_sp(run_sp, pack_src, "-o", out / "sp-%06d.tar.zst", "--frame-size", "8K")
        p = out / "sp-000000.tar.zst"
    else:
        raise ValueError(kind)
    return p


def run_ok_sp(run_sp, *args):
    cp = run_sp(*args, "-q")
    assert cp.returncode == 0, cp.stderr.decode(errors="replace")


def expected_raw_names(kind):
    """Regular members each kind must hold (as names without './'), to be sure the fixture
    exercises what it claims to."""
    if kind.startswith("shardpack"):
        return None
    files = dict(BASE_FILES)
    if kind not in ("gnu-ustar", "gnu-ustar-dot", "bsdtar-ustar", "py-ustar"):
        files.update(LONG_FILES)
    if kind in ("py-pax", "py-gnu"):
        files.update(NON_ASCII)
    return set(files)


@pytest.fixture(params=FOREIGN)
def foreign(request, trees, pack_src, tmp_path, run_sp):
    kind = request.param
    p = make_foreign(kind, trees, pack_src, tmp_path / "shard", run_sp)
    tb = tar_of(p)
    want = expected_raw_names(kind)
    if want is not None:
        members = tar_members(tb)
        regs = {strip_dot_slash(m.name) for m in members if m.isreg()}
        assert regs == want, f"{kind}: fixture holds {sorted(regs ^ want)} unexpectedly"
        # the links really are links in the tar (hard link: the second name)
        types = {strip_dot_slash(m.name): m.type for m in members}
        assert types[SYMLINK] == tarfile.SYMTYPE and types[HARDLINK] == tarfile.LNKTYPE, kind
        if kind == "gnu-gnu-dot":
            assert b"././@LongLink" in tb, "GNU long names expected"
        if kind in ("gnu-pax", "bsdtar-pax", "py-pax"):
            assert any(m.pax_headers.get("path") for m in members), "pax path records expected"
        if kind.endswith("-dot"):
            assert all(m.name.startswith("./") or m.name == "." for m in members), kind
    return kind, p, tb


# ---- 1. listings of foreign shards --------------------------------------------------------


def test_ls_json_matches_webdataset_grouping(foreign, run_sc):
    kind, p, tb = foreign
    ref = wds_reference(tb, p)
    assert len(ref) >= 6
    got = ls_json(run_sc, p)
    assert [s["__key__"] for s in got] == [s["__key__"] for s in ref], kind
    for g, r in zip(got, ref):
        assert set(g) >= {"__key__", "__url__", "fields"}
        assert g["__url__"] == r["__url__"], kind
        assert list(g["fields"]) == list(r["fields"]), f"{kind}: {r['__key__']}: fields or their order"
        assert g["fields"] == r["fields"], f"{kind}: {r['__key__']}: sizes"
    # the same through a pipe
    url = f"pipe:cat '{p}'"
    piped = ls_json(run_sc, url)
    assert public(wds_reference(tb, url)) == piped, kind


def test_ls_text_format(foreign, run_sc):
    kind, p, tb = foreign
    ref = wds_reference(tb, p)
    want = [s["__key__"] + "  " + " ".join(f"{f}:{n}B" for f, n in s["fields"].items()) for s in ref]
    assert sc_ok(run_sc("ls", p)).splitlines() == want, kind


def test_cat_gives_tarfile_bytes(foreign, run_sc):
    kind, p, tb = foreign
    ref = wds_reference(tb, p)
    for s in ref[:: max(1, len(ref) // 5)] + ref[-1:]:
        for m in s["_members"]:
            name = strip_dot_slash(m.name)
            cp = run_sc("cat", p, name)
            assert cp.returncode == 0, f"{kind}: cat {name}: {err_text(cp)}"
            assert cp.stdout == m.data, f"{kind}: cat {name} differs from tarfile's bytes"
            # KEY.FIELD with the field lower-cased finds the same member
            key, field = WDS_RE.match(name).groups()
            if field != field.lower():
                assert run_sc("cat", p, f"{key}.{field.lower()}").stdout == m.data


@pytest.mark.parametrize("layout", ["hole at the end", "hole in the middle", "several holes"])
def test_sparse_members_read_with_their_holes_as_zeros(tmp_path, run_sc, layout):
    """GNU tar --sparse stores only the blocks with data; the holes read back as zeros, up
    to the member's size, as GNU tar extracts them."""
    f = tmp_path / "k.bin"
    pieces = {"hole at the end": [(0, b"head")], "hole in the middle": [(0, b"x"), (5000, b"tail")],
              "several holes": [(10000, b"a" * 600), (70000, b"b"), (200000, b"c" * 5000)]}[layout]
    with open(f, "wb") as fh:
        for off, data in pieces:
            fh.seek(off)
            fh.write(data)
        fh.truncate(max(off + len(data) for off, data in pieces) + (90000 if layout == "hole at the end" else 0))
    (tmp_path / "k.txt").write_bytes(b"abc")
    subprocess.run(["tar", "--sparse", "-cf", "s.tar", "k.bin", "k.txt"], cwd=tmp_path, check=True,
                   env=BASE_ENV)
    cp = run_sc("cat", tmp_path / "s.tar", "k.bin")
    assert cp.returncode == 0, err_text(cp)
    assert cp.stdout == f.read_bytes()
    cp = run_sc("ls", "--json", tmp_path / "s.tar")
    assert json.loads(cp.stdout)["fields"] == {"bin": f.stat().st_size, "txt": 3}


def test_info_counts(foreign, run_sc):
    kind, p, tb = foreign
    ref = wds_reference(tb, p)
    for f in p.parent.glob("*.idx"):
        f.unlink()
    info = info_json(run_sc, p)
    hist = {}
    for s in ref:
        for f in s["fields"]:
            hist[f] = hist.get(f, 0) + 1
    assert info["samples"] == len(ref), kind
    assert info["members"] == sum(len(s["fields"]) for s in ref), kind
    assert info["payload_bytes"] == sum(sum(s["fields"].values()) for s in ref), kind
    assert info["file_bytes"] == p.stat().st_size
    assert 0 < info["tar_bytes"] <= len(tb)
    comp = {"gzip-dot": "gzip", "tgz": "gzip", "seek-table": "zstd", "zst": "zstd"}
    assert info["compression"] == next((v for k, v in comp.items() if kind.endswith(k)), "none")
    assert info["index"] is None
    assert info["fields"] == hist


# ---- 2. index --------------------------------------------------------------------------


def test_index_points_at_member_data(foreign, run_sc):
    kind, p, tb = foreign
    idx = idx_of(p)
    sp_idx = idx.read_bytes() if idx.exists() else None     # shardpack's own index
    if idx.exists():
        idx.unlink()
    ref = wds_reference(tb, p)
    out = sc_ok(run_sc("index", p))
    assert out == f"{idx}: {len(ref)} samples\n"
    lines = parse_idx(idx)
    assert len(lines) == len(ref), kind
    for line, s in zip(lines, ref):
        assert len(line) == len(s["_members"]), f"{kind}: {s['__key__']}"
        for (field, off, size, name), m in zip(line, s["_members"]):
            raw_field = WDS_RE.match(strip_dot_slash(m.name)).group(2)
            assert (field, off, size, name) == (raw_field, m.offset_data, m.size, m.name), kind
            assert tb[off:off + size] == m.data, f"{kind}: {name}: the index slice is not its data"
    if sp_idx is not None:
        assert idx.read_bytes() == sp_idx, "shardcat index differs from shardpack's index"
    info = info_json(run_sc, p)
    assert info["index"] == str(idx) and info["index_samples"] == len(ref)
    cp = run_sc("verify", p)
    if kind == "zstd-no-seek-table":
        # documented: a .tar.zst without libshard's seek table is a defect for verify
        assert_failed(cp, p)
        assert defects(cp)[0] == f"{p}: no seek table at the end (not written by libshard, or truncated)"
        assert all("every reader leaves it out" in d for d in defects(cp)[1:]), defects(cp)
    elif defects(cp):
        # members every reader leaves out (a stray README, links) are verify's defects
        assert all("every reader leaves it out" in d for d in defects(cp)), defects(cp)
        assert {d.split("member ")[1].split("'")[1] for d in defects(cp)} <= \
            {"dog/README", "./dog/README", "dog/link.jpg", "./dog/link.jpg", "emu/e2.jpg",
             "./emu/e2.jpg"}, defects(cp)
    else:
        assert sc_ok(cp).startswith(f"{p}: ok: {len(ref)} samples, "), kind
        assert "index matches" in cp.stdout.decode()


def test_reading_with_the_index_present_gives_the_same(foreign, run_sc):
    """An index (written by shardcat) next to the shard changes nothing that ls shows."""
    kind, p, tb = foreign
    before = ls_json(run_sc, p)
    sc_ok(run_sc("index", p))
    assert ls_json(run_sc, p) == before
    ref = wds_reference(tb, p)
    m = ref[len(ref) // 2]["_members"][0]
    assert run_sc("cat", p, strip_dot_slash(m.name)).stdout == m.data


def test_zstd_without_seek_table_is_readable(trees, pack_src, tmp_path, run_sp, run_sc):
    p = make_foreign("zstd-no-seek-table", trees, pack_src, tmp_path, run_sp)
    ref = wds_reference(tar_of(p), p)
    assert ls_json(run_sc, p) == public(ref)
    assert info_json(run_sc, p)["compression"] == "zstd"
    cp = run_sc("verify", p)
    assert_failed(cp, p)
    assert any("no seek table" in d for d in defects(cp))


# ---- 3. verify: planted defects -------------------------------------------------------------


@pytest.fixture
def packed(run_sp, pack_src, tmp_path):
    """A shardpack .tar set of 3 shards (4 samples each) with its .idx files and manifest."""
    d = tmp_path / "t"
    d.mkdir()
    run_ok_sp(run_sp, pack_src, "-o", d / "tr-%03d.tar", "-c", "4")
    shards = shard_paths(d)
    assert len(shards) == 3
    return d, shards


@pytest.fixture
def packed_zst(run_sp, pack_src, tmp_path):
    d = tmp_path / "z"
    d.mkdir()
    run_ok_sp(run_sp, pack_src, "-o", d / "tr-%03d.tar.zst", "-c", "6", "--frame-size", "4K")
    shards = shard_paths(d, ".tar.zst")
    assert len(shards) == 2
    return d, shards


def flip(path, offset, mask=0x20):
    b = bytearray(path.read_bytes())
    b[offset] ^= mask
    path.write_bytes(bytes(b))


def test_clean_set_verifies(packed, packed_zst, run_sc):
    for d, shards in (packed, packed_zst):
        ext = shards[0].name[len("tr-000"):]
        for arg in (d / "tr.json", f"{d}/tr-{{000..{len(shards) - 1:03d}}}{ext}"):
            cp = run_sc("verify", "--decode", arg)
            out = sc_ok(cp).splitlines()
            assert err_text(cp) == ""
            # a line a shard, the count, and for a manifest the set's own
            assert len(out) == len(shards) + 1 + str(arg).endswith(".json")
            if str(arg).endswith(".json"):
                assert out[-1] == f"set {arg}: every shard there, no gap in its numbering, none " \
                                  "beside it unlisted"
            for s, line in zip(shards, out):
                assert line.startswith(f"{s}: ok: 4 samples" if d == packed[0] else f"{s}: ok: 6 samples")
                assert "index matches" in line and "JPEGs decode" in line
                if str(arg).endswith(".json"):
                    assert "manifest size and checksums match" in line
                if s.name.endswith(".zst"):
                    assert "zstd frames checked" in line
            assert out[len(shards)] == f"{len(shards)} shards, 0 failed"


@pytest.mark.parametrize("which", ["first", "middle", "last"])
@pytest.mark.parametrize("field_at", [0, 124, 148])   # name, size, checksum fields
def test_verify_flipped_header_byte(packed, run_sc, which, field_at):
    _, shards = packed
    s = shards[1]
    members = tar_members(s.read_bytes())
    m = {"first": members[0], "middle": members[len(members) // 2], "last": members[-1]}[which]
    flip(s, m.offset + field_at)
    cp = run_sc("verify", s)
    assert_failed(cp, s)
    msgs = [d for d in defects(cp) if d.startswith(f"{s}: offset ")]
    assert msgs, defects(cp)
    assert f"{s}: offset {m.offset}: " in msgs[0], (m.offset, msgs)
    # ls from the index reads the first and last headers only (the proof that the index is
    # the shard's): those refuse it; verify is the check of every header
    cp = run_sc("ls", s)
    assert cp.returncode == (0 if which == "middle" else 1), err_text(cp)
    # ls from the headers stops there too, with the same message
    idx_of(s).unlink()
    cp = run_sc("ls", s)
    assert cp.returncode == 1 and f"offset {m.offset}:" in err_text(cp)


def jpeg_entropy_middle(data):
    """The offset of a byte in the middle of a baseline JPEG's entropy-coded data."""
    sos = data.index(b"\xff\xda")
    start = sos + 2 + int.from_bytes(data[sos + 2:sos + 4], "big")
    end = data.rindex(b"\xff\xd9")
    assert end - start > 64
    return (start + end) // 2


def test_verify_decode_flipped_jpeg_byte(packed, run_sc):
    _, shards = packed
    s = shards[0]
    jpgs = [m for m in tar_members(s.read_bytes()) if m.name.endswith(".jpg")]
    m = max(jpgs, key=lambda m: m.size)
    flip(s, m.offset_data + jpeg_entropy_middle(m.data), 0xFF)
    # without --decode the tar structure and the index are intact
    assert sc_ok(run_sc("verify", s)).startswith(f"{s}: ok")
    cp = run_sc("verify", "--decode", s)
    assert_failed(cp, s)
    msgs = defects(cp)
    assert len(msgs) == 1, msgs
    assert msgs[0].startswith(f"{s}: offset {m.offset_data}: member '{m.name}': "), msgs


def truncation_points(tb, members):
    last = members[-1]
    end_of_data = last.offset_data + (last.size + 511) // 512 * 512
    k = members[len(members) // 2]
    return {
        "mid-data": k.offset_data + min(100, k.size // 2),
        "mid-header": k.offset + 200,
        "member-boundary": k.offset,
        "no-end-blocks": end_of_data,
        "one-end-block": end_of_data + 512,
    }


@pytest.mark.parametrize("where", ["mid-data", "mid-header"])
def test_verify_truncated_shard(packed, run_sc, where):
    """End of file inside a header or inside member data: the tar alone tells (no index here),
    with an offset within the file and the member."""
    _, shards = packed
    s = shards[1]
    tb = s.read_bytes()
    members = tar_members(tb)
    cut = truncation_points(tb, members)[where]
    s.write_bytes(tb[:cut])
    idx_of(s).unlink()
    cp = run_sc("verify", s)
    assert_failed(cp, s)
    msgs = defects(cp)
    assert len(msgs) == 1, msgs
    m = re.search(r"^.*: offset (\d+): .*member '([^']+)'.*Truncated", msgs[0])
    assert m and int(m.group(1)) <= cut, msgs
    assert m.group(2) in {x.name for x in members}, msgs
    # ls, which seeks over the data, names the same file, offset and member (libarchive
    # words a cut met while skipping differently from one met while reading)
    cp = run_sc("ls", s)
    said = err_text(cp).strip()
    assert cp.returncode == 1 and "Truncated" in said, said
    assert said.rsplit(": ", 1)[0] == f"shardcat: {msgs[0]}".rsplit(": ", 1)[0], said


@pytest.mark.parametrize("where", ["member-boundary", "no-end-blocks", "one-end-block"])
def test_verify_truncated_at_a_block_boundary(packed, run_sc, where):
    """A plain tar cut at a 512-byte boundary (right before a member's header, or in or before
    the end-of-archive blocks) must not pass verify silently: the tar alone (no index, no
    manifest) tells, at an offset within the file; the manifest names the size."""
    d, shards = packed
    s = shards[1]
    tb = s.read_bytes()
    cut = truncation_points(tb, tar_members(tb))[where]
    s.write_bytes(tb[:cut])
    idx_of(s).unlink()
    cp = run_sc("verify", s)
    assert_failed(cp, s)
    offsets = [int(m.group(1)) for x in defects(cp) for m in [re.search(r"offset (\d+)", x)] if m]
    assert offsets and all(o <= cut for o in offsets), defects(cp)
    cp = run_sc("verify", d / "tr.json")
    assert cp.returncode == 1
    assert f"{s}: FAILED" in cp.stdout.decode()
    assert f"{s}: {cut} bytes, the manifest says {len(tb)}" in defects(cp), defects(cp)


def rewrite_idx_line(idx, lineno, fn):
    lines = idx.read_text().split("\n")
    lines[lineno - 1] = fn(lines[lineno - 1])
    idx.write_text("\n".join(lines))


def _bump_offset(line):
    t = line.split(" ")
    t[1] = str(int(t[1]) + 512)
    return " ".join(t)


def _shrink_size(line):
    t = line.split(" ")
    t[2] = str(int(t[2]) - 1)
    return " ".join(t)


def _rename(line):
    t = line.split(" ")
    t[3] = t[3].replace("img", "gmi")
    return " ".join(t)


def _garble(line):
    t = line.split(" ")
    t[1] = "12x"
    return " ".join(t)


def _drop_member(line):
    return " ".join(line.split(" ")[:-4])


@pytest.mark.parametrize("how", [_bump_offset, _shrink_size, _rename, _garble, _drop_member])
@pytest.mark.parametrize("lineno", [2, 4])
def test_verify_wrong_index_line(packed, run_sc, how, lineno):
    _, shards = packed
    s = shards[2]
    idx = idx_of(s)
    rewrite_idx_line(idx, lineno, how)
    cp = run_sc("verify", s)
    assert_failed(cp, s)
    msgs = defects(cp)
    assert any(d.startswith(f"{idx}: line {lineno}: ") for d in msgs), msgs
    assert not any(f"line {n}" in d for d in msgs for n in (2, 3, 4, 5) if n != lineno), msgs


@pytest.fixture(scope="module")
def big_zst(tmp_path_factory, run_sp):
    """One shardpack .tar.zst of about 1.4 MB in 60 frames of at most 16 KiB."""
    src = tmp_path_factory.mktemp("big-src")
    bulk_tree(src, per_class=20, sizes=[(128, 128)])
    d = tmp_path_factory.mktemp("big-zst")
    run_ok_sp(run_sp, src, "-o", d / "b-%03d.tar.zst", "--frame-size", "16K")
    return d / "b-000.tar.zst"


@pytest.mark.parametrize("which,k", [("small", 0), ("small", 2), ("small", "last"),
                                     ("big", 1), ("big", "middle"), ("big", "last")])
def test_verify_damaged_zstd_frame(packed_zst, big_zst, tmp_path, run_sc, which, k):
    """A byte changed inside frame k: verify names frame k and its offset in the file, computed
    here from the seek table. 'small' is a 30 KB shard (6 frames of <= 4 KiB), 'big' 1.4 MB."""
    if which == "small":
        s = packed_zst[1][0]
    else:
        s = tmp_path / big_zst.name
        shutil.copyfile(big_zst, s)
    raw = s.read_bytes()
    table, _ = parse_seek_table(raw)
    assert len(table) >= 6
    k = {"last": len(table) - 1, "middle": len(table) // 2}.get(k, k)
    coff = sum(c for c, _, _ in table[:k])
    flip(s, coff + table[k][0] // 2, 0x5A)
    cp = run_sc("verify", s)
    assert_failed(cp, s)
    msgs = defects(cp)
    assert any(d.startswith(f"{s}: zstd frame {k} at offset {coff}") for d in msgs), (k, coff, msgs)
    assert not any(re.search(r"zstd frame (\d+) at", d).group(1) != str(k)
                   for d in msgs if "zstd frame" in d), msgs


@pytest.mark.parametrize("checksum", [None, "md5", "md5,sha256"])
def test_verify_manifest_checksum_mismatch(run_sp, pack_src, tmp_path, run_sc, checksum):
    d = tmp_path / "t"
    d.mkdir()
    run_ok_sp(run_sp, pack_src, "-o", d / "tr-%03d.tar", "-c", "4",
              *(["--checksum", checksum] if checksum else []))
    shards = shard_paths(d)
    want = {None: ["SHA-256"], "md5": ["MD5"], "md5,sha256": ["MD5", "SHA-256"]}[checksum]
    s = shards[1]
    m = next(x for x in tar_members(s.read_bytes()) if x.name.endswith(".json"))
    flip(s, m.offset_data + 2)          # same size, structure and index intact
    assert sc_ok(run_sc("verify", s)).startswith(f"{s}: ok")
    cp = run_sc("verify", d / "tr.json")
    assert cp.returncode == 1
    out = out_lines(cp)
    assert out[0].startswith(f"{shards[0]}: ok") and out[2].startswith(f"{shards[2]}: ok")
    assert out[1] == f"{s}: FAILED ({len(want)} defect{'s' if len(want) > 1 else ''})"
    assert out[3] == "3 shards, 1 failed"
    msgs = defects(cp)
    assert [x.split()[1] for x in msgs if x.startswith(f"{s}: ")] == want, msgs


def test_verify_manifest_size_and_count(packed, run_sc):
    d, shards = packed
    man = load_manifest(d / "tr.json")
    man["shardlist"][0]["nsamples"] += 1
    man["shardlist"][2]["filesize"] += 512
    (d / "tr.json").write_text(json.dumps(man))
    cp = run_sc("verify", d / "tr.json")
    assert cp.returncode == 1
    msgs = defects(cp)
    assert f"{shards[0]}: 4 samples, the manifest says 5" in msgs, msgs
    assert any(x.startswith(f"{shards[2]}: {shards[2].stat().st_size} bytes, the manifest says") for x in msgs)
    assert out_lines(cp)[1].startswith(f"{shards[1]}: ok")


# ---- 4. grouping errors -----------------------------------------------------------------


def test_key_appearing_again_is_an_error(tmp_path, run_sc):
    p = py_tar(tmp_path / "x.tar", [("a/x.jpg", b"1"), ("b/y.jpg", b"22"), ("a/x.txt", b"333")],
               tarfile.USTAR_FORMAT)
    third = tar_members(p.read_bytes())[2]
    cp = run_sc("ls", "--json", p)
    assert cp.returncode == 1
    assert [json.loads(l)["__key__"] for l in out_lines(cp)] == ["a/x", "b/y"]
    e = err_text(cp)
    assert f"offset {third.offset}" in e and "appears again" in e and "'a/x'" in e, e
    cp = run_sc("verify", p)
    assert_failed(cp, p)
    assert "appears again" in err_text(cp)
    cp = run_sc("index", p)
    assert cp.returncode == 1 and "appears again" in err_text(cp)
    assert not idx_of(p).exists()


def test_skipped_member_between_fields_keeps_the_sample(tmp_path, run_sc):
    p = py_tar(tmp_path / "x.tar", [("a.jpg", b"1"), ("d", None, tarfile.DIRTYPE, ""),
                                    ("README", b"r"), ("a.txt", b"22")], tarfile.USTAR_FORMAT)
    assert ls_json(run_sc, p) == [{"__key__": "a", "__url__": str(p), "fields": {"jpg": 1, "txt": 2}}]


@pytest.mark.parametrize("cmd,names", [("ls", ("a.jpg", "a.jpg")), ("verify", ("a.jpg", "a.jpg")),
                                       ("index", ("a.jpg", "a.jpg")), ("ls", ("a.JPG", "a.jpg")),
                                       ("verify", ("a.JPG", "a.jpg")), ("cat", ("a.JPG", "a.jpg"))])
def test_field_twice_is_an_error(tmp_path, run_sc, names, cmd):
    """formats/shard.md: a field given twice in one sample (compared after lower-casing) is an
    error, for ls, cat and verify. (index keeps the stored case, so a.JPG + a.jpg is not
    tested there.) verify reads fields as stored: a.JPG + a.jpg is its defect because the
    readers, which lower-case, refuse the sample; it names the second field's data offset."""
    p = py_tar(tmp_path / "x.tar", [(names[0], b"1"), (names[1], b"22"), ("b.txt", b"3")],
               tarfile.USTAR_FORMAT)
    second = tar_members(p.read_bytes())[1]
    cp = run_sc(cmd, p, "b.txt") if cmd == "cat" else run_sc(cmd, p)
    assert cp.returncode == 1, f"shardcat {cmd} on {names}: exit {cp.returncode}: {cp.stdout!r}"
    e = err_text(cp)
    where = second.offset_data if (cmd, names) == ("verify", ("a.JPG", "a.jpg")) else second.offset
    assert "twice" in e and f"offset {where}" in e, e


def test_non_utf8_names_are_not_dropped_from_json(tmp_path, run_sc):
    """Names are byte strings (formats/shard.md 2.1.1). ls --json must either show every
    sample with its key and fields, or fail loudly -- never silently drop them."""
    with tarfile.open(tmp_path / "x.tar", "w", format=tarfile.GNU_FORMAT, encoding="latin-1") as tf:
        for name, data in (("café.txt", b"1"), ("b.t\xe9xt", b"22"), ("c.txt", b"333")):
            tf.addfile(_tinfo(name, data), io.BytesIO(data))
    cp = run_sc("ls", "--json", tmp_path / "x.tar")
    if cp.returncode == 0:
        got = [json.loads(l) for l in out_lines(cp)]
        assert len(got) == 3
        assert all("__key__" in g and len(g["fields"]) == 1 for g in got), got
    else:
        assert cp.returncode == 1 and err_text(cp).strip()


# ---- 5. extract --------------------------------------------------------------------------


def test_extract_shardpack_shard(packed, tmp_path, run_sc):
    _, shards = packed
    dest = tmp_path / "x"
    dest.mkdir()
    cp = run_sc("extract", *shards, "-C", dest)
    assert cp.returncode == 0, err_text(cp)
    want = {}
    for s in shards:
        for m in tar_members(s.read_bytes()):
            want[m.name] = m.data
    assert snapshot(dest) == want


def test_extract_foreign_dot_slash(trees, pack_src, tmp_path, run_sp, run_sc):
    p = make_foreign("gnu-gnu-dot", trees, pack_src, tmp_path / "s", run_sp)
    dest = tmp_path / "x"
    dest.mkdir()
    cp = run_sc("extract", p, "-C", dest)
    ref = wds_reference(tar_of(p), p)
    want = {strip_dot_slash(m.name): m.data for s in ref for m in s["_members"]}
    # the links in the tar are refused (exit 1), everything else is written
    assert cp.returncode == 1
    e = err_text(cp)
    assert f"'./{SYMLINK}'" in e and f"'./{HARDLINK}'" in e, e
    assert snapshot(dest) == want


def test_extract_refuses_unsafe_members(tmp_path, run_sc):
    root = tmp_path / "root"
    dest = root / "dest"
    outside = root / "outside"
    dest.mkdir(parents=True)
    outside.mkdir()
    (outside / "target.txt").write_bytes(b"keep me")
    os.symlink(outside, dest / "pre")            # a link already in DIR: never followed
    abs_name = f"/{tmp_path.name}-abs-{os.getpid()}/x.txt"
    entries = [
        ("good/a.txt", b"good a"),
        (abs_name, b"absolute"),
        ("../evil.txt", b"dot dot"),
        ("good/../../evil2.txt", b"dot dot inside"),
        ("l.txt", None, tarfile.SYMTYPE, str(outside / "target.txt")),
        ("h.txt", None, tarfile.LNKTYPE, "../outside/target.txt"),
        ("ld", None, tarfile.SYMTYPE, str(outside)),
        ("ld/pwn.txt", b"through a link?"),
        ("pre/x.txt", b"through a link already there?"),
        ("z/b.txt", b"good b"),
    ]
    p = py_tar(tmp_path / "evil.tar", entries, tarfile.PAX_FORMAT)
    names = [m.name for m in tar_members(p.read_bytes())]
    assert abs_name in names and "../evil.txt" in names     # tarfile kept them as written
    cp = run_sc("extract", p, "-C", dest)
    assert cp.returncode == 1
    e = err_text(cp)
    for name in (abs_name, "../evil.txt", "good/../../evil2.txt", "l.txt", "h.txt", "ld", "pre/x.txt"):
        assert name in e, f"{name} not named in:\n{e}"
    # nothing outside DIR
    assert sorted(os.listdir(root)) == ["dest", "outside"]
    assert os.listdir(outside) == ["target.txt"] and (outside / "target.txt").read_bytes() == b"keep me"
    assert not Path(abs_name).exists() and not Path(abs_name).parent.exists()
    assert not (tmp_path / "evil.txt").exists() and not (tmp_path / "evil2.txt").exists()
    # the safe members are there, as plain files in plain folders
    assert (dest / "good/a.txt").read_bytes() == b"good a"
    assert (dest / "z/b.txt").read_bytes() == b"good b"
    assert (dest / "ld/pwn.txt").read_bytes() == b"through a link?"
    assert not (dest / "ld").is_symlink() and (dest / "pre").is_symlink()
    assert not (dest / "l.txt").exists() and not (dest / "l.txt").is_symlink()
    assert not (dest / "h.txt").exists()


# ---- 6. shard lists, pipes, exit statuses ------------------------------------------------


def test_brace_patterns_manifests_and_pipes(packed, run_sc):
    d, shards = packed
    per = [ls_json(run_sc, s) for s in shards]
    assert all(len(x) == 4 for x in per)
    allv = [x for p in per for x in p]
    assert ls_json(run_sc, str(d / "tr-{000..002}.tar")) == allv
    assert ls_json(run_sc, str(d / "tr-{002,000}.tar")) == per[2] + per[0]
    assert ls_json(run_sc, str(d / "tr-00{0..1}.tar"), shards[2]) == allv
    man = ls_json(run_sc, d / "tr.json")
    assert [(x["__key__"], x["fields"]) for x in man] == [(x["__key__"], x["fields"]) for x in allv]
    assert [x["__url__"] for x in man] == [str(s) for s in shards for _ in range(4)]
    piped = ls_json(run_sc, f"pipe:cat {shards[1]}")
    assert [{**x, "__url__": None} for x in piped] == [{**x, "__url__": None} for x in per[1]]
    assert {x["__url__"] for x in piped} == {f"pipe:cat {shards[1]}"}
    # pipe of a compressed stream, and a failing command
    gz = d / "g.tar.gz"
    gz.write_bytes(gzip.compress(shards[0].read_bytes()))
    assert [x["__key__"] for x in ls_json(run_sc, f"pipe:gzip -dc {gz}")] == [x["__key__"] for x in per[0]]
    cp = run_sc("ls", "pipe:false")
    assert cp.returncode == 1 and err_text(cp).strip()
    cp = run_sc("ls", f"pipe:cat {shards[0]}; exit 3")
    assert cp.returncode == 1 and "status 3" in err_text(cp)
    # info and verify take the same lists
    infos = [json.loads(l) for l in sc_ok(run_sc("info", "--json", str(d / "tr-{000..002}.tar"))).splitlines()]
    assert infos[-1]["total"]["shards"] == len(shards)  # the totals after the shards
    assert [i["url"] for i in infos[:-1]] == [str(s) for s in shards]
    assert sc_ok(run_sc("verify", f"pipe:cat {shards[0]}")).startswith(f"pipe:cat {shards[0]}: ok: 4 samples")


@pytest.mark.parametrize("args", [
    [],
    ["frobnicate", "x.tar"],
    ["ls"],
    ["ls", "--bogus", "x.tar"],
    ["ls", "--decode", "x.tar"],
    ["index", "--json", "x.tar"],
    ["info", "-C", "d", "x.tar"],
    ["cat", "x.tar"],
    ["cat", "x.tar", "a.jpg", "b.jpg"],
    ["cat", "x.tar", "nodot"],
    ["extract", "x.tar"],
    ["index"],
])
def test_bad_usage_exits_2(run_sc, tmp_path, args):
    (tmp_path / "x.tar").write_bytes(b"\0" * 1024)
    cp = run_sc(*args, cwd=tmp_path)
    assert cp.returncode == 2, f"{args}: exit {cp.returncode}: {err_text(cp)}"
    assert cp.stdout == b"" and err_text(cp).strip()


def test_help_exits_0(run_sc):
    cp = run_sc("--help")
    assert cp.returncode == 0 and b"usage: shardcat" in cp.stdout


def test_cat_missing_member_exits_1(packed, run_sc):
    _, shards = packed
    s = shards[0]
    key = ls_json(run_sc, s)[0]["__key__"]
    for arg, msg in ((f"{key}.nope", "has no field 'nope'"), ("zz/none.jpg", "no sample 'zz/none'")):
        cp = run_sc("cat", s, arg)
        assert cp.returncode == 1 and cp.stdout == b""
        assert msg in err_text(cp), err_text(cp)
    cp = run_sc("cat", s.parent / "missing.tar", f"{key}.jpg")
    assert cp.returncode == 1 and "missing.tar" in err_text(cp)
    cp = run_sc("ls", s.parent / "missing.tar")
    assert cp.returncode == 1 and "missing.tar" in err_text(cp)


# ---- behaving as a new user expects ------------------------------------------------------


def test_version_and_each_commands_help(run_sc):
    cp = run_sc("--version")
    assert cp.returncode == 0 and cp.stdout.decode().startswith("shardcat (libshard) ")
    for cmd, says in (("ls", "jpg:81234B"), ("verify", "--json"), ("cat", "manifest"),
                      ("extract", "-C DIR")):
        cp = run_sc(cmd, "--help")
        out = cp.stdout.decode()
        assert cp.returncode == 0 and out.startswith(f"usage: shardcat {cmd}"), out
        assert says in out and "stream URLS" not in out, out


def test_an_unknown_option_is_reported_once(run_sc, tmp_path):
    cp = run_sc("ls", "--bogus", tmp_path / "x.tar")
    err = err_text(cp)
    assert cp.returncode == 2 and err.count("bogus") == 1, err
    assert "unknown option '--bogus'" in err
    cp = run_sc("ls", "--cache-dir")
    assert cp.returncode == 2 and "--cache-dir wants a value" in err_text(cp)


def sc_ok_bytes(cp):
    assert cp.returncode == 0, err_text(cp)
    return cp.stdout


def test_cat_takes_a_manifest_or_pattern(packed, run_sc):
    d, shards = packed
    manifest = d / "tr.json"
    last = ls_json(run_sc, shards[-1])[-1]["__key__"]
    with tarfile.open(shards[-1]) as tf:
        want = tf.extractfile(f"{last}.cls").read()
    assert sc_ok_bytes(run_sc("cat", manifest, f"{last}.cls")) == want
    pattern = str(shards[0]).replace("000", "{000..002}")
    assert sc_ok_bytes(run_sc("cat", pattern, f"{last}.cls")) == want
    cp = run_sc("cat", manifest, "zz/none.jpg")
    assert cp.returncode == 1 and "no sample 'zz/none' in any of 3 shards" in err_text(cp)


def test_verify_json(packed, run_sc, tmp_path):
    d, shards = packed
    manifest = d / "tr.json"
    rows = [json.loads(l) for l in sc_ok(run_sc("verify", "--json", manifest)).splitlines()]
    whole = rows.pop()  # the set's line after its shards'
    assert whole == {"set": str(manifest), "listed": 3, "missing": [], "gaps": [],
                     "unlisted": [], "ok": True}, whole
    assert [r["url"] for r in rows] == [str(s) for s in shards]
    assert all(r["ok"] and r["manifest"] is True and r["defects"] == 0 and r["index"]
               and r["samples"] == 4 and r["error"] is None for r in rows), rows
    bad = tmp_path / "bad.tar"
    data = bytearray(shards[0].read_bytes())
    data[10] ^= 0xFF  # the first member's name: its header checksum fails
    bad.write_bytes(bytes(data))
    cp = run_sc("verify", "--json", bad, shards[1])
    rows = [json.loads(l) for l in cp.stdout.decode().splitlines()]
    assert cp.returncode == 1 and len(rows) == 2
    assert rows[0]["ok"] is False and rows[0]["defects"] >= 1 and rows[0]["manifest"] is None
    assert rows[1]["ok"] is True


def test_file_urls_are_paths_and_other_schemes_are_unsupported(packed, run_sc):
    d, shards = packed
    manifest = d / "tr.json"
    assert sc_ok(run_sc("ls", f"file://{shards[0]}")) == sc_ok(run_sc("ls", shards[0]))
    out = sc_ok(run_sc("verify", f"file://{manifest}"))
    assert "3 shards, 0 failed" in out and "index matches" in out
    for url, scheme in (("ftp://host/x.tar", "ftp"), ("file://host/x.tar", "file")):
        cp = run_sc("ls", url)
        assert cp.returncode == 1, err_text(cp)
        assert f"unsupported scheme '{scheme}'" in err_text(cp)
        assert "No such file" not in err_text(cp)


def stderr_on_a_terminal(cmd):
    """Runs cmd with stderr on a pseudo-terminal (stdout a pipe); its stdout and what the
    terminal showed."""
    import pty
    master, slave = pty.openpty()
    p = subprocess.Popen([os.fspath(c) for c in cmd], stdout=subprocess.PIPE, stderr=slave,
                         stdin=subprocess.DEVNULL, env=BASE_ENV)
    os.close(slave)
    shown = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # the child closed its end
            break
        if not chunk:
            break
        shown += chunk
    out = p.stdout.read()
    p.wait(timeout=60)
    os.close(master)
    return p.returncode, out, shown


@pytest.mark.parametrize("cmd", ["verify", "index", "stream"])
def test_progress_on_a_terminal_only(packed, shardcat, run_sc, tmp_path, cmd):
    d, shards = packed
    extra = ["--seed", "0"] if cmd == "stream" else []
    rc, out, shown = stderr_on_a_terminal([shardcat, cmd, *extra, *shards])
    assert rc == 0, shown
    unit = b"samples" if cmd == "stream" else b"shards"
    assert b"\r\x1b[K" in shown and b"/" + str(12 if cmd == "stream" else 3).encode() in shown, shown
    assert unit in shown
    rc, out, shown = stderr_on_a_terminal([shardcat, cmd, "-q", *extra, *shards])
    assert rc == 0 and b"\r" not in shown, shown
    cp = run_sc(cmd, *extra, *shards)  # stderr a pipe: no progress line
    assert cp.returncode == 0 and b"\r" not in cp.stderr


def test_bench_sweeps_names_the_bottleneck_and_the_ceiling(packed, run_sc):
    d, shards = packed
    cp = run_sc("bench", "--seconds", "0.3", "--warmup", "0.1", "--repeats", "1",
                "--threads", "1,2", "--streams", "1", "--batch-size", "4", "--image-size", "32",
                "--json", d / "tr.json", timeout=120)
    out = json.loads(sc_ok(cp))
    assert [(r["threads"], r["streams"], r["queue_depth"]) for r in out["runs"]] == [
        (1, 1, 64), (2, 1, 64)]
    stages = ("list", "fetch", "decompress", "parse", "shuffle", "batch", "decode", "deliver")
    for r in out["runs"]:
        assert r["samples_per_second"] > 0 and r["bottleneck"].startswith(stages), r
        assert list(r["stages"]) == list(stages) and r["stages"]["deliver"]["items"] > 0
    best = max(out["runs"], key=lambda r: r["samples_per_second"])
    assert out["best"]["samples_per_second"] == best["samples_per_second"]
    assert out["ceiling"]["samples_per_second"] > 0 and out["ceiling"]["threads"] == 2
    assert 0 < out["ceiling"]["images"] <= 12  # the set's samples, each as the pipeline made it
    cp = run_sc("bench", "--seconds", "0.2", "--warmup", "0", "--repeats", "1", "--threads", "1",
                "--streams", "1", "--batch-size", "4", "--image-size", "32", d / "tr.json")
    text = sc_ok(cp)
    assert "threads streams queue  samples/s  bottleneck" in text and "best: --threads 1" in text
    cp = run_sc("bench", "--seconds", "0.2", "--warmup", "0", "--repeats", "1", "--threads", "1",
                "--streams", "1", "--batch-size", "4", "--image-size", "32", "--stats",
                d / "tr.json")
    text = sc_ok(cp)
    assert all(f"        {n} " in text for n in stages) and "waiting for input" in text, text
    assert run_sc("bench", "--help").stdout.startswith(b"usage: shardcat bench")
    cp = run_sc("bench", "--threads", "x", d / "tr.json")
    assert cp.returncode == 2 and "--threads" in err_text(cp)


def test_stream_stats_split_the_fetch_streams_time(packed, packed_zst, run_sc):
    """stream --stats: the list stage, and the fetch streams' reading, decompressing and
    parsing, bytes as stored; a .tar.zst set decompresses, a plain one does not."""
    pat = re.compile(r"shardcat: stages: list (\d+) shards? in ([\d.]+) s \(indexes: 0 made, 0 "
                     r"from the cache\); fetch streams, summed: "
                     r"reading ([\d.]+) s \((\d+) bytes as stored\), decompressing [\d.]+ s "
                     r"\((\d+) bytes out\), parsing ([\d.]+) s")
    for (d, shards), zst in ((packed, False), (packed_zst, True)):
        cp = run_sc("stream", d / "tr.json", "--stats")
        sc_ok(cp)
        m = pat.search(err_text(cp))
        assert m, err_text(cp)
        n, _, _, stored, unzstd, _ = m.groups()
        assert int(n) == len(shards)
        assert int(stored) >= sum(p.stat().st_size for p in shards)
        assert (int(unzstd) > int(stored) / 2) == zst and (int(unzstd) == 0) != zst, m.group(0)


def test_stream_indexes_plain_tars_where_the_mode_needs_counts(packed, run_sc, tmp_path):
    """stream --mode equal over plain tars (no .idx, no manifest): each indexed into
    --index-cache once, found there the next time; --make-indexes never refuses by name."""
    _, shards = packed
    for p in shards:
        (tmp_path / p.name).write_bytes(p.read_bytes())
    plain = [tmp_path / p.name for p in shards]
    args = ["stream", *plain, "--mode", "equal", "--stats", "--seed", "3", "--index-cache",
            tmp_path / "ix"]
    first, second = run_sc(*args), run_sc(*args)
    sc_ok(first)
    sc_ok(second)
    n = len(shards)
    assert f"(indexes: {n} made, 0 from the cache)" in err_text(first)
    assert f"(indexes: 0 made, {n} from the cache)" in err_text(second)
    assert first.stdout == second.stdout and first.stdout
    assert not list(tmp_path.glob("*.idx")), "nothing beside the shards"
    cp = run_sc("stream", *plain, "--mode", "equal", "--make-indexes", "never")
    assert cp.returncode == 1 and "has none" in err_text(cp) and ".tar" in err_text(cp)


def test_bench_runs_the_peer_pipeline_beside(packed, run_sc, shardcat):
    """--peer: the WebDataset + PIL pipeline (python3 -m libshard.peer) on the same shards, its
    samples/s beside the best setting's, in the text and the JSON."""
    d, _ = packed
    env = {"PYTHONPATH": str(Path(shardcat).resolve().parent.parent / "python"),
           "SHARD_PYTHON": "/usr/bin/python3"}
    probe = subprocess.run(["/usr/bin/python3", "-c", "import libshard.peer, torch, torchvision"],
                           env={**os.environ, **env}, capture_output=True)
    if probe.returncode:
        pytest.skip("libshard's Python package with torch and torchvision is not importable "
                    "beside this shardcat: " + probe.stderr.decode(errors="replace")[-200:])
    args = ("bench", "--seconds", "0.5", "--warmup", "0.2", "--repeats", "1", "--threads", "1",
            "--streams", "1", "--batch-size", "4", "--image-size", "32", "--peer")
    out = json.loads(sc_ok(run_sc(*args, "--json", d / "tr.json", env=env, timeout=300)))
    assert out["peer"]["samples_per_second"] > 0 and out["peer"]["workers"] == 1, out["peer"]
    assert "PIL" in out["peer"]["pipeline"], out["peer"]
    text = sc_ok(run_sc(*args, d / "tr.json", env=env, timeout=300))
    assert re.search(r"^peer: .*PIL.*: [\d.]+ samples/s$", text, re.M), text
    assert re.search(r"x the peer$", text, re.M), text
    bad = sc_ok(run_sc(*args, d / "tr.json", env={**env, "SHARD_PYTHON": "/nonexistent/python"}))
    assert ("peer: not run: /nonexistent/python -m libshard.peer: cannot run it: No such file "
            "or directory (it needs an interpreter that imports libshard and torch: set "
            "SHARD_PYTHON, e.g. SHARD_PYTHON=$VIRTUAL_ENV/bin/python)") in bad, bad


def test_bench_says_why_the_peer_did_not_run(packed, run_sc, tmp_path):
    """An interpreter that fails (no libshard, no torch): the line says what it said last
    and how to point shardcat at another, and the bench itself succeeds."""
    d, _ = packed
    py = tmp_path / "python3"
    py.write_text("#!/bin/sh\necho 'Traceback (most recent call last):' >&2\n"
                  "echo \"ModuleNotFoundError: No module named 'torch'\" >&2\nexit 1\n")
    py.chmod(0o755)
    out = sc_ok(run_sc("bench", "--seconds", "0.3", "--warmup", "0.1", "--repeats", "1",
                       "--threads", "1", "--streams", "1", "--batch-size", "4",
                       "--image-size", "32", "--peer", d / "tr.json",
                       env={"SHARD_PYTHON": str(py)}))
    assert (f"peer: not run: {py} -m libshard.peer: ModuleNotFoundError: No module named "
            f"'torch' (it needs an interpreter that imports libshard and torch: set "
            f"SHARD_PYTHON") in out, out


def test_stream_says_a_split_from_the_environment_and_names_bad_values(packed, run_sc):
    """$RANK/$WORLD_SIZE split the data only with a word on stderr; a value that is not a
    number is named as given, a rank past the world size by the flags or variables that
    gave it; all are usage errors (2). Flags win over the environment."""
    d, _ = packed
    whole = run_sc("stream", d / "tr.json", "--seed", "0")
    sc_ok(whole)
    n = len(whole.stdout.splitlines())
    part = run_sc("stream", d / "tr.json", "--seed", "0", env={"RANK": "1", "WORLD_SIZE": "4"})
    sc_ok(part)
    assert "reading rank 1 of 4, from $RANK and $WORLD_SIZE" in err_text(part)
    assert 0 < len(part.stdout.splitlines()) < n
    flags = run_sc("stream", d / "tr.json", "--seed", "0", "--rank", "0", "--world-size", "1",
                   env={"RANK": "1", "WORLD_SIZE": "4"})
    sc_ok(flags)
    assert len(flags.stdout.splitlines()) == n and "reading rank" not in err_text(flags)
    bad = run_sc("stream", d / "tr.json", env={"RANK": "abc", "WORLD_SIZE": "2"})
    assert bad.returncode == 2 and "$RANK='abc' is not a whole number" in err_text(bad)
    past = run_sc("stream", d / "tr.json", "--rank", "2", "--world-size", "2")
    assert past.returncode == 2 and "--rank=2 is not below --world-size=2" in err_text(past)
    past = run_sc("stream", d / "tr.json", env={"RANK": "3", "WORLD_SIZE": "2"})
    assert past.returncode == 2 and "$RANK=3 is not below $WORLD_SIZE=2" in err_text(past)


def test_stream_help_is_its_own(run_sc):
    cp = run_sc("stream", "--help")
    assert cp.returncode == 0
    out = cp.stdout.decode()
    assert out.startswith("usage: shardcat stream") and "$RANK" in out and "--mix" in out
    assert "extract SHARD" not in out, "not the global help"


def test_info_ends_with_totals(packed, run_sc):
    """info over a manifest (or several shards) ends with the data set's totals: shards,
    samples, members, bytes, fields, and the manifest's classes; one shard alone has none."""
    d, shards = packed
    man = json.loads((d / "tr.json").read_text())
    cp = run_sc("info", "--json", d / "tr.json")
    sc_ok(cp)
    rows = [json.loads(l) for l in cp.stdout.decode().splitlines()]
    per, total = rows[:-1], rows[-1]["total"]
    assert len(per) == len(shards) == total["shards"]
    assert total["samples"] == sum(r["samples"] for r in per) == 12
    assert total["file_bytes"] == sum(p.stat().st_size for p in shards)
    assert total["fields"] == {k: sum(r["fields"].get(k, 0) for r in per)
                               for k in total["fields"]}
    assert total["classes"] == man["libshard"]["classes"]
    text = run_sc("info", d / "tr.json")
    sc_ok(text)
    out = text.stdout.decode()
    assert f"total: {len(shards)} shards" in out and "samples      12 (" in out
    assert f"classes      {len(man['libshard']['classes'])} (from the manifest)" in out
    one = run_sc("info", shards[0])
    assert "total:" not in one.stdout.decode()


def test_a_manifest_copied_away_from_its_shards_says_where_names_lead(packed, run_sc, tmp_path):
    d, _ = packed
    other = tmp_path / "other"
    other.mkdir()
    (other / "tr.json").write_bytes((d / "tr.json").read_bytes())
    for cmd in (["ls"], ["stream", "--seed", "1"]):
        cp = run_sc(*cmd, other / "tr.json")
        assert cp.returncode == 1
        assert "resolve against the manifest's own folder" in err_text(cp), err_text(cp)
    cp = run_sc("ls", d / "nope-000.tar")  # not from a manifest: no such word
    assert cp.returncode == 1 and "resolve against" not in err_text(cp)
