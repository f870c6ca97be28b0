"""Pixel tests: libshard's decode, resample and crop paths against PIL on the same files.

Tolerances, each measured and stated here:
- full decode (libshard.decode_rgb) vs PIL's decode: max abs difference <= 1 (both use
  libjpeg-turbo's ISLOW IDCT and fancy upsampling; in practice they are identical);
- resize_rgb vs PIL's Image.resize(BILINEAR, box): identical (max 0) when the box is exact in
  float32 (PIL parses the box as C floats), within 1 for any box;
- the transform's resampler (decode(..., fast=False)) vs PIL on the same box: max <= 1
  (decode.h: "within 1 of PIL's bytes for the same box");
- crop="center" with fast=False against torchvision's Resize(256) + CenterCrop(224) on real
  photographs: max abs <= 1 on every pixel (the box is where torchvision's resize-then-crop
  puts it, and the resampler is PIL's); with fast=True (the DCT-scaled partial decode):
  mean abs <= 3 and PSNR >= 35 dB, as for the fast path below (measured: mean 0.5 to 2.4,
  PSNR 38 to 46 dB on the photographs);
- crop="cover" (an aspect bucket's crop: resized to cover the output, aspect kept, the middle
  taken) with fast=False against PIL's resize((round(W*s), round(H*s)), BILINEAR) + crop:
  max abs <= 1; with fast=True mean abs <= 3 and PSNR >= 35 dB; crop="cover_random" takes
  the output at each whole-pixel offset of the resized image, each as likely, and its
  pixels are PIL's resize + crop at that offset;
- random_resized: the boxes drawn are distributed as torchvision's RandomResizedCrop
  draws them (area, aspect, position; two-sample Kolmogorov-Smirnov at 1%);
- the fast path (DCT-scaled, cropped partial decode) vs the full decode, and vs PIL's
  draft + crop + resize: mean abs <= 3 and PSNR >= 35 dB; a box shifted by 6 source pixels
  scores below 35 dB, so the bound does see a wrong crop position;
- CMYK JPEG vs PIL's convert("RGB"): max abs <= 2;
- WebP (lossy, lossless, with alpha) vs PIL's convert("RGB"): max abs <= 1 (both decode
  with libwebp; measured: identical).
"""
import io
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import libshard

from .conftest import absdiff, decode, decode_rgb, encode, jpeg, pil_rgb, psnr, textured

SIZES = [(500, 375), (375, 500), (333, 221), (1600, 1200)]
SUBSAMPLING = {"444": 0, "420": 2}

FAST_MEAN, FAST_PSNR = 3.0, 35.0


@pytest.fixture(scope="module")
def big():
    """A 1600x1200 4:2:0 JPEG: large enough for DCT scales 1/2 .. 1/8."""
    return jpeg(textured(1600, 1200, seed=3))


@pytest.fixture(scope="module")
def medium():
    return jpeg(textured(500, 375, seed=4))


def f32(v):
    return float(np.float32(v))


def pil_resize(arr, box, ow, oh):
    x0, y0, bw, bh = box
    return np.asarray(Image.fromarray(arr).resize((ow, oh), Image.BILINEAR,
                                                  box=(x0, y0, x0 + bw, y0 + bh)))


def center_box(W, H, ow, oh, fraction=0.875):
    """torchvision's Resize(floor(min(ow, oh) / fraction)) + CenterCrop((oh, ow)) as one box
    of the original image, computed the way torchvision computes it (its
    _compute_resized_output_size, then CenterCrop's rounded offsets)."""
    n = math.floor(min(ow, oh) / fraction)
    short, long = (W, H) if W <= H else (H, W)
    nl = int(n * long / short)
    rw, rh = (n, nl) if W <= H else (nl, n)
    sx, sy = W / rw, H / rh
    return (round((rw - ow) / 2.0) * sx, round((rh - oh) / 2.0) * sy, ow * sx, oh * sy)


# ---- full decode ----------------------------------------------------------------------------


@pytest.mark.parametrize("sub", sorted(SUBSAMPLING))
@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_full_decode_equals_pil(size, sub):
    w, h = size
    data = jpeg(textured(w, h, seed=w + h), subsampling=SUBSAMPLING[sub])
    ours = decode_rgb(data)
    theirs = pil_rgb(data)
    assert ours.shape == (h, w, 3)
    d = absdiff(ours, theirs)
    assert d.max() <= 1, f"{w}x{h} {sub}: max diff {d.max()}, {np.count_nonzero(d)} values differ"


