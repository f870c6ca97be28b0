"""Image geometry beside the index (`shardcat index --geometry`, shard_geometry_build): the
columns equal PIL's Image.size for every sample (JPEG with EXIF, progressive, PNG, WebP, and
one without an image), local and over nginx, where each image costs at most 2 KiB of ranged
reads (counted in nginx's access log) and a large EXIF segment is read past, not the pixels;
a compressed shard is read whole once; a bad header is refused, naming what and where."""
import io
import math
import os
import random
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from PIL import Image

import servers
from conftest import CLEAN_ENV, TIMEOUT


def lib():
    path = os.environ.get("LIBSHARD_PYTHONPATH",
                          str(Path(__file__).resolve().parents[2] / "build" / "python"))
    if path not in sys.path:
        sys.path.insert(0, path)
    from libshard import _libshard
    return _libshard


def photo(w, h, seed):
    r = random.Random(seed)
    im = Image.effect_noise((w, h), 40).convert("RGB")
    im.paste((r.randrange(256), 90, 20), (0, 0, w // 3, h // 3))
    return im


def encoded(i):
    """Sample i's image: (bytes, ext) of several kinds and aspect ratios; None every 9th."""
    if i % 9 == 8:
        return None
    w, h = [(640, 480), (480, 640), (800, 450), (500, 500)][i % 4]
    im, b = photo(w, h, i), io.BytesIO()
    kind = i % 5
    if kind == 0:
        e = Image.Exif()
        e[0x0112] = 6  # rotated: the size stays the stored one
        im.save(b, "JPEG", quality=85, exif=e)
    elif kind == 1:
        im.save(b, "JPEG", quality=85, progressive=True)
    elif kind == 2:
        im.save(b, "PNG")
    elif kind == 3:
        im.save(b, "WEBP", quality=80)
    else:
        im.save(b, "JPEG", quality=85, subsampling=0)
    return b.getvalue(), ["jpg", "jpg", "png", "webp", "jpeg"][kind]


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    d = tmp_path_factory.mktemp("geometry") / "www"
    d.mkdir()
    want = {}
    for s in range(2):
        sizes = []
        with tarfile.open(d / f"g-{s}.tar", "w") as t:
            for i in range(s * 18, s * 18 + 18):
                for ext, data in ([(e, b) for b, e in [encoded(i)]] if encoded(i) else []) + \
                                 [("cls", str(i % 3).encode())]:
                    info = tarfile.TarInfo(f"k{i:03d}.{ext}")
                    info.size = len(data)
                    t.addfile(info, io.BytesIO(data))
                img = encoded(i)
                sizes.append(Image.open(io.BytesIO(img[0])).size if img else None)
        want[f"g-{s}"] = sizes
    return d, want


def cols(path):
    lines = Path(path).read_text().splitlines()
    assert lines[0].startswith("libshard-cols 1 ") and lines[0].endswith("width:u32 height:u32")
    return [None if l == "- -" else tuple(map(int, l.split())) for l in lines[1:]]


def test_local_shards_get_their_images_sizes(shards, shardcat):
    d, want = shards
    cp = subprocess.run([str(shardcat), "index", "--geometry", d / "g-0.tar", d / "g-1.tar"],
                        env=CLEAN_ENV, capture_output=True, text=True, timeout=TIMEOUT)
    assert cp.returncode == 0, cp.stderr
    assert "g-0.cols: 18 samples' image sizes," in cp.stdout
    for s in ("g-0", "g-1"):
        assert cols(d / f"{s}.cols") == want[s]
    # the .idx beside them is DALI's, untouched by the columns
    assert (d / "g-0.idx").read_text().startswith("v1.2 18\n")


def test_over_http_each_image_costs_its_header(shards, shardcat, tmp_path):
    d, want = shards
    subprocess.run([str(shardcat), "index", d / "g-0.tar"], env=CLEAN_ENV, check=True,
                   capture_output=True, timeout=TIMEOUT)
    ng = servers.Nginx(d)
    try:
        log = ng.prefix / "logs" / "access.log"
        before = log.stat().st_size if log.exists() else 0
        st = lib().geometry_build(f"{ng.url}/g-0.tar", cols_path=str(tmp_path / "g-0.cols"))
        sent = [l for l in log.read_text()[before:].splitlines() if "g-0.tar" in l]
    finally:
        ng.close()
    assert cols(tmp_path / "g-0.cols") == want["g-0"]
    images = sum(1 for x in want["g-0"] if x)
    assert st["samples"] == 18 and st["skipped"] == 0
    assert st["bytes_read"] <= 2048 * images, st
    body = sum(int(l.split('"')[2].split()[1]) for l in sent)
    assert body <= 2048 * images and len(sent) == images, (body, len(sent))  # one range each
    assert body < (d / "g-0.tar").stat().st_size / 20


def test_a_compressed_shard_is_read_whole(shards, shardcat, tmp_path):
    d, want = shards
    z = tmp_path / "c.tar.zst"
    subprocess.run(["zstd", "-q", "-f", str(d / "g-0.tar"), "-o", str(z)], check=True)
    cp = subprocess.run([str(shardcat), "index", "--geometry", z], env=CLEAN_ENV,
                        capture_output=True, text=True, timeout=TIMEOUT)
    assert cp.returncode == 0, cp.stderr
    assert cols(tmp_path / "c.cols") == want["g-0"]
    # an index that is not the shard's: named, nothing written
    (tmp_path / "c.cols").unlink()
    idx = (tmp_path / "c.idx").read_text().splitlines()
    (tmp_path / "c.idx").write_text("\n".join([f"v1.2 {len(idx) - 2}"] + idx[1:-1]) + "\n")
    with pytest.raises(Exception, match=r"c.tar.zst: more samples than its index's"):
        lib().geometry_build(str(z))
    assert not (tmp_path / "c.cols").exists()


def test_refusals_name_what_and_where(shards, shardcat, tmp_path):
    d, _ = shards
    # a JPEG whose header is garbage, as the 3rd sample
    bad = tmp_path / "b.tar"
    with tarfile.open(bad, "w") as t:
        for i in range(4):
            data = encoded(i)[0] if i != 2 else b"\xff\xd8\xff\xe0\x00\x10JFIF\x00" + b"\x00" * 500
            info = tarfile.TarInfo(f"k{i:03d}.jpg")
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    cp = subprocess.run([str(shardcat), "index", "--geometry", bad], env=CLEAN_ENV,
                        capture_output=True, text=True, timeout=TIMEOUT)
    assert cp.returncode == 1
    assert "b.tar: sample 2, member 'k002.jpg' at offset" in cp.stderr and "JPEG: no marker" \
        in cp.stderr, cp.stderr
    st = lib().geometry_build(str(bad), skip_errors=True)
    assert st["skipped"] == 1 and cols(tmp_path / "b.cols")[2] is None
    cp = subprocess.run([str(shardcat), "ls", "--geometry", bad], env=CLEAN_ENV,
                        capture_output=True, text=True, timeout=TIMEOUT)
    assert cp.returncode == 2 and "--geometry goes with index" in cp.stderr


def test_a_list_finds_its_shards_sizes_beside_or_in_the_index_cache(shards, tmp_path):
    """ShardListSettings.columns (list_shards(columns=True)): the .cols beside a shard; for a
    plain tar (no index, no columns) those made into the index cache from its headers, over
    nginx too, found there again while the shard is unchanged and made anew (the older
    removed) when it changes; without making indexes, none (None), named by the planner."""
    d, want = shards
    plain = tmp_path / "plain"
    plain.mkdir()
    for s in ("g-0", "g-1"):
        (plain / f"{s}.tar").write_bytes((d / f"{s}.tar").read_bytes())
    cache = tmp_path / "cache"
    specs = [str(plain / "g-0.tar"), str(plain / "g-1.tar")]
    got = lib().list_shards(specs, make_indexes=True, index_cache=str(cache), columns=True)
    for (url, n, idx, c), s in zip(got, ("g-0", "g-1")):
        assert n == 18 and idx and c and Path(c).parent == cache and c.endswith(".cols"), (url, c)
        assert Path(c).name[:-5] == Path(idx).name[:-4]  # named as its cached index is
        assert cols(c) == want[s]
    first = Path(got[0][3])
    made = first.stat().st_mtime_ns
    again = lib().list_shards(specs, make_indexes=True, index_cache=str(cache), columns=True)
    assert again == got and first.stat().st_mtime_ns == made, "found, not made again"
    # the shard changes: its sizes are made anew, the older version's gone
    data = bytearray((plain / "g-0.tar").read_bytes())
    data[-1024:] = b"\0" * 1024
    (plain / "g-0.tar").write_bytes(bytes(data))
    os.utime(plain / "g-0.tar", ns=(made + 10**9, made + 10**9))
    changed = lib().list_shards(specs, make_indexes=True, index_cache=str(cache), columns=True)
    assert changed[0][3] != got[0][3] and not first.exists() and cols(changed[0][3]) == want["g-0"]
    assert sorted(p.suffix for p in cache.iterdir() if not p.name.startswith(".")) == \
        [".cols", ".cols", ".idx", ".idx"]
    # without making indexes: none found, none made
    assert [c for *_, c in lib().list_shards(specs, columns=True)] == [None, None]
    # beside the shard: those, not the cache's
    subprocess.run([str(Path(__file__).resolve().parents[2] / "build" / "tools" / "shardcat"),
                    "index", "--geometry", plain / "g-1.tar"], env=CLEAN_ENV, check=True,
                   capture_output=True, timeout=TIMEOUT)
    mixed = lib().list_shards(specs, make_indexes=True, index_cache=str(cache), columns=True)
    assert mixed[1][3] == str(plain / "g-1.cols") and mixed[0][3] == changed[0][3]
    # over HTTP: a plain tar's sizes made into the cache from its headers
    ng = servers.Nginx(plain)
    try:
        web = lib().list_shards([f"{ng.url}/g-0.tar"], make_indexes=True,
                                index_cache=str(tmp_path / "webcache"), columns=True)
    finally:
        ng.close()
    assert web[0][1] == 18 and cols(web[0][3]) == want["g-0"]


def test_a_bucketed_reading_over_http_plans_from_the_sizes_it_made(shards, tmp_path):
    """aspect_buckets on plain tars served by nginx: the sizes made into the index cache
    from their headers, every sample once in batches of its nearest bucket; a sample
    without an image is refused, naming it and its shard."""
    www = tmp_path / "www"
    www.mkdir()
    size_of = {}
    for s in range(3):
        with tarfile.open(www / f"b-{s}.tar", "w") as t:
            for i in [i for i in range(s * 14, s * 14 + 14) if encoded(i)]:
                data, ext = encoded(i)
                for e, b in ((ext, data), ("cls", b"1")):
                    info = tarfile.TarInfo(f"k{i:03d}.{e}")
                    info.size = len(b)
                    t.addfile(info, io.BytesIO(b))
                size_of[f"k{i:03d}"] = Image.open(io.BytesIO(data)).size
    (www / "bad").mkdir()
    (www / "bad" / "g-0.tar").write_bytes((shards[0] / "g-0.tar").read_bytes())
    buckets = {(480, 640): "landscape", (640, 480): "portrait", (450, 800): "wide",
               (500, 500): "square"}
    ng = servers.Nginx(www)
    try:
        urls = [f"{ng.url}/b-{s}.tar" for s in range(3)]
        rd = lib().Reader(urls, seed=0, batch_size=3, index_cache=str(tmp_path / "cache"),
                          aspect_buckets=",".join(f"{h}x{w}" for h, w in buckets))
        got, cur = [], []
        for smp in rd:
            cur.append((smp["__key__"], smp["__bucket__"]))
            if smp["__batch_end__"]:
                got.append(cur)
                cur = []
        with pytest.raises(lib().ShardError, match=r"sample 8 of .*g-0\.tar has no image size"):
            list(lib().Reader([f"{ng.url}/bad/g-0.tar"], seed=0, batch_size=3,
                              index_cache=str(tmp_path / "cache"), aspect_buckets="500x500"))
    finally:
        ng.close()
    assert sorted(k for b in got for k, _ in b) == sorted(size_of)
    for b in got:
        assert len({bucket for _, bucket in b}) == 1
        for k, bucket in b:
            W, H = size_of[k]
            near = min(buckets, key=lambda hw: abs(math.log(W / H) - math.log(hw[1] / hw[0])))
            assert bucket == near, (k, size_of[k], bucket)
