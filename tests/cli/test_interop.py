"""shardpack's output read by other tools: GNU tar, bsdtar, Python tarfile, the zstd CLI;
the DALI index checked against the bytes; the zstd seek table parsed by hand."""
import os
import re
import shutil
import struct
import subprocess
import tarfile
from pathlib import Path

import pytest

from conftest import (BASE_ENV, expected_keys, group_samples, idx_path, image_bytes, load_manifest,
                      make_tree, ok, parse_idx, parse_seek_table, read_members, sample_json, sha256,
                      shard_paths, snapshot, split_name, tar_bytes, xxh64, zstd_decompress,
                      zstd_frame_header)

LONG_DIR = "d" * 70 + "/" + "e" * 60 + ".jpg"   # > 100 bytes: needs the ustar prefix field
LONG_BASE = "x" * 110 + ".png"                    # basename > 100 bytes: needs a pax header
INTEROP = {
    "cat/a.jpg": 1,
    "cat/a.png": 2,
    "cat/sp ace.jpg": 3,
    "cat/" + LONG_BASE: 4,
    "dog/" + LONG_DIR: 5,
    "dog/plain.bmp": 6,
    "dog/q.jpeg": 7,
    "emu/e1.jpg": (8, (40, 40)),
    "emu/e2.png": (9, (40, 40)),
}
CLASSES = ["cat", "dog", "emu"]


def tool(*cmd, input=None, cwd=None):
    cp = subprocess.run(list(map(os.fspath, cmd)), input=input, capture_output=True, cwd=cwd,
                        env={**BASE_ENV, "TZ": "UTC"})
    assert cp.returncode == 0, f"{cmd}: {cp.stderr.decode(errors='replace')}"
    return cp.stdout


def expected_files(src):
    """{member name: bytes} that the shards of src must hold."""
    keys = expected_keys(list(src))
    out = {}
    for rel, data in src.items():
        cls = rel.split("/")[0]
        label = CLASSES.index(cls)
        key = keys[rel]
        out[f"{key}.{rel.rsplit('.', 1)[1].lower()}"] = data
        out[f"{key}.cls"] = str(label).encode()
        out[f"{key}.json"] = sample_json(rel, label, cls)
    return out


@pytest.fixture
def packed(run_sp, tmp_path):
    """The INTEROP tree packed as .tar and as .tar.zst with the same options."""
    src = make_tree(tmp_path / "src", INTEROP)
    for ext, d in ((".tar", "t"), (".tar.zst", "z")):
        (tmp_path / d).mkdir()
        frames = ["--frame-size", "6K"] if ext == ".tar.zst" else []
        ok(run_sp(tmp_path / "src", "-o", tmp_path / d / f"train-%06d{ext}", "-c", "4", *frames))
    return src, tmp_path / "t", tmp_path / "z"


def python_extract(shard, dest):
    with tarfile.open(shard, encoding="utf-8") as tf:
        for m in tf.getmembers():
            assert m.isreg()
            p = Path(dest) / m.name
            assert Path(os.path.normpath(p)).is_relative_to(dest)
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(tf.extractfile(m).read())


def test_tar_readers_agree(packed, tmp_path):
    src, tdir, _ = packed
    shards = shard_paths(tdir)
    assert len(shards) == 3
    for s in shards:
        gnu = tool("tar", "--quoting-style=literal", "-tf", s).decode().splitlines()
        bsd = tool("bsdtar", "-tf", s).decode().splitlines()
        with tarfile.open(s, encoding="utf-8") as tf:
            py = tf.getnames()
        idx = [c[3] for line in parse_idx(idx_path(s)) for c in line]
        assert gnu == bsd == py == idx, s.name
        verbose = tool("tar", "--numeric-owner", "-tvf", s).decode().splitlines()
        assert all(re.match(r"-rw-r--r-- 0/0 +\d+ 1970-01-01 00:00 ", l) for l in verbose), verbose
    dests = {}
    for name in ("gnu", "bsd", "py"):
        d = tmp_path / f"x-{name}"
        d.mkdir()
        for s in shards:
            if name == "gnu":
                tool("tar", "-xf", s, "-C", d)
            elif name == "bsd":
                tool("bsdtar", "-xf", s, "-C", d)
            else:
                python_extract(s, d)
        dests[name] = snapshot(d)
    want = expected_files(src)
    for name, snap in dests.items():
        assert sorted(snap) == sorted(want), name
        for k, v in want.items():
            assert snap[k] == v, f"{name}: {k} differs from the source"


