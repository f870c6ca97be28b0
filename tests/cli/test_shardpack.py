"""shardpack: layout, keys, rotation, reproducibility, shuffle, errors, parts, list files,
manifest. Every check runs the real tool on images made here with PIL."""
import io
import json
import os
import re
import subprocess
from pathlib import Path

import pytest
from PIL import Image

from conftest import (all_keys_in_order, expected_keys, group_samples, hidden_files,
                      idx_path, image_bytes, is_root, load_manifest, make_tree, md5, ok, out_text,
                      parse_idx, read_members, sample_json, sha256, shard_paths, snapshot,
                      spec_order, summary_line, tar_bytes, bulk_tree, visible_names)

# ---- basic layout ------------------------------------------------------------------------

BASIC = {
    "cat/B.JPG": 1,                   # upper-case extension: field "jpg"
    "cat/a.jpg": 2,
    "cat/a.png": 3,                   # same stem as a.jpg: key cat/a_1
    "cat/img.1.jpg": 4,               # '.' in the stem: cat/img_1
    "cat/img_1.jpeg": 5,              # clashes with the key above: cat/img_1_1
    "cat/sub dir/deeper/z.Tiff": 6,   # nesting, whitespace, mixed-case extension
    "cat/sub dir/x y.png": 7,
    "dog/d1.bmp": 8,
    "dog/d2.ppm": 9,
    "dog/nested/n1.jpg": 10,
    "v1.0/x.png": 11,                 # '.' in a folder name: v1_0/x
    "v1.0/y.pgm": 12,
}
BASIC_KEYS = {
    "cat/B.JPG": ("cat/B", "jpg"),
    "cat/a.jpg": ("cat/a", "jpg"),
    "cat/a.png": ("cat/a_1", "png"),
    "cat/img.1.jpg": ("cat/img_1", "jpg"),
    "cat/img_1.jpeg": ("cat/img_1_1", "jpeg"),
    "cat/sub dir/deeper/z.Tiff": ("cat/sub_dir/deeper/z", "tiff"),
    "cat/sub dir/x y.png": ("cat/sub_dir/x_y", "png"),
    "dog/d1.bmp": ("dog/d1", "bmp"),
    "dog/d2.ppm": ("dog/d2", "ppm"),
    "dog/nested/n1.jpg": ("dog/nested/n1", "jpg"),
    "v1.0/x.png": ("v1_0/x", "png"),
    "v1.0/y.pgm": ("v1_0/y", "pgm"),
}
HIDDEN = {"cat/.hidden.jpg": 20, ".hiddenclass/h.jpg": 21, "dog/.secret/s.jpg": 22}
NOT_IMAGES = {"cat/notes.txt": b"notes\n", "dog/labels.csv": b"a,b\n", "dog/nested/n1.jpg.bak": b"x"}
CLASSES = ["cat", "dog", "v1.0"]


def make_basic(root):
    src = make_tree(root, BASIC)
    make_tree(root, HIDDEN)
    make_tree(root, NOT_IMAGES)
    return src


def test_basic_layout_labels_keys(run_sp, tmp_path):
    src = make_basic(tmp_path / "src")
    (tmp_path / "out").mkdir()
    err = ok(run_sp(tmp_path / "src", "-o", tmp_path / "out/train-%06d.tar"))

    # stderr (not a tty): a line per kind of image the loader does not decode (bmp, tiff,
    # pnm), then the summary line, counting the ignored non-images.
    lines = err.splitlines()
    assert len(lines) == 4, err
    assert all("packed that the loader does not decode" in l for l in lines[:3]), err
    lines = lines[3:]
    assert lines[0].startswith("shardpack: ") and "samples" in lines[0]
    m = re.search(r"ignored (\d+)", lines[0])
    assert m and int(m.group(1)) == len(NOT_IMAGES), lines[0]

    assert visible_names(tmp_path / "out") == ["train-000000.cols", "train-000000.idx",
                                               "train-000000.tar", "train.json"]
    man = load_manifest(tmp_path / "out/train.json")
    assert man["libshard"]["classes"] == CLASSES
    assert expected_keys(list(BASIC)) == {p: k for p, (k, _) in BASIC_KEYS.items()}  # the model agrees

    members = read_members((tmp_path / "out/train-000000.tar").read_bytes())
    samples = group_samples(members)
    assert len(samples) == len(BASIC) == man["shardlist"][0]["nsamples"]
    by_key = dict(samples)
    assert len(by_key) == len(samples), "a key appears in two samples"
    for rel, (key, field) in BASIC_KEYS.items():
        label = CLASSES.index(rel.split("/")[0])
        ms = by_key[key]
        fields = [x["field"] for x in ms]
        assert fields == sorted(fields), f"{key}: members not sorted by field: {fields}"
        assert sorted(fields) == sorted(["cls", field, "json"]), (key, fields)
        got = {x["field"]: x["data"] for x in ms}
        assert got[field] == src[rel], f"{key}.{field}: image bytes changed"
        assert got["cls"] == str(label).encode()
        assert got["json"] == sample_json(rel, label, rel.split("/")[0])
        for x in ms:
            ti = x["info"]
            assert ti.isreg() and ti.mode == 0o644 and ti.uid == 0 and ti.gid == 0 and ti.mtime == 0
            assert ti.uname == "" and ti.gname == ""
    # the columns beside the index: each sample's image size as PIL's Image.size, in tar
    # order; "-" for a format the loader does not decode
    cols = (tmp_path / "out/train-000000.cols").read_text().splitlines()
    assert cols[0] == f"libshard-cols 1 {len(samples)} width:u32 height:u32", cols[0]
    want = []
    for key, ms in samples:
        got = {x["field"]: x["data"] for x in ms}
        image = next((got[f] for f in ("jpg", "jpeg", "png", "webp") if f in got), None)
        want.append("%d %d" % Image.open(io.BytesIO(image)).size if image else "- -")
    assert cols[1:] == want
    names = " ".join(x["name"] for x in members)
    for hidden in ("hidden", "secret", "notes", "labels", "bak"):
        assert hidden not in names


def test_sample_order_is_bytewise_path_order(run_sp, tmp_path):
    """formats/manifest.md: shuffle_seed null means samples come in sorted-path order, and
    formats/shard.md 1.6 sorts all input paths byte-wise ('-' sorts before '/')."""
    files = {"c/extra/1.jpg": 1, "c/extra-1.jpg": 2, "c/extra.jpg": 3, "c/extra0.jpg": 4}
    make_tree(tmp_path / "src", files)
    (tmp_path / "out").mkdir()
    ok(run_sp(tmp_path / "src", "-o", tmp_path / "out/t-%06d.tar"))
    keys = all_keys_in_order(tmp_path / "out")
    want = expected_keys(list(files))
    assert keys == [want[p] for p in spec_order(files)]


