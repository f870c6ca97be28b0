"""Fixtures for the Python tests of libshard (decode pixels, raw reader, torch dataset).

Run with Debian's interpreter, which has numpy, PIL, torch and torchvision:

    /usr/bin/python3 -m pytest tests/python -q -p no:cacheprovider

The extension is imported from $LIBSHARD_PYTHONPATH (default <repo>/build/python, where
meson puts it); shardpack from $SHARDPACK (default <repo>/build/tools/shardpack). The data
sets are small JPEGs made here with PIL and packed once per session.
"""
import io
import json
import os
import random
import subprocess
import sys
import tarfile
import threading
from collections import Counter
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from testtools import shardcat, shardpack, tool_path  # noqa: E402,F401 (fixtures)

REPO = Path(__file__).resolve().parents[2]
_PYPATH = Path(os.environ.get("LIBSHARD_PYTHONPATH", REPO / "build" / "python")).resolve()
if str(_PYPATH) not in sys.path:
    sys.path.insert(0, str(_PYPATH))

import numpy as np  # noqa: E402
from PIL import Image  # noqa: E402

import libshard  # noqa: E402

assert Path(libshard.__file__).resolve().is_relative_to(_PYPATH), (
    f"imported libshard from {libshard.__file__}, not from {_PYPATH}")

# Child processes: no distributed variables leaking in from the environment.
for _v in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"):
    os.environ.pop(_v, None)

# The ImageFolder data set: 300 JPEGs in 5 classes whose names do not sort the way they
# were created, so a label can only be right by following the manifest's class list.
CLASSES = ["zebra", "Apple", "mango", "banana", "cherry"]
NSAMPLES = 300
MAXCOUNT = 40  # samples per shard: 7 shards of 40 and one of 20




PHOTOS = REPO / "tests" / ".photos" / "usr" / "lib" / "python3" / "dist-packages" / "skimage" / "data"
PHOTO_NAMES = ["astronaut.png", "chelsea.png", "coffee.png", "rocket.jpg", "motorcycle_left.png",
               "retina.jpg", "hubble_deep_field.jpg"]


@pytest.fixture(scope="session")
def photos():
    """Real photographs as RGB arrays by name: Debian's python3-skimage sample images,
    unpacked by scripts/test-photos.sh (which scripts/test.sh runs)."""
    if not (PHOTOS / PHOTO_NAMES[0]).exists():
        if os.environ.get("CI"):
            pytest.fail(f"no photographs in {PHOTOS}: run scripts/test-photos.sh")
        pytest.skip(f"no photographs in {PHOTOS}: run scripts/test-photos.sh")
    return {n: np.asarray(Image.open(PHOTOS / n).convert("RGB")) for n in PHOTO_NAMES}


# Under AddressSanitizer, DataLoader workers start from a fork server: forking the test
# process itself, whose torch and libshard threads may be inside ASan's allocator at that
# moment, leaves the child blocked on the allocator's lock forever (GCC 12's libasan takes no
# such lock around fork; seen with gdb in a hung worker).
if os.environ.get("LIBSHARD_TEST_FORKSERVER"):
    import multiprocessing
    multiprocessing.set_start_method("forkserver", force=True)

# Hang bounds stretch under a sanitizer (the sanitized build sets it: AddressSanitizer runs
# several times slower, DataLoader workers start slowly).
SLOW = float(os.environ.get("LIBSHARD_TEST_SLOWDOWN", "1"))

# The README run end to end as written (the demo's training, the quick start on photographs):
# the plain build's suite runs them; under a sanitizer they take many minutes and reach no C
# path the rest of the suite does not.
end_to_end = pytest.mark.skipif(SLOW > 1, reason="a README run end to end: the plain build "
                                "runs it")


def within(seconds, fn, what):
    """Runs fn() on a daemon thread; a hang fails the test instead of the whole suite.
    (libshard releases the GIL while it waits, so the watchdog keeps running.) Stretched
    under a sanitizer, but never past a few minutes: callers often pass bounds already
    stretched, and one hang must leave the suite's own time for the rest."""
    seconds = min(seconds * SLOW, max(seconds, 300))
    box = {}

    def target():
        try:
            box["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - re-raised on the test's thread
            box["error"] = e

    t = threading.Thread(target=target, daemon=True, name=f"within: {what}")
    t.start()
    t.join(seconds)
    if t.is_alive():
        pytest.fail(f"hang: {what} did not finish within {seconds} s")
    if "error" in box:
        raise box["error"]
    return box.get("value")


# ---- images ---------------------------------------------------------------------------------


def textured(w, h, seed=0):
    """A smooth but detailed RGB test picture (ramps, a sine texture, mild noise) as uint8."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    a = np.stack([127 + 80 * np.sin(x / 9.0) * np.cos(y / 7.0),
                  x * 255 / w + 30 * np.sin(y / 5.0),
                  y * 255 / h], -1)
    a += rng.normal(0, 4, a.shape)
    return np.clip(a, 0, 255).astype(np.uint8)


def encode(arr_or_image, fmt="JPEG", **kw):
    im = arr_or_image if isinstance(arr_or_image, Image.Image) else Image.fromarray(arr_or_image)
    b = io.BytesIO()
    im.save(b, fmt, **kw)
    return b.getvalue()


def jpeg(arr, quality=90, subsampling=2):
    """subsampling: 0 = 4:4:4, 2 = 4:2:0 (PIL's numbering)."""
    return encode(arr, "JPEG", quality=quality, subsampling=subsampling)


def pil_rgb(data):
    return np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))


