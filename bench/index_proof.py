#!/usr/bin/python3
"""What proving an index whole costs: `shardcat ls` of shards with an .idx (the index taken
only once proven to belong to its shard and to leave no member out) against the same with a
build before the proof (--baseline: its shardcat), interleaved round by round, medians, files
in the page cache; locally and over loopback nginx.

    /usr/bin/python3 bench/index_proof.py /tmp/imagefolder --baseline /tmp/base/build/tools/shardcat

Two kinds of shard, 8 of 1000 photographs each (key.jpg + key.cls): shardpack's (member after
member: the proof is arithmetic on the index), and Python tarfile's GNU tars with names over
100 bytes (a long-name header before every member: the proof reads what lies between
members, in 1 MiB windows).
"""
import argparse
import io
import os
import statistics
import subprocess
import sys
import tarfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO / "tests" / "remote"))
from benchtools import timed, warm  # noqa: E402


def images(folder, n):
    classes = sorted(d for d in os.listdir(folder) if os.path.isdir(os.path.join(folder, d)))
    files = [(ci, os.path.join(folder, c, f)) for ci, c in enumerate(classes)
             for f in sorted(os.listdir(os.path.join(folder, c)))]
    return files[:n]


def long_name_shards(folder, out, shardcat):
    """8 GNU tars of 1000 samples whose keys are over 100 bytes, each with its .idx."""
    files = images(folder, 8000)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for s in range(8):
        path = out / f"long-{s:06d}.tar"
        paths.append(str(path))
        if path.exists():
            continue
        with tarfile.open(str(path) + ".part", "w", format=tarfile.GNU_FORMAT) as tf:
            for i, (label, f) in enumerate(files[s * 1000:(s + 1) * 1000]):
                key = f"{'a-long-folder-name-' * 6}/{s:04d}{i:05d}"
                tf.add(f, arcname=f"{key}.jpg")
                info = tarfile.TarInfo(f"{key}.cls")
                data = str(label).encode()
                info.size = len(data)
                tf.addfile(info, io.BytesIO(data))
        os.rename(str(path) + ".part", path)
    subprocess.run([shardcat, "index", *paths], check=True, stdout=subprocess.DEVNULL)
    return paths


def packed_shards(folder, out, shardpack):
    """shardpack's shards of the same 8000 images (1000 a shard, each with its .idx)."""
    if not (out / "p.json").exists():
        subprocess.run([shardpack, folder, "-o", str(out / "p-%06d.tar"), "-c", "1000", "-q",
                        "--no-fsync"], check=True)
    return sorted(str(p) for p in out.glob("p-*.tar"))[:8]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("imagefolder")
    ap.add_argument("--baseline", required=True, help="a shardcat built before the proof")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--work", default="/tmp/index-proof")
    a = ap.parse_args()
    shardcat = str(REPO / "build" / "tools" / "shardcat")
    shardpack = str(REPO / "build" / "tools" / "shardpack")
    work = Path(a.work)
    sets = {"shardpack's": packed_shards(a.imagefolder, work / "packed", shardpack),
            "GNU long names": long_name_shards(a.imagefolder, work / "long", shardcat)}
    for paths in sets.values():
        warm(paths + [p[:-4] + ".idx" for p in paths])
    import servers
    ng = servers.Nginx(work)
    try:
        print(f"8 shards of 1000 samples each kind, {a.rounds} rounds interleaved, medians")
        for kind, paths in sets.items():
            for where in ("local", "http"):
                urls = paths if where == "local" else [f"{ng.url}/{Path(p).relative_to(work)}" for p in paths]
                new, old = [shardcat, "ls", *urls], [a.baseline, "ls", *urls]
                want = subprocess.run(old, check=True, capture_output=True).stdout
                got = subprocess.run(new, check=True, capture_output=True).stdout
                assert got == want, f"{kind} {where}: the listings differ"
                t_new, t_old = [], []
                for _ in range(a.rounds):
                    t_new.append(timed(new))
                    t_old.append(timed(old))
                mn, mo = statistics.median(t_new), statistics.median(t_old)
                print(f"  {kind:15} {where:5}  proven {mn * 1000:7.1f} ms   before {mo * 1000:7.1f} ms"
                      f"   ratio {mn / mo:5.2f}")
    finally:
        ng.close()


if __name__ == "__main__":
    main()