# ---- rotation ---------------------------------------------------------------------------


def test_maxcount_rotation(run_sp, tmp_path):
    src = bulk_tree(tmp_path / "src", per_class=8)  # 24 samples
    (tmp_path / "out").mkdir()
    ok(run_sp(tmp_path / "src", "-o", tmp_path / "out/train-%06d.tar", "--maxcount", "5"))
    shards = shard_paths(tmp_path / "out")
    assert [p.name for p in shards] == [f"train-{i:06d}.tar" for i in range(5)]
    counts = [len(group_samples(read_members(p.read_bytes()))) for p in shards]
    assert counts == [5, 5, 5, 5, 4]
    assert [len(parse_idx(idx_path(p))) for p in shards] == counts
    man = load_manifest(tmp_path / "out/train.json")
    assert [e["nsamples"] for e in man["shardlist"]] == counts
    assert man["libshard"]["nsamples"] == 24
    want = expected_keys(list(src))
    assert all_keys_in_order(tmp_path / "out") == [want[p] for p in spec_order(src)]


def sample_sizes(tb):
    """Bytes each sample takes in the tar (headers + padded data)."""
    ms = read_members(tb)
    samples = group_samples(ms)
    starts = [s[1][0]["offset"] for s in samples] + [len(tb) - 1024]
    return [b - a for a, b in zip(starts, starts[1:])], samples


def test_maxsize_rotation(run_sp, tmp_path):
    sizes = [(16, 16), (40, 40), (24, 48), (56, 40), (16, 64)]
    bulk_tree(tmp_path / "src", per_class=6, sizes=sizes)
    make_tree(tmp_path / "src", {"bee/zz_big.png": (99, (96, 96))})  # bigger than maxsize
    (tmp_path / "out").mkdir()
    maxsize = 12 * 1024
    ok(run_sp(tmp_path / "src", "-o", tmp_path / "out/train-%06d.tar", "--maxsize", "12KiB"))
    man = load_manifest(tmp_path / "out/train.json")
    assert man["libshard"]["options"]["maxsize"] == maxsize
    shards = shard_paths(tmp_path / "out")
    assert len(shards) >= 4
    per_shard = []
    for p in shards:
        tb = p.read_bytes()
        sz, samples = sample_sizes(tb)
        assert len(tb) == sum(sz) + 1024, "tar = samples + two zero blocks, no record padding"
        assert sum(sz) <= maxsize or len(sz) == 1, f"{p.name}: {sum(sz)} > {maxsize} with {len(sz)} samples"
        per_shard.append((sz, [k for k, _ in samples]))
        if any(k == "bee/zz_big" for k, _ in samples):
            assert len(samples) == 1, "an oversized sample shares its shard"
            assert sum(sz) > maxsize
    for (a, _), (b, _) in zip(per_shard, per_shard[1:]):
        assert sum(a) + b[0] > maxsize, "a shard was closed although the next sample fitted"
    assert sum(len(k) for _, k in per_shard) == man["libshard"]["nsamples"] == 19


@pytest.mark.parametrize("arg,value", [("20KB", 20000), ("20K", 20480), ("1.5M", 1572864), ("3e4", 30000)])
def test_maxsize_units(run_sp, tmp_path, arg, value):
    make_tree(tmp_path / "src", {"c/a.jpg": 1})
    (tmp_path / "out").mkdir()
    ok(run_sp(tmp_path / "src", "-o", tmp_path / "out/t-%06d.tar", "--maxsize", arg))
    assert load_manifest(tmp_path / "out/t.json")["libshard"]["options"]["maxsize"] == value


# ---- reproducibility --------------------------------------------------------------------


@pytest.mark.parametrize("ext", [".tar", ".tar.zst"])
def test_reproducible_runs_and_jobs(run_sp, tmp_path, ext):
    bulk_tree(tmp_path / "src", per_class=8)
    extra = ["--maxcount", "5", "--frame-size", "3K"] if ext.endswith("zst") else ["--maxcount", "5"]
    for d in "abcd":
        (tmp_path / d).mkdir()
    # a: relative paths, 1 job
    ok(run_sp("src", "-o", f"a/train-%06d{ext}", "--jobs", "1", *extra, cwd=tmp_path))
    # b: absolute paths, 3 jobs, after touching every source's mtime
    for p in (tmp_path / "src").rglob("*"):
        os.utime(p, (1234567890, 1234567890))
    ok(run_sp(tmp_path / "src", "-o", tmp_path / f"b/train-%06d{ext}", "--jobs", "3", *extra))
    # c: another run, 1 job; d: 2 jobs without fsync
    ok(run_sp("src", "-o", f"c/train-%06d{ext}", *extra, cwd=tmp_path))
    ok(run_sp("src", "-o", f"d/train-%06d{ext}", "-j", "2", "--no-fsync", *extra, cwd=tmp_path))
    a = snapshot(tmp_path / "a")
    assert len([n for n in a if n.endswith(ext)]) == 5
    assert "train.json" in a and "train-000004.idx" in a
    for d in "bcd":
        s = snapshot(tmp_path / d)
        assert sorted(s) == sorted(a), d
        for name in a:
            assert s[name] == a[name], f"{d}/{name} differs from a/{name}"


def test_source_date_epoch(run_sp, tmp_path):
    make_tree(tmp_path / "src", {"c/a.jpg": 1, "c/b.png": 2})
    (tmp_path / "o0").mkdir()
    (tmp_path / "o1").mkdir()
    ok(run_sp(tmp_path / "src", "-o", tmp_path / "o0/t-%06d.tar"))
    ok(run_sp(tmp_path / "src", "-o", tmp_path / "o1/t-%06d.tar", env={"SOURCE_DATE_EPOCH": "1700000000"}))
    m0 = read_members((tmp_path / "o0/t-000000.tar").read_bytes())
    m1 = read_members((tmp_path / "o1/t-000000.tar").read_bytes())
    assert {m["info"].mtime for m in m0} == {0}
    assert {m["info"].mtime for m in m1} == {1700000000}
    assert [m["data"] for m in m0] == [m["data"] for m in m1]


# ---- shuffle ------------------------------------------------------------------------------