def decode_rgb(data):
    """libshard.decode_rgb as an (H, W, 3) uint8 array."""
    px, w, h = libshard.decode_rgb(data)
    assert len(px) == w * h * 3
    return np.frombuffer(px, np.uint8).reshape(h, w, 3)


def decode(data, w, h, **kw):
    """libshard.decode (NHWC uint8 unless layout says otherwise) as an array."""
    out = libshard.decode(data, w, h, **kw)
    if kw.get("layout") == "nchw":
        return np.frombuffer(out, np.uint8).reshape(3, h, w)
    return np.frombuffer(out, np.uint8).reshape(h, w, 3)


def absdiff(a, b):
    assert a.shape == b.shape, (a.shape, b.shape)
    return np.abs(a.astype(np.int32) - b.astype(np.int32))


def psnr(a, b):
    mse = float((absdiff(a, b).astype(np.float64) ** 2).mean())
    return float("inf") if mse == 0 else 10 * np.log10(255.0 ** 2 / mse)


# ---- data sets ------------------------------------------------------------------------------


def make_imagefolder(root, n=NSAMPLES, classes=CLASSES, seed=0, size=(48, 120)):
    """ImageFolder layout: root/<class>/<name>.jpg, n small JPEGs of varied sizes."""
    r = random.Random(seed)
    for i in range(n):
        p = Path(root) / classes[i % len(classes)] / f"img{i:04d}.jpg"
        p.parent.mkdir(parents=True, exist_ok=True)
        w, h = r.randint(*size), r.randint(*size)
        small = np.random.default_rng(i).integers(0, 256, (h // 8 + 1, w // 8 + 1, 3), dtype=np.uint8)
        Image.fromarray(small).resize((w, h), Image.BILINEAR).save(p, quality=90)


def pack(shardpack, src, out, maxcount=MAXCOUNT):
    out.mkdir(parents=True)
    cp = subprocess.run([str(shardpack), str(src), "-o", str(out / "train-%06d.tar"),
                         "-c", str(maxcount), "--no-fsync", "-q"],
                        capture_output=True, timeout=120)
    assert cp.returncode == 0, cp.stderr.decode(errors="replace")
    return out / "train.json"


def webdataset_samples(path):
    """A shard's samples as WebDataset groups them, read with Python's tarfile alone:
    regular members only; key = the member name up to the first dot of its basename, field
    = the rest, lower-cased; a new sample starts whenever the key changes; members whose
    basename has no dot, starts with a dot, or (at top level) starts with "__" are skipped."""
    samples = []
    with tarfile.open(path, "r:") as tf:
        for m in tf:
            if not m.isreg():
                continue
            d, slash, base = m.name.rpartition("/")
            if "." not in base or base.startswith(".") or base.startswith("__"):
                continue
            stem, _, field = base.partition(".")
            key = d + slash + stem
            data = tf.extractfile(m).read()
            if not samples or samples[-1]["__key__"] != key:
                samples.append({"__key__": key, "__url__": str(path)})
            samples[-1][field.lower()] = data
    return samples


class Packed:
    """A packed data set: manifest, shards in manifest order, the samples tarfile sees."""

    def __init__(self, manifest):
        self.manifest = Path(manifest)
        self.meta = json.loads(self.manifest.read_text())
        self.classes = self.meta["libshard"]["classes"]
        self.shards = [self.manifest.parent / s["url"] for s in self.meta["shardlist"]]
        self.by_shard = [webdataset_samples(p) for p in self.shards]
        self.samples = [s for ss in self.by_shard for s in ss]
        self.keys = [s["__key__"] for s in self.samples]
        self.label_of = {s["__key__"]: int(s["cls"]) for s in self.samples}

    def class_label(self, key):
        """The label the manifest's class list gives the key's class folder."""
        return self.classes.index(key.split("/")[0])

    def label_counts(self):
        return Counter(self.label_of.values())


@pytest.fixture(scope="session")
def data_root(tmp_path_factory):
    return tmp_path_factory.mktemp("libshard-python")


@pytest.fixture(scope="session")
def imagefolder(data_root):
    root = data_root / "images"
    make_imagefolder(root)
    return root


@pytest.fixture(scope="session")
def packed(shardpack, data_root, imagefolder):
    ds = Packed(pack(shardpack, imagefolder, data_root / "shards"))
    assert len(ds.samples) == NSAMPLES and len(set(ds.keys)) == NSAMPLES
    assert len(ds.shards) == 8
    return ds


@pytest.fixture(scope="session")
def packed_bad(shardpack, data_root):
    """40 samples in 4 shards of 10; one JPEG (class 'b', img0011) cut in half."""
    root = data_root / "bad-images"
    make_imagefolder(root, n=40, classes=["a", "b"], seed=1)
    bad = root / "b" / "img0011.jpg"
    data = bad.read_bytes()
    bad.write_bytes(data[: len(data) // 2])
    ds = Packed(pack(shardpack, root, data_root / "bad-shards", maxcount=10))
    assert len(ds.samples) == 40
    ds.bad_key = "b/img0011"
    ds.bad_shard = next(p for p, ss in zip(ds.shards, ds.by_shard)
                        if any(s["__key__"] == ds.bad_key for s in ss))
    return ds