def test_zstd_pipe_and_plain_equivalence(packed):
    _, tdir, zdir = packed
    tshards, zshards = shard_paths(tdir), shard_paths(zdir, ".tar.zst")
    assert [p.name[: -len(".tar")] for p in tshards] == [p.name[: -len(".tar.zst")] for p in zshards]
    for t, z in zip(tshards, zshards):
        listing = subprocess.run(["bash", "-o", "pipefail", "-c", 'zstd -dc "$1" | tar -tf -', "_", str(z)],
                                 capture_output=True, env=BASE_ENV)
        assert listing.returncode == 0, listing.stderr
        names = listing.stdout.decode().splitlines()
        assert names == tool("tar", "-tf", t).decode().splitlines()
        assert tool("zstd", "-dc", z) == t.read_bytes(), f"{z.name} does not decompress to {t.name}"
        tool("zstd", "-tq", z)
        assert tool("tar", "--zstd", "-tf", z).decode().splitlines() == names
        assert tool("bsdtar", "-tf", z).decode().splitlines() == names
        assert idx_path(t).read_bytes() == idx_path(z).read_bytes(), "one .idx must serve .tar and .tar.zst"
    mt, mz = load_manifest(tdir / "train.json"), load_manifest(zdir / "train.json")
    for et, ez in zip(mt["shardlist"], mz["shardlist"]):
        assert ez["tarsize"] == et["tarsize"] == et["filesize"]
        assert ez["nsamples"] == et["nsamples"]
        assert ez["filesize"] < et["filesize"]


def gnu_blocks(shard):
    """{member name: header block number} from GNU tar --block-number."""
    out = {}
    for line in tool("tar", "--quoting-style=literal", "--block-number", "-tf", shard).decode().splitlines():
        m = re.match(r"block (\d+): (.*)$", line)
        if m and not m.group(2).startswith("** "):
            out[m.group(2)] = int(m.group(1))
    return out


@pytest.mark.parametrize("ext", [".tar", ".tar.zst"])
def test_idx_points_at_member_bytes(packed, ext):
    _, tdir, zdir = packed
    d = tdir if ext == ".tar" else zdir
    for s in shard_paths(d, ext):
        tb = tar_bytes(s)
        members = read_members(tb)
        idx = parse_idx(idx_path(s))
        samples = group_samples(members)
        assert len(idx) == len(samples)
        blocks = gnu_blocks(s) if ext == ".tar" else {}
        prev = -1
        for line, (key, ms) in zip(idx, samples):
            assert len(line) == len(ms), key
            assert {split_name(c[3])[0] for c in line} == {key}, "one line = one sample"
            for (field, off, size, name), m in zip(line, ms):
                assert name == m["name"] and field == m["field"]
                assert off % 512 == 0 and off > prev
                prev = off
                assert off == m["offset_data"] and size == m["size"]
                assert tb[off:off + size] == m["data"], f"{name}: idx slice is not the member's bytes"
                if blocks and not m["info"].pax_headers:
                    assert off == (blocks[name] + 1) * 512, f"{name}: differs from wds2idx's rule"
        if ext == ".tar.zst":
            # Through the seek table: the frame holding offset-1 holds the whole sample.
            raw = s.read_bytes()
            table, _ = parse_seek_table(raw)
            cstarts, dstarts = [0], [0]
            for c, dsz, _ in table:
                cstarts.append(cstarts[-1] + c)
                dstarts.append(dstarts[-1] + dsz)
            cache = {}
            for line in idx:
                frames = set()
                for field, off, size, name in line:
                    j = max(i for i in range(len(table)) if dstarts[i] <= off - 1)
                    frames.add(j)
                    if j not in cache:
                        cache[j] = zstd_decompress(raw[cstarts[j]:cstarts[j + 1]])
                    rel = off - dstarts[j]
                    assert cache[j][rel:rel + size] == tb[off:off + size], name
                    assert off + size <= dstarts[j + 1]
                assert len(frames) == 1, f"sample {line[0][3]} spans frames {frames}"