def test_greyscale_jpeg_to_rgb():
    grey = textured(321, 243, seed=5)[..., 0]
    data = encode(Image.fromarray(grey, "L"), "JPEG", quality=90)
    assert Image.open(io.BytesIO(data)).mode == "L"
    ours = decode_rgb(data)
    assert ours.shape == (243, 321, 3)
    assert absdiff(ours, pil_rgb(data)).max() <= 1
    # through the transform (fast path and full path) the three channels stay equal
    for fast in (True, False):
        out = decode(data, 64, 48, crop="center", fast=fast)
        assert (out[..., 0] == out[..., 1]).all() and (out[..., 1] == out[..., 2]).all()


def test_cmyk_jpeg_to_rgb():
    """PIL writes CMYK JPEGs Adobe-style (inverted, with an APP14 'Adobe' marker) and turns
    CMYK into RGB as r = 255 - c - k + c*k/255 (i.e. (255-c)(255-k)/255): max diff <= 2."""
    rng = np.random.default_rng(6)
    cmyk = np.concatenate([textured(200, 150, seed=6), rng.integers(0, 256, (150, 200, 1), np.uint8)], -1)
    data = encode(Image.fromarray(cmyk, "CMYK"), "JPEG", quality=90)
    im = Image.open(io.BytesIO(data))
    assert im.mode == "CMYK" and "adobe" in im.info
    ours = decode_rgb(data)
    theirs = np.asarray(im.convert("RGB"))
    d = absdiff(ours, theirs)
    assert d.max() <= 2, (f"CMYK -> RGB differs from PIL: max {d.max()}, mean {d.mean():.2f} "
                          f"(PIL multiplies (255-c)(255-k)/255; 255-c-k clipped differs by up to 64)")
    # and the transform path decodes it too, as RGB
    assert decode(data, 32, 32, crop="center", fast=True).shape == (32, 32, 3)


# ---- PNG ------------------------------------------------------------------------------------


def _png_images():
    rgb = textured(97, 61, seed=7)
    opaque = np.concatenate([rgb, np.full((61, 97, 1), 255, np.uint8)], -1)
    return {
        "RGB": Image.fromarray(rgb),
        "L": Image.fromarray(rgb[..., 1], "L"),
        "P": Image.fromarray(rgb).quantize(64),
        "RGBA-opaque": Image.fromarray(opaque, "RGBA"),
        "LA-opaque": Image.fromarray(opaque, "RGBA").convert("LA"),
    }


@pytest.mark.parametrize("mode", sorted(_png_images()))
def test_png_equals_pil(mode):
    data = encode(_png_images()[mode], "PNG")
    ours = decode_rgb(data)
    assert ours.shape == (61, 97, 3)
    assert absdiff(ours, pil_rgb(data)).max() == 0
    assert decode(data, 40, 30, crop="none", fast=False).shape == (30, 40, 3)


def test_png_with_alpha_drops_alpha_like_pil_and_is_deterministic():
    """PNG with translucent pixels: libshard drops alpha as PIL's convert("RGB") does (the
    reference pipelines' view), whatever the alpha, and decoding twice gives the same bytes."""
    rgba = np.concatenate([textured(80, 60, seed=8), np.full((60, 80, 1), 255, np.uint8)], -1)
    rgba[:20, :, 3] = 0      # transparent band
    rgba[20:40, :, 3] = 128  # half transparent band
    data = encode(Image.fromarray(rgba, "RGBA"), "PNG")
    first = decode_rgb(data).copy()
    assert first.shape == (60, 80, 3)
    again = [decode_rgb(data).copy() for _ in range(5)]
    # some garbage of the same size in between, as a busy decode thread would have
    decode_rgb(encode(textured(80, 60, seed=9), "PNG"))
    again.append(decode_rgb(data).copy())
    for a in again:
        assert (a == first).all(), "decoding the same RGBA PNG twice gives different pixels"
    theirs = np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))
    assert (first == theirs).all(), "RGBA PNG must match PIL's convert('RGB')"
    assert (first == rgba[:, :, :3]).all()


# ---- WebP ----------------------------------------------------------------------------------


