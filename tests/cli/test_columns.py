"""The image sizes beside the index (.cols, formats/columns.md) as shardpack and the writer
make them and shardcat verify checks them: equal to PIL's Image.size for every sample (JPEG
with an EXIF rotation, progressive, PNG, WebP; .tar and .tar.zst), "-" for an image the
loader does not decode or one whose header does not parse (packed, said, or left out with
--on-error skip), and a wrong or short line named with its file and line."""
import io
import json

import pytest
from PIL import Image

from conftest import group_samples, idx_path, ok, out_text, read_members, tar_bytes


def photo(w, h, seed):
    im = Image.new("RGB", (w, h))
    im.putdata([((x * 7 + seed) & 255, (y * 5) & 255, (x ^ y) & 255)
                for y in range(h) for x in range(w)])
    return im


def encoded(im, fmt, **kw):
    b = io.BytesIO()
    im.save(b, fmt, **kw)
    return b.getvalue()


def rotated_jpeg(w, h):
    exif = Image.Exif()
    exif[0x0112] = 6  # rotate 90: PIL's size is as stored, not as shown
    return encoded(photo(w, h, 3), "JPEG", exif=exif.tobytes())


IMAGES = {
    "a/base.jpg": lambda: encoded(photo(40, 30, 1), "JPEG"),
    "a/prog.jpg": lambda: encoded(photo(33, 57, 2), "JPEG", progressive=True),
    "a/full.jpg": lambda: encoded(photo(64, 16, 4), "JPEG", subsampling=0),
    "a/exif.jpg": lambda: rotated_jpeg(48, 20),
    "b/p.png": lambda: encoded(photo(17, 71, 5), "PNG"),
    "b/w.webp": lambda: encoded(photo(90, 45, 6), "WEBP"),
    "b/g.bmp": lambda: encoded(photo(12, 12, 7), "BMP"),
}


def cols_of(path):
    lines = path.read_text().splitlines()
    head = lines[0].split()
    assert head[:2] == ["libshard-cols", "1"] and head[3:] == ["width:u32", "height:u32"], head
    assert int(head[2]) == len(lines) - 1
    return [None if l == "- -" else tuple(map(int, l.split())) for l in lines[1:]]


def pil_sizes(shard):
    """Each sample's image size as PIL gives it, in tar order; None without a decoded one."""
    out = []
    for _, ms in group_samples(read_members(tar_bytes(shard))):
        got = {x["field"]: x["data"] for x in ms}
        image = next((got[f] for f in ("jpg", "jpeg", "png", "webp") if f in got), None)
        out.append(Image.open(io.BytesIO(image)).size if image else None)
    return out


@pytest.fixture
def tree(tmp_path):
    src = tmp_path / "src"
    for rel, make in IMAGES.items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_bytes(make())
    return src


@pytest.mark.parametrize("ext", [".tar", ".tar.zst"])
def test_shardpack_writes_each_images_size_beside_the_index(run_sp, run_sc, tree, tmp_path, ext):
    out = tmp_path / "out"
    ok(run_sp(tree, "-o", out / f"s-%03d{ext}", "-c", "4", "-q"))
    shards = sorted(out.glob(f"s-*{ext}"))
    assert len(shards) == 2
    for shard in shards:
        cols = cols_of(idx_path(shard).with_suffix(".cols"))
        assert cols == pil_sizes(shard)
    assert sum(c is None for s in shards for c in cols_of(idx_path(s).with_suffix(".cols"))) == 1
    assert (48, 20) in cols_of(out / "s-000.cols")  # EXIF orientation not applied
    cp = run_sc("verify", "--json", *shards)
    rows = [json.loads(l) for l in cp.stdout.decode().splitlines()]
    assert cp.returncode == 0 and all(r["columns"] and r["ok"] for r in rows), out_text(cp)


