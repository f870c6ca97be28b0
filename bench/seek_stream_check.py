#!/usr/bin/python3
"""A rank whose share starts inside a shard, over HTTP (nginx on 127.0.0.1): samples, time
and requests for each of 3 ranks over 40,000 small samples in 4 shards of 10,000 with a
manifest, one stream, shards in order.

    /usr/bin/python3 bench/seek_stream_check.py
"""
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "remote"))
sys.path.insert(0, str(REPO / "build" / "python"))
import servers  # noqa: E402

import libshard  # noqa: E402
from libshard.writer import ShardWriter  # noqa: E402


def main():
    folder = Path(tempfile.mkdtemp(prefix="seek-stream-"))
    ng = None
    try:
        with ShardWriter(str(folder / "t-%05d.tar"), maxcount=10000, encoder=False, sync=False,
                         checksums="none", manifest=str(folder / "t.json")) as w:
            for i in range(40000):
                w.write({"__key__": f"{i:08d}", "bin": bytes(64), "cls": b"1"})
        ng = servers.Nginx(folder)
        for rank in range(3):
            r = libshard.Reader(f"{ng.url}/t.json", seed=1, rank=rank, world_size=3, streams=1,
                                shuffle_shards=False)
            t = time.perf_counter()
            n = sum(1 for _ in r)
            took = time.perf_counter() - t
            print(f"rank {rank}: {n} samples in {took:.2f} s, "
                  f"{r.remote_stats()['requests']} requests")
    finally:
        if ng:
            ng.close()
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
