"""States that an earlier libshard took, kept as data (data/states-0.5/states.json), and the
shards they were taken on, made here the same way every time: a later libshard must resume
each one and deliver the very samples the earlier one delivered after it (formats/order.md,
section 4: how the state grows).

    /usr/bin/python3 tests/stream/old_states.py SHARDCAT [OUT.json]

takes the states again with SHARDCAT (libshard 0.5, main at 2d5925e, made them) and writes
them, with the samples that shardcat delivered after each, to OUT.json (default: the data
file)."""
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATA = HERE / "data" / "states-0.5" / "states.json"

# Two sets of plain tars with uneven counts: a (8 shards), b (3 shards).
SETS = {"a": [23, 41, 17, 36, 29, 44, 12, 31], "b": [19, 27, 14]}

# name: (shardcat stream's arguments, {DIR} for the shards' folder; samples before the state)
CASES = {
    "exact": (["{DIR}/a-{000000..000007}.tar", "--seed", "7", "--shuffle", "30",
               "--mode", "exact"], 101),
    "equal-2x2": (["{DIR}/a-{000000..000007}.tar", "--seed", "7", "--shuffle", "20",
                   "--mode", "equal", "--rank", "1", "--world-size", "2", "--worker", "0",
                   "--workers", "2"], 37),
    "mix": (["--mix", "3:{DIR}/a-{000000..000007}.tar", "--mix", "1:{DIR}/b-{000000..000002}.tar",
             "--seed", "11", "--shuffle", "25", "--mode", "exact"], 120),
    "uncounted": (["{DIR}/a-{000000..000007}.tar", "--seed", "5", "--shuffle", "10",
                   "--mode", "exact", "--make-indexes", "never"], 77),
}


def make_shards(folder):
    """The sets' shards, with Python's tarfile: every byte fixed (names, counts, contents,
    header fields), so the list's fingerprint is the same wherever they are made."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for name, counts in SETS.items():
        n = 0
        for i, count in enumerate(counts):
            with tarfile.open(folder / f"{name}-{i:06d}.tar", "w", format=tarfile.USTAR_FORMAT) as tf:
                for _ in range(count):
                    for field, data in (("cls", str(n % 5).encode()), ("txt", f"{name}{n}".encode())):
                        info = tarfile.TarInfo(f"{name}{n:05d}.{field}")
                        info.size, info.mtime, info.mode = len(data), 0, 0o644
                        tf.addfile(info, io.BytesIO(data))
                    n += 1


def args_for(case, folder):
    args, _ = CASES[case]
    return [a.replace("{DIR}", str(folder)) for a in args]


def run(shardcat, args, env=None):
    e = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE")}
    e.update(env or {})
    cp = subprocess.run([str(shardcat), "stream", *args], capture_output=True, text=True,
                        timeout=120, stdin=subprocess.DEVNULL, env=e)
    if cp.returncode:
        raise RuntimeError(f"{shardcat} stream {' '.join(args)}: exit {cp.returncode}\n{cp.stderr}")
    keys = [line.split("\t", 1)[0] for line in cp.stdout.splitlines() if line]
    states = [l[len("state: "):] for l in cp.stderr.splitlines() if l.startswith("state: ")]
    return keys, states


def take(shardcat, out):
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "shards"
        make_shards(folder)
        env = {"XDG_CACHE_HOME": str(Path(tmp) / "cache")}
        cases = {}
        for case, (_, n) in CASES.items():
            args = args_for(case, folder)
            head, states = run(shardcat, args + ["--index-cache", str(Path(tmp) / "idx"),
                                                 "--samples", str(n)], env)
            state = states[0]
            after, _ = run(shardcat, args + ["--index-cache", str(Path(tmp) / "idx"),
                                             "--state", state], env)
            cases[case] = {"state": state, "before": len(head), "after": after}
    version = subprocess.run([str(shardcat), "--version"], capture_output=True,
                             text=True).stdout.strip()
    Path(out).write_text(json.dumps({"taken_by": version, "cases": cases}, indent=1) + "\n")


if __name__ == "__main__":
    take(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else DATA)