def test_xxh64_helper():
    """The checksum model used below, checked against known values and the zstd CLI."""
    assert xxh64(b"") == 0xEF46DB3751D8E999
    assert xxh64(b"abc") == 0x44BC2CF5AD770999
    data = image_bytes(5, "PNG", (40, 40)) * 3
    frame = tool("zstd", "-c", "--check", "-q", input=data)
    assert struct.unpack("<I", frame[-4:])[0] == xxh64(data) & 0xFFFFFFFF


def frame_plan(sample_sizes, frame_size):
    """formats/zstd.md 2.1: the frame cut rule, as d_size per frame."""
    frames, cur = [], 0
    for s in sample_sizes:
        if cur and cur + s > frame_size:
            frames.append(cur)
            cur = 0
        cur += s
    frames.append(cur + 1024)
    return frames


def test_seek_table(run_sp, tmp_path):
    sizes = [(16, 16), (40, 40), (24, 56), (56, 24), (32, 32), (48, 48)]
    files = {f"c{i % 2}/im{i:02d}.png": (300 + i, sizes[i % len(sizes)]) for i in range(14)}
    make_tree(tmp_path / "src", files)
    out = tmp_path / "out"
    out.mkdir()
    frame_size = 8192
    ok(run_sp(tmp_path / "src", "-o", out / "t-%06d.tar.zst", "-c", "8", "--frame-size", str(frame_size),
              "--level", "5"))
    man = load_manifest(out / "t.json")
    shards = shard_paths(out, ".tar.zst")
    assert len(shards) == 2
    max_frames = 0
    for s, entry in zip(shards, man["shardlist"]):
        raw = s.read_bytes()
        tb = tool("zstd", "-dc", s)
        table, tstart = parse_seek_table(raw)
        max_frames = max(max_frames, len(table))
        assert sum(c for c, _, _ in table) == tstart == len(raw) - (17 + 12 * len(table))
        assert sum(d for _, d, _ in table) == len(tb) == entry["tarsize"]
        members = read_members(tb)
        samples = group_samples(members)
        starts = [ms[0]["offset"] for _, ms in samples]
        key_at = {m["offset"]: m["key"] for m in members}
        prev_key = {}
        for a, b in zip(members, members[1:]):
            prev_key[b["offset"]] = a["key"]
        c0 = d0 = 0
        for i, (csize, dsize, checksum) in enumerate(table):
            frame = raw[c0:c0 + csize]
            fcs, has_checksum, dict_flag = zstd_frame_header(frame)
            assert fcs == dsize and has_checksum == 1 and dict_flag == 0, (i, fcs, dsize)
            content = tool("zstd", "-dc", input=frame)  # decompresses on its own
            assert content == tb[d0:d0 + dsize], f"{s.name} frame {i}"
            assert struct.unpack("<I", frame[-4:])[0] == checksum, "table checksum != frame's"
            assert checksum == xxh64(content) & 0xFFFFFFFF
            if i > 0:
                assert d0 in starts, f"{s.name}: frame {i} starts at {d0}, not at a sample"
                assert key_at[d0] != prev_key[d0], "a sample continues across frames"
            c0 += csize
            d0 += dsize
        ssizes = [b - a for a, b in zip(starts, starts[1:] + [len(tb) - 1024])]
        assert [d for _, d, _ in table] == frame_plan(ssizes, frame_size)
    assert max_frames >= 3, "the test needs several frames per shard"


def resolve(manifest, url):
    return os.path.normpath(os.path.join(os.path.dirname(manifest), url))


