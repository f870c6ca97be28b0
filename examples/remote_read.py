#!/usr/bin/python3
"""Training batches from shards in a bucket or on a web server: libshard.torch.ShardDataset
and ShardLoader over s3://, gs:// and https:// URLs, with a local cache of whole shards.

    AWS_ACCESS_KEY_ID=... AWS_SECRET_ACCESS_KEY=... AWS_REGION=us-east-1 \\
    PYTHONPATH=build/python /usr/bin/python3 examples/remote_read.py \\
        s3://my-bucket/imagenet/train.json --cache-dir ~/.cache/libshard/shards --epochs 2

The URL may be a manifest, a brace pattern (gs://b/train-{000000..000146}.tar), or a
bucket prefix ending in "/" (every shard under it). Credentials and endpoints come from
the environment, as docs/remote.md lists them; nothing here names them:

  s3://     AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY (AWS_SESSION_TOKEN), else AWS_PROFILE
            of ~/.aws/credentials, else anonymous; AWS_REGION; AWS_ENDPOINT_URL(_S3) for
            an S3-compatible store (MinIO, R2, Ceph)
  gs://     GOOGLE_OAUTH_ACCESS_TOKEN, GOOGLE_APPLICATION_CREDENTIALS (a service-account
            key file), else the GCE metadata server, else anonymous; STORAGE_EMULATOR_HOST
            for an emulator
  https://  CURL_CA_BUNDLE or SSL_CERT_FILE for a private CA (or --ca-bundle here)

--cache-dir keeps each shard read whole (shared by the processes of the machine, bounded by
--cache-size): the second epoch, and the next run, read it from the disk. Prints each
batch, the loader's stats (the stage the others wait on) and the remote counters (bytes,
requests, retries, cache hits); its last line is JSON.
"""
import argparse
import json
import os

import torch

from libshard.torch import ShardDataset, ShardLoader


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("url", help="s3://, gs://, https:// shards: a manifest, a pattern, a prefix/")
    ap.add_argument("--cache-dir", default="~/.cache/libshard/shards",
                    help="local folder that keeps whole shards (default %(default)s); '' for none")
    ap.add_argument("--cache-size", type=int, default=0,
                    help="bytes the cache may hold (0: 10%% of the free space)")
    ap.add_argument("--ca-bundle",
                    help="CA bundle for https (else $CURL_CA_BUNDLE or $SSL_CERT_FILE)")
    ap.add_argument("--workers", type=int, default=0,
                    help="DataLoader workers (0: libshard's own threads read and decode; "
                         "the remote counters are then this process's)")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--image-size", type=int, default=64)
    ap.add_argument("--retries", type=int, default=10, help="tries without progress per transfer")
    ap.add_argument("--show", type=int, default=3, help="batches printed per epoch")
    a = ap.parse_args()

    remote = {"retries": a.retries}
    if a.cache_dir:
        remote["cache_dir"] = os.path.expanduser(a.cache_dir)
        os.makedirs(remote["cache_dir"], exist_ok=True)
        remote["cache_size"] = a.cache_size
    if a.ca_bundle:
        remote["ca_bundle"] = a.ca_bundle
    ds = ShardDataset(a.url, seed=0, shuffle=500, batch_size=a.batch_size,
                      image_size=a.image_size, crop="random_resized", flip=True, **remote)
    loader = ShardLoader(ds, num_workers=a.workers)

    epochs = []
    for epoch in range(a.epochs):
        loader.set_epoch(epoch)
        samples = batches = 0
        classes = torch.zeros(0, dtype=torch.int64)
        for images, labels in loader:   # images: uint8 (B, 3, H, W); labels: int64 (B,)
            if batches < a.show:
                print(f"epoch {epoch} batch {batches}: images {tuple(images.shape)} "
                      f"{images.dtype}, labels {labels[:8].tolist()}...")
            samples += len(labels)
            batches += 1
            classes = torch.cat([classes, labels])
        counts = torch.bincount(classes).tolist() if len(classes) else []
        print(f"epoch {epoch}: {samples} samples in {batches} batches, per class {counts}")

        stats = loader.stats()     # with workers: {"workers": {i: that worker's}}
        for who, st in ([("", stats)] if "workers" not in stats
                        else [(f"worker {i}: ", s) for i, s in sorted(stats["workers"].items())]):
            if st:
                print(f"  {who}{st['wall_seconds']:.2f} s, bottleneck {st['bottleneck']}: "
                      f"{st['verdict']}")
        rs = ds.remote_stats()     # this process's reads (num_workers=0)
        if rs:
            print("  remote: " + ", ".join(f"{k} {v}" for k, v in rs.items()))
        epochs.append({"samples": samples, "batches": batches, "classes": counts, "remote": rs})
    print(json.dumps({"url": a.url, "epochs": epochs}))


if __name__ == "__main__":
    main()
