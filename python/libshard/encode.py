"""Sample fields encoded as WebDataset's writer encodes them, shared by libshard's writers
(libshard.writer, in C) and libshard.webdataset's (WebDataset's, in Python): bytes as they
are, str as UTF-8, other values by the field's extension (cls -> decimal text, json ->
json.dumps, pyd/pickle -> pickle, npy/npz -> numpy, pth -> torch.save, ten/tb -> tenbin,
mp/msgpack -> msgpack, jpg/png/... -> an image encoded by PIL from a PIL image or an array); a
field ending in ".gz" gzip-compressed (no timestamp: the same sample gives the same bytes);
fields starting with "_" are metadata, str, kept as they are."""
import gzip
import io
import json
import pickle

__all__ = ["imageencoder", "bytestr", "torch_dumps", "numpy_dumps", "numpy_npz_dumps",
           "tenbin_dumps", "cbor_dumps", "mp_dumps", "add_handlers", "make_handlers",
           "default_handlers", "encode_field", "encode_sample", "make_encoder"]


def imageencoder(image, format="PNG"):  # noqa: A002 (WebDataset's name)
    """An image (PIL, or a uint8 or 0..1 float array: HxW, HxWx1 or HxWx3) encoded in
    format ("jpg" at quality 100, "png", "ppm", ...)."""
    import numpy as np
    import PIL.Image
    if isinstance(image, np.ndarray):
        if image.dtype in (np.dtype("f"), np.dtype("d")):
            if np.amin(image) <= -0.001 or np.amax(image) >= 1.001:
                raise ValueError(f"image values out of range {np.amin(image)} {np.amax(image)}")
            image = np.array(np.clip(image, 0.0, 1.0) * 255.0, "uint8")
        if image.ndim not in (2, 3) or (image.ndim == 3 and image.shape[2] not in (1, 3)):
            raise ValueError(f"an image array is HxW or HxWx1 or HxWx3, not {image.shape}")
        image = PIL.Image.fromarray(image)
    elif not isinstance(image, PIL.Image.Image):
        raise ValueError(f"cannot encode {type(image).__name__} as an image")
    fmt = {"JPG": "JPEG", "IMG": "PPM", "IMAGE": "PPM"}.get(format.upper(), format.upper())
    opts = {"quality": 100} if fmt in ("JPEG", "TIFF") else {}
    with io.BytesIO() as out:
        image.save(out, format=fmt, **opts)
        return out.getvalue()


def bytestr(data):
    """bytes as they are, anything else its ASCII text."""
    if isinstance(data, bytes):
        return data
    return (data if isinstance(data, str) else str(data)).encode("ascii")


def torch_dumps(data):
    """torch.save's bytes."""
    import torch
    out = io.BytesIO()
    torch.save(data, out)
    return out.getvalue()


def numpy_dumps(data):
    """An array as a .npy file's bytes."""
    import numpy.lib.format
    out = io.BytesIO()
    numpy.lib.format.write_array(out, data)
    return out.getvalue()


def numpy_npz_dumps(data):
    """{name: array} as a compressed .npz file's bytes."""
    import numpy as np
    if not isinstance(data, dict) or not all(isinstance(k, str) and isinstance(v, np.ndarray)
                                             for k, v in data.items()):
        raise ValueError("npz wants a dict of str to numpy arrays")
    out = io.BytesIO()
    np.savez_compressed(out, **data)
    return out.getvalue()


def tenbin_dumps(x):
    """An array, or a list of them, as tenbin (.ten) bytes."""
    from . import tenbin
    return memoryview(tenbin.encode_buffer(x if isinstance(x, list) else [x]))


def _optional(module, fn):
    def dumps(x):
        try:
            mod = __import__(module)
        except ImportError:
            raise ValueError(f"encoding this field needs the {module} module, which is not "
                             f"installed") from None
        return getattr(mod, fn)(x)
    return dumps


cbor_dumps = _optional("cbor", "dumps")
mp_dumps = _optional("msgpack", "packb")


def add_handlers(d, keys, value):
    """value as the handler of each extension in keys (a list, or space-separated)."""
    for k in keys.split() if isinstance(keys, str) else keys:
        d[k] = value


def make_handlers():
    """{extension: encoder}, WebDataset's writer's table."""
    h = {}
    add_handlers(h, "cls cls2 class count index inx id", lambda x: str(x).encode("ascii"))
    add_handlers(h, "txt text transcript html htm", lambda x: x.encode("utf-8"))
    add_handlers(h, "pyd pickle", pickle.dumps)
    add_handlers(h, "pth", torch_dumps)
    add_handlers(h, "npy", numpy_dumps)
    add_handlers(h, "npz", numpy_npz_dumps)
    add_handlers(h, "ten tenbin tb", tenbin_dumps)
    add_handlers(h, "json jsn", lambda x: json.dumps(x).encode("utf-8"))
    add_handlers(h, "mp msgpack msg", mp_dumps)
    add_handlers(h, "cbor", cbor_dumps)
    add_handlers(h, "jpg jpeg img image", lambda x: imageencoder(x, "jpg"))
    for fmt in ("png", "pbm", "pgm", "ppm"):
        add_handlers(h, fmt, lambda x, f=fmt: imageencoder(x, f))
    add_handlers(h, "tiff tif", lambda x: imageencoder(x, "tiff"))
    return h


default_handlers = make_handlers()


def encode_field(data, name, handlers):
    """One field's bytes by its name's extension (".gz": gzip-compressed)."""
    if name.startswith("_"):
        if not isinstance(data, str):
            raise ValueError("the values of metadata must be of string type")
        return data
    compress = name.endswith(".gz")
    ext = (name[:-3] if compress else name).rsplit(".", 1)[-1].lower()
    if isinstance(data, (bytes, bytearray, memoryview)):
        out = data
    elif isinstance(data, str):
        out = data.encode("utf-8")
    else:
        handler = handlers.get(ext)
        if handler is None:
            raise ValueError(f"{name}: no encoder for a {type(data).__name__} (give bytes, or a "
                             f"field name whose extension has one: {' '.join(sorted(handlers))})")
        out = handler(data)
    return gzip.compress(bytes(out), mtime=0) if compress else out


def encode_sample(sample, handlers=None):
    """A sample dict encoded: {field: bytes}, metadata ("_" fields) checked to be str."""
    handlers = default_handlers if handlers is None else handlers
    return {k: encode_field(v, k, handlers) for k, v in sample.items()}


def make_encoder(spec):
    """The encoder a writer's encoder= means: True the default table, a dict a table of its
    own, a callable itself, False or None no encoding."""
    if spec is False or spec is None:
        return lambda x: x
    if spec is True:
        return encode_sample
    if isinstance(spec, dict):
        return lambda x: encode_sample(x, spec)
    if callable(spec):
        return spec
    raise ValueError(f"{spec}: unknown encoder spec (True, False, a dict of handlers or a "
                     f"callable)")
