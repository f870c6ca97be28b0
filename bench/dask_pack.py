#!/usr/bin/python3
"""Packing on a Dask LocalCluster against shardpack on the same folder, page cache warm.

Dask with 1 and 2 worker processes (1 thread each) against `shardpack -j 1` and `-j 2`, the
same options (the output is byte-identical), rounds interleaved; reports medians and ratios.
The cluster is started once per worker count, outside the timings: the figure is the packing.

    /usr/bin/python3 bench/dask_pack.py /tmp/imagefolder [--rounds 5] [--maxcount 1000]
"""
import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "build" / "python"))

from distributed import Client, LocalCluster  # noqa: E402

from benchtools import medians_table, timed, warm  # noqa: E402
from libshard.distributed import pack  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("src")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--maxcount", type=int, default=1000)
    ap.add_argument("--shardpack", default=str(REPO / "build" / "tools" / "shardpack"))
    a = ap.parse_args()
    files = [os.path.join(r, f) for r, _, fs in os.walk(a.src) for f in fs]
    total = sum(os.path.getsize(f) for f in files)
    warm(files)
    work = tempfile.mkdtemp(prefix="libshard-daskbench-", dir=os.path.dirname(os.path.abspath(a.src)))
    clusters = {n: LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None,
                                silence_logs=40) for n in (1, 2)}
    clients = {n: Client(c) for n, c in clusters.items()}
    times = {k: [] for k in ("shardpack -j 1", "dask, 1 worker", "shardpack -j 2", "dask, 2 workers")}
    try:
        for _ in range(a.rounds):
            for k in times:
                out = os.path.join(work, k.replace(" ", "_").replace(",", ""))
                shutil.rmtree(out, ignore_errors=True)
                os.makedirs(out)
                pattern = os.path.join(out, "t-%06d.tar")
                if k.startswith("shardpack"):
                    times[k].append(timed([a.shardpack, a.src, "-o", pattern, "-q", "-c", str(a.maxcount),
                                           "-j", k[-1]]))
                else:
                    t = time.perf_counter()
                    pack(a.src, pattern, client=clients[1 if "1 worker" in k else 2], maxcount=a.maxcount)
                    times[k].append(time.perf_counter() - t)
    finally:
        for c in clients.values():
            c.close()
        for c in clusters.values():
            c.close()
        shutil.rmtree(work, ignore_errors=True)
    med = medians_table(times, len(files), total, a.maxcount, a.rounds)
    print("ratios (time / baseline time):")
    print(f"  dask, 1 worker / shardpack -j 1   = {med['dask, 1 worker'] / med['shardpack -j 1']:.2f}")
    print(f"  dask, 2 workers / shardpack -j 2  = {med['dask, 2 workers'] / med['shardpack -j 2']:.2f}")
    print(f"  dask, 2 workers / dask, 1 worker  = {med['dask, 2 workers'] / med['dask, 1 worker']:.2f}")


if __name__ == "__main__":
    sys.exit(main())
