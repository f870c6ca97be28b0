"""WebDataset 1.0.2 and libshard.webdataset side by side: the same pipelines, the same shards
of real photographs, read through a DataLoader with --workers workers, from local files and
over loopback HTTP (nginx).

    /usr/bin/python3 bench/wds_bench.py IMAGEFOLDER [--webdataset DIR] [--rounds 5]
                                        [--workers 2] [--shards DIR] [--cases raw,rgb8,...]

IMAGEFOLDER (../shared/bench-data's make_imagefolder.py makes one) is packed into tar shards
of 500 samples unless --shards names a folder of them. --webdataset is a copy of
WebDataset's repository at v1.0.2 (default: ~/.cache/libshard/webdataset-e0953f9, the copy
tests/wds_suite/run.py runs; braceexpand from Debian's python3-braceexpand). Each run is a
fresh process that imports one of the two under the name wds and times one epoch; a round
runs every case once with each, in turn (alternating which goes first), and the table gives
the median of --rounds rounds, in samples a second, and their ratio.

The pipelines (DataPipeline(SimpleShardList(urls), split_by_worker, tarfile_to_samples(), ...)):
  raw        ..., batched(64, collation_fn=None): the samples' bytes cross to the main
             process, as lists of 64 (one pickle each)
  raw-read   ..., map(sizes), batched(64): each sample read in its worker, its key and its
             fields' sizes cross (what the tar stage itself costs, the bytes not pickled)
  rgb8, torchrgb8, pil
             ..., decode(SPEC), to_tuple("jpg", "cls"), map_tuple(crop, None), batched(64):
             each image decoded whole, its top left 128x128 kept (a slice, the same code for
             both), batches of 64 crossing, as a training pipeline's fixed-size batches do
  ceiling    no library: made-up samples of the photographs' mean size, in lists of 64,
             through the same DataLoader: what pickling raw bytes between processes allows
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "remote"))
import servers  # noqa: E402

CASES = ("raw", "raw-read", "rgb8", "torchrgb8", "pil")

RUN = r"""
import json, os, sys, time, warnings
warnings.simplefilter("ignore")
which, path, urls, case, workers, passes = sys.argv[1:7]
workers, passes = int(workers), int(passes)
sys.path.insert(0, path)
if which == "webdataset":
    import webdataset as wds
elif which == "libshard":
    import libshard.webdataset as wds
import torch


def sizes(sample):
    return sample["__key__"], {k: len(v) for k, v in sample.items() if isinstance(v, bytes)}


def crop(x):  # the top left 128x128: fixed-size images, batched as training batches
    if isinstance(x, torch.Tensor):
        return x[:, :128, :128].clone()
    if hasattr(x, "crop"):
        return x.crop((0, 0, 128, 128))
    import numpy
    return numpy.ascontiguousarray(x[:128, :128])


