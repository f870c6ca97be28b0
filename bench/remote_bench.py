"""Remote shards over loopback HTTP (nginx), side by side with their baselines in one run.

    /usr/bin/python3 bench/remote_bench.py IMAGEFOLDER [--rounds 5] [--shards DIR]

IMAGEFOLDER is packed into 16 tar shards (with a manifest) unless --shards names a folder
packed before. nginx (nginx-light, with its echo module for the added latency) serves it
on 127.0.0.1. Every measure is the median of --rounds rounds, the commands of a round run
in turn, so that a noisy machine slows them alike:

  read      the streaming reader (read_iter --touch --reader 0 4: four streams, every byte
            touched) over http://, as a ratio to curl of the same shards from the same
            server to /dev/null, the faster in that run of `curl -Z --parallel-max 4` (four
            at a time) and plain `curl` (one after the other, on one connection), and to
            the same reader on local files; and without --touch: samples parsed and handed
            over but not looked at, as curl does not look at the bytes it throws away
  latency   the reader with 50 ms added to every request (echo_sleep), over the reader
            without it, from the same server
  first     time to the first sample (open the reader, take one), remote over local
  batches   decoded 224x224 training batches (examples/read_batches, 256 per batch), remote
            over local
  ceiling   the same local batches while curl fetches the same shards from the same server
            at the same time: what moving the bytes over loopback costs the decoders when
            client and server share the cores, so the most any HTTP client could reach here
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "remote"))
sys.path.insert(0, str(REPO / "bench"))
import servers  # noqa: E402
from benchtools import timed, warm  # noqa: E402

BUILD = REPO / "build"


def first_sample(url):
    """Seconds to open a reader on url and take one sample, in a fresh process."""
    code = ("import sys, time; sys.path.insert(0, %r); from libshard import _libshard as L; "
            "t = time.perf_counter(); r = L.Reader([%r], seed=1); next(r); "
            "print(time.perf_counter() - t)") % (str(BUILD / "python"), url)
    out = subprocess.run(["/usr/bin/python3", "-c", code], check=True, capture_output=True,
                         text=True).stdout
    return float(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("imagefolder")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--shards")
    ap.add_argument("--repeat", type=int, default=1,
                    help="read the set this many times over in each run (a manifest listing "
                         "each shard that many times): a longer run, for the latency ratio, as "
                         "the manifest's and the first shards' requests are paid once per run")
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="remote-bench-"))
    shards = Path(a.shards) if a.shards else tmp / "www"
    if not a.shards:
        shards.mkdir()
        subprocess.run([str(BUILD / "tools" / "shardpack"), a.imagefolder, "-o",
                        str(shards / "t-%03d.tar"), "-c", "500", "-q", "-j", "2", "--no-fsync"],
                       check=True)
    tars = sorted(shards.glob("t-*.tar"))
    total = sum(p.stat().st_size for p in tars)
    warm(tars)
    ng = servers.Nginx(shards, main=f"load_module {servers_echo()};",
                       extra="location /slow/ { echo_sleep 0.05; echo_exec @file; }\n"
                             "    location @file { rewrite ^/slow/(.*)$ /$1 break; }")
    try:
        base = ng.url
        read_iter = str(BUILD / "bench" / "read_iter")
        batches = str(BUILD / "examples" / "read_batches")
        curl = ["curl", "-s", "-Z", "--parallel-max", "4"]
        for p in tars:
            curl += ["-o", "/dev/null", f"{base}/{p.name}"]
        k = a.repeat
        m = "t.json"
        if k > 1:  # one manifest listing every shard k times: one request for the list
            import json
            doc = json.loads((shards / "t.json").read_text())
            doc["shardlist"] = doc["shardlist"] * k
            m = f"t-x{k}.json"
            (shards / m).write_text(json.dumps(doc))
        cmds = {
            "curl": curl,
            "curl1": ["curl", "-s"] + curl[5:],
            "remote": [read_iter, "--touch", "--reader", "0", "4", f"{base}/{m}"],
            "untouched": [read_iter, "--reader", "0", "4", f"{base}/{m}"],
            "local": [read_iter, "--touch", "--reader", "0", "4", str(shards / m)],
            "remote+50ms": [read_iter, "--touch", "--reader", "0", "4", f"{base}/slow/{m}"],
        }
        if k > 1:  # curl reads the shards k times over too
            cmds["curl"] = curl + curl[5:] * (k - 1)
            cmds["curl1"] = cmds["curl1"] + curl[5:] * (k - 1)
        times = {k: [] for k in cmds}
        firsts = {"remote": [], "local": []}
        for r in range(a.rounds):
            for k, c in cmds.items():
                times[k].append(timed(c, quiet=True))
            firsts["remote"].append(first_sample(f"{base}/t.json"))
            firsts["local"].append(first_sample(str(shards / "t.json")))
        bt = {"remote": [], "local": [], "local+curl": []}
        for r in range(max(1, a.rounds // 2)):
            bt["remote"].append(timed([batches, f"{base}/t.json", "256"], quiet=True))
            bt["local"].append(timed([batches, str(shards / "t.json"), "256"], quiet=True))
            side = subprocess.Popen(curl, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            bt["local+curl"].append(timed([batches, str(shards / "t.json"), "256"], quiet=True))
            side.wait()
    finally:
        ng.close()
    med = {k: statistics.median(v) for k, v in times.items()}
    mb = total * a.repeat / 1e6
    print(f"{len(tars)} shards x {a.repeat}, {mb:.0f} MB, {a.rounds} rounds (medians)")
    for k in cmds:
        print(f"  {k:12s} {med[k]:.3f} s  {mb / med[k]:.0f} MB/s")
    fast = min(med["curl"], med["curl1"])  # the stricter baseline
    print(f"  read remote / curl           {fast / med['remote']:.2f}"
          f"  (-Z: {med['curl'] / med['remote']:.2f}, one by one: {med['curl1'] / med['remote']:.2f})")
    print(f"  untouched / curl             {fast / med['untouched']:.2f}")
    print(f"  read remote / local          {med['local'] / med['remote']:.2f}")
    print(f"  remote+50ms / remote         {med['remote'] / med['remote+50ms']:.2f}")
    fr, fl = statistics.median(firsts["remote"]), statistics.median(firsts["local"])
    print(f"  first sample remote {fr * 1000:.1f} ms, local {fl * 1000:.1f} ms")
    br, bl = statistics.median(bt["remote"]), statistics.median(bt["local"])
    bc = statistics.median(bt["local+curl"])
    print(f"  decoded batches remote {br:.2f} s, local {bl:.2f} s: remote / local {bl / br:.2f}")
    print(f"  ceiling: local batches with curl beside them {bc:.2f} s: {bl / bc:.2f}")


def servers_echo():
    for p in ("/usr/lib/nginx/modules/ngx_http_echo_module.so",):
        if os.path.exists(p):
            return p
    sys.exit("remote_bench: nginx's echo module (libnginx-mod-http-echo) is missing")


if __name__ == "__main__":
    main()