def test_shuffle_deterministic(run_sp, tmp_path):
    bulk_tree(tmp_path / "src", per_class=8)
    runs = {"plain": [], "s1": ["--shuffle", "1"], "s1b": ["--shuffle", "1", "--jobs", "3"],
            "s2": ["--shuffle", "2"]}
    keys, content = {}, {}
    for name, args in runs.items():
        (tmp_path / name).mkdir()
        ok(run_sp(tmp_path / "src", "-o", tmp_path / f"{name}/t-%06d.tar", "--maxcount", "5", *args))
        keys[name] = all_keys_in_order(tmp_path / name)
        content[name] = {}
        for p in shard_paths(tmp_path / name):
            for k, ms in group_samples(read_members(p.read_bytes())):
                content[name][k] = {m["field"]: m["data"] for m in ms}
    assert len(keys["plain"]) == 24
    assert keys["s1"] == keys["s1b"], "same seed, different order"
    assert keys["s1"] != keys["s2"], "different seeds, same order"
    assert keys["s1"] != keys["plain"], "--shuffle did not change the order"
    for name in ("s1", "s2"):
        assert sorted(keys[name]) == sorted(keys["plain"])
        assert content[name] == content["plain"], "shuffling changed a sample's key or content"
    assert snapshot(tmp_path / "s1") == snapshot(tmp_path / "s1b")
    assert load_manifest(tmp_path / "s1/t.json")["libshard"]["options"]["shuffle_seed"] == 1
    assert load_manifest(tmp_path / "plain/t.json")["libshard"]["options"]["shuffle_seed"] is None


# ---- bad inputs ---------------------------------------------------------------------------

GOOD = {f"c/g{i}.jpg": (100 + i, (32, 32)) for i in range(6)}
BAD_NAME = "c/g2_bad.jpg"  # sorts right after g2.jpg: shard 1 with --maxcount 2


