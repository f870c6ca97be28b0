"""The cost of a resume: the time from restoring a state taken mid-epoch to the first
sample, against a fresh start of the same reader, and the bytes read to get there, on a
data set of small synthetic samples with indexes, from local files and over loopback HTTP
(nginx). A resume enters the partition it was cut in: it replays that partition's streams
and shuffle draws over the samples' identities (no I/O), then reads by index only the
samples in its shuffle buffer at the cut (formats/order.md, section 5). The state is taken
by one consumer and restored on the same one, and as rank 1 of 3 (another topology, whose
block holds the partition cut).

    /usr/bin/python3 bench/resume_bench.py [--samples 1000000] [--per-shard 10000]
                                           [--shuffle 5000] [--cut 0.55] [--rounds 3]

Prints, per place, the medians of: the time to the first sample fresh and resumed, their
ratio, and over HTTP the bytes and requests before the first sample (resumed: the plan's
indexes and the buffer's samples). Then, over HTTP, each of 3 ranks reading its whole
share: a rank whose share starts inside a shard streams it from there (`--ranks-only`:
that alone, one stream, shards in order).
"""
import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "remote"))
sys.path.insert(0, str(REPO / "build" / "python"))
import servers  # noqa: E402

import libshard  # noqa: E402
from libshard.torch import ShardDataset  # noqa: E402
from libshard.writer import ShardWriter  # noqa: E402


def make(folder, samples, per_shard):
    with ShardWriter(str(folder / "t-%05d.tar"), maxcount=per_shard, encoder=False, sync=False,
                     checksums="none", manifest=str(folder / "t.json")) as w:
        for i in range(samples):
            w.write({"__key__": f"{i:08d}", "bin": i.to_bytes(8, "little") * 8,
                     "cls": str(i % 1000).encode()})


def ranks(url, world=3, **kw):
    """Each of world ranks reading its whole share over url: samples, time, requests."""
    for rank in range(world):
        r = libshard.Reader(url, seed=1, rank=rank, world_size=world, **kw)
        t = time.perf_counter()
        n = sum(1 for _ in r)
        took = time.perf_counter() - t
        rs = r.remote_stats()
        print(f"    rank {rank}: {n} samples in {took:.2f} s, {rs['requests']} requests, "
              f"{rs['bytes'] / 1e6:.1f} MB")


def first(reader, state=None):
    """Seconds from restore (or the start) to the first sample, and the bytes and requests
    that took over HTTP (local files are mapped: no count)."""
    t = time.perf_counter()
    if state:
        reader.restore(state)
    next(iter(reader))
    took = time.perf_counter() - t
    rs = reader.remote_stats()
    reader.stop()
    return took, rs["bytes"], rs["requests"]


def first_dataset(url, kw, state=None):
    """Seconds from ShardDataset.load_state_dict (or the start) to the first sample, as a
    training loop resumes (decode=False: the samples are not images)."""
    ds = ShardDataset(url, decode=False, **kw)
    t = time.perf_counter()
    if state:
        ds.load_state_dict({"epoch": 0, "seed": kw["seed"], "state": state})
    it = iter(ds)
    next(it)
    took = time.perf_counter() - t
    del it, ds
    return took


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--samples", type=int, default=1_000_000)
    ap.add_argument("--per-shard", type=int, default=10_000)
    ap.add_argument("--shuffle", type=int, default=5000)
    ap.add_argument("--cut", type=float, default=0.55, help="where in the epoch the state is")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--ranks-only", action="store_true",
                    help="only the ranks' reading over HTTP, one stream, shards in order")
    a = ap.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="resume-bench-"))
    ng = None
    try:
        t = time.perf_counter()
        make(folder, a.samples, a.per_shard)
        print(f"{a.samples} samples in {a.samples // a.per_shard} shards with indexes: "
              f"{time.perf_counter() - t:.1f} s to write; shuffle {a.shuffle}, 4 streams, "
              f"the state at {a.cut:.0%} of the epoch; {a.rounds} rounds (medians)")
        ng = servers.Nginx(folder)
        places = {"local": str(folder / "t.json"), "http": f"{ng.url}/t.json"}
        if a.ranks_only:
            print("  http, each rank of 3 reading its whole share, one stream, shards in order:")
            ranks(places["http"], streams=1, shuffle_shards=False)
            return
        kw = dict(seed=1, shuffle=a.shuffle, streams=4)
        cut = int(a.samples * a.cut)
        r = libshard.Reader(places["local"], **kw)
        for i, _ in enumerate(r):
            if i + 1 == cut:
                break
        state = r.state()
        r.stop()
        print(f"  {r.partitions} partitions; the state: {state.split(';')[1]}")
        elsewhere = dict(kw, rank=1, world_size=3)
        for place, url in places.items():
            runs = {"fresh": [], "resumed": [], "rank 1 of 3": []}
            for _ in range(a.rounds):
                runs["fresh"].append(first(libshard.Reader(url, **kw)))
                runs["resumed"].append(first(libshard.Reader(url, **kw), state))
                runs["rank 1 of 3"].append(first(libshard.Reader(url, **elsewhere), state))
            med = {k: [statistics.median(x[i] for x in v) for i in range(3)]
                   for k, v in runs.items()}
            read = (lambda b, q: f" ({b / 1e6:.2f} MB in {q:.0f} requests)") if place == "http" \
                else (lambda b, q: "")
            f = med["fresh"][0]
            print(f"  {place:5s} to the first sample: fresh {f * 1e3:7.1f} ms"
                  f"{read(*med['fresh'][1:])}")
            for k in ("resumed", "rank 1 of 3"):
                t, b, q = med[k]
                print(f"        {k} at sample {cut}: {t * 1e3:7.1f} ms{read(b, q)}; "
                      f"/ fresh {t / f:.2f}")
            dkw = dict(seed=1, shuffle=a.shuffle, streams=4, rank=0, world_size=1)
            fresh = statistics.median(first_dataset(url, dkw) for _ in range(a.rounds))
            back = statistics.median(first_dataset(url, dkw, state) for _ in range(a.rounds))
            print(f"        ShardDataset: load_state_dict to the first sample {back * 1e3:7.1f} "
                  f"ms, a fresh one {fresh * 1e3:7.1f} ms; / fresh {back / fresh:.2f}")
        # a rank's whole share over HTTP: rank 0's starts at a shard, rank 1's inside one
        print("  http, each rank of 3 reading its whole share (no shuffle buffer):")
        ranks(places["http"], streams=4)
    finally:
        if ng:
            ng.close()
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
