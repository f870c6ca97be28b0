#!/usr/bin/python3
"""Packing an image folder (ImageFolder layout: one folder per class) into a bucket, twice:
with the shardpack tool, and on a Dask cluster with libshard.distributed.pack; each set is
then checked with `shardcat verify MANIFEST`. The two sets are byte-identical.

    AWS_ACCESS_KEY_ID=... AWS_SECRET_ACCESS_KEY=... \\
    PYTHONPATH=build/python /usr/bin/python3 examples/pack_bucket.py \\
        /data/imagenet/train s3://my-bucket/imagenet --maxcount 1000 \\
        [--scheduler tcp://10.0.0.1:8786] [--shardpack build/tools/shardpack] \\
        [--shardcat build/tools/shardcat]

DEST is a gs:// or s3:// prefix: the tool's set goes to DEST/shardpack/train-%06d.tar, the
cluster's to DEST/dask/train-%06d.tar, each with its .idx files and train.json (the
manifest, written last). Credentials come from the environment (docs/remote.md:
AWS_* for s3://, GOOGLE_* or STORAGE_EMULATOR_HOST for gs://); Dask workers started here
inherit them, and workers of a scheduler given with --scheduler need them in theirs, with
libshard importable and SRC at the same path. Without --scheduler a LocalCluster of
--workers processes packs. Prints each run's summary; the last line is JSON.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys


def tool(name, given):
    """The path of a libshard tool: --NAME, else $NAME in capitals (SHARDPACK), else PATH."""
    path = given or os.environ.get(name.upper()) or shutil.which(name)
    if not path:
        sys.exit(f"{name} not found: pass --{name} or put it on PATH")
    return path


def verify(shardcat, manifest):
    """shardcat verify: every shard's structure, index and checksums against the manifest,
    and the set against the bucket (no shard missing, none unlisted)."""
    cp = subprocess.run([shardcat, "verify", "--json", manifest], capture_output=True, text=True)
    reports = [json.loads(line) for line in cp.stdout.splitlines() if line.strip()]
    bad = [r for r in reports if not r.get("ok")]
    print(f"verify {manifest}: {len(reports)} reports, {len(bad)} with defects, "
          f"exit {cp.returncode}")
    for r in bad:
        print(f"  {r.get('url', r.get('set'))}: {r.get('error') or r.get('defect_messages')}")
    return cp.returncode == 0 and not bad


def pack_with_tool(shardpack, src, pattern, maxcount):
    """shardpack SRC -o PATTERN: scans, plans and writes the shards, uploading each as it is
    written (in parts above --upload-part); --json makes its summary one JSON object."""
    cp = subprocess.run([shardpack, src, "-o", pattern, "--maxcount", str(maxcount), "--quiet",
                         "--json"], capture_output=True, text=True)
    if cp.returncode != 0:
        sys.exit(f"shardpack failed (exit {cp.returncode}):\n{cp.stderr}")
    summary = json.loads(cp.stdout)
    print(f"shardpack: {summary['samples']} samples in {summary['shards']} shards -> {pattern}")
    return {"samples": summary["samples"], "shards": summary["shards"]}


def pack_on_dask(src, pattern, maxcount, scheduler, workers):
    """libshard.distributed.pack: the client plans, each task writes whole shards on a
    worker, the client writes the manifest last. The same bytes as shardpack's."""
    from distributed import Client, LocalCluster
    from libshard.distributed import pack
    if scheduler:
        client, cluster = Client(scheduler), None
    else:
        cluster = LocalCluster(n_workers=workers, threads_per_worker=1, dashboard_address=None)
        client = Client(cluster)
    try:
        result = pack(src, pattern, client=client, maxcount=maxcount)
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
    print(f"dask: {result.samples} samples in {result.shards} shards -> {result.manifest}")
    if result.skipped:
        print(f"  skipped: {result.skipped}")
    return {"samples": result.samples, "shards": result.shards, "manifest": result.manifest}


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("src", help="image folder, one sub-folder per class")
    ap.add_argument("dest", help="gs://BUCKET/PREFIX or s3://BUCKET/PREFIX")
    ap.add_argument("--maxcount", type=int, default=1000, help="samples per shard")
    ap.add_argument("--scheduler", help="a Dask scheduler's address; default: a LocalCluster")
    ap.add_argument("--workers", type=int, default=2, help="LocalCluster worker processes")
    ap.add_argument("--shardpack", help="the shardpack tool (default $SHARDPACK, else PATH)")
    ap.add_argument("--shardcat", help="the shardcat tool (default $SHARDCAT, else PATH)")
    a = ap.parse_args()
    if not a.dest.startswith(("gs://", "s3://")):
        ap.error(f"dest: a gs:// or s3:// prefix, not {a.dest!r}")
    dest = a.dest.rstrip("/")
    shardpack, shardcat = tool("shardpack", a.shardpack), tool("shardcat", a.shardcat)

    out = {"shardpack": pack_with_tool(shardpack, a.src, f"{dest}/shardpack/train-%06d.tar",
                                       a.maxcount),
           "dask": pack_on_dask(a.src, f"{dest}/dask/train-%06d.tar", a.maxcount, a.scheduler,
                                a.workers)}
    out["shardpack"]["manifest"] = f"{dest}/shardpack/train.json"
    ok = True
    for run in out.values():
        run["verified"] = verify(shardcat, run["manifest"])
        ok &= run["verified"]
    print(json.dumps(out))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":   # Dask's worker processes import this file again
    main()
