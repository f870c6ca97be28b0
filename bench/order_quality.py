"""How well an epoch's order is shuffled, for libshard's reader and for WebDataset's
pipeline over the same shards, as a training job on W ranks of K DataLoader workers sees it:

- neighbours: the share of a batch's other samples that come from the same shard, averaged
  over samples and batches (a batch is made by one worker; 1/shards is a perfect shuffle's);
- displacement: the mean distance between a sample's place in the job's sequence (step
  after step, each rank's batch of that step, a rank taking its workers' batches in turn)
  and its place in the data set (shards in name order, samples in tar order), over the
  sample count (a random permutation's is 1/3).

    /usr/bin/python3 bench/order_quality.py libshard 'D/t-{000..015}.tar' [--manifest D/t.json]
    /usr/bin/python3 bench/order_quality.py webdataset 'D/t-{000..015}.tar'

The library is whichever `libshard` or `webdataset` the interpreter imports (PYTHONPATH).
Prints one JSON line per topology: the means over the seeds.
"""
import argparse
import glob
import json
import os
import re
import tarfile
from collections import Counter


def natural_order(pattern):
    """{key: place in the data set} and {key: shard}, shards in name order."""
    m = re.match(r"(.*)\{(\d+)\.\.(\d+)\}(.*)", pattern)
    if m:
        width = len(m.group(2))
        paths = [f"{m.group(1)}{i:0{width}d}{m.group(4)}"
                 for i in range(int(m.group(2)), int(m.group(3)) + 1)]
    else:
        paths = sorted(glob.glob(pattern))
    place, shard = {}, {}
    for path in paths:
        with tarfile.open(path) as t:
            for member in t:
                folder, base = os.path.split(member.name)  # WebDataset's key
                key = os.path.join(folder, base.split(".", 1)[0])
                if key not in place:
                    place[key] = len(place)
                    shard[key] = os.path.basename(path)
    return place, shard


def libshard_streams(spec, world, workers, shuffle, seed):
    """[[keys of consumer (rank, worker)] for each consumer], rank-major."""
    import libshard
    out = []
    for rank in range(world):
        for worker in range(workers):
            r = libshard.Reader(spec, seed=seed, shuffle=shuffle, mode="exact", rank=rank,
                                world_size=world, worker=worker, num_workers=workers)
            out.append([s["__key__"] for s in r])
    return out


def webdataset_streams(pattern, world, workers, shuffle, seed):
    import webdataset as wds
    out = []
    for rank in range(world):
        for worker in range(workers):
            os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), WORKER=str(worker),
                              NUM_WORKERS=str(workers))
            ds = wds.WebDataset(pattern, shardshuffle=100, seed=seed,
                                nodesplitter=wds.split_by_node, empty_check=False)
            ds = ds.shuffle(shuffle, initial=shuffle)
            out.append([s["__key__"] for s in ds])
    return out


def measure(streams, world, workers, batch, place, shard):
    n = len(place)
    # a consumer's batches; the job's sequence: step after step, rank after rank, a rank's
    # workers in turn
    batches = [[st[i:i + batch] for i in range(0, len(st), batch)] for st in streams]
    share, counted = 0.0, 0
    for bs in batches:
        for b in bs:
            c = Counter(shard[k] for k in b)
            if len(b) > 1:
                share += sum(c[shard[k]] - 1 for k in b) / (len(b) - 1)
                counted += len(b)
    seq, step = [], 0
    turns = [0] * world
    while any(turns[r] < sum(len(batches[r * workers + w]) for w in range(workers))
              for r in range(world)):
        for r in range(world):
            w = step % workers
            mine = batches[r * workers + w]
            j = step // workers
            if j < len(mine):
                seq += mine[j]
                turns[r] += 1
        step += 1
    disp = sum(abs(i - place[k]) for i, k in enumerate(seq)) / len(seq) / n
    return {"samples": len(seq), "neighbours_same_shard": share / counted,
            "displacement": disp, "every_sample_once": sorted(seq) == sorted(place)}


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("library", choices=["libshard", "webdataset"])
    ap.add_argument("pattern", help="the shards as a brace pattern (the data set's order)")
    ap.add_argument("--manifest", help="libshard reads this instead (counts known)")
    ap.add_argument("--shuffle", type=int, default=1000)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--seeds", type=int, default=10,
                    help="seeds 1..N, averaged: one seed's shard order decides much")
    ap.add_argument("--topologies", default="1x1,2x2,4x2")
    a = ap.parse_args()
    place, shard = natural_order(a.pattern)
    for topo in a.topologies.split(","):
        world, workers = map(int, topo.split("x"))
        runs = []
        for seed in range(1, a.seeds + 1):
            if a.library == "libshard":
                streams = libshard_streams(a.manifest or a.pattern, world, workers, a.shuffle,
                                           seed)
            else:
                streams = webdataset_streams(a.pattern, world, workers, a.shuffle, seed)
            runs.append(measure(streams, world, workers, a.batch, place, shard))
        mean = {k: sum(r[k] for r in runs) / len(runs)
                for k in ("neighbours_same_shard", "displacement")}
        print(json.dumps({"library": a.library, "topology": topo, "shuffle": a.shuffle,
                          "batch": a.batch, "seeds": a.seeds, **mean,
                          "every_sample_once": all(r["every_sample_once"] for r in runs)}),
              flush=True)


if __name__ == "__main__":
    main()
