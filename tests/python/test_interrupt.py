"""Ctrl-C while Python waits: a KeyboardInterrupt within a second (asserted with a generous
bound) during a batch wait on a slow pipe: source and during retries against a closed port,
with 0 and 2 DataLoader workers, and nothing left behind: no process of the pipe's command,
no file in /dev/shm, no temporary file.

Each case runs a script in a session of its own and sends SIGINT to its process group, as a
terminal's Ctrl-C does (the DataLoader workers get it too).
"""
import json
import os
import random
import signal
import socket
import subprocess
import sys
import textwrap
import time

import pytest

from .conftest import _PYPATH, SLOW

# the slow command's sleep, found in /proc if it outlives the run: this run's own (another
# run of the suite on the machine has another)
MARK = f"31.{os.getpid()}{random.randrange(1000)}"
BOUND = 3.0 * SLOW  # seconds from SIGINT to exit: the aim is 1 s

SCRIPT = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, sys.argv[1])
    import torch
    from libshard.torch import ShardDataset
    import json
    urls, workers, extra = json.loads(sys.argv[2]), int(sys.argv[3]), json.loads(sys.argv[4])
    ds = ShardDataset(urls, seed=0, batch_size=4, image_size=16, shuffle=0, streams=1, **extra)
    loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=workers)
    print("ready", flush=True)
    for batch in loader:
        print("batch", flush=True)
    print("ended", flush=True)
""")


def closed_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def shm():
    return set(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else set()


def leftovers():
    """The processes running the slow command (read from /proc: no tool that a sanitizer's
    LD_PRELOAD, inherited by children, could upset)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                args = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue  # gone meanwhile
        if f"sleep {MARK}" in args and "pytest" not in args:
            found.append(f"{pid} {args}")
    return found


def interrupt(tmp_path, urls, workers, extra=None, settle=1.5):
    """Starts the script, sends SIGINT once it waits, and returns (seconds to exit, output)."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    before = shm()
    env = dict(os.environ, TMPDIR=str(tmp), PYTHONUNBUFFERED="1")
    p = subprocess.Popen([sys.executable, "-c", SCRIPT, str(_PYPATH), json.dumps(urls),
                          str(workers), json.dumps(extra or {})],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                         start_new_session=True, text=True)
    try:
        assert p.stdout.readline().strip() == "ready"
        time.sleep(settle * SLOW)  # the workers start, the readers wait
        assert p.poll() is None, p.stdout.read()
        t0 = time.monotonic()
        os.killpg(p.pid, signal.SIGINT)
        p.wait(timeout=60)
        took = time.monotonic() - t0
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    out = p.stdout.read()
    assert "KeyboardInterrupt" in out, out
    assert "batch" not in out.splitlines(), out
    time.sleep(0.2)
    assert leftovers() == [], f"the pipe's command outlived the run: {leftovers()}"
    assert shm() <= before, f"left in /dev/shm: {shm() - before}"
    assert list(tmp.iterdir()) == [], list(tmp.iterdir())
    return took, out


@pytest.mark.parametrize("workers", [0, 2])
def test_ctrl_c_during_a_batch_wait_on_a_slow_pipe(packed, tmp_path, workers):
    urls = [f"pipe:sleep {MARK}; cat {s}" for s in packed.shards[:2]]
    took, out = interrupt(tmp_path, urls, workers)
    print(f"exit {took:.2f} s after SIGINT")
    assert took < BOUND, (took, out)


@pytest.mark.parametrize("workers", [0, 2])
def test_ctrl_c_during_retries_against_a_closed_port(packed, tmp_path, workers):
    """The manifest counts the shards, so the retries are the fetch threads' (backoff up to
    5, 10, 20 s): Ctrl-C lands in one of them."""
    meta = json.loads(packed.manifest.read_text())
    port = closed_port()
    for e in meta["shardlist"]:
        e["url"] = f"http://127.0.0.1:{port}/{os.path.basename(e['url'])}"
    manifest = tmp_path / "closed.json"
    manifest.write_text(json.dumps(meta))
    took, out = interrupt(tmp_path, str(manifest), workers, {"backoff": 5.0, "retries": 10})
    print(f"exit {took:.2f} s after SIGINT")
    assert took < BOUND, (took, out)
    assert "; retry 1 of 3" in out, out  # it was retrying when interrupted


def test_ctrl_c_during_a_listing_that_retries(tmp_path):
    """No manifest: the open reads each shard's .idx for its count, in this process, and
    retries against the closed port (backoff up to 5, 10, 20 s)."""
    urls = f"http://127.0.0.1:{closed_port()}/x-{{0..3}}.tar"
    took, out = interrupt(tmp_path, urls, 0, {"backoff": 5.0, "retries": 10})
    print(f"exit {took:.2f} s after SIGINT")
    assert took < BOUND, (took, out)
    assert "; retry 1 of 3" in out, out
