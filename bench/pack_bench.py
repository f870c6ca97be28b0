#!/usr/bin/python3
"""shardpack against bsdtar (and zstd) on the same image folder, page cache warm.

Runs every command ROUNDS times, interleaved (A B C A B C ...) so that machine noise hits
all of them alike, and reports medians and ratios to the baseline measured in the same run.

    /usr/bin/python3 bench/pack_bench.py /tmp/imagefolder [--rounds 5] [--shardpack build/tools/shardpack]
"""
import argparse
import os
import shutil
import statistics
import sys
import tempfile

from benchtools import timed, warm


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("src")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--shardpack", default="build/tools/shardpack")
    ap.add_argument("--work", default=None, help="output folder (default: a temp folder on the src's filesystem)")
    a = ap.parse_args()
    sp = os.path.abspath(a.shardpack)
    work = a.work or tempfile.mkdtemp(prefix="libshard-packbench-", dir=os.path.dirname(os.path.abspath(a.src)))
    os.makedirs(work, exist_ok=True)
    files = [os.path.join(r, f) for r, _, fs in os.walk(a.src) for f in fs]
    total = sum(os.path.getsize(f) for f in files)
    warm(files)
    ref_tar = os.path.join(work, "ref.tar")
    d = lambda name: os.path.join(work, name)
    for x in ("tar", "tarfast", "zst", "zstfast"):
        os.makedirs(d(x), exist_ok=True)
    cmds = {
        "bsdtar -cf": (["bsdtar", "-cf", ref_tar, "-C", a.src, "."], False),
        "bsdtar -cf + md5sum + sha256sum": (f"bsdtar -cf {ref_tar} -C {a.src} . && md5sum {ref_tar} && sha256sum {ref_tar}", True),
        "shardpack .tar (default: checksums, fsync)": ([sp, a.src, "-o", d("tar/x-%06d.tar"), "-q"], False),
        "shardpack .tar --no-checksum --no-fsync": ([sp, a.src, "-o", d("tarfast/x-%06d.tar"), "-q", "--no-checksum", "--no-fsync"], False),
        "zstd -3 --single-thread (of the tar)": (["zstd", "-q", "-f", "-3", "--single-thread", ref_tar, "-o", d("ref.tar.zst")], False),
        "shardpack .tar.zst (default)": ([sp, a.src, "-o", d("zst/x-%06d.tar.zst"), "-q"], False),
        "shardpack .tar.zst --no-checksum --no-fsync": ([sp, a.src, "-o", d("zstfast/x-%06d.tar.zst"), "-q", "--no-checksum", "--no-fsync"], False),
    }
    times = {k: [] for k in cmds}
    for _ in range(a.rounds):
        for k, (cmd, shell) in cmds.items():
            times[k].append(timed(cmd, shell))
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"input: {len(files)} files, {total / 1e6:.1f} MB, {a.rounds} rounds interleaved, medians")
    print(f"{'command':48} {'median s':>9} {'MB/s':>8}")
    for k in cmds:
        print(f"{k:48} {med[k]:9.3f} {total / med[k] / 1e6:8.1f}")
    print("ratios (time / baseline time; below 1 is faster than the baseline):")
    r = lambda x, y: med[x] / med[y]
    print(f"  shardpack .tar --no-checksum --no-fsync / bsdtar -cf       = {r('shardpack .tar --no-checksum --no-fsync', 'bsdtar -cf'):.2f}")
    print(f"  shardpack .tar (default) / bsdtar -cf                      = {r('shardpack .tar (default: checksums, fsync)', 'bsdtar -cf'):.2f}")
    print(f"  shardpack .tar (default) / bsdtar + md5sum + sha256sum     = {r('shardpack .tar (default: checksums, fsync)', 'bsdtar -cf + md5sum + sha256sum'):.2f}")
    z = "zstd -3 --single-thread (of the tar)"
    print(f"  shardpack .tar.zst --no-checksum --no-fsync / zstd -3      = {r('shardpack .tar.zst --no-checksum --no-fsync', z):.2f}")
    print(f"  shardpack .tar.zst (default) / zstd -3                     = {r('shardpack .tar.zst (default)', z):.2f}")
    if not a.work:
        shutil.rmtree(work)


if __name__ == "__main__":
    sys.exit(main())
