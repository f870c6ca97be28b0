"""show: a picture of what a ShardDataset delivers, the Python twin of `shardcat show`.

    from libshard.torch import ShardDataset, show
    ds = ShardDataset("shards/train.json", seed=0, shuffle=1000, flip=True, batch_size=256)
    show(ds, "grid.png", count=16, epoch=0)

The first `count` samples of the epoch, as the dataset's loader delivers them with its own
settings (the crop, the flip, the resize), drawn as a grid with each sample's key and label
under its tile; the tiles are the batch's pixels, laid out as shardcat show lays them.
"""
import math

from .dataset import ShardDataset

GAP = 6        # pixels between tiles and around the grid, as shardcat show's
LINE_GAP = 2
CAPTION = 2 * (8 + LINE_GAP)   # two lines of an 8-pixel font under each tile


def grid(images, captions, columns=None):
    """A PIL image of uint8 (N, 3, H, W) images in a grid, two caption lines under each."""
    from PIL import Image, ImageDraw
    n, _, h, w = images.shape
    columns = columns or math.ceil(math.sqrt(n))
    columns = min(columns, n)
    rows = math.ceil(n / columns)
    cell = h + LINE_GAP + CAPTION
    out = Image.new("RGB", (GAP + columns * (w + GAP), GAP + rows * (cell + GAP)), (24, 24, 24))
    draw = ImageDraw.Draw(out)
    for i in range(n):
        x = GAP + (i % columns) * (w + GAP)
        y = GAP + (i // columns) * (cell + GAP)
        out.paste(Image.fromarray(images[i].permute(1, 2, 0).contiguous().numpy(), "RGB"), (x, y))
        for k, (line, ink) in enumerate(zip(captions[i], ((235, 235, 235), (150, 150, 150)))):
            draw.text((x, y + h + LINE_GAP + k * (8 + LINE_GAP) - 2), line, fill=ink)
    return out


def show(dataset, path=None, *, count=16, epoch=None, columns=None):
    """The first count samples of dataset's epoch (default: its current epoch) drawn with
    their keys and labels; saved as a PNG at path when given. Returns the PIL image.
    The dataset itself is not read: a copy with the same settings, batches of count
    samples, on the CPU as uint8 (the pixels a float or GPU batch is made from)."""
    if not isinstance(dataset, ShardDataset):
        raise TypeError(f"show takes a libshard.torch.ShardDataset, not "
                        f"{type(dataset).__name__}")
    settings = {**dataset.settings, "batch_size": count, "dtype": "uint8", "layout": "nchw",
                "raw_fields": ["__key__", "__pad__"], "missing_label": -1, "drop_last": False}
    ds = ShardDataset(dataset.urls, rank=dataset.rank, world_size=dataset.world_size,
                      **settings)
    ds.set_epoch(dataset.epoch if epoch is None else epoch)
    images, labels, fields = next(iter(ds))
    captions = []
    for key, label, pad in zip(fields["__key__"], labels.tolist(), fields["__pad__"].tolist()):
        key = key.decode() if isinstance(key, bytes) else str(key)
        captions.append((key, (f"label {label}" if label >= 0 else "no label") +
                         (" (repeat)" if pad else "")))
    picture = grid(images, captions, columns)
    if path is not None:
        picture.save(path, format="PNG")
    return picture
