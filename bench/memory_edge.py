"""Memory at the edge of the limits: what the process holds (peak resident, GNU time) while
an entry point meets input made to sit just under each limit that guards memory, against
the same interpreter with torch imported and nothing read (the baseline the promise is
above). The cases of the reliability report: four 11000 x 11000 PNGs (352 KB each) through
ShardDataset; six progressive 5000 x 5000 JPEGs (their coefficients held) at threads=4; a
manifest of 256 MB listing a million shards through shardcat, Reader, ShardDataset,
IndexedShards and wids.

    /usr/bin/python3 bench/memory_edge.py [--build build] [--work DIR]
"""
import argparse
import json
import os
import subprocess
import tarfile
import tempfile
from pathlib import Path

PY = r'''
import sys, json
import torch
what, path, kw = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
if what == "dataset":
    from libshard.torch import ShardDataset
    ds = ShardDataset(path, shuffle=False, seed=1, image_size=32, batch_size=1, missing_label=-1, **kw)
    try:
        for _ in ds:
            pass
        print("read")
    except Exception as e:
        print("raised:", str(e)[:100])
elif what == "raw":
    from libshard.torch import ShardDataset
    print(next(iter(ShardDataset(path, decode=False, seed=1)))["__key__"])
elif what == "reader":
    import libshard
    print(next(iter(libshard.Reader(path, seed=1)))["__key__"])
elif what == "indexed":
    from libshard.indexed import IndexedShards
    ix = IndexedShards(path)
    print(len(ix), ix[0]["__key__"])
elif what == "wids":
    from libshard.wids import ShardListDataset
    ds = ShardListDataset(path)
    print(len(ds), ds[0]["__key__"])
'''


def peak(argv, env):
    """(peak resident KiB, seconds, last line of output)."""
    cp = subprocess.run(["/usr/bin/time", "-f", "%M %e", *argv], capture_output=True, env=env,
                        timeout=900)
    kb, secs = cp.stderr.decode().strip().splitlines()[-1].split()
    out = (cp.stdout.decode().strip().splitlines() or [""])[-1]
    return int(kb), float(secs), out


def pngs(d):
    from PIL import Image
    im = Image.new("RGB", (11000, 11000), (90, 120, 200))
    im.save(d / "big.png", compress_level=9)
    with tarfile.open(d / "png.tar", "w") as t:
        for i in range(4):
            t.add(d / "big.png", f"s{i}.png")
    return d / "png.tar"


def progressive(d):
    """Progressive 5000 x 5000 JPEGs of 49 scans, 4:4:4 (cjpeg -scans; it writes at most
    100): libjpeg keeps every coefficient until the last scan."""
    from PIL import Image
    Image.effect_noise((5000, 5000), 64).convert("RGB").save(d / "noise.ppm")
    lines = ["0,1,2: 0-0, 0, 0;"]
    for c in range(3):
        lines += [f"{c}: {k}-{min(k + 3, 63)}, 0, 0;" for k in range(1, 64, 4)]
    (d / "scans.txt").write_text("\n".join(lines) + "\n")
    subprocess.run(["cjpeg", "-sample", "1x1", "-scans", str(d / "scans.txt"), "-outfile",
                    str(d / "scans.jpg"), str(d / "noise.ppm")], check=True)
    with tarfile.open(d / "scans.tar", "w") as t:
        for i in range(6):
            t.add(d / "scans.jpg", f"s{i}.jpg")
    return d / "scans.tar"


def manifest(d):
    """256,000,015 bytes listing a million times one 5-sample shard (with its index)."""
    folder = d / ("d" * 206)
    folder.mkdir(exist_ok=True)
    with tarfile.open(folder / "s.tar", "w") as t:
        for i in range(5):
            p = d / f"k{i}.txt"
            p.write_text(str(i))
            t.add(p, f"k{i}.txt")
    subprocess.run([str(BUILD / "tools" / "shardcat"), "index", str(folder / "s.tar")],
                   check=True, capture_output=True)
    entry = json.dumps({"url": f"{folder.name}/s.tar", "nsamples": 5}, separators=(",", ":"))
    n = 1_000_000
    head, tail = '{"shardlist":[', "]}"
    pad = (256_000_015 - len(head) - len(tail) - (n - 1) - n * len(entry)) // n
    entry = entry[:-1] + " " * max(pad, 0) + "}"
    with open(d / "m.json", "w") as f:
        f.write(head)
        f.write(",".join([entry] * n))
        f.write(tail)
    return d / "m.json"


def main():
    global BUILD
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--work")
    a = ap.parse_args()
    BUILD = Path(a.build).resolve()
    env = dict(os.environ, PYTHONPATH=str(BUILD / "python"))
    d = Path(a.work or tempfile.mkdtemp(prefix="memory-edge-"))
    d.mkdir(parents=True, exist_ok=True)
    base, _, _ = peak(["/usr/bin/python3", "-c", PY, "none", "", "{}"], env)
    rows = []

    def py(case, what, path, **kw):
        kb, secs, out = peak(["/usr/bin/python3", "-c", PY, what, str(path), json.dumps(kw)],
                             env)
        rows.append((case, kb, kb - base, secs, out))

    py("four 11000x11000 PNGs, ShardDataset (defaults)", "dataset", pngs(d))
    py("six progressive 5000x5000 JPEGs, ShardDataset threads=4", "dataset", progressive(d),
       threads=4)
    m = manifest(d)
    for args in (["stream", m, "--seed", "1", "--samples", "1"], ["info", m]):
        kb, secs, out = peak([str(BUILD / "tools" / "shardcat"), *map(str, args)], env)
        rows.append((f"256 MB manifest, shardcat {args[0]}", kb, None, secs, out))
    for what in ("reader", "raw", "indexed", "wids"):
        py(f"256 MB manifest, {what}", what, m)
    print(f"baseline (python3 with torch imported): {base / 1024:.0f} MiB\n")
    print("| case | peak resident | above the baseline | seconds | outcome |")
    print("| --- | --- | --- | --- | --- |")
    for case, kb, above, secs, out in rows:
        print(f"| {case} | {kb / 1024:.0f} MiB | "
              f"{'-' if above is None else f'{above / 1024:.0f} MiB'} | {secs:.1f} | {out[:60]} |")


if __name__ == "__main__":
    main()
