#!/usr/bin/python3
"""A WebDataset training pipeline, as open_clip and timm write it, ported to libshard by
changing its import line only, and run for one epoch through a torch DataLoader.

    PYTHONPATH=build/python /usr/bin/python3 examples/wds_port.py \\
        'https://data.example.com/imagenet/train-{000000..000146}.tar'

The shards may be local paths, http(s)://, gs:// or s3:// URLs (credentials from the
environment, docs/remote.md), brace patterns, or several of them. Both of
WebDataset's ways of writing a pipeline are run, one epoch each: the composed DataPipeline
(shards split by node and by DataLoader worker, tar -> samples, a shuffle buffer, PIL
decode, a torchvision transform, batches of 16) and the fluid WebDataset(urls).shuffle()
.decode().to_tuple() with the DataLoader batching. Prints what each delivered (its last
line is JSON: samples, batches and batch sizes of each), then the sample count.
"""
import argparse
import json

import torch
from torchvision import transforms

# The one line the port changes; it was `import webdataset as wds`.
import libshard.webdataset as wds


def make_transform(size):
    """The training transform of a timm / open_clip recipe, scaled down."""
    return transforms.Compose([
        transforms.RandomResizedCrop(size),
        transforms.RandomHorizontalFlip(),
        transforms.ToTensor(),
        transforms.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225]),
    ])


def composed(urls, transform, batch_size):
    """open_clip's style: every stage named in one DataPipeline. split_by_node gives each
    torch.distributed rank its shards, split_by_worker each DataLoader worker a share of
    those; batched() makes the batches inside the workers (the DataLoader's batch_size is
    then None)."""
    return wds.DataPipeline(
        wds.SimpleShardList(urls),
        wds.split_by_node,
        wds.split_by_worker,
        wds.tarfile_to_samples(),
        wds.shuffle(1000),
        wds.decode("pil"),
        wds.to_tuple("jpg", "cls"),
        wds.map_tuple(transform, None),
        wds.batched(batch_size),
    )


def fluid(urls, transform):
    """timm's style: the fluid WebDataset; here the DataLoader makes the batches.
    shardshuffle is given (WebDataset 1.0 warns when it is left None)."""
    return (wds.WebDataset(urls, shardshuffle=100)
            .shuffle(1000)
            .decode("pil")
            .to_tuple("jpg", "cls")
            .map_tuple(transform, None))


def run_epoch(name, dataset, workers, batch_size=None):
    """One epoch: the samples and the size of every batch the DataLoader handed out."""
    loader = torch.utils.data.DataLoader(dataset, batch_size=batch_size, num_workers=workers)
    sizes = []
    for images, labels in loader:
        assert images.shape[0] == labels.shape[0]
        if not sizes:
            print(f"{name}: first batch images {tuple(images.shape)} {images.dtype}, "
                  f"labels {labels[:8].tolist()}...")
        sizes.append(int(images.shape[0]))
    print(f"{name}: {sum(sizes)} samples in {len(sizes)} batches")
    return {"samples": sum(sizes), "batches": len(sizes), "sizes": sizes}


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("urls", nargs="+", help="shards: paths, URLs, brace patterns")
    ap.add_argument("--workers", type=int, default=2, help="DataLoader worker processes")
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--image-size", type=int, default=64)
    a = ap.parse_args()
    # one pattern stays a string (SimpleShardList expands its braces); several, a list
    urls = a.urls[0] if len(a.urls) == 1 else a.urls
    transform = make_transform(a.image_size)
    out = {
        "pipeline": run_epoch("DataPipeline", composed(urls, transform, a.batch_size), a.workers),
        "fluid": run_epoch("WebDataset", fluid(urls, transform), a.workers, a.batch_size),
    }
    print(json.dumps(out))
    print(f"samples: {out['pipeline']['samples']}")


if __name__ == "__main__":
    main()
