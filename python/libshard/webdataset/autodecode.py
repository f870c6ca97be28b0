"""Decoding sample fields as webdataset.autodecode does: image specs ("pil", "rgb8",
"torchrgb", ...), the basic handlers (txt, cls, json, npy, ...), .gz fields, and the
Decoder that runs them in order."""
import gzip
import io
import json
import pickle
import re

import numpy as np
import torch

IMAGESPECS = {
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


def _image_extensions():
    import PIL.Image
    return {e.lstrip(".").lower() for e in PIL.Image.registered_extensions()}


class DecodingError(Exception):
    """A field that did not decode: url, key (the sample's), k (the field)."""

    def __init__(self, url=None, key=None, k=None, sample=None, reason=None):
        super().__init__(f"cannot decode field {k!r} of sample {key!r} in {url}" +
                         (f": {reason}" if reason is not None else ""))
        self.url, self.key, self.k, self.sample = url, key, k, sample


def _check_limits(data, img):
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
    limit = DEFAULTS["max_decode_memory"]
    if need > limit:
        raise ValueError(f"a {img.format} of {w}x{h} pixels needs {need} bytes to decode, more "
                         f"than the limit of {limit} (max_decode_memory)")


def imagehandler(imagespec, extensions=None):
    """A handler that decodes image fields as imagespec says ("pil", "rgb8", "torchrgb",
    ...; the table of WebDataset's ImageHandler)."""
    if imagespec not in IMAGESPECS:
        raise ValueError(f"Unknown imagespec: {imagespec}")
    exts = set(extensions) if extensions is not None else _image_extensions()
    atype, etype, mode = IMAGESPECS[imagespec]

    def handler(key, data):
        import PIL.Image
        if re.sub(r".*[.]", "", key).lower() not in exts:
            return None
        with io.BytesIO(data) as stream:
            img = PIL.Image.open(stream)
            _check_limits(data, img)
            img.load()
            img = img.convert(mode.upper())
        if atype == "pil":
            return img
        a = np.asarray(img)
        if etype == "float":
            a = a.astype(np.float32) / 255.0
        if atype == "numpy":
            return a
        return torch.from_numpy((a.transpose(2, 0, 1) if a.ndim == 3 else a).copy())

    return handler


def _npy(data):
    return np.lib.format.read_array(io.BytesIO(data))


_BASIC = {
    "txt": lambda d: d.decode("utf-8"), "text": lambda d: d.decode("utf-8"),
    "transcript": lambda d: d.decode("utf-8"),
    "cls": int, "cls2": int, "index": int, "inx": int, "id": int,
    "json": json.loads, "jsn": json.loads,
    "pkl": pickle.loads, "pickle": pickle.loads, "pyd": pickle.loads,
    "pth": lambda d: torch.load(io.BytesIO(d), weights_only=False),
    "npy": _npy, "npz": lambda d: dict(np.load(io.BytesIO(d))),
}


def basichandlers(key, data):
    """txt/text -> str; cls, cls2, index, inx, id -> int; json -> objects; pickle, pth,
    npy, npz as their libraries load them; None for other extensions."""
    f = _BASIC.get(re.sub(r".*[.]", "", key))
    return f(data) if f else None


class _Continue:
    def __init__(self, key, data):
        self.key, self.data = key, data


def gzfilter(key, data):
    """x.gz fields: decompressed, then decoded as x."""
    if not key.endswith(".gz"):
        return None
    return _Continue(key[:-3], gzip.decompress(data))


class Decoder:
    """Decodes each field of a sample with the first handler that returns something (pre
    handlers, then the given ones, then post); "__" fields become str; with only, other
    fields stay bytes; with partial, fields that are not bytes are kept."""

    def __init__(self, handlers, pre=None, post=None, only=None, partial=False):
        self.only = set(only.split() if isinstance(only, str) else only) if only else None
        self.handlers = ([gzfilter] if pre is None else list(pre)) + list(handlers) + (
            [basichandlers] if post is None else list(post))
        self.partial = partial

    def decode1(self, key, data):
        """One field (its name, its bytes) through the handlers."""
        key = "." + key
        for f in self.handlers:
            out = f(key, data)
            if isinstance(out, _Continue):
                key, data = out.key, out.data
                continue
            if out is not None:
                return out
        return data

    def __call__(self, sample):
        out = {}
        for k, v in sample.items():
            try:
                if k.startswith("__"):
                    out[k] = v.decode("utf-8") if isinstance(v, bytes) else v
                elif (self.only is not None and k not in self.only) or (
                        self.partial and not isinstance(v, bytes)):
                    out[k] = v
                else:
                    out[k] = self.decode1(k, v)
            except Exception as exn:
                raise DecodingError(sample.get("__url__"), sample.get("__key__"), k,
                                    sample, reason=exn) from exn
        return out
