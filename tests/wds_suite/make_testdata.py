"""WebDataset's testdata/imagenet-000000.tgz, which its public repository lacks (its tests
read it), made anew: 47 samples keyed as its testdata/imagenet-extra.json lists them, each
KEY.cls (a class index as text, the first 304), KEY.png (an RGB photograph; the first
600x793, which its tests check), KEY.wnid (a WordNet id) and KEY.xml ("None"), in that
order, gzip-compressed with no timestamp. The photographs are crops of the sample images of
Debian's python3-skimage (scripts/test-photos.sh unpacks them), so the first 10 KiB of the
gzip stream end inside 10.png, after 10.cls, as the tests of a cut shard need. The same
input gives the same bytes.

    /usr/bin/python3 tests/wds_suite/make_testdata.py WEBDATASET/testdata
"""
import gzip
import io
import json
import os
import random
import sys
import tarfile
from pathlib import Path

from PIL import Image

PHOTOS = (Path(__file__).resolve().parents[1] / ".photos" / "usr" / "lib" / "python3" /
          "dist-packages" / "skimage" / "data")
NAMES = ["chelsea.png", "coffee.png", "astronaut.png", "rocket.jpg", "motorcycle_left.png",
         "hubble_deep_field.jpg", "ihc.png", "retina.jpg", "color.png"]


def photographs():
    found = []
    for name in NAMES:
        p = PHOTOS / name
        if p.exists():
            found.append(Image.open(p).convert("RGB"))
    if not found:
        raise SystemExit(f"make_testdata: no photographs in {PHOTOS}: run scripts/test-photos.sh")
    return found


def png_of(photos, rng, i):
    """The i-th sample's PNG: the first 600x793, the others crops of 160 to 360 pixels."""
    im = photos[i % len(photos)]
    if i == 0:
        w, h = 600, 793
    else:
        w, h = rng.randint(160, 360), rng.randint(160, 360)
    scale = max(w / im.width, h / im.height, 1.0)
    if scale > 1.0:
        im = im.resize((int(im.width * scale) + 1, int(im.height * scale) + 1))
    x, y = rng.randint(0, im.width - w), rng.randint(0, im.height - h)
    out = io.BytesIO()
    im.crop((x, y, x + w, y + h)).save(out, "PNG")
    return out.getvalue()


def members(keys):
    rng = random.Random(47)
    photos = photographs()
    for i, key in enumerate(keys):
        cls = 304 if i == 0 else rng.randint(0, 999)
        wnid = f"n{rng.randint(1000000, 15000000):08d}"
        yield f"{key}.cls", str(cls).encode()
        yield f"{key}.png", png_of(photos, rng, i)
        yield f"{key}.wnid", wnid.encode()
        yield f"{key}.xml", b"None"


def main():
    testdata = Path(sys.argv[1])
    keys = list(json.loads((testdata / "imagenet-extra.json").read_text()))
    tar = io.BytesIO()
    with tarfile.open(fileobj=tar, mode="w", format=tarfile.USTAR_FORMAT) as tf:
        for name, data in members(keys):
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(data), 0, 0o444
            info.uname = info.gname = "bigdata"
            tf.addfile(info, io.BytesIO(data))
    out = testdata / "imagenet-000000.tgz"
    tmp = out.with_suffix(".tmp")
    tmp.write_bytes(gzip.compress(tar.getvalue(), mtime=0))
    os.replace(tmp, out)
    print(f"make_testdata: {out}: {len(keys)} samples, {out.stat().st_size} bytes")


if __name__ == "__main__":
    main()
