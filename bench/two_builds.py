"""Two builds of libshard side by side on the same shards: decode (shardcat verify --decode,
every image decoded), stream (shardcat stream, an epoch's order through the shuffle buffer)
and resume (shardcat stream --state from the middle of the epoch: the restore's planning and
replay, then the rest), each timed in pairs, the builds taking turns, the ratio BEFORE/AFTER
per pair (above 1: the new build is faster), and its median. With --remote also: remote (the
stream's epoch read over http:// from nginx on 127.0.0.1) and, given --images, pack-s3
(shardpack of that folder into s3rver, 1,000 samples a shard).

    /usr/bin/python3 bench/two_builds.py BEFORE_BUILD AFTER_BUILD MANIFEST [--rounds 5] \
        [--remote] [--images IMAGEFOLDER] [--only stream,remote,...]

A build is a meson build folder (its tools/shardcat and tools/shardpack are run). MANIFEST
names the shards, a shardpack manifest (every count known, the cut a line). The servers are
the tests' (tests/remote/servers.py; s3rver needs tests/remote/node's packages:
scripts/test-servers.sh)."""
import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

from benchtools import timed, warm

REPO = Path(__file__).resolve().parents[1]
S3_ENV = {"AWS_ACCESS_KEY_ID": "S3RVER", "AWS_SECRET_ACCESS_KEY": "S3RVER",
          "AWS_REGION": "us-east-1"}


def shardcat(build):
    return f"{build}/tools/shardcat"


def state_at(build, manifest, n):
    """The state after n samples of the epoch, as this build writes it."""
    cp = subprocess.run([shardcat(build), "stream", manifest, *ORDER, "--samples", str(n)],
                        check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    return next(l[len("state: "):] for l in cp.stderr.splitlines() if l.startswith("state: "))


ORDER = ["--seed", "1", "--shuffle", "2000", "--mode", "exact"]


def commands(build, manifest, state, web=None, images=None):
    out = {
        "decode": [shardcat(build), "verify", "--decode", manifest],
        "stream": [shardcat(build), "stream", manifest, *ORDER],
        "resume": [shardcat(build), "stream", manifest, *ORDER, "--state", state],
    }
    if web:
        out["remote"] = [shardcat(build), "stream", f"{web}/{os.path.basename(manifest)}", *ORDER]
    if images:
        out["pack-s3"] = [f"{build}/tools/shardpack", images, "-o", "s3://shards/b/t-%06d.tar",
                          "-q", "-c", "1000", "--no-fsync"]
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("manifest")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--at", type=int, default=4000, help="samples before the resume's state")
    ap.add_argument("--remote", action="store_true", help="also read the shards over http://")
    ap.add_argument("--images", help="also pack this folder into s3rver")
    ap.add_argument("--only", help="the benchmarks to run, comma-separated")
    a = ap.parse_args()
    import json
    shards = [os.path.join(os.path.dirname(a.manifest), s["url"])
              for s in json.load(open(a.manifest))["shardlist"]]
    warm(shards)
    builds = {"before": a.before, "after": a.after}
    web = s3 = None
    if a.remote or a.images:
        sys.path.insert(0, str(REPO / "tests" / "remote"))
        import servers
        web = servers.Nginx(os.path.dirname(os.path.abspath(a.manifest))) if a.remote else None
        if a.images:
            s3 = servers.S3Server("shards")
            os.environ.update({**S3_ENV, "AWS_ENDPOINT_URL": s3.url})
            warm([os.path.join(r, f) for r, _, fs in os.walk(a.images) for f in fs])
    cmds = {k: commands(b, a.manifest, state_at(b, a.manifest, a.at), web and web.url, a.images)
            for k, b in builds.items()}
    try:
        run(a, builds, cmds, shards)
    finally:
        for server in (web, s3):
            if server:
                server.close()


def run(a, builds, cmds, shards):
    print(f"before: {a.before}\nafter:  {a.after}\nshards: {a.manifest} ({len(shards)}), "
          f"{a.rounds} pairs a benchmark, the builds in turn after a warm-up of each")
    print(f"{'bench':8} {'before s':>9} {'after s':>9} {'before/after':>13}  (pairs)")
    names = [n for n in cmds["after"] if not a.only or n in a.only.split(",")]
    for bench in names:
        for k in builds:
            timed(cmds[k][bench], quiet=True)  # warm-up
        t = {k: [] for k in builds}
        for r in range(a.rounds):
            order = list(builds) if r % 2 == 0 else list(reversed(builds))
            for k in order:
                t[k].append(timed(cmds[k][bench], quiet=True))
        ratios = [b / f for b, f in zip(t["before"], t["after"])]
        print(f"{bench:8} {statistics.median(t['before']):9.3f} {statistics.median(t['after']):9.3f} "
              f"{statistics.median(ratios):13.3f}  ({', '.join(f'{x:.3f}' for x in ratios)})")


if __name__ == "__main__":
    main()
