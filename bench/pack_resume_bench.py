#!/usr/bin/python3
"""shardpack --resume after 90% of a pack against the whole pack, and --dedup against a plain
pack, on the same image folder, page cache warm, rounds interleaved (noise hits both alike).

A resume's setup: a pack with its record is killed (SIGKILL) once the record marks 90% of
the shards; the timed command is the resume that finishes it. Its target: at most 0.15 of
the whole pack's time. --dedup's target: at most 1.05x a plain pack.

    /usr/bin/python3 bench/pack_resume_bench.py /tmp/imagefolder [--rounds 5] [--maxcount 250]
"""
import argparse
import os
import shutil
import signal
import statistics
import subprocess
import tempfile
import time

from benchtools import timed, warm


def killed_at(cmd, record, shards, share):
    """cmd run until its record marks share of the shards, then killed."""
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while p.poll() is None:
        done = len([n for n in os.listdir(record) if n.startswith("shard-")]) if os.path.isdir(record) else 0
        if done >= share * shards:
            p.send_signal(signal.SIGKILL)
            break
        time.sleep(0.002)
    p.wait()
    marked = len([n for n in os.listdir(record) if n.startswith("shard-")]) if os.path.isdir(record) else 0
    return marked


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("src")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--maxcount", type=int, default=250)
    ap.add_argument("--shardpack", default="build/tools/shardpack")
    a = ap.parse_args()
    sp = os.path.abspath(a.shardpack)
    work = tempfile.mkdtemp(prefix="libshard-resumebench-", dir=os.path.dirname(os.path.abspath(a.src)))
    files = [os.path.join(r, f) for r, _, fs in os.walk(a.src) for f in fs]
    total = sum(os.path.getsize(f) for f in files)
    warm(files)
    out = os.path.join(work, "out")
    cmd = lambda *o: [sp, a.src, "-o", os.path.join(out, "t-%06d.tar"), "-q", "-c", str(a.maxcount), *o]
    shards = -(-len(files) // a.maxcount)
    times = {"whole": [], "resume after 90%": [], "plain": [], "--dedup": []}
    marked = []
    for _ in range(a.rounds):
        shutil.rmtree(out, ignore_errors=True)
        times["whole"].append(timed(cmd(), quiet=True))
        shutil.rmtree(out, ignore_errors=True)
        marked.append(killed_at(cmd("--resume"), os.path.join(out, ".t.pack"), shards, 0.9))
        times["resume after 90%"].append(timed(cmd("--resume"), quiet=True))
        shutil.rmtree(out, ignore_errors=True)
        times["plain"].append(timed(cmd(), quiet=True))
        shutil.rmtree(out, ignore_errors=True)
        times["--dedup"].append(timed(cmd("--dedup"), quiet=True))
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"{len(files)} files, {total / 1e6:.0f} MB, {shards} shards of {a.maxcount}, {a.rounds} rounds "
          f"interleaved; resumes found {min(marked)}-{max(marked)} of {shards} shards marked")
    for k, v in times.items():
        print(f"  {k:20s} median {med[k]:7.3f} s   (min {min(v):.3f}, max {max(v):.3f})")
    print(f"resume after 90% / whole pack: {med['resume after 90%'] / med['whole']:.3f} (target <= 0.15)")
    print(f"--dedup / plain pack:          {med['--dedup'] / med['plain']:.3f} (target <= 1.05)")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
