"""webdataset.autodecode as libshard writes it: decoding a sample's fields by their
extension. Image specs ("pil", "rgb8", "torchrgb", ...: imagespecs) decode with PIL under
libshard's decode limits; the basic decoders (decoders: txt, cls, json, npy, pickle, pth,
ten, msgpack, ...) follow; .gz fields are decompressed first (gzfilter). pickle and torch
loads are refused while utils.enforce_security is set."""
import gzip
import io
import json
import os
import pickle
import re
import tempfile
from functools import partial

import numpy as np

from . import limits as _limits
from . import utils
from ..redact import shown

#: torch.load(..., weights_only=) for .pth fields ($WDS_PYTORCH_WEIGHTS_ONLY=1)
pytorch_weights_only = os.environ.get("WDS_PYTORCH_WEIGHTS_ONLY", "0") == "1"

#: Extensions passed on to the image decoder.
IMAGE_EXTENSIONS = ["blp", "bmp", "dib", "bufr", "cur", "pcx", "dcx", "dds", "ps", "eps", "fit",
                    "fits", "fli", "flc", "ftc", "ftu", "gbr", "gif", "grib", "h5", "hdf", "png",
                    "apng", "jp2", "j2k", "jpc", "jpf", "jpx", "j2c", "icns", "ico", "im", "iim",
                    "tif", "tiff", "jfif", "jpe", "jpg", "jpeg", "mpg", "mpeg", "msp", "pcd",
                    "pxr", "pbm", "pgm", "ppm", "pnm", "psd", "bw", "rgb", "rgba", "sgi", "ras",
                    "tga", "icb", "vda", "vst", "webp", "wmf", "emf", "xbm", "xpm"]


def torch_loads(data):
    """A .pth field: torch.load on the CPU (weights_only as pytorch_weights_only says)."""
    import torch
    if utils.enforce_security:
        raise ValueError("torch.loads is not allowed for security reasons when "
                         "enforce_security is set.")
    return torch.load(io.BytesIO(data), weights_only=pytorch_weights_only, map_location="cpu")


def tenbin_loads(data):
    """A .ten field: its list of arrays."""
    from . import tenbin
    return tenbin.decode_buffer(data)


def msgpack_loads(data):
    """A .mp or .msg field (Debian: python3-msgpack)."""
    import msgpack
    return msgpack.unpackb(data)


def npy_loads(data):
    """A .npy field: its array."""
    return np.lib.format.read_array(io.BytesIO(data))


def npz_loads(data):
    """A .npz field: {name: array}."""
    return dict(np.load(io.BytesIO(data)))


def cbor_loads(data):
    """A .cbor field (the cbor package)."""
    import cbor
    return cbor.loads(data)


def unpickle_loads(data):
    """A pickle (.pkl, .pickle, .pyd), refused while enforce_security is set."""
    if utils.enforce_security:
        raise ValueError("Unpickling is not allowed for security reasons when "
                         "enforce_security is set.")
    return pickle.loads(data)


def _text(data):
    return data.decode("utf-8")


#: extension -> the function decoding a field's bytes (the basic handlers)
decoders = {
    "txt": _text, "text": _text, "transcript": _text,
    "cls": int, "cls2": int, "index": int, "inx": int, "id": int,
    "json": json.loads, "jsn": json.loads,
    "pkl": unpickle_loads, "pickle": unpickle_loads, "pyd": unpickle_loads,
    "pth": torch_loads, "ten": tenbin_loads, "tb": tenbin_loads,
    "mp": msgpack_loads, "msg": msgpack_loads,
    "npy": npy_loads, "npz": npz_loads, "cbor": cbor_loads,
}


def basichandlers(key, data):
    """A field decoded by its extension's entry in decoders; None when there is none."""
    f = decoders.get(re.sub(r".*[.]", "", key))
    return f(data) if f is not None else None


def call_extension_handler(key, data, f, extensions):
    """f(data) when key ends in one of extensions (each may hold dots: "seg.png")."""
    parts = key.lower().split(".")
    for target in extensions:
        want = target.split(".")
        if len(want) <= len(parts) and parts[-len(want):] == want:
            return f(data)
    return None


def handle_extension(extensions, f):
    """A handler calling f(data) for fields ending in one of extensions (space-separated)."""
    return partial(call_extension_handler, f=f, extensions=extensions.lower().split())


