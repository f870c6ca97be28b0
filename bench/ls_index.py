"""`shardcat ls` from each shard's .idx (proven to belong to its shard: its first and last
headers and the archive's end read where it says) against `bsdtar -tf` of the same shards,
and against `shardcat ls` of the same tars without an index (their headers read).

    /usr/bin/python3 bench/ls_index.py /tmp/imagefolder --rounds 9

Shards: 8 of 1000 photographs each (key.jpg + key.cls, by Python's tarfile:
benchtools.plain_shards), indexed by `shardcat index` into a second folder (the tars
hard-linked). Interleaved rounds, medians, files in the page cache.
"""
import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
from benchtools import plain_shards, timed, warm  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("imagefolder")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--shards", default="/tmp/plain", help="where the plain shards are made")
    a = ap.parse_args()
    plain = plain_shards(a.imagefolder, a.shards, 1000, 8)
    shardcat = str(REPO / "build" / "tools" / "shardcat")
    indexed_dir = Path(a.shards + "-indexed")
    indexed_dir.mkdir(exist_ok=True)
    indexed = []
    for p in plain:
        q = indexed_dir / os.path.basename(p)
        if not q.exists():
            os.link(p, q)
        indexed.append(str(q))
    subprocess.run([shardcat, "index", *indexed], check=True, stdout=subprocess.DEVNULL)
    warm(plain + indexed + [str(q)[:-4] + ".idx" for q in indexed])
    want = subprocess.run([shardcat, "ls", *plain], check=True, capture_output=True).stdout
    got = subprocess.run([shardcat, "ls", *indexed], check=True, capture_output=True).stdout
    assert got == want, "the listing from the index differs from the headers'"
    cmds = {"shardcat ls (.idx)": ([shardcat, "ls", *indexed], False),
            "shardcat ls (headers)": ([shardcat, "ls", *plain], False),
            "bsdtar -tf": (" && ".join(f"bsdtar -tf {p}" for p in plain), True)}
    times = {k: [] for k in cmds}
    for _ in range(a.rounds):
        for k, (cmd, shell) in cmds.items():
            times[k].append(timed(cmd, shell=shell))
    med = {k: statistics.median(v) for k, v in times.items()}
    total = sum(os.path.getsize(p) for p in plain)
    print(f"{len(plain)} shards, 8000 samples, {total / 1e6:.0f} MB, {a.rounds} rounds, medians")
    for k, v in med.items():
        print(f"  {k:22} {v * 1000:7.1f} ms   bsdtar / this {med['bsdtar -tf'] / v:5.2f}")


if __name__ == "__main__":
    main()
