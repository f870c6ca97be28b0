"""Plain tars (no .idx, no manifest), as WebDataset users have them: listing them against
bsdtar, and the index libshard makes on demand, locally and over loopback nginx.

    /usr/bin/python3 bench/plain_index.py /tmp/imagefolder --rounds 9 [--baseline B/tools/shardcat]

Shards: 8 of 1000 photographs each (key.jpg + key.cls), written by Python's tarfile from the
image folder (benchtools.plain_shards). Measures, interleaved round by round, medians, with
the files in the page cache:
  ls       `shardcat ls` of the 8 shards against `bsdtar -tf` of each (and a baseline
           shardcat, when given)
  index    opening a reader (exact mode, the default; --mode equal) with an empty index
           cache (every shard indexed: seconds, and GB/s of tar scanned), against opening it
           again (every index found in the cache); local paths, and http:// URLs served by
           nginx on 127.0.0.1, with the bytes nginx sent for each open (its access log)
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO / "tests" / "remote"))
from benchtools import plain_shards, timed, warm  # noqa: E402

BUILD = REPO / "build"


def open_seconds(spec, cache, mode):
    """Seconds to open a reader in a fresh process, and the indexes it made and found."""
    code = ("import sys, time; sys.path.insert(0, %r); from libshard import _libshard as L; "
            "t = time.perf_counter(); r = L.Reader([%r], seed=1, mode=%r, rank=0, "
            "world_size=1, index_cache=%r); s = time.perf_counter() - t; st = r.stats(); "
            "print(s, st['indexes_built'], st['indexes_cached'], r.epoch_length)"
            ) % (str(BUILD / "python"), spec, mode, cache)
    out = subprocess.run(["/usr/bin/python3", "-c", code], check=True, capture_output=True,
                         text=True).stdout.split()
    return float(out[0]), int(out[1]), int(out[2]), int(out[3])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("imagefolder")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--shards", default="/tmp/plain", help="where the plain shards are made")
    ap.add_argument("--baseline", help="another build's shardcat, listed side by side")
    ap.add_argument("--mode", default="exact", choices=["exact", "equal"])
    a = ap.parse_args()
    paths = plain_shards(a.imagefolder, a.shards, 1000, 8)
    total = sum(os.path.getsize(p) for p in paths)
    warm(paths)
    shardcat = str(BUILD / "tools" / "shardcat")
    ls = {"shardcat ls": [shardcat, "ls", *paths]}
    if a.baseline:
        ls["baseline ls"] = [a.baseline, "ls", *paths]
    bsdtar = " && ".join(f"bsdtar -tf {p}" for p in paths)
    times = {k: [] for k in [*ls, "bsdtar -tf"]}
    for _ in range(a.rounds):
        for k, cmd in ls.items():
            times[k].append(timed(cmd))
        times["bsdtar -tf"].append(timed(bsdtar, shell=True))
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"{len(paths)} plain shards, {total / 1e6:.0f} MB, {a.rounds} rounds, medians")
    for k, v in med.items():
        print(f"  {k:14} {v * 1000:7.1f} ms   bsdtar / this {med['bsdtar -tf'] / v:5.2f}")

    import servers
    spec_local = os.path.join(a.shards, "plain-{000000..000007}.tar")
    ng = servers.Nginx(Path(a.shards))
    try:
        spec_http = f"{ng.url}/plain-{{000000..000007}}.tar"
        log = ng.prefix / "logs" / "access.log"

        def sent():  # bytes nginx has sent so far: the combined format's body_bytes_sent
            return sum(int(line.split('"')[2].split()[1])
                       for line in log.read_text().splitlines()) if log.exists() else 0

        res = {}
        for where, spec in (("local", spec_local), ("http", spec_http)):
            cold, hot, cold_b, hot_b = [], [], [], []
            for _ in range(a.rounds):
                cache = tempfile.mkdtemp(prefix="plain-index-")
                b = sent()
                s, built, cached, n = open_seconds(spec, cache, a.mode)
                assert built == 8 and cached == 0 and n == 8000, (built, cached, n)
                cold.append(s)
                cold_b.append(sent() - b)
                b = sent()
                s, built, cached, n = open_seconds(spec, cache, a.mode)
                assert built == 0 and cached == 8, (built, cached)
                hot.append(s)
                hot_b.append(sent() - b)
                shutil.rmtree(cache)
            res[where] = (statistics.median(cold), statistics.median(hot),
                          statistics.median(cold_b), statistics.median(hot_b))
        print(f"  reader open, mode={a.mode}: first (indexes made) / second (found in the cache)")
        for where, (c, h, cb, hb) in res.items():
            bytes_ = (f"   bytes sent {cb / 1e6:7.1f} MB / {hb / 1e6:5.3f} MB "
                      f"({cb / total:.3f} / {hb / total:.5f} of the tars)" if where == "http"
                      else "")
            print(f"  {where:5}  {c:6.3f} s ({total / c / 1e9:5.2f} GB/s of tar) / {h:6.3f} s  "
                  f"x{c / h:5.1f}{bytes_}")
    finally:
        ng.close()


if __name__ == "__main__":
    main()