#: spec -> (array type, element type, mode)
imagespecs = {
    "l8": ("numpy", "uint8", "l"), "rgb8": ("numpy", "uint8", "rgb"),
    "rgba8": ("numpy", "uint8", "rgba"), "l": ("numpy", "float", "l"),
    "rgb": ("numpy", "float", "rgb"), "rgba": ("numpy", "float", "rgba"),
    "torchl8": ("torch", "uint8", "l"), "torchrgb8": ("torch", "uint8", "rgb"),
    "torchrgba8": ("torch", "uint8", "rgba"), "torchl": ("torch", "float", "l"),
    "torchrgb": ("torch", "float", "rgb"), "torch": ("torch", "float", "rgb"),
    "torchrgba": ("torch", "float", "rgba"), "pill": ("pil", None, "l"),
    "pil": ("pil", None, "rgb"), "pilrgb": ("pil", None, "rgb"),
    "pilrgba": ("pil", None, "rgba"),
}


def check_limits(data, img, memory=None):
    """The C decoders' limits held on PIL's decode, before it starts (PIL has neither): a
    JPEG's scans (each walks every block: the decode's time) and the memory the header asks
    for. ValueError naming the limit."""
    from ..settings import DEFAULTS
    if data[:3] == b"\xff\xd8\xff":
        # FF DA starts a scan: inside entropy-coded data an FF is followed by 00 or a
        # restart marker, so the count is the scans' (an embedded thumbnail's add a few)
        limit = DEFAULTS["max_scans"]
        if data.count(b"\xff\xda") > limit:
            raise ValueError(f"a progressive JPEG of more than {limit} scans (max_scans)")
    w, h = img.size
    bands = len(img.getbands())
    need = w * h * (bands + 3)  # decoded, then converted
    if img.format == "JPEG" and img.info.get("progressive"):
        need += w * h * bands * 2  # every coefficient kept until the last scan
    limit = _limits.limit("max_decode_memory") if memory is None else memory
    if need > limit:
        raise ValueError(_limits.explained(
            f"a {img.format} of {w}x{h} pixels needs {need} bytes to decode, more than the "
            f"limit of {limit} (max_decode_memory)"))


def _as_mode(a, mode):
    """An array of PIL's pixels in mode's channels: l the mean of the colour channels, rgb
    three (grey repeated, alpha dropped), rgba four (alpha 255 where there was none)."""
    if mode == "l":
        return np.mean(a[:, :, :3], axis=2) if a.ndim == 3 else a
    if mode == "rgb":
        if a.ndim == 2:
            return np.repeat(a[:, :, np.newaxis], 3, axis=2)
        return a[:, :, :3] if a.shape[2] == 4 else a
    if a.ndim == 2:
        a = np.repeat(a[:, :, np.newaxis], 4, axis=2)
        a[:, :, 3] = 255
        return a
    if a.shape[2] == 3:
        return np.concatenate([a, 255 * np.ones(a.shape[:2])[:, :, np.newaxis]], axis=2)
    return a


def _l_of_rgb(a):
    """PIL's convert("L") of RGB pixels: ITU-R 601-2 luma in its 16-bit fixed point."""
    w = a.astype(np.uint32)
    return ((w[:, :, 0] * 19595 + w[:, :, 1] * 38470 + w[:, :, 2] * 7471 + 0x8000) >> 16
            ).astype(np.uint8)


_SOF = {0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF}


def jpeg_mode(data):
    """The mode PIL opens a JPEG in, from its frame header's component count ("L", "RGB",
    "CMYK"); None for what is not a JPEG (or whose header is cut)."""
    if data[:2] != b"\xff\xd8":
        return None
    i, n = 2, len(data)
    while i + 4 <= n:
        if data[i] != 0xFF:
            return None
        marker = data[i + 1]
        if marker == 0xFF:  # fill byte
            i += 1
            continue
        length = (data[i + 2] << 8) | data[i + 3]
        if marker in _SOF:
            return {1: "L", 3: "RGB", 4: "CMYK"}.get(data[i + 9]) if i + 10 <= n else None
        i += 2 + length
    return None


