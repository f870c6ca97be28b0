#!/usr/bin/python3
"""shardpack from a URL list served on loopback by nginx, against the same files listed
from disk, page cache warm, rounds interleaved; reports medians and the ratio.

    /usr/bin/python3 bench/pack_urls.py /tmp/imagefolder [--rounds 5] [--maxcount 1000]
"""
import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "remote"))

import servers  # noqa: E402

from benchtools import medians_table, timed, warm  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("src", help="an image folder (CLASS/IMAGE)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--maxcount", type=int, default=1000)
    ap.add_argument("--shardpack", default=str(REPO / "build" / "tools" / "shardpack"))
    a = ap.parse_args()
    src = os.path.abspath(a.src)
    rels = sorted(os.path.relpath(os.path.join(r, f), src) for r, _, fs in os.walk(src) for f in fs)
    total = sum(os.path.getsize(os.path.join(src, r)) for r in rels)
    warm([os.path.join(src, r) for r in rels])
    work = Path(tempfile.mkdtemp(prefix="libshard-urlbench-", dir=os.path.dirname(src)))
    ng = servers.Nginx(os.path.dirname(src))
    try:
        name = os.path.basename(src)
        (work / "disk.tsv").write_text("path\tlabel\n" + "".join(f"{src}/{r}\t{r.split('/')[0]}\n" for r in rels))
        (work / "urls.tsv").write_text("path\tlabel\n" + "".join(f"{ng.url}/{name}/{r}\t{r.split('/')[0]}\n"
                                                                 for r in rels))
        times = {"list of paths on disk": [], "list of http:// URLs (nginx, loopback)": []}
        for _ in range(a.rounds):
            for k, lst in zip(times, ("disk.tsv", "urls.tsv")):
                out = work / lst.split(".")[0]
                shutil.rmtree(out, ignore_errors=True)
                out.mkdir()
                times[k].append(timed([a.shardpack, str(work / lst), "--list", "-o", str(out / "t-%06d.tar"),
                                       "-q", "-c", str(a.maxcount)]))
    finally:
        ng.close()
        shutil.rmtree(work, ignore_errors=True)
    med = medians_table(times, len(rels), total, a.maxcount, a.rounds)
    d, u = times
    print(f"ratio (time / baseline time): URLs / disk = {med[u] / med[d]:.2f}")


if __name__ == "__main__":
    sys.exit(main())
