#!/usr/bin/python3
"""Evaluation on several ranks where every sample of the validation set is seen exactly once
across them: ShardDataset(mode="exact"), the ranks' counts all-reduced and checked against
the manifest's sample count.

    PYTHONPATH=build/python /usr/bin/python3 -m torch.distributed.run --nproc_per_node 2 \\
        --standalone examples/eval_once.py SHARDS/val.json

(torch.distributed.run is torchrun run by the interpreter that has libshard; Debian's torch
1.13 on Python 3.11 also needs `--redirects 0:1 --tee 0:1` before the script.) Without
torchrun it runs as one rank. VAL is a manifest: a path, or an http(s)://, gs:// or s3:// URL
(credentials from the environment, docs/remote.md); its sample count is the total
the ranks must reach.

mode="exact" splits the set between the ranks so that each sample is read once: the ranks
may end a batch apart, which an evaluation loop (no gradient all-reduce) does not mind.
shuffle=False reads in dataset order, crop="center" is torchvision's Resize + CenterCrop.
Each batch's "__index__" (the sample's index in the data set, the same on any split) is
gathered, so rank 0 checks that every index was seen exactly once, and the per-rank counts
are all-reduced into the total. --mode equal (the default with several ranks, as
DistributedSampler: the same count per rank) drops a few samples, with --pad repeats a few:
for training, not for evaluation, and this check says so. Exits 1 when the check fails;
rank 0's last line is JSON.
"""
import argparse
import json
import os
import socket
import sys
from datetime import timedelta

import torch
import torch.distributed as dist

import libshard.webdataset as wds
from libshard.torch import ShardDataset


def init_distributed():
    """The process group: torchrun's (RANK, WORLD_SIZE, MASTER_ADDR in the environment), or
    one of a single rank when run on its own."""
    if "RANK" in os.environ:
        dist.init_process_group("gloo", timeout=timedelta(seconds=120))
    else:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0,
                                world_size=1)
    return dist.get_rank(), dist.get_world_size()


def read_manifest(url):
    """(sample count, class names) of a manifest (a wids shard index: the shards' nsamples;
    libshard's adds the classes), read through libshard's sources, so a gs://, s3:// or
    https:// manifest works as a local one does."""
    with wds.gopen(url) as f:
        manifest = json.load(f)
    classes = manifest.get("libshard", {}).get("classes", [])
    return sum(int(s["nsamples"]) for s in manifest["shardlist"]), classes


def model_for(classes):
    """A fixed small classifier: what it predicts does not matter here, the data path does."""
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, stride=2, padding=1), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(8, classes)).eval()


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("manifest", help="the validation set's manifest (path or URL)")
    ap.add_argument("--mode", default="exact", choices=["exact", "equal"],
                    help="how the set is split between ranks (default exact: each sample once)")
    ap.add_argument("--pad", action="store_true", help="equal mode: repeat samples, not drop")
    ap.add_argument("--partitions", type=int, default=0,
                    help="canonical partitions of the set (0: libshard's choice)")
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--image-size", type=int, default=32)
    ap.add_argument("--classes", type=int, help="the model's classes (default: the manifest's)")
    a = ap.parse_args()

    rank, world = init_distributed()
    expected, classes = read_manifest(a.manifest)
    # rank and world size come from torch.distributed; every rank passes the same settings
    ds = ShardDataset(a.manifest, shuffle=False, mode=a.mode, pad=a.pad,
                      partitions=a.partitions, batch_size=a.batch_size,
                      image_size=a.image_size, crop="center", dtype="float32",
                      raw_fields="__index__;__pad__")
    model = model_for(a.classes or len(classes) or 1000)

    seen, correct, padded = [], 0, 0
    with torch.no_grad():
        for images, labels, fields in torch.utils.data.DataLoader(ds, batch_size=None):
            correct += int((model(images).argmax(1) == labels).sum())
            seen += fields["__index__"].tolist()
            padded += int(fields["__pad__"].sum())   # equal mode's repeats, marked

    # the per-rank counts, summed over the ranks
    counts = torch.tensor([len(seen), correct, padded], dtype=torch.int64)
    per_rank = [torch.zeros_like(counts) for _ in range(world)]
    dist.all_gather(per_rank, counts)
    dist.all_reduce(counts, op=dist.ReduceOp.SUM)
    total, correct_all, padded_all = counts.tolist()
    # every rank's indices to rank 0, which checks that each sample came once
    gathered = [None] * world if rank == 0 else None
    dist.gather_object(seen, gathered, dst=0)

    errors = []
    if rank == 0:
        if total != expected:
            errors.append(f"the ranks saw {total} samples, the manifest has {expected}")
        times = {}
        for index in (i for g in gathered for i in g):
            times[index] = times.get(index, 0) + 1
        repeated = sorted(i for i, n in times.items() if n > 1)
        missing = sorted(set(range(expected)) - set(times))
        if repeated:
            errors.append(f"{len(repeated)} samples seen more than once (e.g. {repeated[:5]})")
        if missing:
            errors.append(f"{len(missing)} samples not seen (e.g. {missing[:5]})")
        print(f"{world} ranks saw {[int(c[0]) for c in per_rank]} samples: {total} of "
              f"{expected}; accuracy {correct_all / max(total, 1):.3f}")
        print("OK: every sample exactly once" if not errors else "FAILED: " + "; ".join(errors))
        print(json.dumps({"world_size": world, "mode": a.mode, "pad": a.pad,
                          "per_rank": [int(c[0]) for c in per_rank], "total": total,
                          "expected": expected, "padded": padded_all,
                          "repeated": len(repeated), "missing": len(missing),
                          "errors": errors}))
    verdict = [errors]
    dist.broadcast_object_list(verdict, src=0)   # every rank exits with rank 0's verdict
    dist.destroy_process_group()
    sys.exit(1 if verdict[0] else 0)


if __name__ == "__main__":
    main()