def _webp(kind):
    rgb = textured(97, 61, seed=11)
    if kind == "lossy":
        return encode(Image.fromarray(rgb), "WEBP", quality=80)
    if kind == "lossless":
        return encode(Image.fromarray(rgb), "WEBP", lossless=True)
    rgba = np.concatenate([rgb, np.full((61, 97, 1), 255, np.uint8)], -1)
    rgba[:20, :, 3] = 0
    rgba[20:40, :, 3] = 128
    lossless = kind == "alpha-lossless"
    return encode(Image.fromarray(rgba, "RGBA"), "WEBP", lossless=lossless, quality=80,
                  exact=True)


@pytest.mark.parametrize("kind", ["lossy", "lossless", "alpha-lossy", "alpha-lossless"])
def test_webp_equals_pil(kind):
    data = _webp(kind)
    ours = decode_rgb(data)
    assert ours.shape == (61, 97, 3)
    assert absdiff(ours, pil_rgb(data)).max() <= 1
    # through the transform's crop and resize as any image: as PIL's decode, resized
    full = decode(data, 40, 30, crop="none", fast=False)
    alone = decode(encode(Image.fromarray(pil_rgb(data)), "PNG"), 40, 30, crop="none", fast=False)
    assert absdiff(full, alone).max() <= 1


def test_webp_limits_and_refusals():
    data = _webp("lossless")
    assert data[12:16] == b"VP8L" and data[20] == 0x2F
    # the header declares 16384 x 16384 (its 14-bit width and height fields all ones): past
    # the limit before a pixel is decoded
    bits = int.from_bytes(data[21:25], "little") | (1 << 28) - 1
    big = data[:21] + bits.to_bytes(4, "little") + data[25:]
    with pytest.raises(libshard.ShardError, match="a WebP of 16384x16384 pixels, more than "
                                                  "the limit"):
        libshard.decode_rgb(big)
    with pytest.raises(libshard.ShardError, match="corrupt WebP"):
        libshard.decode_rgb(data[:40])
    frames = [Image.fromarray(textured(40, 30, seed=s)) for s in range(3)]
    buf = io.BytesIO()
    frames[0].save(buf, "WEBP", save_all=True, append_images=frames[1:], duration=50)
    with pytest.raises(libshard.ShardError, match="animated WebP .40x30. is not decoded"):
        libshard.decode_rgb(buf.getvalue())


# ---- resampling -----------------------------------------------------------------------------

BOXES = [
    ((0, 0, 500, 375), (224, 224)),           # whole image, shrink with aspect change
    ((10.5, 20.25, 300.3, 200.7), (224, 224)),  # fractional box
    ((100, 100, 50, 40), (224, 224)),         # strong upscale
    ((0, 0, 500, 375), (37, 23)),             # strong downscale (wide filter support)
    ((3, 7, 400, 300), (500, 375)),           # upscale of an inner box
    ((0, 0, 500, 375), (500, 200)),           # one axis only
    ((1.5, 0, 60, 375), (17, 600)),           # shrink one axis, grow the other
    ((85.9375, 23.4375, 328.125, 328.125), (224, 224)),  # the center crop's box
]


@pytest.fixture(scope="module")
def medium_rgb(medium):
    return decode_rgb(medium)


@pytest.mark.parametrize("box,out", BOXES, ids=[f"{b}->{o}" for b, o in BOXES])
def test_resize_rgb_equals_pil(medium_rgb, box, out):
    h, w, _ = medium_rgb.shape
    x0, y0, bw, bh = box
    # the box as PIL sees it: its C code parses the four numbers as float32
    x1, y1, x0, y0 = f32(x0 + bw), f32(y0 + bh), f32(x0), f32(y0)
    fbox = (x0, y0, x1 - x0, y1 - y0)
    ow, oh = out
    ours = np.frombuffer(libshard.resize_rgb(medium_rgb.tobytes(), w, h, fbox, ow, oh),
                         np.uint8).reshape(oh, ow, 3)
    theirs = pil_resize(medium_rgb, fbox, ow, oh)
    d = absdiff(ours, theirs)
    assert d.max() == 0, f"max {d.max()}, {np.count_nonzero(d)} of {d.size} values differ"
    # the same box in double precision: within 1 (PIL rounds the box to float32)
    ours64 = np.frombuffer(libshard.resize_rgb(medium_rgb.tobytes(), w, h, box, ow, oh),
                           np.uint8).reshape(oh, ow, 3)
    assert absdiff(ours64, theirs).max() <= 1