def _corrupt_truncated():
    b = image_bytes(7, "JPEG", (64, 64), quality=90)
    return b[: len(b) // 2]


def _corrupt_flipped():
    b = bytearray(image_bytes(7, "JPEG", (64, 64), quality=90))
    sos = b.index(b"\xff\xda")
    for k in range(sos + 40, sos + 60):
        b[k] ^= 0x55
    return bytes(b)


BAD_KINDS = {
    # kind: (bytes, needs --verify, stderr pattern)
    "unreadable": (None, False, r"permission denied|cannot read|unreadable"),
    "zero_byte": (b"", False, r"zero|empty"),
    "not_image": (b"this is plain text, not a JPEG\n" * 4, False, r"not an image"),
    "corrupt_truncated": (None, True, r"corrupt"),
    "corrupt_flipped": (None, True, r"corrupt"),
    "bad_utf8": (None, False, r"utf-?8"),
}


def setup_bad(root, kind):
    """src with six good JPEGs and one bad file; ref = output of the good ones alone."""
    src = root / "src"
    good = make_tree(src, GOOD)
    bad_path = src / BAD_NAME
    if kind == "unreadable":
        bad_path.write_bytes(image_bytes(50, "JPEG", (32, 32)))
    elif kind == "corrupt_truncated":
        bad_path.write_bytes(_corrupt_truncated())
    elif kind == "corrupt_flipped":
        bad_path.write_bytes(_corrupt_flipped())
    elif kind == "bad_utf8":
        bad_path = Path(os.fsdecode(os.fsencode(str(src / "c/g2_bad")) + b"\xff.jpg"))
        bad_path.write_bytes(image_bytes(50, "JPEG", (32, 32)))
    else:
        bad_path.write_bytes(BAD_KINDS[kind][0])
    return src, good, bad_path


def pack_args(kind, mode):
    args = ["--maxcount", "2", "--jobs", "1", "--on-error", mode]
    if BAD_KINDS[kind][1]:
        args.append("--verify")
    return args


def check_failed_output(out, ref, err, must_be_missing=()):
    """After a failed run: no manifest, no temp/hidden files, every file present is complete
    (byte-identical to the reference run's file of the same name)."""
    assert not list(Path(out).glob("*.json")), f"manifest written after a failure: {os.listdir(out)}"
    # the pack's record (.STEM.pack/: its plan and the shards it finished, for --resume) stays
    hidden = [h for h in hidden_files(out) if not h.endswith(".pack")]
    assert hidden == [], f"temporary files left behind: {hidden}"
    refsnap = snapshot(ref)
    for name, data in snapshot(out).items():
        if name.split("/")[0].endswith(".pack"):
            continue
        assert name in refsnap, f"unexpected file {name}"
        assert data == refsnap[name], f"{name} is incomplete or differs from a clean run"
    for name in must_be_missing:
        assert not (Path(out) / name).exists(), f"{name} (the shard that failed) exists"


@pytest.mark.parametrize("kind", list(BAD_KINDS))
def test_bad_input_fails(run_sp, world_tmp, kind):
    src, good, bad = setup_bad(world_tmp, kind)
    ref, out = world_tmp / "ref", world_tmp / "out"
    ref.mkdir()
    out.mkdir()
    out.chmod(0o777)
    # Reference: the good files alone (same plan for shard 0 = g0, g1).
    bad_bytes = bad.read_bytes()
    bad.unlink()
    ok(run_sp(src, "-o", ref / "t-%06d.tar", *pack_args(kind, "fail")))
    bad.write_bytes(bad_bytes)
    as_nobody = False
    if kind == "unreadable":
        bad.chmod(0o000)
        as_nobody = is_root()  # root reads anything: drop to nobody
    cp = run_sp(src, "-o", out / "t-%06d.tar", *pack_args(kind, "fail"), as_nobody=as_nobody)
    err = out_text(cp)
    assert cp.returncode == 1, f"exit {cp.returncode}, stderr:\n{err}"
    bad_lines = [l for l in err.splitlines() if "g2_bad" in l]
    assert bad_lines, f"stderr does not name the bad file:\n{err}"
    assert any(re.search(BAD_KINDS[kind][2], l, re.I) for l in bad_lines), err
    check_failed_output(out, ref, err, must_be_missing=["t-000001.tar", "t-000001.idx"])


@pytest.mark.parametrize("kind", list(BAD_KINDS))
def test_bad_input_skipped(run_sp, world_tmp, kind):
    src, good, bad = setup_bad(world_tmp, kind)
    out = world_tmp / "out"
    out.mkdir()
    out.chmod(0o777)
    as_nobody = False
    if kind == "unreadable":
        bad.chmod(0o000)
        as_nobody = is_root()
    cp = run_sp(src, "-o", out / "t-%06d.tar", *pack_args(kind, "skip"), as_nobody=as_nobody)
    err = out_text(cp)
    assert cp.returncode == 0, f"exit {cp.returncode}, stderr:\n{err}"
    last = summary_line(err)
    assert last.startswith("shardpack: ") and "samples" in last, last
    assert re.search(r"skipped 1\b", last), last
    man = load_manifest(out / "t.json")
    assert man["libshard"]["nsamples"] == len(GOOD)
    listed = {e["url"] for e in man["shardlist"]}
    on_disk = {p.name for p in shard_paths(out)}
    assert listed == on_disk, "shard files and manifest disagree"
    assert hidden_files(out) == []
    paths = []
    for p in shard_paths(out):
        samples = group_samples(read_members(p.read_bytes()))
        assert len(parse_idx(idx_path(p))) == len(samples)
        for key, ms in samples:
            d = {m["field"]: m["data"] for m in ms}
            rel = json.loads(d["json"])["path"]
            paths.append(rel)
            assert d["jpg"] == good[rel]
    assert sorted(paths) == sorted(GOOD), "bad file packed, or a good one lost"


def test_corrupt_jpeg_packed_unchanged_without_verify(run_sp, tmp_path):
    data = _corrupt_truncated()
    make_tree(tmp_path / "src", {"c/half.jpg": data})
    (tmp_path / "out").mkdir()
    ok(run_sp(tmp_path / "src", "-o", tmp_path / "out/t-%06d.tar"))
    ms = read_members((tmp_path / "out/t-000000.tar").read_bytes())
    assert [m["data"] for m in ms if m["field"] == "jpg"] == [data]


def test_skip_messages_are_plain_lines_when_not_a_tty(run_sp, tmp_path):
    """stderr is a pipe: no progress bar, so no carriage returns; every line is 'shardpack: ...'."""
    make_tree(tmp_path / "src", {"c/a.jpg": 1, "c/b.jpg": b"not an image", "c/c.jpg": b""})
    (tmp_path / "out").mkdir()
    err = ok(run_sp(tmp_path / "src", "-o", tmp_path / "out/t-%06d.tar", "--on-error", "skip"))
    assert re.search(r"skipped 2\b", summary_line(err))
    for line in err.split("\n")[:-1]:
        assert line.startswith("shardpack: "), f"line {line!r} in non-tty stderr"


def test_a_missing_output_folder_is_made(run_sp, tmp_path):
    make_tree(tmp_path / "src", GOOD)
    ok(run_sp(tmp_path / "src", "-o", tmp_path / "nope/sub/t-%06d.tar", "-q"))
    assert (tmp_path / "nope/sub/t-000000.tar").is_file()
    assert (tmp_path / "nope/sub/t.json").is_file()
    # a file where a folder should be: said, and nothing made
    (tmp_path / "afile").write_bytes(b"x")
    before = snapshot(tmp_path)
    cp = run_sp(tmp_path / "src", "-o", tmp_path / "afile/sub/t-%06d.tar")
    err = out_text(cp)
    assert cp.returncode == 1, err
    assert "afile" in err and err.startswith("shardpack: "), err
    assert snapshot(tmp_path) == before


def test_maxcount_zero_is_refused(run_sp, tmp_path):
    make_tree(tmp_path / "src", GOOD)
    cp = run_sp(tmp_path / "src", "-o", tmp_path / "o/t-%06d.tar", "-c", "0")
    assert cp.returncode == 2 and "--maxcount" in out_text(cp) and "at least 1" in out_text(cp)
    assert not (tmp_path / "o").exists()


def test_version_and_one_message_for_an_unknown_option(run_sp):
    cp = run_sp("--version")
    assert cp.returncode == 0 and cp.stdout.decode().startswith("shardpack (libshard) ")
    cp = run_sp("--bogus")
    err = out_text(cp)
    assert cp.returncode == 2 and err.count("--bogus") == 1 and "unknown option '--bogus'" in err


def test_join_refuses_an_incomplete_or_repeated_set_of_parts(run_sp, tmp_path):
    bulk_tree(tmp_path / "src", per_class=3)
    out = tmp_path / "out"
    for i in range(3):
        ok(run_sp(tmp_path / "src", "-o", out / "train-%06d.tar", "-c", "2", "--part", f"{i}/3"))
    part = [out / f"train.part-{i}-of-3.json" for i in range(3)]
    assert load_manifest(part[1])["libshard"]["part"] == {"index": 1, "of": 3, "shards": 5}
    for given, msg in (([part[0], part[2]], "part 1 of 3 missing"),
                       ([part[0], part[1]], "part 2 of 3 missing"),
                       ([part[0], part[0], part[1], part[2]], "part 0 of 3 is given twice")):
        cp = run_sp("--join", "-o", out / "train.json", *given)
        assert cp.returncode == 1 and msg in out_text(cp), out_text(cp)
        assert not (out / "train.json").exists()
    ok(run_sp("--join", "-o", out / "train.json", *part))
    assert len(load_manifest(out / "train.json")["shardlist"]) == 5


def test_unwritable_output_folder(run_sp, world_tmp):
    make_tree(world_tmp / "src", GOOD)
    out = world_tmp / "ro"
    out.mkdir()
    if is_root():
        out.chmod(0o755)  # root-owned: nobody cannot write
    else:
        out.chmod(0o555)
    cp = run_sp(world_tmp / "src", "-o", out / "t-%06d.tar", as_nobody=is_root())
    err = out_text(cp)
    assert cp.returncode == 1, err
    assert str(out) in err, err
    assert os.listdir(out) == []


def test_full_disk(run_sp, tmp_path):
    files = {f"c/i{i}.png": (200 + i, (128, 128)) for i in range(8)}  # ~49 KB each
    make_tree(tmp_path / "src", files)
    ref = tmp_path / "ref"
    ref.mkdir()
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    args = ["--maxcount", "3"]  # shards of ~150 KB: the 2nd does not fit in 256 KiB
    ok(run_sp(tmp_path / "src", "-o", ref / "t-%06d.tar", *args))
    mounted = False
    if is_root():
        mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mnt)],
                                 capture_output=True).returncode == 0
    try:
        if mounted:
            cp = run_sp(tmp_path / "src", "-o", mnt / "t-%06d.tar", *args)
            want = r"no space left on device"
        else:
            # A per-file size limit instead (SIGXFSZ ignored, so write() fails with EFBIG).
            prefix = ["bash", "-c", 'trap "" XFSZ; ulimit -f 100 || exit 99; exec "$@"', "_"]
            cp = run_sp(tmp_path / "src", "-o", mnt / "t-%06d.tar", *args, prefix=prefix)
            if cp.returncode == 99:
                pytest.skip("cannot mount a tmpfs (not root) and `ulimit -f` failed")
            want = r"file too large"
        err = out_text(cp)
        assert cp.returncode == 1, f"exit {cp.returncode}:\n{err}"
        assert re.search(want, err, re.I), err
        assert re.search(r"t-0000\d\d\.tar", err), f"stderr does not name the shard:\n{err}"
        check_failed_output(mnt, ref, err)
        assert len(shard_paths(mnt)) < len(shard_paths(ref))
    finally:
        if mounted:
            subprocess.run(["umount", str(mnt)], check=True)