def test_verify_names_a_wrong_or_short_line(run_sp, run_sc, tree, tmp_path):
    out = tmp_path / "out"
    ok(run_sp(tree, "-o", out / "s-%03d.tar", "-c", "10", "-q"))
    shard, cols = out / "s-000.tar", out / "s-000.cols"
    good = cols.read_text()
    lines = good.splitlines()
    lines[2] = "1 2"
    cols.write_text("\n".join(lines) + "\n")
    cp = run_sc("verify", shard)
    err = cp.stderr.decode()
    assert cp.returncode == 1 and "s-000.cols: line 3: sample" in err and \
        "the columns say 1 x 2, its header says" in err, err
    # one line too few: the count is the file's, the shard has more
    cols.write_text("\n".join([lines[0].replace(" 7 ", " 6 ")] + good.splitlines()[1:-1]) + "\n")
    cp = run_sc("verify", shard)
    assert cp.returncode == 1 and "the columns list 6 samples, the shard has more" in \
        cp.stderr.decode(), out_text(cp)
    # not a columns file: named with its line
    cols.write_text("libshard-cols 2 7 width:u32 height:u32\n")
    cp = run_sc("verify", shard)
    assert cp.returncode == 1 and "s-000.cols: line 1: a version this libshard does not read" \
        in cp.stderr.decode(), out_text(cp)
    # none: nothing to compare (control: the same shard passes)
    cols.unlink()
    cp = run_sc("verify", "--json", shard)
    row = json.loads(cp.stdout)
    assert cp.returncode == 0 and row["columns"] is False and row["index"] is True, out_text(cp)


def test_a_broken_header_is_packed_said_and_dashed_or_left_out(run_sp, tree, tmp_path):
    (tree / "a" / "zz.jpg").write_bytes(b"\xff\xd8\xff\xe0\x00\x10JFIF\x00" + b"\x00" * 300)
    out = tmp_path / "out"
    cp = run_sp(tree, "-o", out / "s-%03d.tar", "-c", "10")
    err = ok(cp)
    assert "1 JPEG, PNG or WebP image packed whose header does not parse" in err, err
    cols = cols_of(out / "s-000.cols")
    assert len(cols) == 8 and cols.count(None) == 2  # the BMP and the broken JPEG
    assert cols == pil_sizes_or_none(out / "s-000.tar")
    skipped = tmp_path / "skipped"
    cp = run_sp(tree, "-o", skipped / "s-%03d.tar", "-c", "10", "--on-error", "skip")
    err = ok(cp)
    assert "zz.jpg: broken jpeg image (its header: JPEG: " in err, err
    assert cols_of(skipped / "s-000.cols") == [c for c in cols if c]  # both left out


def pil_sizes_or_none(shard):
    out = []
    for _, ms in group_samples(read_members(tar_bytes(shard))):
        got = {x["field"]: x["data"] for x in ms}
        image = next((got[f] for f in ("jpg", "jpeg", "png", "webp") if f in got), None)
        try:
            out.append(Image.open(io.BytesIO(image)).size if image else None)
        except Exception:
            out.append(None)
    return out


def nearest(size, buckets):
    """The bucket nearest an image in log aspect ratio, the first of equals."""
    import math
    r = math.log(size[0] / size[1])
    d = [abs(r - math.log(w / h)) for h, w in buckets]
    return d.index(min(d))


@pytest.fixture
def mixed(tmp_path):
    """Photographs of 4:3, 3:4, 16:9 and 1:1 (5, 3, 2, 4 of them), packed in shards of 5."""
    src = tmp_path / "mixed"
    sizes = [(640, 480)] * 5 + [(480, 640)] * 3 + [(800, 450)] * 2 + [(500, 500)] * 4
    (src / "a").mkdir(parents=True)
    for i, (w, h) in enumerate(sizes):
        (src / "a" / f"{i:02d}.jpg").write_bytes(encoded(photo(w, h, i), "JPEG"))
    return src, sizes


