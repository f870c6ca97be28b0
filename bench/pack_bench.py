#!/usr/bin/python3
"""shardpack against bsdtar (and zstd) on the same image folder, page cache warm.

Runs every command ROUNDS times, interleaved (A B C A B C ...) so that machine noise hits
all of them alike, and reports medians and ratios to the baseline measured in the same run.

    /usr/bin/python3 bench/pack_bench.py /tmp/imagefolder [--rounds 5] [--maxcount 1000] [--shardpack build/tools/shardpack]
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

from benchtools import timed, warm


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("src")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--shardpack", default="build/tools/shardpack")
    ap.add_argument("--maxcount", type=int, default=1000, help="samples per shard (default 1000)")
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
    sp_tar = lambda name, *opts: [sp, a.src, "-o", d(f"{name}/x-%06d.tar"), "-q", "-c", str(a.maxcount), *opts]
    sp_zst = lambda name, *opts: [sp, a.src, "-o", d(f"{name}/x-%06d.tar.zst"), "-q", "-c", str(a.maxcount), *opts]
    BSD, BSDSUM, ZSTD = "bsdtar -cf", "bsdtar -cf + md5sum + sha256sum", "zstd -3 --single-thread (of the tar)"
    DEF, DEF2 = "shardpack .tar (default: sha256, fsync)", "shardpack .tar (default) -j 2"
    cmds = {
        BSD: (["bsdtar", "-cf", ref_tar, "-C", a.src, "."], False),
        BSDSUM: (f"bsdtar -cf {ref_tar} -C {a.src} . && md5sum {ref_tar} && sha256sum {ref_tar}", True),
        DEF: (sp_tar("tar"), False),
        DEF2: (sp_tar("tar2", "-j", "2"), False),
        "shardpack .tar --checksum md5,sha256": (sp_tar("tarboth", "--checksum", "md5,sha256"), False),
        "shardpack .tar --no-fsync": (sp_tar("tarnosync", "--no-fsync"), False),
        "shardpack .tar --no-checksum --no-fsync": (sp_tar("tarfast", "--no-checksum", "--no-fsync"), False),
        ZSTD: (["zstd", "-q", "-f", "-3", "--single-thread", ref_tar, "-o", d("ref.tar.zst")], False),
        "shardpack .tar.zst (default)": (sp_zst("zst"), False),
        "shardpack .tar.zst --no-checksum --no-fsync": (sp_zst("zstfast", "--no-checksum", "--no-fsync"), False),
    }
    for k, (cmd, shell) in cmds.items():
        if not shell and cmd[0] == sp:
            os.makedirs(os.path.dirname(cmd[3]), exist_ok=True)
    subprocess.run(["bsdtar", "-cf", ref_tar, "-C", a.src, "."], check=True)  # for zstd's first round
    times = {k: [] for k in cmds}
    for _ in range(a.rounds):
        for k, (cmd, shell) in cmds.items():
            times[k].append(timed(cmd, shell))
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"input: {len(files)} files, {total / 1e6:.1f} MB, {a.maxcount} per shard, {a.rounds} rounds interleaved, medians")
    print(f"{'command':48} {'median s':>9} {'MB/s':>8}")
    for k in cmds:
        print(f"{k:48} {med[k]:9.3f} {total / med[k] / 1e6:8.1f}")
    print("ratios (time / baseline time; below 1 is faster than the baseline):")
    for x, y in [(DEF, BSD), (DEF2, BSD), ("shardpack .tar --checksum md5,sha256", BSD),
                 ("shardpack .tar --no-fsync", BSD), ("shardpack .tar --no-checksum --no-fsync", BSD),
                 (DEF, BSDSUM), ("shardpack .tar.zst --no-checksum --no-fsync", ZSTD),
                 ("shardpack .tar.zst (default)", ZSTD)]:
        print(f"  {x} / {y} = {med[x] / med[y]:.2f}")
    if not a.work:
        shutil.rmtree(work)


if __name__ == "__main__":
    sys.exit(main())
