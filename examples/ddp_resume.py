#!/usr/bin/python3
"""Data-parallel training that checkpoints mid-epoch and resumes on another number of ranks
and DataLoader workers, with libshard's defaults (no partition count chosen in advance).

    # 2 ranks x 2 workers; stopped after 20 steps (as a preempted job is), ckpt.pt kept
    /usr/bin/python3 -m torch.distributed.run --standalone --nproc_per_node 2 \\
        --redirects 0:1 --tee 0:1 examples/ddp_resume.py SHARDS/train.json --workers 2 --stop-after 20
    # 3 ranks x 1 worker: the rest of that epoch, then the next ones
    /usr/bin/python3 -m torch.distributed.run --standalone --nproc_per_node 3 \\
        --redirects 0:1 --tee 0:1 examples/ddp_resume.py SHARDS/train.json --workers 1

(PYTHONPATH=build/python for a libshard built in the tree; torch.distributed.run is torchrun
run by the interpreter that has libshard.) The loader's state goes into the checkpoint beside
the model's and the optimizer's: any rank's is the whole job's, so rank 0 saves for all, and
every rank of the next job loads the same file, and the dataset, made without mode=, takes
the state's mode. Equal mode, the default with several ranks, gives every rank the same
number of steps, which DDP's all-reduce needs; after a resume on another topology a rank may
be topped up with at most one batch of repeats, marked in "__pad__", which the loss below
leaves out. Exact mode (the default on one rank, so what a resume from one rank goes on
in) may leave the ranks a batch apart: Join lets the rank done first stand in for the
other's last all-reduce. docs/resume.md says what may change between a
checkpoint and its resume.
"""
import argparse
import gc
import json
import os
from datetime import timedelta

import torch
import torch.distributed as dist
from torch.distributed.algorithms.join import Join
from torch.nn.parallel import DistributedDataParallel

from libshard.torch import ShardDataset, ShardLoader


def model_for(classes):
    """A small convolutional net: the data path is what this example shows."""
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3, stride=2, padding=1), torch.nn.ReLU(),
        torch.nn.Conv2d(16, 32, 3, stride=2, padding=1), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(32, classes))


def save(path, model, opt, loader, epoch):
    """The checkpoint, written whole or not at all (a job killed while saving keeps the one
    before)."""
    tmp = f"{path}.tmp"
    torch.save({"model": model.module.state_dict(), "opt": opt.state_dict(),
                "data": loader.state_dict(), "epoch": epoch}, tmp)
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("manifest", help="shards: a manifest, a brace pattern, a folder, a URL")
    ap.add_argument("--workers", type=int, default=2, help="DataLoader workers per rank")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--image-size", type=int, default=64)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--checkpoint", default="ckpt.pt")
    ap.add_argument("--every", type=int, default=10, help="steps between checkpoints")
    ap.add_argument("--stop-after", type=int, default=0,
                    help="stop after this many steps of this run (0: run to the end)")
    ap.add_argument("--log", help="append each rank's sample keys here (JSON lines)")
    a = ap.parse_args()

    dist.init_process_group("gloo", timeout=timedelta(seconds=300))  # "nccl" on GPUs
    rank, world = dist.get_rank(), dist.get_world_size()
    ds = ShardDataset(a.manifest, seed=0, shuffle=1000, batch_size=a.batch_size,
                      image_size=a.image_size, crop="random_resized", flip=True,
                      raw_fields="__key__;__pad__")
    loader = ShardLoader(ds, num_workers=a.workers)
    classes = 1000
    if a.manifest.endswith(".json"):
        classes = len(json.load(open(a.manifest)).get("libshard", {}).get("classes", [])) or 1000
    model = DistributedDataParallel(model_for(classes))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

    first_epoch = 0
    if os.path.exists(a.checkpoint):
        ckpt = torch.load(a.checkpoint)
        model.module.load_state_dict(ckpt["model"])
        opt.load_state_dict(ckpt["opt"])
        loader.load_state_dict(ckpt["data"])  # on any world size and worker count
        first_epoch = ckpt["epoch"]
        if rank == 0:
            print(f"resumed in epoch {first_epoch} on {world} ranks x {a.workers} workers: "
                  f"{len(loader)} steps left in it")

    steps, loss = 0, torch.zeros(())
    for epoch in range(first_epoch, a.epochs):
        loader.set_epoch(epoch)  # keeps a restored position for its own epoch
        keys = []
        with Join([model]):  # exact mode's ranks may be a batch apart
            for images, labels, fields in loader:
                real = ~fields["__pad__"]  # repeats: in step, out of the loss
                x = images.float().div_(255)
                losses = torch.nn.functional.cross_entropy(model(x), labels, reduction="none")
                loss = (losses * real).sum() / real.sum().clamp(min=1)
                opt.zero_grad()
                loss.backward()
                opt.step()
                keys += [k for k, r in zip(fields["__key__"], real.tolist()) if r]
                steps += 1
                if steps % a.every == 0 and rank == 0:
                    save(a.checkpoint, model, opt, loader, epoch)
                if a.stop_after and steps == a.stop_after:
                    break
        if a.log:
            gathered = [None] * world
            dist.all_gather_object(gathered, keys)
            if rank == 0:
                with open(a.log, "a") as f:
                    for r, k in enumerate(gathered):
                        f.write(json.dumps({"epoch": epoch, "rank": r, "world": world,
                                            "keys": k}) + "\n")
        if rank == 0:
            print(f"epoch {epoch}: {steps} steps on this rank so far, loss {loss.item():.3f}")
        if a.stop_after and steps == a.stop_after:
            if rank == 0:
                save(a.checkpoint, model, opt, loader, epoch)
                print(f"stopped after {steps} steps: {a.checkpoint} resumes the job")
            break
        if rank == 0:  # the next epoch from its start
            save(a.checkpoint, model, opt, loader, epoch + 1)
    dist.barrier()
    # DDP's reducer goes before the process group, not after it at the interpreter's exit:
    # there its destructor would tear the gloo group down holding the GIL, while a gloo
    # thread frees a collective's tensor and waits for the GIL (torch 1.13: a hang at exit)
    del model, opt, loss
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