def test_resize_rgb_rejects_bad_boxes(medium_rgb):
    h, w, _ = medium_rgb.shape
    for box in [(0, 0, w + 1, h), (-1, 0, 10, 10), (0, 0, 0, 10), (w - 5, 0, 10, 10)]:
        with pytest.raises((ValueError, libshard.ShardError)):
            libshard.resize_rgb(medium_rgb.tobytes(), w, h, box, 10, 10)
    with pytest.raises(ValueError):
        libshard.resize_rgb(medium_rgb.tobytes()[:-1], w, h, (0, 0, w, h), 10, 10)


# ---- evaluation crop ------------------------------------------------------------------------


@pytest.mark.parametrize("size", [(500, 375), (375, 500), (1600, 1200), (333, 221)],
                         ids=lambda s: f"{s[0]}x{s[1]}")
def test_center_crop_full_decode_equals_pil(size):
    W, H = size
    data = jpeg(textured(W, H, seed=10))
    full = pil_rgb(data)
    ours = decode(data, 224, 224, crop="center", fast=False)
    box = center_box(W, H, 224, 224)
    theirs = pil_resize(full, box, 224, 224)
    d = absdiff(ours, theirs)
    assert d.max() <= 1, f"center crop vs PIL resize of box {box}: max {d.max()}"


def pil_cover(arr, ow, oh, x=None, y=None):
    """Resized with PIL to cover ow x oh, aspect kept (sides rounded as Python rounds), then
    ow x oh cropped at (x, y), the middle by default: as diffusion trainers bucket."""
    H, W = arr.shape[:2]
    s = max(ow / W, oh / H)
    rw, rh = max(ow, round(W * s)), max(oh, round(H * s))
    big = Image.fromarray(arr).resize((rw, rh), Image.BILINEAR)
    x = (rw - ow) // 2 if x is None else x
    y = (rh - oh) // 2 if y is None else y
    return np.asarray(big.crop((x, y, x + ow, y + oh))), (rw, rh)


# (image, bucket): wider and taller than the bucket, square into landscape and portrait,
# upscaled (a small image into a large bucket), odd sizes
COVER_CASES = [((500, 375), (256, 192)), ((375, 500), (192, 256)), ((500, 375), (192, 256)),
               ((400, 400), (320, 180)), ((400, 400), (180, 320)), ((160, 90), (448, 256)),
               ((333, 221), (224, 224)), ((1600, 1200), (512, 384))]


@pytest.mark.parametrize("size,out", COVER_CASES, ids=str)
def test_cover_crop_equals_pil_resize_then_crop(size, out):
    W, H = size
    ow, oh = out
    data = jpeg(textured(W, H, seed=12))
    full = pil_rgb(data)
    theirs, _ = pil_cover(full, ow, oh)
    exact = decode(data, ow, oh, crop="cover", fast=False)
    d = absdiff(exact, theirs)
    assert d.max() <= 1, f"cover {size} -> {out}: max {d.max()}"
    fast = decode(data, ow, oh, crop="cover", fast=True)
    f = absdiff(fast, theirs)
    assert f.mean() <= FAST_MEAN and psnr(fast, theirs) >= FAST_PSNR, (f.mean(), psnr(fast, theirs))


