"""Which samples were in step N, deep into an epoch of a 10,000,000-sample data set: 10,000
shards of 1,000 samples, each with its .idx (DALI v1.2) and listed in a manifest; the shards
themselves are sparse files of their right size (nothing reads their bytes).

    /usr/bin/python3 bench/step_keys.py [--data /tmp/stepkeys] [--rounds 3]

For a job of 8 ranks x 4 workers, batches of 256, equal mode, a 5,000-sample shuffle buffer,
epoch 3, it measures (medians of --rounds, each in a fresh process):
  shardcat batch --step N --rank 5     the whole command: wall seconds, peak RSS (MiB), the
                                       indexes it read and, over HTTP, the bytes it read
  ShardLoader.batch_keys(3, N, 5)      the call's seconds and the process's RSS growth over
                                       its baseline after `import torch, libshard`
  shardcat batch --key K (where_is)    the reverse: names every consumer's whole epoch
locally (paths) and over HTTP (nginx on 127.0.0.1, the manifest's URL).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BUILD = REPO / "build"
SHARDCAT = str(BUILD / "tools" / "shardcat")
SHARDS, PER = 10_000, 1_000
JPG, STRIDE = 100_000, 512 + 100_352 + 512 + 512  # a member of 100 kB and its label
JOB = ["--world-size", "8", "--workers", "4", "--batch-size", "256", "--mode", "equal",
       "--shuffle", "5000", "--seed", "11", "--epoch", "3"]


def make(data, shards=SHARDS, sizes=None):
    """The manifest, the indexes and the sparse shards (once); with sizes (s, i) -> (w, h),
    each shard's image sizes beside its index too (.cols)."""
    man = data / "train.json"
    if man.exists() and len(json.loads(man.read_text())["shardlist"]) == shards:
        return man
    data.mkdir(parents=True, exist_ok=True)
    shardlist = []
    for s in range(shards):
        name = f"train-{s:06d}"
        lines, cols = [f"v1.2 {PER}"], [f"libshard-cols 1 {PER} width:u32 height:u32"]
        for i in range(PER):
            off = i * STRIDE + 512
            k = f"s{s:05d}/i{i:04d}"
            lines.append(f"jpg {off} {JPG} {k}.jpg cls {off + 100_352 + 512} 1 {k}.cls")
            if sizes:
                cols.append("%d %d" % sizes(s, i))
        (data / f"{name}.idx").write_text("\n".join(lines) + "\n")
        if sizes:
            (data / f"{name}.cols").write_text("\n".join(cols) + "\n")
        size = PER * STRIDE + 1024
        with open(data / f"{name}.tar", "wb") as f:
            f.truncate(size)
        shardlist.append({"url": f"{name}.tar", "nsamples": PER, "filesize": size,
                          "tarsize": size})
    man.write_text(json.dumps({"__kind__": "wids-shard-index-v1", "wids_version": 1,
                               "name": "train", "shardlist": shardlist}))
    return man


def peak_rss(cmd):
    """Seconds and peak RSS (MiB) of cmd, with its output, through /usr/bin/time."""
    t = time.perf_counter()
    p = subprocess.run(["/usr/bin/time", "-f", "%M", *cmd], capture_output=True, text=True)
    dt = time.perf_counter() - t
    if p.returncode:
        sys.exit(f"{' '.join(cmd)} failed:\n{p.stderr}")
    lines = p.stderr.strip().splitlines()
    return dt, int(lines[-1]) / 1024, p.stdout, "\n".join(lines[:-1])


PY = r"""
import resource, sys, time
sys.path.insert(0, %(path)r)
import torch, libshard
from libshard.torch import ShardDataset, ShardLoader
def rss():
    return int(open("/proc/self/statm").read().split()[1]) * 4096 / 2**20
base = rss()
ds = ShardDataset(%(man)r, seed=11, batch_size=256, shuffle=5000, mode="equal", rank=0,
                  world_size=8)
ld = ShardLoader(ds, num_workers=4)
t = time.perf_counter()
keys = ld.batch_keys(3, %(step)d, 5)
dt = time.perf_counter() - t
print(dt, rss() - base, len(keys), keys[0]["__key__"])
"""


def python_call(man, step):
    out = subprocess.run(["/usr/bin/python3", "-c", PY % dict(path=str(BUILD / "python"),
                                                               man=str(man), step=step)],
                         capture_output=True, text=True)
    if out.returncode:
        sys.exit(out.stderr)
    dt, grow, n, first = out.stdout.split()
    return float(dt), float(grow), int(n), first


def measure(where, man, rounds):
    # the rank's last full step, found by asking past the end
    probe = subprocess.run([SHARDCAT, "batch", str(man), *JOB, "--step", "99999999",
                            "--rank", "5"], capture_output=True, text=True).stderr
    last = int(probe.split("(the last is ")[1].split(")")[0])
    step = last - 7  # a full batch, in the rank's second last round
    rows = {}
    for _ in range(rounds):
        dt, rss, out, err = peak_rss([SHARDCAT, "batch", str(man), *JOB, "--step", str(step),
                                      "--rank", "5", "--stats"])
        rows.setdefault("batch", []).append((dt, rss))
        stats = err.strip().splitlines()[-1]
        pdt, grow, n, first = python_call(man, step)
        rows.setdefault("python", []).append((pdt, grow))
        assert n == len(out.splitlines()) and first == out.split("\t")[4], (n, first)
    key = out.splitlines()[100].split("\t")[4]
    wdt, wrss, wout, werr = peak_rss([SHARDCAT, "batch", str(man), *JOB, "--key", key,
                                      "--stats"])
    assert f"{step}\t5\t" in wout, wout
    med = lambda v, i: statistics.median(x[i] for x in v)
    print(f"{where}: step {step} of {last + 1} on rank 5 (8 ranks x 4 workers, batches of 256)")
    print(f"  shardcat batch --step   {med(rows['batch'], 0):6.3f} s  peak RSS "
          f"{med(rows['batch'], 1):6.1f} MiB   [{stats.replace('shardcat: ', '')}]")
    print(f"  ShardLoader.batch_keys  {med(rows['python'], 0):6.3f} s  RSS over the "
          f"interpreter's baseline {med(rows['python'], 1):6.1f} MiB")
    print(f"  shardcat batch --key    {wdt:6.3f} s  peak RSS {wrss:6.1f} MiB   "
          f"[{werr.strip().splitlines()[-1].replace('shardcat: ', '')}]")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="/tmp/stepkeys")
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    data = Path(a.data)
    t = time.perf_counter()
    man = make(data)
    print(f"data: {SHARDS} shards x {PER} samples, indexes and manifest "
          f"({time.perf_counter() - t:.0f} s to make or find)")
    measure("local", man, a.rounds)
    sys.path.insert(0, str(REPO / "tests" / "remote"))
    import servers
    ng = servers.Nginx(data)
    try:
        measure("HTTP (nginx, 127.0.0.1)", f"{ng.url}/train.json", a.rounds)
    finally:
        ng.close()


if __name__ == "__main__":
    main()