def _c_decode(data, **layout):
    """(PIL's mode of it, pixels, width, height) of a grey or colour JPEG decoded by
    libshard's decoder (layout: decode_rgb's planar or rgbx); None where PIL decodes it: not
    such a JPEG, no C core, or one the C decoder refuses (it stops at what libjpeg only
    warns of; PIL reads on, or refuses too)."""
    source = jpeg_mode(data)
    if source not in ("L", "RGB"):
        return None
    try:
        from .._libshard import decode_rgb
        return (source, *decode_rgb(data, **layout))
    except Exception:  # noqa: BLE001 (PIL's to decide, and to say why)
        return None


def _c_pixels(data, mode, planar=False):
    """The pixels PIL's Image.open(data).convert(mode) would give, decoded by libshard's JPEG
    decoder (libjpeg-turbo, as PIL's: the same IDCT and upsampling), HxWxC (planar: RGB as
    3xHxW); None where PIL decodes it (_c_decode)."""
    decoded = _c_decode(data, planar=planar and mode == "rgb")
    if decoded is None:
        return None
    source, px, w, h = decoded
    if planar and mode == "rgb":
        return np.frombuffer(px, np.uint8).reshape(3, h, w)
    a = np.frombuffer(px, np.uint8).reshape(h, w, 3)
    if mode == "l":
        a = _l_of_rgb(a) if source == "RGB" else a[:, :, 0].copy()
    elif mode == "rgba":
        a = np.concatenate([a, np.full((h, w, 1), 255, np.uint8)], axis=2)
    a.flags.writeable = False  # as np.asarray of PIL's image
    return a


def torch_of(a):
    """A tensor sharing the array's memory."""
    import torch
    return torch.from_numpy(a)


def _c_pil(data, mode):
    """The PIL image PIL's Image.open(data).convert("RGB") gives (its pixels, mode, size and
    info), its pixels decoded by libshard's JPEG decoder straight into PIL's layout for RGB
    (four bytes a pixel), PIL reading only the header (for info); None where PIL decodes it
    (_c_decode), and for other modes."""
    decoded = _c_decode(data, rgbx=True) if mode == "rgb" else None
    if decoded is None:
        return None
    import PIL.Image
    _, px, w, h = decoded
    with io.BytesIO(data) as stream:
        info = PIL.Image.open(stream).info
    out = PIL.Image.frombytes("RGB", (w, h), px, "raw", "RGBX")  # a copy of the layout's
    out.info = dict(info)
    return out


class ImageHandler:
    """Decodes image fields (extensions: IMAGE_EXTENSIONS) as imagespec says: PIL images,
    numpy arrays (HxW or HxWxC; uint8, or float32 from 0 to 1) or torch tensors (CxHxW).
    JPEGs (grey or colour) are decoded by libshard's decoder to the pixels PIL gives (PIL
    images of them in RGB too), the rest by PIL; counts (counters.Counts) counts which. An
    image whose decode needs more than max_decode_memory bytes (limits.py) is refused
    before it is decoded."""

    def __init__(self, imagespec, extensions=IMAGE_EXTENSIONS, counts=None,
                 max_decode_memory=None):
        if imagespec not in imagespecs:
            raise ValueError(f"Unknown imagespec: {imagespec}")
        self.max_decode_memory = _limits.limit("max_decode_memory", max_decode_memory)
        self.imagespec = imagespec.lower()
        self.extensions = set(extensions)
        from .counters import Counts
        self.counts = Counts() if counts is None else counts

    def __call__(self, key, data):
        import PIL.Image
        if re.sub(r".*[.]", "", key).lower() not in self.extensions:
            return None
        atype, etype, mode = imagespecs[self.imagespec]
        planar = atype == "torch" and mode == "rgb"  # CHW from the decoder: no transpose
        # the C decoder holds the library's limit: under a lower one, PIL's path checks it
        c = self.max_decode_memory >= _limits.LIMITS["max_decode_memory"][0]
        a = None if not c else _c_pil(data, mode) if atype == "pil" else _c_pixels(data, mode, planar)
        self.counts.add(**{"decodes_python" if a is None else "decodes_c": 1})
        if atype == "pil" and a is not None:
            return a
        if a is None:
            with io.BytesIO(data) as stream:
                img = PIL.Image.open(stream)
                check_limits(data, img, self.max_decode_memory)
                img.load()
                img = img.convert(mode.upper())
            if atype == "pil":
                return img
            a = np.asarray(img)
        elif planar:
            return torch_of(a.astype(np.float32) / 255.0 if etype == "float" else a.copy())
        if etype == "float":
            a = a.astype(np.float32) / 255.0
        assert a.ndim in (2, 3), a.shape
        a = _as_mode(a, mode)
        if atype == "numpy":
            return a
        return torch_of((a.transpose(2, 0, 1) if a.ndim == 3 else a).copy())


