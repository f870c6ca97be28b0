"""Helpers shared by the benchmarks in this folder."""
import subprocess
import time


def timed(cmd, shell=False, quiet=False):
    """Seconds a command takes, its stdout (and with quiet its stderr) discarded."""
    t = time.perf_counter()
    subprocess.run(cmd, shell=shell, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL if quiet else None)
    return time.perf_counter() - t


def warm(paths):
    """Reads the files through, so the timed runs find them in the page cache."""
    for f in paths:
        with open(f, "rb") as fh:
            while fh.read(1 << 20):
                pass


def pack(shardpack, src, pattern, maxcount):
    """src packed by shardpack into shards named by pattern, maxcount samples each."""
    subprocess.run([shardpack, src, "-o", pattern, "-c", str(maxcount), "-q", "-j", "2",
                    "--no-fsync"], check=True)


def packed_once(folder, out, per_shard=500):
    """folder packed by the build's shardpack into out/train-NNNNNN.tar (per_shard samples
    each, with indexes) unless out holds shards already; the shards."""
    from pathlib import Path
    out = Path(out)
    if not any(out.glob("*.tar")):
        out.mkdir(parents=True, exist_ok=True)
        shardpack = Path(__file__).resolve().parents[1] / "build" / "tools" / "shardpack"
        subprocess.run([str(shardpack), str(folder), "-o", str(out / "train-%06d.tar"), "-c",
                        str(per_shard), "-q"], check=True)
    return sorted(out.glob("*.tar"))


def webdataset_parser():
    """The arguments of a bench run against WebDataset: IMAGEFOLDER, --webdataset DIR (a copy
    of its repository at v1.0.2: tests/wds_suite/run.py's), --rounds N."""
    import argparse
    import os
    ap = argparse.ArgumentParser()
    ap.add_argument("imagefolder")
    ap.add_argument("--webdataset", default=os.path.expanduser(
        "~/.cache/libshard/webdataset-e0953f9"))
    ap.add_argument("--rounds", type=int, default=5)
    return ap


def python_run(code, args, env=None):
    """The words a fresh `python3 -c code args...` prints (one thread a library: OMP), its
    environment os.environ with env; exits with its stderr when it fails."""
    import os
    import sys
    cp = subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True,
                        text=True, env={**os.environ, "OMP_NUM_THREADS": "1", **(env or {})})
    if cp.returncode:
        sys.exit(cp.stderr[-3000:])
    return cp.stdout.split()


def medians_table(times, nfiles, total, maxcount, rounds):
    """Prints the medians of interleaved rounds ({name: [seconds]}) with MB/s; returns them."""
    import statistics
    med = {k: statistics.median(v) for k, v in times.items()}
    width = max(len(k) for k in times) + 2
    print(f"input: {nfiles} files, {total / 1e6:.1f} MB, {maxcount} per shard, {rounds} rounds interleaved, medians")
    print(f"{'command':{width}} {'median s':>9} {'MB/s':>8}")
    for k in times:
        print(f"{k:{width}} {med[k]:9.3f} {total / med[k] / 1e6:8.1f}")
    return med


def plain_shards(folder, out, per_shard, nshards):
    """Plain WebDataset-style tars (key.jpg + key.cls, written by Python's tarfile, no .idx,
    no manifest) of the first per_shard * nshards images of an image folder; their paths."""
    import io
    import os
    import tarfile
    classes = sorted(d for d in os.listdir(folder) if os.path.isdir(os.path.join(folder, d)))
    files = [(c, os.path.join(folder, c, f)) for c in classes
             for f in sorted(os.listdir(os.path.join(folder, c)))]
    files = files[: per_shard * nshards]
    os.makedirs(out, exist_ok=True)
    paths = []
    for s in range(nshards):
        path = os.path.join(out, f"plain-{s:06d}.tar")
        paths.append(path)
        if os.path.exists(path):
            continue
        with tarfile.open(path + ".part", "w", format=tarfile.GNU_FORMAT) as tf:
            for i, (c, f) in enumerate(files[s * per_shard:(s + 1) * per_shard]):
                key = f"{s:04d}{i:05d}"
                tf.add(f, arcname=f"{key}.jpg")
                cls = str(classes.index(c)).encode()
                info = tarfile.TarInfo(f"{key}.cls")
                info.size = len(cls)
                tf.addfile(info, io.BytesIO(cls))
        os.rename(path + ".part", path)
    return paths