def ceiling():
    class Made(torch.utils.data.IterableDataset):
        def __iter__(self):
            info = torch.utils.data.get_worker_info()
            base = os.urandom(int(urls))
            for i in range(8000 * passes // 64 // (info.num_workers if info else 1)):
                yield [dict(__key__=f"k{i}-{j}", jpg=base[:-1] + bytes([j]), cls=b"1")
                       for j in range(64)]
    return Made()


if case == "ceiling":
    dataset = ceiling()
else:
    stages = {
        "raw": [wds.batched(64, collation_fn=None)],
        "raw-read": [wds.map(sizes), wds.batched(64, collation_fn=None)],
    }
    shards = wds.SimpleShardList(json.loads(urls) * passes)
    after = stages.get(case) or [wds.decode(case), wds.to_tuple("jpg", "cls"),
                                 wds.map_tuple(crop, None), wds.batched(64)]
    dataset = wds.DataPipeline(shards, wds.split_by_worker, wds.tarfile_to_samples(), *after)
loader = torch.utils.data.DataLoader(dataset, num_workers=workers, batch_size=None)
t = time.perf_counter()
n = 0
for item in loader:
    n += len(item) if case in ("raw", "raw-read", "ceiling") else len(item[1])
print(json.dumps({"samples": n, "seconds": time.perf_counter() - t}))
"""


def run(which, path, urls, case, workers, passes):
    out = subprocess.run(["/usr/bin/python3", "-c", RUN, which, str(path), urls, case,
                          str(workers), str(passes)], capture_output=True, text=True,
                         timeout=1800)
    if out.returncode:
        sys.exit(f"wds_bench: {which} {case}: {out.stderr[-3000:]}")
    r = json.loads(out.stdout.strip().splitlines()[-1])
    return r["samples"], r["samples"] / r["seconds"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("imagefolder")
    ap.add_argument("--webdataset", default=os.path.expanduser(
        "~/.cache/libshard/webdataset-e0953f9"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--shards")
    ap.add_argument("--cases", default=",".join(CASES + ("ceiling",)))
    ap.add_argument("--where", default="local,http")
    ap.add_argument("--raw-passes", type=int, default=3,
                    help="epochs over the shard list in one run of the raw cases (short ones)")
    a = ap.parse_args()
    src = Path(a.webdataset) / "src"
    if not (src / "webdataset" / "__init__.py").exists():
        sys.exit(f"wds_bench: no WebDataset source in {src} (--webdataset)")
    try:
        import braceexpand  # noqa: F401 (WebDataset's dependency)
    except ImportError:
        sys.exit("wds_bench: WebDataset needs braceexpand: apt-get install python3-braceexpand")
    paths = {"webdataset": src, "libshard": REPO / "build" / "python"}
    shards = Path(a.shards) if a.shards else Path(tempfile.mkdtemp(prefix="wds-bench-"))
    if not a.shards:
        subprocess.run([str(REPO / "build" / "tools" / "shardpack"), a.imagefolder, "-o",
                        str(shards / "b-%03d.tar"), "-c", "500", "-q", "-j", "2", "--no-fsync"],
                       check=True)
    tars = sorted(shards.glob("*.tar"))
    mean = sum(p.stat().st_size for p in tars) // (len(tars) * 500)
    for p in tars:  # into the page cache: every run reads the same warm files
        p.read_bytes()
    ng = servers.Nginx(shards)
    cases = a.cases.split(",")
    where = a.where.split(",")
    results = {}
    try:
        bases = {"local": str(shards), "http": ng.url}
        for r in range(a.rounds):
            for case in cases:
                for place in (["-"] if case == "ceiling" else where):
                    passes = a.raw_passes if case.startswith("raw") or case == "ceiling" else 1
                    urls = (str(mean) if case == "ceiling" else
                            json.dumps([f"{bases[place]}/{p.name}" for p in tars]))
                    order = ["webdataset", "libshard"] if r % 2 == 0 else ["libshard", "webdataset"]
                    for which in (["-"] if case == "ceiling" else order):
                        n, rate = run(which, paths.get(which, ""), urls, case, a.workers, passes)
                        results.setdefault((case, place, which), []).append(rate)
                        print(f"round {r + 1} {case:9s} {place:5s} {which:10s} {n:6d} samples "
                              f"{rate:8.0f}/s", flush=True)
    finally:
        ng.close()
    print(f"\n{len(tars)} shards, {len(tars) * 500} samples, {a.workers} DataLoader workers, "
          f"median of {a.rounds} rounds, samples/s")
    print("| pipeline | where | WebDataset 1.0.2 | libshard.webdataset | ratio |")
    print("|---|---|---|---|---|")
    for case in cases:
        if case == "ceiling":
            print(f"| ceiling (pickled raw samples, no reader) | - | "
                  f"{statistics.median(results[(case, '-', '-')]):.0f} | | |")
            continue
        for place in where:
            w = statistics.median(results[(case, place, "webdataset")])
            s = statistics.median(results[(case, place, "libshard")])
            print(f"| {case} | {place} | {w:.0f} | {s:.0f} | {s / w:.2f} |")


if __name__ == "__main__":
    t0 = time.time()
    main()
    print(f"wds_bench: {time.time() - t0:.0f} s")