# ---- usage errors ----------------------------------------------------------------------------


@pytest.mark.parametrize("args", [
    ["--part", "3/3"], ["--part", "1"], ["--part", "a/2"], ["--part", "0/0"], ["--part", "-1/2"],
    ["--part", "1/2/3"], ["--bogus"], ["-Z"], ["--on-error", "ignore"], ["--jobs", "0"],
    ["--level", "23"], ["--inflight", "0"], ["--inflight", "300"], ["--checksum", "crc32"], ["--checksum", ""], ["--checksum", "md5,"],
    ["PATTERN=out/train.tar"], ["PATTERN=out/train-%d-%d.tar"], ["PATTERN=out/train-%s.tar"],
], ids=lambda a: " ".join(a))
def test_usage_errors(run_sp, tmp_path, args):
    make_tree(tmp_path / "src", {"c/a.jpg": 1})
    (tmp_path / "out").mkdir()
    pattern = "out/train-%06d.tar"
    if args[0].startswith("PATTERN="):
        pattern, args = args[0].split("=", 1)[1], []
    cp = run_sp("src", "-o", pattern, *args, cwd=tmp_path)
    err = out_text(cp)
    assert cp.returncode == 2, f"exit {cp.returncode}:\n{err}"
    assert err.strip(), "no message"
    assert os.listdir(tmp_path / "out") == []


# ---- parts and join ---------------------------------------------------------------------------


def test_part_and_join(run_sp, tmp_path):
    bulk_tree(tmp_path / "src", per_class=7)  # 21 samples, 7 shards of 3
    single, parts = tmp_path / "single", tmp_path / "parts"
    single.mkdir()
    parts.mkdir()
    ok(run_sp(tmp_path / "src", "-o", single / "train-%06d.tar", "-c", "3"))
    smap = load_manifest(single / "train.json")
    assert len(smap["shardlist"]) == 7
    seen = set()
    for i in range(3):
        before = set(visible_names(parts))
        ok(run_sp(tmp_path / "src", "-o", parts / "train-%06d.tar", "-c", "3", "--part", f"{i}/3",
                  "--jobs", str(1 + i % 2)))
        mpath = parts / f"train.part-{i}-of-3.json"
        pm = load_manifest(mpath)
        urls = {e["url"] for e in pm["shardlist"]}
        assert urls, f"part {i} packed nothing"
        assert not urls & seen, f"part {i} repeats shards {urls & seen}"
        seen |= urls
        new = set(visible_names(parts)) - before
        want = ({mpath.name} | urls | {idx_path(parts / u).name for u in urls}
                | {idx_path(parts / u).with_suffix(".cols").name for u in urls})
        assert new == want, f"part {i} wrote {sorted(new)}"
        assert pm["libshard"]["nsamples"] == sum(e["nsamples"] for e in pm["shardlist"])
    assert seen == {e["url"] for e in smap["shardlist"]}
    cp = run_sp("--join", "-o", parts / "train.json", *[parts / f"train.part-{i}-of-3.json" for i in range(3)])
    ok(cp)
    joined = load_manifest(parts / "train.json")
    assert joined["shardlist"] == smap["shardlist"]
    assert joined == smap
    s1, s2 = snapshot(single), snapshot(parts)
    for name, data in s1.items():
        assert s2[name] == data, f"{name} differs between the single run and the parts"


def test_join_names_output_after_its_stem(run_sp, tmp_path):
    """formats/manifest.md section 4: the joined manifest's name is the output's stem."""
    bulk_tree(tmp_path / "src", per_class=2)
    out = tmp_path / "out"
    out.mkdir()
    for i in range(2):
        ok(run_sp(tmp_path / "src", "-o", out / "train-%06d.tar", "-c", "2", "--part", f"{i}/2"))
    ok(run_sp("--join", "-o", out / "all.json", out / "train.part-0-of-2.json", out / "train.part-1-of-2.json"))
    m = load_manifest(out / "all.json")
    assert len(m["shardlist"]) == 3 and m["libshard"]["nsamples"] == 6
    assert m["name"] == "all"


def test_join_refuses_parts_with_other_options(run_sp, tmp_path):
    bulk_tree(tmp_path / "src", per_class=2)
    out = tmp_path / "out"
    out.mkdir()
    ok(run_sp(tmp_path / "src", "-o", out / "t-%06d.tar", "-c", "2", "--part", "0/2"))
    ok(run_sp(tmp_path / "src", "-o", out / "t-%06d.tar", "-c", "3", "--part", "1/2"))
    cp = run_sp("--join", "-o", out / "t.json", out / "t.part-0-of-2.json", out / "t.part-1-of-2.json")
    assert cp.returncode != 0
    assert not (out / "t.json").exists()


# ---- list files ------------------------------------------------------------------------------


def test_list_tsv(run_sp, tmp_path):
    data = tmp_path / "data"
    src = make_tree(data, {"imgs/p1.jpg": 1, "imgs/p3.jpg": 3, "imgs/sub/p2.png": 2, "imgs/x y.jpg": 4})
    rows = [("imgs/p1.jpg", "bird", "a small bird", "web"),
            ("imgs/p3.jpg", "bird", "caf\u00e9 au lait", "cam"),
            ("imgs/sub/p2.png", "ant", "an ant", "web"),
            ("imgs/x y.jpg", "ant", "spaced", "cam")]
    lines = ["path\tlabel\tcaption\tsource"] + ["\t".join(r) for r in rows]
    (data / "train.tsv").write_text("\n".join(lines) + "\n", "utf-8")
    out = tmp_path / "out"
    out.mkdir()
    work = tmp_path / "elsewhere"
    work.mkdir()
    # Paths in the list are relative to the list's folder, not to the working directory.
    ok(run_sp("../data/train.tsv", "--list", "-o", "../out/train-%06d.tar", cwd=work))
    man = load_manifest(out / "train.json")
    assert man["libshard"]["classes"] == ["ant", "bird"]
    samples = dict(group_samples(read_members((out / "train-000000.tar").read_bytes())))
    assert sorted(samples) == ["imgs/p1", "imgs/p3", "imgs/sub/p2", "imgs/x_y"]
    for path, cls, caption, source in rows:
        key = expected_keys([r[0] for r in rows])[path]
        d = {m["field"]: m["data"] for m in samples[key]}
        label = ["ant", "bird"].index(cls)
        assert d["cls"] == str(label).encode()
        assert d[path.rsplit(".", 1)[1]] == src[path]
        assert d["json"] == sample_json(path, label, cls, {"caption": caption, "source": source})