def check_urls(manifest):
    man = load_manifest(manifest)
    assert man["shardlist"]
    for e in man["shardlist"]:
        url = e["url"]
        assert not url.startswith("/") and "://" not in url, f"absolute url {url!r}"
        assert not url.startswith("./") and ".." not in url.split("/"), url
        p = resolve(manifest, url)
        assert os.path.isfile(p), f"{url} does not resolve from {manifest}"
        assert sha256(Path(p).read_bytes()) == e["sha256"]
    return man


def test_manifest_urls_resolve_relative_to_manifest(run_sp, tmp_path):
    make_tree(tmp_path / "src", INTEROP)
    (tmp_path / "a").mkdir()
    (tmp_path / "b/shards/sub").mkdir(parents=True)
    ok(run_sp(tmp_path / "src", "-o", tmp_path / "a/train-%06d.tar", "-c", "4"))
    man = check_urls(tmp_path / "a/train.json")
    assert [e["url"] for e in man["shardlist"]] == [f"train-{i:06d}.tar" for i in range(3)]
    # A manifest above the shards: urls carry the sub-folder, relative to the manifest.
    ok(run_sp("src", "-o", "b/shards/sub/x-%06d.tar.zst", "-c", "4", "--manifest", "b/all.json", cwd=tmp_path))
    man = check_urls(tmp_path / "b/all.json")
    assert [e["url"] for e in man["shardlist"]] == [f"shards/sub/x-{i:06d}.tar.zst" for i in range(3)]
    # The dataset folder can move: relative urls still resolve.
    shutil.move(tmp_path / "b", tmp_path / "moved")
    check_urls(tmp_path / "moved/all.json")


def test_manifest_in_sibling_folder_has_relative_urls(run_sp, tmp_path):
    """A manifest beside (not above) the shard folder: formats/manifest.md says libshard
    writes only relative urls, so the dataset stays relocatable; refusing is acceptable,
    an absolute path is not."""
    make_tree(tmp_path / "src", {"c/a.jpg": 1})
    (tmp_path / "shards").mkdir()
    (tmp_path / "meta").mkdir()
    cp = run_sp(tmp_path / "src", "-o", tmp_path / "shards/t-%06d.tar", "--manifest", tmp_path / "meta/t.json")
    if cp.returncode != 0:
        assert not (tmp_path / "meta/t.json").exists()
        return
    url = load_manifest(tmp_path / "meta/t.json")["shardlist"][0]["url"]
    assert not os.path.isabs(url), f"absolute url {url!r} in the manifest"
    assert os.path.isfile(resolve(tmp_path / "meta/t.json", url))


def test_non_ascii_names(run_sp, tmp_path):
    """UTF-8 names (pax path records) must pack, and every reader must agree on them."""
    src = make_tree(tmp_path / "src", {"caf\u00e9/na\u00efve.jpg": 1, "caf\u00e9/plain.jpg": 2})
    (tmp_path / "out").mkdir()
    cp = run_sp(tmp_path / "src", "-o", tmp_path / "out/t-%06d.tar")
    assert cp.returncode == 0, f"exit {cp.returncode}: {cp.stderr.decode(errors='replace')}"
    s = tmp_path / "out/t-000000.tar"
    gnu = tool("tar", "--quoting-style=literal", "-tf", s).decode().splitlines()
    bsd = tool("bsdtar", "-tf", s).decode().splitlines()
    with tarfile.open(s, encoding="utf-8") as tf:
        py = tf.getnames()
    assert gnu == bsd == py
    assert "caf\u00e9/na\u00efve.jpg" in py
    man = load_manifest(tmp_path / "out/t.json")
    assert man["libshard"]["classes"] == ["caf\u00e9"]
    ms = {m["name"]: m["data"] for m in read_members(s.read_bytes())}
    assert ms["caf\u00e9/na\u00efve.json"] == sample_json("caf\u00e9/na\u00efve.jpg", 0, "caf\u00e9")
    assert ms["caf\u00e9/na\u00efve.jpg"] == src["caf\u00e9/na\u00efve.jpg"]
