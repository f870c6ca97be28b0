#!/usr/bin/python3
"""A short training loop on a torchvision model over shards made by shardpack, on the CPU.

    build/tools/shardpack /tmp/images -o /tmp/shards/train-%06d.tar --maxcount 100
    PYTHONPATH=build/python /usr/bin/python3 examples/train.py /tmp/shards/train.json --steps 20

The data comes from libshard.torch.ShardDataset: shards shuffled per epoch, a sample
shuffle buffer, JPEG decode with RandomResizedCrop and flips on libshard's own threads,
batches as uint8 tensors, normalized here on the way into the model, through a ShardLoader
(--workers N for DataLoader worker processes; its state_dict resumes mid-epoch). Under
torchrun each rank reads its own share (mode="equal", so every rank does the same number
of steps). Prints the batch shapes, each step's loss and the samples per second.
"""
import argparse
import json
import time

import torch
import torchvision

from libshard.torch import ShardDataset, ShardLoader


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("manifest")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--image-size", type=int, default=96)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--workers", type=int, default=0)
    a = ap.parse_args()
    classes = json.load(open(a.manifest))["libshard"]["classes"]
    ds = ShardDataset(a.manifest, seed=0, shuffle=1000, mode="equal", batch_size=a.batch_size,
                      image_size=a.image_size, crop="random_resized", flip=True, drop_last=True)
    loader = ShardLoader(ds, num_workers=a.workers)
    model = torchvision.models.resnet18(num_classes=len(classes))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    mean = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1) * 255
    std = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1) * 255
    step, losses = 0, []
    t0 = time.time()
    for epoch in range(a.epochs):
        loader.set_epoch(epoch)
        for images, labels in loader:
            if step == 0:
                print(f"batch: images {tuple(images.shape)} {images.dtype}, labels "
                      f"{tuple(labels.shape)} {labels.dtype}")
            x = (images.float() - mean) / std
            loss = torch.nn.functional.cross_entropy(model(x), labels)
            opt.zero_grad()
            loss.backward()
            opt.step()
            step += 1
            losses.append(loss.item())
            print(f"epoch {epoch} step {step}: loss {loss.item():.3f}")
            if step >= a.steps:
                break
        if step >= a.steps:
            break
    secs = time.time() - t0
    if losses:  # the mean of the first and of the last few steps: one batch's loss is noisy
        k = max(1, len(losses) // 4)
        first, last = sum(losses[:k]) / k, sum(losses[-k:]) / k
        print(f"loss: {first:.3f} over the first {k} steps, {last:.3f} over the last {k}"
              f"{' (falling: the model learns the classes)' if last < first else ''}")
    print(f"{step} steps of {a.batch_size} in {secs:.1f} s: {step * a.batch_size / secs:.0f} "
          f"samples/s (decode, batch and a ResNet-18 step on this CPU); resume state: "
          f"{loader.state_dict()}")


if __name__ == "__main__":
    main()