def test_list_jsonl(run_sp, tmp_path):
    data = tmp_path / "data"
    src = make_tree(data, {"a/one.jpg": 1, "a/two.png": 2, "b/three.jpg": 3})
    rows = [
        {"path": "a/one.jpg", "label": 3, "caption": "first", "tags": ["x", "y"],
         "meta": {"w": 24, "ok": True}, "none": None},
        {"path": "a/two.png", "label": 0, "caption": "second"},
        {"path": "b/three.jpg", "label": 7},
    ]
    (data / "list.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), "utf-8")
    out = tmp_path / "out"
    out.mkdir()
    ok(run_sp(data / "list.jsonl", "--list", "-o", out / "train-%06d.tar"))
    samples = dict(group_samples(read_members((out / "train-000000.tar").read_bytes())))
    assert sorted(samples) == ["a/one", "a/two", "b/three"]
    for r in rows:
        key = r["path"].rsplit(".", 1)[0]
        d = {m["field"]: m["data"] for m in samples[key]}
        extra = {k: v for k, v in r.items() if k not in ("path", "label")}
        assert d["cls"] == str(r["label"]).encode()
        assert d["json"] == sample_json(r["path"], r["label"], None, extra)
        assert d[r["path"].rsplit(".", 1)[1]] == src[r["path"]]
    assert load_manifest(out / "train.json")["libshard"]["nsamples"] == 3


def test_list_jsonl_class_names_and_no_labels(run_sp, tmp_path):
    data = tmp_path / "data"
    make_tree(data, {"i/1.jpg": 1, "i/2.jpg": 2, "i/3.jpg": 3})
    (data / "named.jsonl").write_text(
        '{"path": "i/1.jpg", "label": "zebra"}\n{"path": "i/2.jpg", "label": "ape"}\n', "utf-8")
    (data / "plain.tsv").write_text("path\tnote\ni/3.jpg\thello\n", "utf-8")
    for d in ("o1", "o2"):
        (tmp_path / d).mkdir()
    ok(run_sp(data / "named.jsonl", "--list", "-o", tmp_path / "o1/t-%06d.tar"))
    assert load_manifest(tmp_path / "o1/t.json")["libshard"]["classes"] == ["ape", "zebra"]
    s = dict(group_samples(read_members((tmp_path / "o1/t-000000.tar").read_bytes())))
    assert {m["field"]: m["data"] for m in s["i/1"]}["cls"] == b"1"
    assert {m["field"]: m["data"] for m in s["i/2"]}["json"] == sample_json("i/2.jpg", 0, "ape")
    ok(run_sp(data / "plain.tsv", "--list", "-o", tmp_path / "o2/t-%06d.tar"))
    ms = read_members((tmp_path / "o2/t-000000.tar").read_bytes())
    assert [m["field"] for m in ms] == ["jpg", "json"], "an unlabelled sample has no .cls"
    assert ms[1]["data"] == sample_json("i/3.jpg", extra={"note": "hello"})


# ---- manifest ----------------------------------------------------------------------------------

TOP_KEYS = ["__kind__", "wids_version", "name", "shardlist", "libshard"]
ENTRY_KEYS = ["url", "nsamples", "filesize", "md5sum", "sha256", "tarsize"]
DIGESTS = {None: ["sha256"], "md5": ["md5sum"], "md5,sha256": ["md5sum", "sha256"],
           "sha256,md5": ["md5sum", "sha256"], "none": []}


@pytest.mark.parametrize("ext,checksum", [(".tar", None), (".tar.zst", None), (".tar", "md5"),
                                          (".tar.zst", "md5,sha256"), (".tar", "sha256,md5"),
                                          (".tar", "none")])
def test_manifest_counts_and_checksums(run_sp, tmp_path, ext, checksum):
    bulk_tree(tmp_path / "src", per_class=8)
    out = tmp_path / "out"
    out.mkdir()
    opts = ["--checksum", checksum] if checksum else []
    ok(run_sp(tmp_path / "src", "-o", out / f"train-%06d{ext}", "-c", "5", *opts))
    raw = (out / "train.json").read_bytes()
    man = json.loads(raw)
    assert raw == (json.dumps(man, indent=2, ensure_ascii=False) + "\n").encode(), "not the canonical encoding"
    assert list(man) == TOP_KEYS
    assert man["__kind__"] == "wids-shard-index-v1" and man["wids_version"] == 1
    assert man["name"] == "train"
    assert list(man["libshard"])[:4] == ["version", "classes", "nsamples", "options"]
    assert man["libshard"]["version"] == 1
    assert man["libshard"]["classes"] == ["ant", "bee", "cow"]
    urls = [e["url"] for e in man["shardlist"]]
    assert urls == sorted(urls, key=str.encode) and len(set(urls)) == len(urls)
    assert urls == [p.name for p in shard_paths(out, ext)]
    total = 0
    for e in man["shardlist"]:
        assert list(e) == [k for k in ENTRY_KEYS if k not in ("md5sum", "sha256") or k in DIGESTS[checksum]]
        f = out / e["url"]
        data = f.read_bytes()
        tb = tar_bytes(f)
        assert e["filesize"] == len(data)
        if "md5sum" in e:
            assert e["md5sum"] == md5(data)
        if "sha256" in e:
            assert e["sha256"] == sha256(data)
        assert e["tarsize"] == len(tb)
        if ext == ".tar":
            assert e["tarsize"] == e["filesize"]
        n = len(group_samples(read_members(tb)))
        assert e["nsamples"] == n == len(parse_idx(idx_path(f)))
        total += n
    assert man["libshard"]["nsamples"] == total == 24


@pytest.mark.parametrize("ext", [".tar", ".tar.zst"])
def test_manifest_options_per_format_spec(run_sp, tmp_path, ext):
    """formats/manifest.md 1: options hold maxcount, maxsize, compression, level (recorded
    even when compression is "none"), frame_size and shuffle_seed."""
    make_tree(tmp_path / "src", {"c/a.jpg": 1})
    (tmp_path / "out").mkdir()
    zstd = ext.endswith("zst")
    ok(run_sp(tmp_path / "src", "-o", tmp_path / f"out/t-%06d{ext}", "-c", "7", "--shuffle", "9",
              *(["--level", "5", "--frame-size", "64K"] if zstd else [])))
    opts = load_manifest(tmp_path / "out/t.json")["libshard"]["options"]
    want = {"maxcount": 7, "maxsize": 3000000000, "compression": "zstd" if zstd else "none",
            "level": 5 if zstd else 3, "frame_size": 65536 if zstd else 4 << 20,
            "shuffle_seed": 9}
    assert {k: opts.get(k, "<missing>") for k in want} == want


@pytest.mark.parametrize("option", [["--level", "5"], ["-l", "9"], ["--frame-size", "64K"]])
def test_zstd_options_for_plain_tar_shards_are_refused(run_sp, tmp_path, option):
    """--level and --frame-size set zstd's compression: for .tar shards they could not be
    honoured, so they are refused, named, and nothing is written; for .tar.zst they pack."""
    make_tree(tmp_path / "src", {"c/a.jpg": 1})
    (tmp_path / "out").mkdir()
    r = run_sp(tmp_path / "src", "-o", tmp_path / "out/t-%06d.tar", *option)
    err = r.stderr.decode()
    assert r.returncode == 2 and "ends in .tar" in err
    assert ("--level" if option[0] == "-l" else option[0]) in err
    assert not list((tmp_path / "out").iterdir())
    ok(run_sp(tmp_path / "src", "-o", tmp_path / "out/t-%06d.tar.zst", *option))


# ---- resizing while packing -----------------------------------------------------------------


def smooth_image(w, h, mode="RGB", seed=0):
    """A photograph-like image (gradients and soft shapes): JPEG keeps it well, so the
    comparisons below measure the resize, not the noise."""
    import numpy as np
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    r = 128 + 100 * np.sin(x / (17 + seed) + y / 31)
    g = 128 + 100 * np.cos(y / (23 + seed) - x / 41)
    b = 255 * ((x - w / 2) ** 2 + (y - h / 2) ** 2 < (min(w, h) / 3) ** 2) * 0.6 + 40
    arr = np.clip(np.stack([r, g, b], -1), 0, 255).astype(np.uint8)
    img = Image.fromarray(arr)
    return img.convert("L") if mode == "L" else img


def psnr(a, b):
    import numpy as np
    d = np.asarray(a, np.float64) - np.asarray(b, np.float64)
    return 10 * np.log10(255 ** 2 / max(np.mean(d * d), 1e-12))


def test_resize_shrinks_large_jpegs_and_leaves_the_rest(run_sp, tmp_path):
    src = tmp_path / "src" / "c"
    src.mkdir(parents=True)
    cases = {"wide.jpg": ((900, 500), "RGB", "JPEG"), "tall.jpg": ((301, 1000), "RGB", "JPEG"),
             "gray.jpg": ((640, 480), "L", "JPEG"), "small.jpg": ((200, 120), "RGB", "JPEG"),
             "edge.jpg": ((256, 100), "RGB", "JPEG"), "big.png": ((800, 600), "RGB", "PNG")}
    orig = {}
    for i, (name, (size, mode, fmt)) in enumerate(cases.items()):
        buf = io.BytesIO()
        smooth_image(*size, mode=mode, seed=i).save(buf, format=fmt, **({"quality": 92} if fmt == "JPEG" else {}))
        orig[name] = buf.getvalue()
        (src / name).write_bytes(orig[name])
    outs = []
    for run in ("a", "b"):
        out = tmp_path / run
        out.mkdir()
        cp = run_sp(tmp_path / "src", "-o", out / "t-%06d.tar", "--resize", "256", "--quality", "90",
                    *(["--json"] if run == "b" else []))
        err = ok(cp)
        outs.append(out)
    # the run says how many it re-encoded: the three JPEGs over 256 px, not the PNG
    assert "; re-encoded 3 JPEGs over 256 px (" in summary_line(err), err
    summary = json.loads(cp.stdout)
    assert summary["resized"] == 3 and summary["samples"] == 6, summary
    big = sum(len(orig[n]) for n in ("wide.jpg", "tall.jpg", "gray.jpg"))
    assert summary["resized_bytes_in"] == big > summary["resized_bytes_out"] > 0, summary
    assert (outs[0] / "t-000000.tar").read_bytes() == (outs[1] / "t-000000.tar").read_bytes(), "reproducible"
    samples = {k: {m["field"]: m["data"] for m in ms}
               for k, ms in group_samples(read_members((outs[0] / "t-000000.tar").read_bytes()))}
    want = {"wide": (256, 142), "tall": (77, 256), "gray": (256, 192)}
    for key, (w, h) in want.items():
        s = samples[f"c/{key}"]
        img = Image.open(io.BytesIO(s["jpg"]))
        assert img.size == (w, h), key
        assert img.mode == ("L" if key == "gray" else "RGB"), "greyscale stays greyscale"
        meta = json.loads(s["json"])
        src_img = Image.open(io.BytesIO(orig[f"{key}.jpg"]))
        assert (meta["original_width"], meta["original_height"]) == src_img.size
        ref = src_img.resize((w, h), Image.BILINEAR)  # PIL's own resize of PIL's decode
        buf = io.BytesIO()
        ref.save(buf, format="JPEG", quality=90)  # and PIL's own encode at the same quality
        floor = psnr(Image.open(buf), ref)
        assert psnr(img, ref) > floor - 0.5, (key, psnr(img, ref), floor)
    for key, ext in (("small", "jpg"), ("edge", "jpg"), ("big", "png")):
        s = samples[f"c/{key}"]
        assert s[ext] == orig[f"{key}.{ext}"], f"{key}: left as it was"
        assert "original_width" not in json.loads(s["json"])
    man = load_manifest(outs[0] / "t.json")
    assert man["libshard"]["options"]["max_side"] == 256 and man["libshard"]["options"]["quality"] == 90


def test_resize_says_when_nothing_was_over_the_size(run_sp, tmp_path):
    make_tree(tmp_path / "src", {"c/a.jpg": 1})
    err = ok(run_sp(tmp_path / "src", "-o", tmp_path / "out/t-%06d.tar", "--resize", "4000"))
    assert "; no JPEG over 4000 px to re-encode;" in summary_line(err), err


@pytest.mark.parametrize("args", [["--resize", "0"], ["--resize", "70000"], ["--resize", "9", "--quality", "0"],
                                  ["--resize", "9", "--quality", "101"]])
def test_resize_usage_errors(run_sp, tmp_path, args):
    make_tree(tmp_path / "src", {"c/a.jpg": 1})
    (tmp_path / "out").mkdir()
    cp = run_sp(tmp_path / "src", "-o", tmp_path / "out/t-%d.tar", *args)
    assert cp.returncode == 2 and out_text(cp).strip()


# ---- formats the loader does not decode ----------------------------------------------------

MIXED = {"c/a.jpg": 1, "c/b.png": 2, "c/w.webp": 3, "c/x.bmp": 4, "c/y.bmp": 5, "d/t.tif": 6,
         "d/p.ppm": 7, "d/g.pgm": 8}


def test_formats_the_loader_does_not_decode_are_named_at_pack_time(run_sp, tmp_path):
    make_tree(tmp_path / "src", MIXED)
    err = ok(run_sp(tmp_path / "src", "-o", tmp_path / "a/t-%06d.tar"))
    lines = err.strip().split("\n")
    assert "8 samples in 1 shard," in summary_line(err)
    named = sorted(l for l in lines if "the loader does not decode" in l)
    assert named == [
        "shardpack: 1 tiff image packed that the loader does not decode (JPEG, PNG and WebP "
        "are; --on-error skip leaves them out)",
        "shardpack: 2 bmp images packed that the loader does not decode (JPEG, PNG and WebP "
        "are; --on-error skip leaves them out)",
        "shardpack: 2 pnm images packed that the loader does not decode (JPEG, PNG and WebP "
        "are; --on-error skip leaves them out)"]
    # on request they are left out, named and counted
    err = ok(run_sp(tmp_path / "src", "-o", tmp_path / "b/t-%06d.tar", "--on-error", "skip"))
    assert "3 samples in 1 shard," in summary_line(err)
    assert "skipped 5 (5 not decoded by the loader)" in summary_line(err)
    assert "skipping " + str(tmp_path / "src/c/x.bmp") + ": bmp image, which the loader" in err
    fields = sorted(m["field"] for m in read_members((tmp_path / "b/t-000000.tar").read_bytes())
                    if m["field"] not in ("cls", "json"))
    assert fields == ["jpg", "png", "webp"]


def test_verify_decode_names_each_image_the_loader_does_not_decode(run_sp, tmp_path):
    make_tree(tmp_path / "src", MIXED)
    ok(run_sp(tmp_path / "src", "-o", tmp_path / "a/t-%06d.tar", "-q"))
    shardcat = os.environ.get("SHARDCAT", str(Path(__file__).resolve().parents[2] / "build" /
                                              "tools" / "shardcat"))
    cp = subprocess.run([shardcat, "verify", "--decode", str(tmp_path / "a/t-000000.tar")],
                        capture_output=True, text=True)
    assert cp.returncode == 1
    defects = [l for l in cp.stderr.split("\n") if "does not decode" in l]
    assert len(defects) == 5, cp.stderr
    assert re.search(r"t-000000.tar: offset \d+: member 'c/x.bmp': bmp image, which the loader "
                     r"does not decode \(JPEG, PNG and WebP are\)", cp.stderr)
    # without --decode the shard passes, and one of decoded formats alone passes --decode
    assert subprocess.run([shardcat, "verify", str(tmp_path / "a/t-000000.tar")],
                          capture_output=True).returncode == 0
    make_tree(tmp_path / "ok", {"c/a.jpg": 1, "c/b.png": 2, "c/w.webp": 3})
    ok(run_sp(tmp_path / "ok", "-o", tmp_path / "o/t-%06d.tar", "-q"))
    assert subprocess.run([shardcat, "verify", "--decode", str(tmp_path / "o/t-000000.tar")],
                          capture_output=True).returncode == 0


# ---- the summary as JSON ---------------------------------------------------------------------


def test_json_summary_counts_what_the_line_says(run_sp, tmp_path):
    """--json puts the summary on stdout as one object (the line stays on stderr): what was
    written, agreeing with the manifest, and what was skipped, ignored and not decodable."""
    make_tree(tmp_path / "src", {**MIXED, "c/bad.jpg": b"not an image", "c/notes.txt": b"hi",
                                 "d/empty.jpg": b""})
    cp = run_sp(tmp_path / "src", "-o", tmp_path / "out/t-%06d.tar", "-c", "2", "--on-error",
                "skip", "--json")
    err = ok(cp)
    s = json.loads(cp.stdout)
    man = load_manifest(tmp_path / "out/t.json")
    assert s["manifest"] == str(tmp_path / "out/t.json")
    assert s["samples"] == 3 == sum(e["nsamples"] for e in man["shardlist"])
    assert s["shards"] == len(man["shardlist"]) == 2
    assert s["bytes"] == sum(e["filesize"] for e in man["shardlist"])
    assert s["skipped"] == {"zero-byte": 1, "not an image": 1, "not decoded by the loader": 5}, s
    assert (s["ignored"], s["ignored_first"]) == (1, [str(tmp_path / "src/c/notes.txt")]), s
    assert s["resized"] == 0 and s["seconds"] > 0
    assert "skipped 7" in summary_line(err)
    # packed as they are: counted by kind
    make_tree(tmp_path / "mixed", MIXED)
    cp = run_sp(tmp_path / "mixed", "-o", tmp_path / "all/t-%06d.tar", "-q", "--json")
    ok(cp)
    assert json.loads(cp.stdout)["undecoded"] == {"bmp": 2, "tiff": 1, "pnm": 2}, cp.stdout
    # a failed run (the bad files, no skip) prints no JSON: the reason is on stderr
    cp = run_sp(tmp_path / "src", "-o", tmp_path / "fail/t-%06d.tar", "--json")
    assert cp.returncode == 1 and cp.stdout == b"", cp.stdout


def test_json_summary_of_a_join(run_sp, tmp_path):
    make_tree(tmp_path / "src", GOOD)
    for i in range(2):
        ok(run_sp(tmp_path / "src", "-o", tmp_path / "out/t-%06d.tar", "-c", "1", "--part",
                  f"{i}/2", "-q"))
    parts = sorted(str(p) for p in (tmp_path / "out").glob("t.part-*.json"))
    cp = run_sp("--join", "-o", tmp_path / "out/t.json", *parts, "--json")
    ok(cp)
    s = json.loads(cp.stdout)
    man = load_manifest(tmp_path / "out/t.json")
    assert s == {"manifest": str(tmp_path / "out/t.json"), "parts": 2,
                 "shards": len(man["shardlist"]),
                 "samples": sum(e["nsamples"] for e in man["shardlist"])}
