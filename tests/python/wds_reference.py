"""What WebDataset's own pipelines give on a fixed set of shards, recorded once, for
test_webdataset.py to hold libshard.webdataset to. WebDataset is not a dependency: run this
with its source fetched outside the repository (and braceexpand, which it needs), and commit
the JSON it writes:

    git clone https://github.com/webdataset/webdataset /tmp/wds   # then check out RECORDED
    PYTHONPATH=/tmp/wds/src /usr/bin/python3 tests/python/wds_reference.py \\
        tests/python/data/wds_reference.json

The module cases (wds_modules.py) are recorded beside the decoder cases.

make_shards and describe are shared with the test, which runs the same pipelines through
libshard.webdataset and compares the descriptions: for every decoder spec WebDataset
documents, each sample as decode(spec) gives it, and batches of to_tuple(image, "cls")
.batched(4) for a PNG and a JPEG field.
"""
import hashlib
import io
import json
import os
import sys
import tarfile

import numpy as np

#: the WebDataset the committed JSON was recorded with
RECORDED = {"version": "1.0.2", "commit": "e0953f9",
            "repository": "https://github.com/webdataset/webdataset"}

SPECS = ["l8", "rgb8", "rgba8", "l", "rgb", "rgba", "torchl8", "torchrgb8", "torchrgba8",
         "torchl", "torchrgb", "torch", "torchrgba", "pill", "pil", "pilrgb", "pilrgba"]
BATCHED = ["png", "jpg"]
NSHARDS, PER = 2, 5


def make_shards(root):
    """Two shards of five samples (png: RGB or RGBA 20x14, jpg: the same image as a JPEG,
    cls, txt), written by Python's tarfile; their brace pattern."""
    from PIL import Image
    rng = np.random.default_rng(3)
    for s in range(NSHARDS):
        with tarfile.open(os.path.join(root, f"ref-{s}.tar"), "w", format=tarfile.USTAR_FORMAT) as tf:
            for j in range(PER):
                i = s * PER + j
                rgb = rng.integers(0, 256, (14, 20, 3), dtype=np.uint8)
                if i % 3 == 2:  # some with alpha
                    png = Image.fromarray(np.dstack([rgb, rng.integers(0, 256, (14, 20), np.uint8)]),
                                          "RGBA")
                else:
                    png = Image.fromarray(rgb)
                fields = {"png": _encode(png, "PNG"), "jpg": _encode(Image.fromarray(rgb), "JPEG"),
                          "cls": str(i % 3).encode(), "txt": f"sample {i}".encode()}
                for ext, data in fields.items():
                    info = tarfile.TarInfo(f"r{i:03d}.{ext}")
                    info.size = len(data)
                    tf.addfile(info, io.BytesIO(data))
    return os.path.join(root, "ref-{0..%d}.tar" % (NSHARDS - 1))


def _encode(im, fmt):
    b = io.BytesIO()
    im.save(b, fmt, quality=90) if fmt == "JPEG" else im.save(b, fmt)
    return b.getvalue()


def _digest(b):
    return hashlib.sha256(b).hexdigest()[:16]


def describe(x):
    """A JSON description of a decoded value: its kind, type, shape and a digest of its
    values (floats: of their rounding to 1/4096, and their range)."""
    import torch
    from PIL import Image
    if isinstance(x, Image.Image):
        return {"kind": "PIL", "mode": x.mode, "size": list(x.size), "digest": _digest(x.tobytes())}
    if isinstance(x, torch.Tensor):
        return {"kind": "torch", **_array(x.numpy(), str(x.dtype).replace("torch.", ""))}
    if isinstance(x, np.ndarray):
        return {"kind": "numpy", **_array(x, str(x.dtype))}
    if isinstance(x, (bool, int, float, str)):
        return {"kind": type(x).__name__, "value": x}
    if isinstance(x, bytes):
        return {"kind": "bytes", "digest": _digest(x)}
    if isinstance(x, (list, tuple)):
        return {"kind": type(x).__name__, "items": [describe(v) for v in x]}
    if isinstance(x, dict):
        return {"kind": "dict", "items": {k: describe(v) for k, v in sorted(x.items())
                                          if k == "__key__" or not k.startswith("__")}}
    return {"kind": type(x).__name__}


def _array(a, dtype):
    a = np.ascontiguousarray(a)
    out = {"dtype": dtype, "shape": list(a.shape)}
    if a.dtype.kind == "f":
        out["digest"] = _digest(np.round(a.astype(np.float64) * 4096).astype(np.int64).tobytes())
        out["range"] = [round(float(a.min()), 6), round(float(a.max()), 6)] if a.size else []
    else:
        out["digest"] = _digest(a.tobytes())
    return out


def pipelines(wds, url):
    """name: the pipeline, for each recorded case (wds: webdataset or libshard.webdataset)."""
    out = {}
    for spec in SPECS:
        out[f"decode({spec})"] = wds.WebDataset(url, shardshuffle=False).decode(spec)
        for field in BATCHED:
            out[f"decode({spec}).to_tuple({field},cls).batched(4)"] = (
                wds.WebDataset(url, shardshuffle=False).decode(spec).to_tuple(field, "cls")
                .batched(4))
    return out


def record(wds, url):
    return {name: [describe(x) for x in p] for name, p in pipelines(wds, url).items()}


def main():
    import tempfile
    import warnings
    import webdataset
    assert webdataset.__version__ == RECORDED["version"], webdataset.__version__
    warnings.simplefilter("ignore")
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import wds_modules
    with tempfile.TemporaryDirectory() as root:
        cases = record(webdataset, make_shards(root))
        modules = wds_modules.cases(webdataset, root)
    with open(sys.argv[1], "w") as f:
        json.dump({"webdataset": RECORDED, "cases": cases, "modules": modules}, f, indent=0,
                  sort_keys=True)
        f.write("\n")
    print(f"{len(cases)} decoder cases and {len(modules)} module cases recorded with "
          f"WebDataset {webdataset.__version__}")


if __name__ == "__main__":
    main()