@pytest.mark.parametrize("size,out", [((500, 375), (256, 128)), ((300, 500), (200, 200))], ids=str)
def test_cover_random_offsets_are_uniform_and_pil_at_each(size, out):
    W, H = size
    ow, oh = out
    full = textured(W, H, seed=13)
    _, (rw, rh) = pil_cover(full, ow, oh)
    span = (rw - ow) if rw > ow else (rh - oh)
    assert span > 0 and (rw == ow or rh == oh)  # one side free
    offsets = []
    for seed in range(400):
        (x, y, w, h), _ = libshard.crop_box(W, H, ow, oh, crop="cover_random", seed=seed)
        assert w == pytest.approx(ow * W / rw) and h == pytest.approx(oh * H / rh)
        k = x * rw / W if rw > ow else y * rh / H
        assert abs(k - round(k)) < 1e-6 and 0 <= round(k) <= span
        offsets.append(round(k))
    # every offset as likely: chi-square of the counts in 4 bins at 1%
    counts = np.bincount(np.array(offsets) * 4 // (span + 1), minlength=4)
    assert ((counts - 100) ** 2 / 100).sum() < 11.34, counts
    # negative control: a box always in the middle is not uniform
    mid = np.bincount(np.full(400, span // 2) * 4 // (span + 1), minlength=4)
    assert ((mid - 100) ** 2 / 100).sum() >= 11.34
    data = jpeg(full)
    for seed in (1, 2, 3):
        (x, y, _, _), _ = libshard.crop_box(W, H, ow, oh, crop="cover_random", seed=seed)
        theirs, _ = pil_cover(pil_rgb(data), ow, oh, round(x * rw / W), round(y * rh / H))
        ours = decode(data, ow, oh, crop="cover_random", fast=False, seed=seed)
        assert absdiff(ours, theirs).max() <= 1


PHOTO_SIZES = [None, (500, 375), (375, 500), (333, 221), (257, 300)]


def photo_jpegs(photos):
    """Each photograph (whole, and cut to sizes of both orientations, odd and near the crop)
    as a JPEG of quality 90, with a name."""
    for name, arr in photos.items():
        for size in PHOTO_SIZES:
            w, h = (arr.shape[1], arr.shape[0]) if size is None else size
            w, h = min(w, arr.shape[1]), min(h, arr.shape[0])
            yield f"{name} {w}x{h}", jpeg(np.ascontiguousarray(arr[:h, :w]), quality=90)


def test_center_crop_equals_torchvision_on_photographs(photos):
    T = pytest.importorskip("torchvision.transforms")
    worst = {False: 0, True: 0}
    for name, data in photo_jpegs(photos):
        im = Image.open(io.BytesIO(data)).convert("RGB")
        tv = np.asarray(T.CenterCrop(224)(T.Resize(256)(im)))
        exact = decode(data, 224, 224, crop="center", fast=False)
        d = absdiff(exact, tv)
        assert d.max() <= 1, (f"{name}: crop='center', fast=False vs torchvision: max {d.max()}, "
                              f"{np.count_nonzero(d > 1)} values off by more than 1")
        fast = decode(data, 224, 224, crop="center", fast=True)
        f = absdiff(fast, tv)
        assert f.mean() <= FAST_MEAN and psnr(fast, tv) >= FAST_PSNR, (
            f"{name}: fast vs torchvision: mean {f.mean():.2f}, PSNR {psnr(fast, tv):.1f} dB")
        worst[False] = max(worst[False], d.max())
    assert worst[False] <= 1


@pytest.mark.parametrize("size,out", [((500, 375), (224, 224)), ((375, 500), (128, 160)),
                                      ((1000, 872), (96, 96))], ids=str)
def test_center_box_is_torchvisions(size, out):
    """The box as libshard draws it (crop_box) is torchvision's, on sizes where its integer
    rounding matters."""
    W, H = size
    ow, oh = out
    (x, y, w, h), flipped = libshard.crop_box(W, H, ow, oh, crop="center")
    assert (x, y, w, h) == pytest.approx(center_box(W, H, ow, oh), abs=1e-9)
    assert not flipped


def _ks(a, b):
    """The two-sample Kolmogorov-Smirnov statistic: the largest gap between the empirical
    distribution functions of a and b."""
    a, b = np.sort(a), np.sort(b)
    grid = np.concatenate([a, b])
    return np.abs(np.searchsorted(a, grid, side="right") / len(a) -
                  np.searchsorted(b, grid, side="right") / len(b)).max()


def _fallback(W, H, ratio):
    """RandomResizedCrop's box when all ten tries fail: the central crop of the image at
    the nearest allowed aspect."""
    w, h = W, H
    if W / H < min(ratio):
        h = int(round(w / min(ratio)))
    elif W / H > max(ratio):
        w = int(round(h * max(ratio)))
    return ((W - w) // 2, (H - h) // 2, w, h)


def _box_features(boxes, W, H, ratio):
    b = np.asarray(boxes, dtype=float)
    x, y, w, h = b.T
    return {"area": w * h / (W * H), "log aspect": np.log(w / h),
            "x center": (x + w / 2) / W, "y center": (y + h / 2) / H,
            "fallback": (b == np.asarray(_fallback(W, H, ratio), dtype=float)).all(axis=1)}


@pytest.mark.parametrize("size,scale,ratio", [((500, 375), (0.08, 1.0), (3 / 4, 4 / 3)),
                                              ((1000, 250), (0.08, 1.0), (3 / 4, 4 / 3)),
                                              ((400, 400), (0.35, 1.0), (0.5, 2.0))], ids=str)
def test_random_resized_boxes_are_distributed_as_torchvisions(size, scale, ratio):
    torch = pytest.importorskip("torch")
    T = pytest.importorskip("torchvision.transforms")
    W, H = size
    n = 6000
    ours = [libshard.crop_box(W, H, crop="random_resized", seed=s, scale=scale, ratio=ratio)[0]
            for s in range(n)]
    torch.manual_seed(0)
    img = torch.empty(3, H, W)
    theirs = []
    for _ in range(n):
        i, j, h, w = T.RandomResizedCrop.get_params(img, list(scale), list(ratio))
        theirs.append((j, i, w, h))
    fo, ft = _box_features(ours, W, H, ratio), _box_features(theirs, W, H, ratio)
    bound = 1.63 * math.sqrt(2 / n)  # KS critical value at 1%
    for k in ("area", "log aspect", "x center", "y center"):
        assert _ks(fo[k], ft[k]) < bound, f"{k}: KS {_ks(fo[k], ft[k]):.4f} >= {bound:.4f}"
    # how often all ten tries fail and the central fallback is taken
    po, pt = fo["fallback"].mean(), ft["fallback"].mean()
    assert abs(po - pt) < 4 * math.sqrt(max(pt, 1 / n) / n) + 1e-3, (po, pt)
    # the test can fail: a narrower scale range is told apart
    other = [libshard.crop_box(W, H, crop="random_resized", seed=s, scale=(0.2, 1.0),
                               ratio=ratio)[0] for s in range(n)]
    assert _ks(_box_features(other, W, H, ratio)["area"], ft["area"]) > bound


# ---- the fast path: DCT scaling and partial decode -----------------------------------------


def test_fast_random_crops_close_to_full_decode(big, medium):
    for name, data in (("1600x1200", big), ("500x375", medium)):
        for seed in range(24):
            for flip in (False, True):
                fast = decode(data, 224, 224, seed=seed, fast=True, flip=flip)
                full = decode(data, 224, 224, seed=seed, fast=False, flip=flip)
                d = absdiff(fast, full)
                assert d.mean() <= FAST_MEAN and psnr(fast, full) >= FAST_PSNR, (
                    f"{name} seed {seed}: fast vs full mean {d.mean():.2f}, "
                    f"PSNR {psnr(fast, full):.1f} dB")


def _draft(data, box, ow, oh):
    """PIL's draft mode: the smallest 1/2^k DCT scale keeping the box >= the output, then
    crop + resize of the box (scaled to the drafted image) with BILINEAR."""
    x0, y0, bw, bh = box
    im = Image.open(io.BytesIO(data))
    W, H = im.size
    im.draft("RGB", (math.ceil(W * ow / bw), math.ceil(H * oh / bh)))
    fx, fy = im.size[0] / W, im.size[1] / H
    im = im.convert("RGB")
    return np.asarray(im.resize((ow, oh), Image.BILINEAR,
                                box=(x0 * fx, y0 * fy, (x0 + bw) * fx, (y0 + bh) * fy))), fx


CASES = [("center", 224, 224), ("center", 96, 96), ("center", 300, 200),
         ("none", 224, 224), ("none", 100, 100), ("none", 640, 480), ("none", 500, 400)]


@pytest.mark.parametrize("crop,ow,oh", CASES)
def test_fast_path_close_to_pil_draft(big, crop, ow, oh):
    W, H = 1600, 1200
    box = center_box(W, H, ow, oh) if crop == "center" else (0, 0, W, H)
    draft, scale = _draft(big, box, ow, oh)
    assert scale < 1, "the case must exercise DCT scaling"
    fast = decode(big, ow, oh, crop=crop, fast=True)
    full = decode(big, ow, oh, crop=crop, fast=False)
    for name, ref in (("PIL draft", draft), ("full decode", full)):
        d = absdiff(fast, ref)
        assert d.mean() <= FAST_MEAN and psnr(fast, ref) >= FAST_PSNR, (
            f"{crop} {ow}x{oh}: fast vs {name}: mean {d.mean():.2f}, PSNR {psnr(fast, ref):.1f} dB")


def test_fast_path_tolerance_detects_a_shifted_crop(big):
    """The fast-path bound is tight enough to fail a crop 6 source pixels off."""
    W, H = 1600, 1200
    x0, y0, bw, bh = center_box(W, H, 224, 224)
    full = pil_rgb(big)
    right = pil_resize(full, (x0, y0, bw, bh), 224, 224)
    shifted = pil_resize(full, (x0 + 6, y0, bw, bh), 224, 224)
    assert psnr(right, shifted) < FAST_PSNR
    fast = decode(big, 224, 224, crop="center", fast=True)
    assert psnr(fast, right) >= FAST_PSNR > psnr(fast, shifted)


# ---- randomness, flip, layout, options ------------------------------------------------------


def test_same_seed_same_bytes_different_seeds_different_crops(big, medium):
    for data in (big, medium):
        for fast in (True, False):
            a = libshard.decode(data, 64, 64, seed=42, fast=fast, flip=True)
            b = libshard.decode(data, 64, 64, seed=42, fast=fast, flip=True)
            assert a == b
            outs = {libshard.decode(data, 64, 64, seed=s, fast=fast) for s in range(16)}
            assert len(outs) >= 15, "different seeds must give different crops"


def test_flip_mirrors_the_unflipped_crop(medium):
    flipped_seeds = 0
    for seed in range(16):
        plain = decode(medium, 80, 60, seed=seed, flip=False)
        maybe = decode(medium, 80, 60, seed=seed, flip=True)
        if (plain == maybe).all():
            continue
        flipped_seeds += 1
        assert (maybe == plain[:, ::-1]).all(), f"seed {seed}: flip is not the mirror image"
    # each seed flips with probability 1/2: all 16 or none would be a broken coin
    assert 2 <= flipped_seeds <= 14, flipped_seeds


@pytest.mark.parametrize("crop", ["random_resized", "center", "none"])
def test_layouts_are_transposes(medium, crop):
    nhwc = decode(medium, 72, 56, seed=3, crop=crop, layout="nhwc", flip=True)
    nchw = decode(medium, 72, 56, seed=3, crop=crop, layout="nchw", flip=True)
    assert (nchw == nhwc.transpose(2, 0, 1)).all()


def test_crop_none_is_a_plain_resize(medium):
    full = pil_rgb(medium)
    ours = decode(medium, 100, 80, crop="none", fast=False)
    assert absdiff(ours, pil_resize(full, (0, 0, 500, 375), 100, 80)).max() <= 1


@pytest.mark.parametrize("ow,oh", [(100, 80), (13, 7), (1, 1), (224, 3), (9, 250), (700, 500)])
@pytest.mark.parametrize("layout", ["nchw", "nhwc"])
@pytest.mark.parametrize("flip", [False, True])
def test_resampler_shapes_against_pil(medium, big, ow, oh, layout, flip):
    """Widths and heights off the 8-pixel blocks, flips of partial blocks, enlarging, and a
    shrink by 100 and more (windows of over 64 rows): within 1 of PIL's resize."""
    for data, (W, H) in ((medium, (500, 375)), (big, (1600, 1200))):
        full = pil_rgb(data)
        want = pil_resize(full, (0, 0, W, H), ow, oh)
        # each seed flips or not: take the first seed that does
        for seed in range(64):
            ours = decode(data, ow, oh, crop="none", fast=False, layout=layout, flip=flip, seed=seed)
            if layout == "nchw":
                ours = ours.transpose(1, 2, 0)
            plain = decode(data, ow, oh, crop="none", fast=False, layout="nhwc", seed=seed)
            if not flip or ow == 1 or (ours != plain).any():
                break
        if flip and ow > 1:
            assert (ours == plain[:, ::-1]).all(), f"{ow}x{oh} {layout}: flip is not the mirror"
            want = want[:, ::-1]
        d = absdiff(ours, want).max()
        assert d <= 1, f"{W}x{H} -> {ow}x{oh} {layout} flip={flip}: max diff {d}"


def test_decode_rejects_unknown_options(medium):
    """A typo must not silently pick another transform (Loader refuses the same words)."""
    for kw in ({"crop": "centre"}, {"layout": "hwc"}):
        with pytest.raises(ValueError):
            libshard.decode(medium, 32, 32, **kw)


# ---- corrupt files --------------------------------------------------------------------------


def _corrupt_cases():
    rng = np.random.default_rng(12)
    good = jpeg(textured(200, 150, seed=12))
    png = encode(textured(60, 40, seed=12), "PNG")
    return {
        "jpeg-truncated-half": (good[: len(good) // 2], "corrupt JPEG"),
        "jpeg-truncated-end": (good[:-200], "corrupt JPEG"),
        "jpeg-header-only": (good[:600], "corrupt JPEG"),
        "jpeg-magic-then-garbage": (b"\xff\xd8\xff" + rng.bytes(3000), "corrupt JPEG"),
        "png-truncated": (png[: len(png) // 2], "corrupt PNG"),
        "garbage": (rng.bytes(5000), "not decoded"),
        "text": (b"this is a text file, not an image\n" * 40, "not decoded"),
        "empty": (b"", "not decoded"),
        "gif": (encode(textured(30, 20, seed=1), "GIF"), "not decoded"),
    }


@pytest.mark.parametrize("case", sorted(_corrupt_cases()))
def test_corrupt_files_raise(case):
    data, words = _corrupt_cases()[case]
    calls = {
        "decode_rgb": lambda: libshard.decode_rgb(data),
        "decode fast": lambda: libshard.decode(data, 64, 64, crop="center", fast=True),
        "decode full": lambda: libshard.decode(data, 64, 64, fast=False),
    }
    for name, call in calls.items():
        with pytest.raises((libshard.ShardError, ValueError)) as e:
            call()
        assert words in str(e.value), f"{name}: {e.value}"


def test_truncated_jpeg_fails_whatever_the_crop():
    """The error policy must not depend on the random crop: a JPEG missing its last bytes is
    corrupt for every seed (otherwise the same sample passes one epoch and fails, or is
    skipped, in another), also when the crop lies above the missing rows."""
    good = jpeg(textured(200, 150, seed=12))
    for cut in (2, 200):
        data = good[:-cut]
        passed = []
        for seed in range(16):
            for fast in (True, False):
                try:
                    libshard.decode(data, 64, 64, seed=seed, fast=fast)
                    passed.append((seed, fast))
                except libshard.ShardError as e:
                    assert "corrupt JPEG" in str(e)
        assert not passed, (f"a JPEG missing its last {cut} bytes decoded without error for "
                            f"(seed, fast) in {passed}")


# The resampler tests again under each SIMD path: the plain run checks only the best path
# this CPU has, and the others serve CPUs without it.
RESAMPLER_TESTS = (
    "resampler_shapes or random_crops or center_crop_full_decode or flip_mirrors or layouts or draft "
    "or crop_none")


@pytest.mark.parametrize("level", ["none", "avx2", "avx512"])
def test_each_simd_path_against_pil(level):
    env = dict(os.environ, LIBSHARD_SIMD=level)
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        "-k", RESAMPLER_TESTS, __file__], env=env, capture_output=True, text=True,
                       cwd=Path(__file__).resolve().parents[2])
    assert r.returncode == 0, f"LIBSHARD_SIMD={level}:\n{r.stdout[-4000:]}{r.stderr[-2000:]}"
    assert " passed" in r.stdout and "skipped" not in r.stdout, r.stdout[-2000:]


def _cpu_flags():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def _digest_under(level, *paths):
    """What the decode of a few crops gives with LIBSHARD_SIMD=level, in a fresh process."""
    code = (
        "import hashlib, sys; sys.path[:0] = sys.argv[1:2]; import libshard\n"
        "h = hashlib.sha1()\n"
        "for f in sys.argv[2:]:\n"
        "    data = open(f, 'rb').read()\n"
        "    for seed in range(4):\n"
        "        h.update(bytes(libshard.decode(data, 224, 224, crop='random_resized', fast=False,"
        " seed=seed, flip=True)))\n"
        "print(h.hexdigest())\n")
    return subprocess.run([sys.executable, "-c", code, os.path.dirname(os.path.dirname(libshard.__file__)),
                           *paths], env=dict(os.environ, LIBSHARD_SIMD=level),
                          capture_output=True, text=True, check=True).stdout.strip()


def test_libshard_simd_caps_the_path(medium, big, tmp_path):
    """LIBSHARD_SIMD is obeyed: the AVX2 and AVX-512 float paths give the same bytes, the
    scalar path and (where the CPU has VBMI and VNNI) the integer path other bytes."""
    files = []
    for name, data in (("m.jpg", medium), ("b.jpg", big)):
        (tmp_path / name).write_bytes(data)
        files.append(str(tmp_path / name))
    flags = _cpu_flags()
    if "avx2" not in flags:
        pytest.skip("this CPU has no AVX2: only the scalar path runs")
    d = {level: _digest_under(level, *files) for level in ("none", "avx2", "avx512", "vnni")}
    assert d["none"] != d["avx2"]
    if {"avx512vl", "avx512bw"} <= flags:
        assert d["avx512"] == d["avx2"]
    if {"avx512vl", "avx512bw", "avx512vbmi", "avx512_vnni"} <= flags:
        assert d["vnni"] != d["avx512"], "LIBSHARD_SIMD=avx512 did not leave the VNNI path"
