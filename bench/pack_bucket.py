#!/usr/bin/python3
"""shardpack into buckets on loopback (s3rver, the GCS emulator, the tests' GCS upload server
for chunked sessions) and into tmpfs, with this build and a baseline build side by side,
rounds interleaved (the builds' order alternating); reports medians and each target's time against tmpfs and against the
baseline.

    /usr/bin/python3 bench/pack_bucket.py /tmp/imagefolder --baseline /tmp/prev/build/tools/shardpack \
        [--rounds 5] [--maxcount 1000]

The servers are the tests' (tests/remote/servers.py; the Node ones need tests/remote/node's
packages: scripts/test-servers.sh). Every run writes the same names, so each store holds
one set at a time.
"""
import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "remote"))

import servers  # noqa: E402

from benchtools import medians_table, timed, warm  # noqa: E402

BUCKET = "shards"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("src", help="an image folder (CLASS/IMAGE)")
    ap.add_argument("--baseline", help="another build's shardpack, run in turn with this one")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--maxcount", type=int, default=1000)
    ap.add_argument("--shardpack", default=str(REPO / "build" / "tools" / "shardpack"))
    a = ap.parse_args()
    src = os.path.abspath(a.src)
    files = [os.path.join(r, f) for r, _, fs in os.walk(src) for f in fs]
    total = sum(os.path.getsize(f) for f in files)
    warm(files)
    shm = Path(tempfile.mkdtemp(prefix="libshard-bucketbench-", dir="/dev/shm"))
    s3 = servers.S3Server(BUCKET)
    gcs = servers.GcsEmulator()
    up = servers.GcsUploadServer()
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "STORAGE_EMULATOR", "GOOGLE_"))}
    targets = {  # name: (pattern, environment, extra options)
        "tmpfs": (str(shm / "t-%06d.tar"), {}, []),
        "s3rver, 64 MiB parts": (f"s3://{BUCKET}/b/t-%06d.tar",
                                 {"AWS_ENDPOINT_URL": s3.url, "AWS_ACCESS_KEY_ID": "S3RVER",
                                  "AWS_SECRET_ACCESS_KEY": "S3RVER", "AWS_REGION": "us-east-1"}, []),
        "GCS emulator, one request": (f"gs://{BUCKET}/b/t-%06d.tar", {"STORAGE_EMULATOR_HOST": gcs.url},
                                      ["--upload-part", "1G"]),
        "GCS upload server, 8 MiB chunks": (f"gs://{BUCKET}/b/t-%06d.tar", {"STORAGE_EMULATOR_HOST": up.url},
                                            ["--upload-part", "8M"]),
    }
    builds = {"this build": a.shardpack}
    if a.baseline:
        builds["baseline"] = a.baseline
    times = {f"{t} ({b})": [] for t in targets for b in builds}
    try:
        for r in range(a.rounds):
            for t, (pattern, env, extra) in targets.items():
                # the builds' order turns round by round: what runs first after another target
                # finds the servers still busy with it (the emulator collecting its garbage)
                for b, exe in (list(builds.items()) if r % 2 == 0 else list(builds.items())[::-1]):
                    if t == "tmpfs":
                        shutil.rmtree(shm, ignore_errors=True)
                        shm.mkdir()
                    up.objects.clear()
                    up.sessions.clear()
                    up.log.clear()
                    cmd = [exe, src, "-o", pattern, "-q", "-c", str(a.maxcount), "--no-fsync", *extra]
                    os.environ.clear()
                    os.environ.update({**clean, **env})
                    times[f"{t} ({b})"].append(timed(cmd))
    finally:
        up.close()
        gcs.close()
        s3.close()
        shutil.rmtree(shm, ignore_errors=True)
    med = medians_table(times, len(files), total, a.maxcount, a.rounds)
    for t in targets:
        line = f"{t}: this build / tmpfs = {med[f'{t} (this build)'] / med['tmpfs (this build)']:.2f}"
        if a.baseline:
            line += f"; this build / baseline = {med[f'{t} (this build)'] / med[f'{t} (baseline)']:.2f}"
        print(line)


if __name__ == "__main__":
    sys.exit(main())