def test_info_counts_samples_by_aspect_bucket_from_the_sizes_alone(run_sp, run_sc, mixed,
                                                                      tmp_path):
    src, sizes = mixed
    out = tmp_path / "out"
    ok(run_sp(src, "-o", out / "s-%03d.tar.zst", "-c", "5", "-q"))
    spec = [(768, 1024), (1024, 768), (1024, 1024), (576, 1024), (1024, 576)]
    arg = ",".join(f"{h}x{w}" for h, w in spec)
    cp = run_sc("info", "--aspect-buckets", arg, "--json", out / "s.json")
    assert cp.returncode == 0, out_text(cp)
    got = json.loads(cp.stdout)
    want = [0] * len(spec)
    for s in sizes:
        want[nearest(s, spec)] += 1
    assert [(b["height"], b["width"]) for b in got["buckets"]] == spec
    assert [b["samples"] for b in got["buckets"]] == want == [5, 3, 4, 2, 0]
    assert got["samples"] == len(sizes) and got["no_size"] == 0
    # auto: sizes of one area fitted to the histogram; each sample in its nearest
    cp = run_sc("info", "--aspect-buckets", "auto:3", "--image-size", "512", "--json", out / "s.json")
    got = json.loads(cp.stdout)
    fitted = [(b["height"], b["width"]) for b in got["buckets"]]
    assert len(fitted) == 3 and all(abs(h * w / 512 ** 2 - 1) < 0.05 for h, w in fitted), fitted
    counts = [0] * 3
    for s in sizes:
        counts[nearest(s, fitted)] += 1
    assert [b["samples"] for b in got["buckets"]] == counts
    # sdxl at 1024: SDXL's sizes, 64-aligned
    cp = run_sc("info", "--aspect-buckets", "sdxl", "--image-size", "1024", "--json", out / "s.json")
    sd = [(b["height"], b["width"]) for b in json.loads(cp.stdout)["buckets"]]
    assert (1024, 1024) in sd and (896, 1152) in sd and all(h % 64 == 0 == w % 64 for h, w in sd)
    # a compressed shard without its sizes is named, with the command that makes them
    (out / "s-001.cols").unlink()
    cp = run_sc("info", "--aspect-buckets", "auto", out / "s.json")
    err = cp.stderr.decode()
    assert cp.returncode == 1 and "s-001.tar.zst has no image sizes" in err and \
        "shardcat index --geometry" in err, err
    # a bad spec, and the option elsewhere
    cp = run_sc("info", "--aspect-buckets", "12x", out / "s.json")
    assert cp.returncode == 1 and "aspect_buckets: '12x'" in cp.stderr.decode()
    cp = run_sc("ls", "--aspect-buckets", "sdxl", out / "s.json")
    assert cp.returncode == 2 and "--aspect-buckets goes with info" in cp.stderr.decode()


def test_info_makes_a_plain_tars_sizes_into_the_index_cache(run_sc, mixed, tmp_path):
    import tarfile
    src, sizes = mixed
    plain = tmp_path / "plain.tar"  # as GNU tar or WebDataset's writer leave it: no index
    with tarfile.open(plain, "w") as t:
        for i in range(len(sizes)):
            t.add(src / "a" / f"{i:02d}.jpg", f"k{i:02d}.jpg")
    cache = tmp_path / "xdg"
    env = {"XDG_CACHE_HOME": str(cache)}
    cp = run_sc("info", "--aspect-buckets", "480x640,640x480,500x500,450x800", "--json", plain,
                env=env)
    assert cp.returncode == 0, out_text(cp)
    assert [b["samples"] for b in json.loads(cp.stdout)["buckets"]] == [5, 3, 4, 2]
    kept = sorted(p.suffix for p in (cache / "libshard" / "index").iterdir()
                  if not p.name.startswith("."))
    assert kept == [".cols", ".idx"] and not (tmp_path / "plain.cols").exists()


def test_a_manifests_plain_tars_get_index_and_sizes_in_the_cache(run_sp, run_sc, mixed, tmp_path):
    """A manifest lists plain tars (its counts known) with neither .idx nor .cols beside them:
    the index is made into the cache first, then the sizes beside it."""
    src, sizes = mixed
    out = tmp_path / "out"
    ok(run_sp(src, "-o", out / "s-%03d.tar", "-c", "5", "-q"))
    for p in list(out.glob("*.idx")) + list(out.glob("*.cols")):
        p.unlink()
    cache = tmp_path / "xdg"
    cp = run_sc("info", "--aspect-buckets", "480x640,640x480,500x500,450x800", "--json",
                out / "s.json", env={"XDG_CACHE_HOME": str(cache)})
    assert cp.returncode == 0, out_text(cp)
    assert [b["samples"] for b in json.loads(cp.stdout)["buckets"]] == [5, 3, 4, 2]
    kept = sorted(p.suffix for p in (cache / "libshard" / "index").iterdir()
                  if not p.name.startswith("."))
    assert kept == [".cols"] * 3 + [".idx"] * 3, kept
