"""An image's size from its header alone (shard_image_geometry, _libshard.image_geometry):
equal to PIL's Image.size for JPEG (baseline 4:2:0 and 4:4:4, progressive, grey, CMYK, an
EXIF orientation), PNG and WebP (lossy, lossless, alpha, animated); read in ranges, the
bytes it asks for are the header's (< 2 KiB but for large application segments, which it
reads past without the pixels); bad headers named with their offset."""
import io

import pytest
from PIL import Image

import libshard
from libshard import _libshard


def saved(im, fmt, **kw):
    b = io.BytesIO()
    im.save(b, fmt, **kw)
    return b.getvalue()


def photo(w, h):
    """Not flat: a gradient with some noise, so encoders write real scans."""
    import random
    r = random.Random(w * 7 + h)
    im = Image.linear_gradient("L").resize((w, h)).convert("RGB")
    px = im.load()
    for _ in range(200):
        px[r.randrange(w), r.randrange(h)] = (r.randrange(256), r.randrange(256), 0)
    return im


def ranged(data):
    """The size, reading a prefix at a time as a ranged read would: (w, h), bytes read."""
    n = 16
    while True:
        got = _libshard.image_geometry(data[:n])
        if isinstance(got, tuple):
            return got, n
        assert got > n, (got, n)
        n = got


def exif_orientation(v):
    e = Image.Exif()
    e[0x0112] = v
    return e


CASES = {
    "jpeg 4:2:0": lambda: saved(photo(333, 217), "JPEG", quality=90),
    "jpeg 4:4:4": lambda: saved(photo(217, 333), "JPEG", quality=90, subsampling=0),
    "jpeg progressive": lambda: saved(photo(640, 427), "JPEG", progressive=True),
    "jpeg grey": lambda: saved(photo(101, 99).convert("L"), "JPEG"),
    "jpeg cmyk": lambda: saved(photo(64, 48).convert("CMYK"), "JPEG"),
    "jpeg exif rotated": lambda: saved(photo(300, 200), "JPEG", exif=exif_orientation(6)),
    "png rgb": lambda: saved(photo(321, 123), "PNG"),
    "png rgba": lambda: saved(photo(50, 70).convert("RGBA"), "PNG"),
    "png 16-bit grey": lambda: saved(photo(33, 44).convert("L").convert("I"), "PNG"),
    "webp lossy": lambda: saved(photo(301, 199), "WEBP", quality=80),
    "webp lossless": lambda: saved(photo(97, 203), "WEBP", lossless=True),
    "webp alpha": lambda: saved(photo(120, 80).convert("RGBA"), "WEBP"),
    "webp animated": lambda: saved(photo(64, 40), "WEBP", save_all=True,
                                   append_images=[photo(64, 40)], duration=100),
}


@pytest.mark.parametrize("name", list(CASES))
def test_the_size_pil_gives_from_the_header(name):
    data = CASES[name]()
    want = Image.open(io.BytesIO(data)).size  # as stored: no EXIF transpose
    assert _libshard.image_geometry(data) == want
    got, read = ranged(data)
    assert got == want
    assert read <= 2048 and read < len(data), (read, len(data))


def test_a_large_exif_segment_is_read_past_not_the_pixels():
    big = Image.Exif()
    big[0x010E] = "x" * 60000  # ImageDescription: an application segment of 60 kB
    data = saved(photo(800, 600), "JPEG", exif=big)
    assert _libshard.image_geometry(data) == (800, 600)
    got, read = ranged(data)
    assert got == (800, 600) and 60000 < read < 62000 and read < len(data) - 1000


def test_bad_headers_say_what_and_where():
    jpeg = saved(photo(40, 30), "JPEG")
    # a scan before any frame header
    with pytest.raises(libshard.ShardError, match="JPEG: no frame header before the scan at "
                                                  "byte 2"):
        _libshard.image_geometry(b"\xff\xd8\xff\xda\x00\x08" + b"\x00" * 20)
    # garbage where a marker should be
    with pytest.raises(libshard.ShardError, match="JPEG: no marker at byte 20"):
        _libshard.image_geometry(jpeg[:20] + b"\x00" * 40)
    png = saved(photo(40, 30), "PNG")
    with pytest.raises(libshard.ShardError, match="PNG: the first chunk is not IHDR at byte 8"):
        _libshard.image_geometry(png[:12] + b"IHDX" + png[16:])
    with pytest.raises(libshard.ShardError, match="not an image the loader decodes"):
        _libshard.image_geometry(saved(photo(8, 8), "GIF"))
    with pytest.raises(libshard.ShardError, match="unknown bytes"):
        _libshard.image_geometry(b"hello, this is text")
    # the whole of an image cut before its frame header: more bytes wanted than it has
    cut = jpeg[:25]
    assert _libshard.image_geometry(cut) > len(cut)
