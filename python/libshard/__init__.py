"""libshard: WebDataset-style sharded datasets, read and decoded in C.

    from libshard import Reader, Loader
    for sample in Reader("shards/train-{000000..000009}.tar", shuffle=1000, seed=0):
        sample["__key__"], sample["jpg"]        # raw bytes, WebDataset's sample dicts

    from libshard.torch import ShardDataset    # batches as torch tensors

    with libshard.ShardWriter("out/train-%06d.tar", maxcount=10000) as sink:
        sink.write({"__key__": "x0", "jpg": jpeg_bytes, "cls": 3})
"""
from ._libshard import (Batch, Loader, Reader, ShardError, ShardNotFoundError, crop_box, decode,
                        decode_rgb, merge_states, resize_rgb, version)
from .writer import ShardWriter, TarWriter

__all__ = ["Reader", "Loader", "Batch", "ShardError", "ShardNotFoundError", "ShardWriter",
           "TarWriter", "crop_box", "decode", "decode_rgb", "merge_states", "pkgconfig_dir",
           "resize_rgb", "version"]
__version__ = version


def pkgconfig_dir():
    """The folder of this libshard's pkg-config file, for PKG_CONFIG_PATH when building C
    against it (man 3 libshard): a pip install's (beside the package, in site-packages), a
    build tree's (its meson-uninstalled/); None for a system install, which pkg-config
    finds by itself."""
    import pathlib
    here = pathlib.Path(__file__).resolve().parent
    for d in (here.parent / ".libshard.mesonpy.libs" / "pkgconfig",
              here.parents[1] / "meson-uninstalled"):
        if d.is_dir() and any(d.glob("libshard*.pc")):
            return str(d)
    return None