def imagehandler(imagespec, extensions=IMAGE_EXTENSIONS, max_decode_memory=None):
    """ImageHandler(imagespec, extensions, max_decode_memory=...)."""
    return ImageHandler(imagespec, extensions, max_decode_memory=max_decode_memory)


def _media(key, data, extensions, load):
    extension = re.sub(r".*[.]", "", key)
    if extension not in extensions:
        return None
    with tempfile.TemporaryDirectory() as folder:
        fname = os.path.join(folder, f"file.{extension}")
        with open(fname, "wb") as stream:
            stream.write(data)
        return load(fname)


def torch_video(key, data):
    """A video field (mp4, ogv, mjpeg, avi, mov, h264, mpg, webm, wmv) through
    torchvision.io.read_video."""
    import torchvision.io
    return _media(key, data, "mp4 ogv mjpeg avi mov h264 mpg webm wmv".split(),
                  lambda f: torchvision.io.read_video(f, pts_unit="sec"))


def torch_audio(key, data):
    """An audio field (flac, mp3, sox, wav, m4a, ogg, wma) through torchaudio.load."""
    def load(f):
        import torchaudio
        return torchaudio.load(f)
    return _media(key, data, ["flac", "mp3", "sox", "wav", "m4a", "ogg", "wma"], load)


class Continue:
    """A handler's answer: decode data again, as a field named key."""

    def __init__(self, key, data):
        self.key, self.data = key, data


def gzfilter(key, data):
    """x.gz fields: decompressed, then decoded as x."""
    if not key.endswith(".gz"):
        return None
    return Continue(key[:-3], gzip.decompress(data))


default_pre_handlers = [gzfilter]
default_post_handlers = [basichandlers]


class DecodingError(Exception):
    """A field that did not decode: url, key (the sample's), k (the field), sample; the
    message says why (reason: the exception it chains to)."""

    def __init__(self, url=None, key=None, k=None, sample=None, reason=None):
        super().__init__(f"cannot decode field {k!r} of sample {key!r} in {shown(url)}"
                         + (f": {reason}" if reason is not None else ""))
        self.url, self.key, self.k, self.sample = url, key, k, sample


class Decoder:
    """Decodes each field of a sample with the first handler that returns something: pre
    (gzfilter), handlers, then post (basichandlers); "__" fields become str; with only,
    the other fields stay as they are; with partial, fields that are not bytes too."""

    def __init__(self, handlers, pre=None, post=None, only=None, partial=False):
        assert isinstance(handlers, list), f"handlers = {handlers} must be a list"
        if isinstance(only, str):
            only = only.split()
        self.only = None if only is None else set(only)
        pre = default_pre_handlers if pre is None else pre
        post = default_post_handlers if post is None else post
        for h in (*handlers, *pre, *post):
            assert callable(h), f"{h} is not callable"
        self.handlers = list(pre) + list(handlers) + list(post)
        self.partial = partial

    def decode1(self, key, data):
        """One field (its name, its bytes) through the handlers."""
        key = "." + key
        for f in self.handlers:
            result = f(key, data)
            if isinstance(result, Continue):
                key, data = result.key, result.data
                continue
            if result is not None:
                return result
        return data

    def decode(self, sample):
        """The sample decoded; DecodingError naming the field that failed."""
        assert isinstance(sample, dict), sample
        out = {}
        for k, v in list(sample.items()):
            try:
                if k.startswith("__"):
                    if isinstance(v, bytes):
                        try:
                            v = v.decode("utf-8")
                        except UnicodeDecodeError:
                            pass
                    out[k] = v
                elif self.only is not None and k not in self.only:
                    out[k] = v
                elif self.partial and not isinstance(v, bytes):
                    out[k] = v
                else:
                    assert isinstance(v, bytes), f"k,v = {k}, {v}"
                    out[k] = self.decode1(k, v)
            except Exception as exn:
                raise DecodingError(key=sample.get("__key__"), url=sample.get("__url__"),
                                    k=k, sample=sample, reason=exn) from exn
        return out

    def __call__(self, sample):
        assert isinstance(sample, dict), (len(sample), sample)
        return self.decode(sample)


default_decoder = Decoder(default_pre_handlers + default_post_handlers)
