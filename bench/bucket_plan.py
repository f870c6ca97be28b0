"""What planning bucketed batches costs on a large data set, against the same job without
buckets: shards of 1,000 samples with their .idx (DALI v1.2) and .cols (image sizes of six
aspect ratios), listed in a manifest; the shards themselves are sparse files of their right
size (nothing here reads their bytes).

    /usr/bin/python3 bench/bucket_plan.py [--shards 1000] [--data /tmp/bucketplan] [--rounds 3]

For a job of 8 ranks x 4 workers, batches of 256, a 5,000-sample shuffle buffer, buckets
"192x256,256x192,144x256,256x144,224x224,160x320", it measures (medians of --rounds, each in
a fresh process):
  len(ShardDataset)            rank 5's batches this epoch: in exact mode from the counts,
                               with buckets a walk of the epoch's line (equal mode: every
                               consumer's batches counted)
  Reader open + rank_batches   the C call under it
  shardcat batch --step N      a step near the end of rank 5's epoch, named from the order
"""
import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
import step_keys  # noqa: E402 (its data set, with columns)

BUILD = REPO / "build"
SHARDCAT = str(BUILD / "tools" / "shardcat")
PER = step_keys.PER
SIZES = [(640, 480), (480, 640), (1280, 720), (720, 1280), (500, 500), (600, 300)]  # w, h
BUCKETS = "192x256,256x192,144x256,256x144,224x224,160x320"
JOB = ["--world-size", "8", "--workers", "4", "--batch-size", "256", "--mode", "equal",
       "--shuffle", "5000", "--seed", "11", "--epoch", "3"]


def make(data, shards):
    """The manifest, the indexes, the columns and the sparse shards (once): step_keys.py's,
    with six aspect ratios."""
    return step_keys.make(data, shards,
                          lambda s, i: SIZES[(s * 7 + i * 13 + i // 17) % len(SIZES)])


PY = r"""
import sys, time
sys.path.insert(0, %(path)r)
import libshard
from libshard import _libshard
from libshard.torch import ShardDataset
kw = dict(seed=11, batch_size=256, shuffle=5000, mode="equal", rank=5, world_size=8,
          image_size=224)
if %(buckets)r:
    kw["aspect_buckets"] = %(buckets)r
ds = ShardDataset(%(man)r, **kw)
t = time.perf_counter()
n = len(ds)
dt = time.perf_counter() - t
rkw = dict(seed=11, shuffle=5000, mode="equal", rank=5, world_size=8, worker=0, num_workers=1,
           batch_size=256, queue_depth=1)
if %(buckets)r:
    rkw.update(aspect_buckets=%(buckets)r, aspect_side=224)
t = time.perf_counter()
r = _libshard.Reader(%(man)r, **rkw)
m = r.rank_batches(256, rank=5)
rt = time.perf_counter() - t
print(dt, n, rt, m)
"""


def python_len(man, buckets):
    out = subprocess.run(["/usr/bin/python3", "-c",
                          PY % dict(path=str(BUILD / "python"), man=str(man), buckets=buckets)],
                         capture_output=True, text=True)
    if out.returncode:
        sys.exit(out.stderr)
    dt, n, rt, m = out.stdout.split()
    return float(dt), int(n), float(rt), int(m)


def batch_step(man, buckets, step):
    extra = ["--aspect-buckets", buckets, "--image-size", "224"] if buckets else []
    t = time.perf_counter()
    p = subprocess.run(["/usr/bin/time", "-f", "%M", SHARDCAT, "batch", str(man), *JOB,
                        *extra, "--step", str(step), "--rank", "5"],
                       capture_output=True, text=True)
    dt = time.perf_counter() - t
    if p.returncode:
        sys.exit(p.stderr)
    return dt, int(p.stderr.strip().splitlines()[-1]) / 1024, len(p.stdout.splitlines())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="/tmp/bucketplan")
    ap.add_argument("--shards", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    t = time.perf_counter()
    man = make(Path(a.data), a.shards)
    print(f"data: {a.shards} shards x {PER} samples, indexes, columns and manifest "
          f"({time.perf_counter() - t:.0f} s to make or find)")
    rows = {}
    for _ in range(a.rounds):
        for name, buckets in (("fixed", None), ("buckets", BUCKETS)):
            rows.setdefault(name, []).append(python_len(man, buckets))
    med = lambda name, i: statistics.median(r[i] for r in rows[name])
    for name in ("fixed", "buckets"):
        print(f"  {name:8s} len() {med(name, 0):7.3f} s ({med(name, 1):.0f} batches); Reader "
              f"open + rank_batches {med(name, 2):7.3f} s ({med(name, 3):.0f})")
    step = int(med("buckets", 1)) - 6
    for name, buckets in (("fixed", None), ("buckets", BUCKETS)):
        got = [batch_step(man, buckets, step) for _ in range(a.rounds)]
        print(f"  {name:8s} shardcat batch --step {step} --rank 5: "
              f"{statistics.median(g[0] for g in got):7.3f} s, peak RSS "
              f"{statistics.median(g[1] for g in got):6.1f} MiB, {got[0][2]} samples")


if __name__ == "__main__":
    main()
