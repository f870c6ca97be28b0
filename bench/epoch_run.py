"""One epoch through libshard.torch.ShardDataset, for timing whole runs against each other
(bench/interleave.py): decoded batches of 256 at 224 x 224 (random resized crops, flips), or
with --raw the samples undecoded (decode=False); shuffle 1000, the default order otherwise.
The libshard timed is whichever the interpreter imports (PYTHONPATH).

    PYTHONPATH=build/python /usr/bin/python3 bench/epoch_run.py D/t.json [--raw]
"""
import argparse

from libshard.torch import ShardDataset


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("shards")
    ap.add_argument("--raw", action="store_true", help="decode=False")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    ds = ShardDataset(a.shards, seed=a.seed, shuffle=1000, decode=not a.raw, batch_size=256,
                      image_size=224, crop="random_resized", flip=True, rank=0, world_size=1)
    n = 0
    for item in ds:
        n += 1
    print(n)


if __name__ == "__main__":
    main()
