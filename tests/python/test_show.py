"""shardcat show and libshard.torch.show: a picture of what the loader delivers. The tiles
of the PNG are the loader's batch for the same settings, seed and epoch, pixel for pixel
(read back with PIL); a different epoch's batch is not (the negative control)."""
import math
import subprocess

import numpy as np
import pytest
from PIL import Image

from .conftest import tool_path

torch = pytest.importorskip("torch")
from libshard.torch import ShardDataset, show  # noqa: E402

GAP, CAPTION = 6, 2 + 2 * (8 + 2)


def tiles(path, n, size, columns=None):
    """The n tiles of size x size of a grid PNG, as uint8 (n, 3, size, size)."""
    px = np.asarray(Image.open(path).convert("RGB"))
    columns = min(columns or math.ceil(math.sqrt(n)), n)
    rows = math.ceil(n / columns)
    assert px.shape == (GAP + rows * (size + CAPTION + GAP), GAP + columns * (size + GAP), 3)
    out = []
    for i in range(n):
        x = GAP + (i % columns) * (size + GAP)
        y = GAP + (i // columns) * (size + CAPTION + GAP)
        out.append(px[y:y + size, x:x + size].transpose(2, 0, 1))
    return torch.from_numpy(np.stack(out))


def first_batch(url, epoch, **settings):
    ds = ShardDataset(url, **settings)
    ds.set_epoch(epoch)
    images, labels = next(iter(ds))
    return images, labels


SETTINGS = dict(seed=3, shuffle=50, flip=True, image_size=40)


@pytest.mark.parametrize("crop", ["random_resized", "center"])
def test_shardcat_show_draws_the_loaders_batch(packed, tmp_path, crop):
    shardcat = tool_path("SHARDCAT", "shardcat")
    png = tmp_path / "grid.png"
    cp = subprocess.run([shardcat, "show", packed.manifest, "-o", png, "--seed", "3",
                         "--epoch", "1", "--shuffle", "50", "--flip", "--image-size", "40",
                         "--count", "10", "--crop", crop], capture_output=True, text=True,
                        timeout=300)
    assert cp.returncode == 0, cp.stderr
    assert f"10 samples of epoch 1, seed 3, drawn into {png}" in cp.stderr
    got = tiles(png, 10, 40)
    images, _ = first_batch(str(packed.manifest), 1, batch_size=10, crop=crop, **SETTINGS)
    assert torch.equal(got, images)
    other, _ = first_batch(str(packed.manifest), 0, batch_size=10, crop=crop, **SETTINGS)
    assert not torch.equal(got, other)   # the control: another epoch is another picture


def test_the_python_twin_draws_the_same_tiles(packed, tmp_path):
    ds = ShardDataset(str(packed.manifest), batch_size=64, dtype="float32", **SETTINGS)
    picture = show(ds, tmp_path / "py.png", count=10, epoch=1, columns=5)
    assert picture.size == Image.open(tmp_path / "py.png").size
    images, labels = first_batch(str(packed.manifest), 1, batch_size=10, **SETTINGS)
    assert torch.equal(tiles(tmp_path / "py.png", 10, 40, columns=5), images)
    assert not torch.equal(tiles(tmp_path / "py.png", 10, 40, columns=5),
                           first_batch(str(packed.manifest), 2, batch_size=10, **SETTINGS)[0])


def test_show_refuses_what_it_cannot_do(packed, tmp_path):
    shardcat = tool_path("SHARDCAT", "shardcat")
    for args, msg in [((), "show wants -o FILE"), (("-o", tmp_path / "x.png", "--samples", "3"),
                                                   "that option goes with stream"),
                      (("-o", tmp_path / "x.png", "--crop", "square"), "--crop wants")]:
        cp = subprocess.run([shardcat, "show", packed.manifest, *args], capture_output=True,
                            text=True, timeout=300)
        assert cp.returncode == 2 and msg in cp.stderr, cp.stderr
    cp = subprocess.run([shardcat, "ls", packed.manifest, "--flip"], capture_output=True,
                        text=True, timeout=300)
    assert cp.returncode == 2 and "that option goes with show" in cp.stderr
    (tmp_path / "a-file").write_text("")  # a picture's folder that cannot be made
    cp = subprocess.run([shardcat, "show", packed.manifest, "-o", tmp_path / "a-file/x.png",
                         "--seed", "0"], capture_output=True, text=True, timeout=300)
    assert cp.returncode == 1 and "a-file" in cp.stderr and not (tmp_path / "x.png").exists(), \
        cp.stderr
