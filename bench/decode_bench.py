#!/usr/bin/python3
"""Training batches from the same shards: libshard against a reference Python pipeline.

Reference (what users run today): tarfile reading the shards, WebDataset's grouping, PIL
decode, torchvision RandomResizedCrop(224) + RandomHorizontalFlip + PILToTensor, a torch
DataLoader with 2 worker processes (shards split between them) and batch size 256.
libshard: libshard.torch.ShardDataset, same crop, flip and batch size, DataLoader with
num_workers=0 (libshard's own decode threads, one per core), full decode (fast=False) and
the fast path (crop-only partial decode at a reduced DCT scale). libjpeg-turbo's own rate
(bench/jpeg_rate.c: full decode of every image, one core; and one copy per core at once)
is measured in the same run.

Each pipeline runs in its own process, one epoch, ROUNDS times interleaved; medians and
each process's peak RSS are reported (for libshard also the peaks of its anonymous memory
and of its mapped shard pages). libshard-fast-2x reads the shards listed twice: twice the
data with the same settings, to show that memory follows the settings, not the data.

    /usr/bin/python3 bench/decode_bench.py /tmp/imagefolder [--rounds 2]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

from benchtools import pack, warm

WORKER = r'''
import json, os, resource, sys, tarfile, threading, time, io
sys.path.insert(0, sys.argv[1])
import torch
which, manifest, cores = sys.argv[2], sys.argv[3], int(sys.argv[4])
peak = {"RssAnon": 0, "RssFile": 0}


def sample_rss():
    # this process's anonymous memory and mapped file pages (shards), sampled every 20 ms
    while True:
        with open("/proc/self/status") as f:
            for line in f:
                k = line.split(":")[0]
                if k in peak:
                    peak[k] = max(peak[k], int(line.split()[1]))
        time.sleep(0.02)


threading.Thread(target=sample_rss, daemon=True).start()
m = json.load(open(manifest))
base = os.path.dirname(manifest)
shards = [os.path.join(base, s["url"]) for s in m["shardlist"]]
n = 0
t = time.perf_counter()
cpu0 = resource.getrusage(resource.RUSAGE_SELF)
if which == "reference":
    import torchvision.transforms as T
    from PIL import Image
    tf = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.PILToTensor()])

    class Ref(torch.utils.data.IterableDataset):
        def __iter__(self):
            info = torch.utils.data.get_worker_info()
            mine = shards[info.id::info.num_workers] if info else shards
            for s in mine:
                with tarfile.open(s) as tf_:
                    sample, key = {}, None
                    for mem in tf_:
                        k, _, ext = mem.name.partition(".")
                        if key is not None and k != key:
                            yield sample
                            sample = {}
                        key = k
                        sample[ext.lower()] = tf_.extractfile(mem).read()
                    if sample:
                        yield sample

    def prep(s):
        img = Image.open(io.BytesIO(s["jpg"])).convert("RGB")
        return tf(img), int(s["cls"])

    class Mapped(torch.utils.data.IterableDataset):
        def __iter__(self):
            return (prep(s) for s in Ref())

    dl = torch.utils.data.DataLoader(Mapped(), batch_size=256, num_workers=2)
    for images, labels in dl:
        n += images.shape[0]
else:
    from libshard.torch import ShardDataset
    ds = ShardDataset(manifest, seed=0, batch_size=256, image_size=224, crop="random_resized",
                      flip=True, fast=(which != "libshard-full"), threads=cores)
    for images, labels in torch.utils.data.DataLoader(ds, batch_size=None, num_workers=0):
        n += images.shape[0]
dt = time.perf_counter() - t
cpu1 = resource.getrusage(resource.RUSAGE_SELF)
# this process's CPU (all its threads; the reference's worker processes are not in it)
cpu = cpu1.ru_utime - cpu0.ru_utime + cpu1.ru_stime - cpu0.ru_stime
rss = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
          resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
print(json.dumps({"samples": n, "seconds": dt, "cpu_ms": cpu * 1e3 / n, "maxrss_mb": rss / 1024,
                  "anon_mb": peak["RssAnon"] / 1024, "file_mb": peak["RssFile"] / 1024}))
'''


def round_by_round(ratios):
    """Each round's ratio (its pipeline run against the decoder run beside it): the median
    and the range, the machine's drift between rounds cancelled."""
    r = sorted(ratios)
    return f"median {statistics.median(r):.2f}, range {r[0]:.2f}-{r[-1]:.2f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("src")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--build", default="build")
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    cores = os.cpu_count()
    work = tempfile.mkdtemp(prefix="libshard-decodebench-")
    try:
        pack(f"{build}/tools/shardpack", a.src, f"{work}/t-%06d.tar", 500)
        manifest = f"{work}/t.json"
        # the same shards listed twice: twice the data, the same settings
        m = json.load(open(manifest))
        m["shardlist"] = m["shardlist"] * 2
        json.dump(m, open(f"{work}/t2.json", "w"))
        script = f"{work}/worker.py"
        open(script, "w").write(WORKER)
        warm(os.path.join(work, f) for f in os.listdir(work) if f.endswith(".tar"))
        runs = {"reference": [], "libshard-full": [], "libshard-fast": [], "libshard-fast-2x": [],
                "jpeg_rate": [], "jpeg_rate_all": []}
        rss = {k: 0.0 for k in runs}
        anon = {k: 0.0 for k in runs}
        mapped = {k: 0.0 for k in runs}
        cpu_ms = {"jpeg_rate": [], "libshard-full": []}

        def jpeg_rate():
            out = subprocess.run([f"{build}/bench/jpeg_rate", a.src], check=True,
                                 capture_output=True, text=True).stdout.split()
            runs["jpeg_rate"].append(float(out[out.index("images_per_s") + 1]))
            cpu_ms["jpeg_rate"].append(float(out[out.index("cpu_ms_per_image") + 1]))

        def jpeg_rate_all():
            # one copy per core at once: what the cores decode together (they share caches,
            # memory and, on a VM, perhaps a physical core)
            procs = [subprocess.Popen([f"{build}/bench/jpeg_rate", a.src], stdout=subprocess.PIPE,
                                      text=True) for _ in range(cores)]
            total = 0.0
            for p in procs:
                out = p.communicate()[0].split()
                total += float(out[out.index("images_per_s") + 1])
            runs["jpeg_rate_all"].append(total)

        def pipeline(which):
            m = f"{work}/t2.json" if which.endswith("2x") else manifest
            r = json.loads(subprocess.run([sys.executable, script, f"{build}/python", which, m,
                                           str(cores)], check=True, capture_output=True,
                                          text=True).stdout.strip().splitlines()[-1])
            runs[which].append(r["samples"] / r["seconds"])
            if which in cpu_ms:
                cpu_ms[which].append(r["cpu_ms"])
            rss[which] = max(rss[which], r["maxrss_mb"])
            anon[which] = max(anon[which], r["anon_mb"])
            mapped[which] = max(mapped[which], r["file_mb"])

        # the decode ceilings right beside the full-decode run, since this machine's speed
        # drifts from minute to minute
        for _ in range(a.rounds):
            jpeg_rate_all()
            pipeline("libshard-full")
            jpeg_rate()
            pipeline("libshard-fast")
            pipeline("reference")
            pipeline("libshard-fast-2x")
        med = {k: statistics.median(v) for k, v in runs.items()}
        print(f"{cores} cores, medians of {a.rounds} interleaved rounds, one epoch each:")
        print(f"  libjpeg-turbo full decode, 1 core       {med['jpeg_rate']:8.0f} images/s "
              f"(x {cores} cores = {med['jpeg_rate'] * cores:.0f})")
        print(f"  libjpeg-turbo full decode, {cores} copies at once {med['jpeg_rate_all']:6.0f} images/s")
        for k in ("reference", "libshard-full", "libshard-fast", "libshard-fast-2x"):
            extra = "" if k == "reference" else \
                f" (anon {anon[k]:.0f}, shard pages {mapped[k]:.0f})"
            print(f"  {k:36} {med[k]:8.0f} samples/s   peak RSS {rss[k]:5.0f} MB{extra}")
        print("ratios:")
        print(f"  libshard fast / reference                 = {med['libshard-fast'] / med['reference']:.2f}  (target >= 3)")
        print(f"  libshard full / (libjpeg-turbo x cores)   = {med['libshard-full'] / (med['jpeg_rate'] * cores):.2f}  (target >= 0.85)")
        # each round's full-decode run against the single-core decoder run right after it
        print("    the same, round by round: " + round_by_round(
            f / (j * cores) for f, j in zip(runs["libshard-full"], runs["jpeg_rate"])))
        # the whole pipeline process (reading, decode, resampling, batching, Python, the RSS
        # sampler) against the decoder's loop over files already in memory
        print(f"    by CPU time per image: libjpeg-turbo {statistics.median(cpu_ms['jpeg_rate']):.2f} ms, "
              f"libshard full {statistics.median(cpu_ms['libshard-full']):.2f} ms (whole process); "
              f"libjpeg-turbo's / libshard's, round by round: " + round_by_round(
                  j / f for f, j in zip(cpu_ms["libshard-full"], cpu_ms["jpeg_rate"])))
        print(f"  libshard fast / (libjpeg-turbo x cores)   = {med['libshard-fast'] / (med['jpeg_rate'] * cores):.2f}")
        print(f"  libshard full / (libjpeg-turbo, {cores} at once) = {med['libshard-full'] / med['jpeg_rate_all']:.2f}")
        print("    the same, round by round: " + round_by_round(
            f / j for f, j in zip(runs["libshard-full"], runs["jpeg_rate_all"])))
        print(f"  memory: 2x the data, peak anon {anon['libshard-fast-2x']:.0f} MB and shard pages "
              f"{mapped['libshard-fast-2x']:.0f} MB, against {anon['libshard-fast']:.0f} and "
              f"{mapped['libshard-fast']:.0f} MB")
    finally:
        shutil.rmtree(work)


if __name__ == "__main__":
    sys.exit(main())
