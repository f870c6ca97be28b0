"""JPEG decode into GPU batches: the CPU threads alone, the GPU's JPEG decoder alone
(nvJPEG), decoder="auto", and fixed splits (SHARD_GPU_SHARE), each for a few seconds on the
same shards, side by side in one run.

    python3 bench/gpu_decode.py PHOTOS_DIR [--seconds 10] [--threads 16] [--side 700x525]
        [--shares 0.2,0.4,0.6,0.8,1.0] [--repeat 20] --build build-gpu/build

PHOTOS_DIR holds class folders of JPEGs; --side re-encodes them at that size first (quality
90, as made otherwise). Prints images/s per mode, the split auto settled on, the per-batch
latency (the training loop's wait between batches, p50 and p99), and the CPU seconds per
wall second of the process's threads other than the decode threads."""
import argparse
import glob
import io
import os
import subprocess
import sys
import tarfile
import tempfile
import time


def pack(photos, side, out, repeat):
    from PIL import Image
    images = []
    for f in sorted(glob.glob(os.path.join(photos, "*", "*.jpg"))):
        data = open(f, "rb").read()
        if side:
            b = io.BytesIO()
            Image.open(f).convert("RGB").resize(side).save(b, "JPEG", quality=90)
            data = b.getvalue()
        images.append(data)
    files = images * repeat
    n = 0
    for s in range(0, len(files), 256):
        with tarfile.open(os.path.join(out, f"p-{n:04d}.tar"), "w") as t:
            for i, data in enumerate(files[s:s + 256], s):
                for name, b in ((f"{i:06d}.jpg", data), (f"{i:06d}.cls", str(i % 10).encode())):
                    info = tarfile.TarInfo(name)
                    info.size = len(b)
                    t.addfile(info, io.BytesIO(b))
        n += 1
    return os.path.join(out, "p-{0000..%04d}.tar" % (n - 1)), len(files)


def run_one(spec, decoder, share, seconds, threads, batch):
    """One mode in a fresh process (SHARD_GPU_SHARE is read when the uploader opens)."""
    code = f"""
import os, sys, time, torch
from libshard.torch import ShardDataset
def cpu():
    return sum(os.times()[:2])
ds = ShardDataset({spec!r}, device="cuda", decoder={decoder!r}, batch_size={batch},
                  image_size=224, threads={threads}, seed=1, flip=True)
n = 0; lat = []; t0 = t_end = None
for epoch in range(1000):
    ds.set_epoch(epoch)
    print("epoch", epoch, n, file=sys.stderr, flush=True)
    for x, y in ds:
        torch.cuda.current_stream().synchronize()
        now = time.perf_counter()
        if t0 is None:  # the first batch: warm-up over, the clock starts
            t0 = last = now; c0 = cpu(); d0 = None
            continue
        lat.append(now - last); last = now; n += len(y)
        if now - t0 >= {seconds}:
            t_end = now; break
    if t_end is not None and t_end - t0 >= {seconds}:
        break
wall = t_end - t0
st = ds.stats(); g = ds.gpu_stats()
busy = st["stages"]["decode"]["busy_seconds"]
lat.sort()
p = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))] * 1e3
print("measured", file=sys.stderr, flush=True)
print("RESULT", n / wall, p(0.5), p(0.99), (cpu() - c0) / wall, busy, g.get("gpu_share", 0),
      g.get("gpu_decoded", 0), g.get("cpu_decoded", 0), repr(g.get("decoder", "")), flush=True)
os._exit(0)  # the figures are out; no teardown in the timing's process
"""
    env = dict(os.environ)
    if share is not None:
        env["SHARD_GPU_SHARE"] = str(share)
    try:
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           env=env, timeout=seconds * 3 + 40)
    except subprocess.TimeoutExpired as e:
        err = e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
        print("timed out; its last words:", err[-600:])
        return None
    line = [l for l in r.stdout.splitlines() if l.startswith("RESULT")]
    if r.returncode or not line:
        print(r.stdout[-1000:], r.stderr[-1500:])
        return None
    f = line[0].split(maxsplit=9)[1:]
    return [float(v) for v in f[:8]] + [f[8]]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("photos")
    ap.add_argument("--build", default="build")
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--threads", type=int, default=16)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--side", default="")
    ap.add_argument("--repeat", type=int, default=20, help="each photograph this many times")
    ap.add_argument("--shares", default="0.2,0.4,0.6,0.8,1.0")
    a = ap.parse_args()
    sys.path.insert(0, os.path.join(a.build, "python"))
    os.environ["PYTHONPATH"] = os.path.join(a.build, "python") + os.pathsep + \
        os.environ.get("PYTHONPATH", "")
    side = tuple(int(v) for v in a.side.split("x")) if a.side else None
    with tempfile.TemporaryDirectory() as tmp:
        spec, n = pack(a.photos, side, tmp, a.repeat)
        print(f"{n} JPEGs {'at ' + a.side if side else 'as made'}, batch {a.batch}, "
              f"{a.threads} decode threads, {a.seconds:.0f} s each")
        print(f"{'mode':<22} {'img/s':>8} {'p50 ms':>7} {'p99 ms':>7} {'p99/p50':>7} "
              f"{'other CPU/s':>11} {'share':>6}")
        rows = {}
        modes = [("cpu", "cpu", None), ("gpu", "gpu", None), ("auto", "auto", None)]
        modes += [(f"fixed {s}", "auto", float(s)) for s in a.shares.split(",") if s]
        for name, dec, share in modes:
            r = run_one(spec, dec, share, a.seconds, a.threads, a.batch)
            if r is None:
                print(f"{name:<22} failed")
                continue
            rate, p50, p99, cpu_s, busy, sh, gd, cd, what = r
            other = cpu_s - busy / a.seconds  # decode threads' busy time taken out
            rows[name] = rate
            print(f"{name:<22} {rate:8.0f} {p50:7.2f} {p99:7.2f} {p99 / p50:7.2f} "
                  f"{other:11.2f} {sh:6.3f}  gpu {gd:.0f} cpu {cd:.0f} {what}")
        if "auto" in rows and "cpu" in rows and "gpu" in rows:
            best_fixed = max([v for k, v in rows.items() if k.startswith("fixed")] or [0])
            print(f"auto / better of cpu and gpu: "
                  f"{rows['auto'] / max(rows['cpu'], rows['gpu']):.2f}; auto / best fixed "
                  f"split: {rows['auto'] / best_fixed if best_fixed else float('nan'):.2f}")


if __name__ == "__main__":
    main()
