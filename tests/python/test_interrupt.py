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

def mark():
    """A slow command's sleep, found in /proc if it outlives the run: this test's own
    (another test, or another run of the suite on the machine, has another)."""
    return f"{300 + random.randrange(100)}.{os.getpid()}{random.randrange(10**6)}"
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
    """/dev/shm's files, but Python's named semaphores (sem.mp-*): the script makes none,
    and tests running beside this one (meson runs suites in parallel) do."""
    names = os.listdir("/dev/shm") if os.path.isdir("/dev/shm") else []
    return {n for n in names if not n.startswith("sem.mp-")}


def leftovers(marker):
    """The processes running the slow command (read from /proc: no tool that a sanitizer's
    LD_PRELOAD, inherited by children, could upset)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                args = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue  # gone meanwhile
        if f"sleep {marker}" in args and "pytest" not in args:
            found.append(f"{pid} {args}")
    return found


def interrupt(tmp_path, urls, workers, extra=None, settle=1.5, until=None, marker="-"):
    """Starts the script, sends SIGINT once it waits (settle seconds after it is ready, or as
    soon as a line holding until is out), and returns (seconds to exit, output)."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    before = shm()
    env = dict(os.environ, TMPDIR=str(tmp), PYTHONUNBUFFERED="1")
    # the output goes to a file: a command left running would hold a pipe open, and reading
    # it to its end would wait for that command instead of seeing it
    log = open(tmp_path / "out.txt", "w+")
    p = subprocess.Popen([sys.executable, "-c", SCRIPT, str(_PYPATH), json.dumps(urls),
                          str(workers), json.dumps(extra or {})],
                         stdout=log, stderr=subprocess.STDOUT, env=env,
                         start_new_session=True, text=True)
    reader = open(tmp_path / "out.txt")
    try:
        def line():
            while True:  # the next whole line of the output, as it comes
                got = reader.readline()
                if got.endswith("\n") or p.poll() is not None:
                    return got
                time.sleep(0.05)
                reader.seek(reader.tell() - len(got))

        seen = [line()]
        assert seen[0].strip() == "ready", seen[0] + reader.read()
        if until:  # a retry has begun: its backoff is on
            while until not in seen[-1]:
                seen.append(line())
                assert seen[-1], "".join(seen)  # the script ended first
        else:
            time.sleep(settle * SLOW)  # the workers start, the readers wait
        assert p.poll() is None, "".join(seen) + reader.read()
        t0 = time.monotonic()
        os.killpg(p.pid, signal.SIGINT)
        p.wait(timeout=60)
        took = time.monotonic() - t0
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    out = "".join(seen) + reader.read()
    reader.close()
    log.close()
    assert "KeyboardInterrupt" in out, out
    assert "batch" not in out.splitlines(), out
    time.sleep(0.2)
    left = leftovers(marker)
    for entry in left:  # not to trouble the tests after this one
        os.kill(int(entry.split()[0]), signal.SIGKILL)
    assert left == [], f"the pipe's command outlived the run: {left}"
    assert shm() <= before, f"left in /dev/shm: {shm() - before}"
    assert list(tmp.iterdir()) == [], list(tmp.iterdir())
    (tmp_path / "out.txt").unlink()
    return took, out


@pytest.mark.parametrize("workers", [0, 2])
def test_ctrl_c_during_a_batch_wait_on_a_slow_pipe(packed, tmp_path, workers):
    m = mark()
    urls = [f"pipe:sleep {m}; cat {s}" for s in packed.shards[:2]]
    took, out = interrupt(tmp_path, urls, workers, marker=m)
    print(f"exit {took:.2f} s after SIGINT")
    assert took < BOUND, (took, out)


@pytest.mark.parametrize("workers", [0, 2])
def test_ctrl_c_during_retries_against_a_closed_port(packed, tmp_path, workers):
    """The manifest counts the shards, so the retries are the fetch threads' (backoffs of up
    to 20 s each): Ctrl-C comes as the first retry line is out, in its backoff."""
    meta = json.loads(packed.manifest.read_text())
    port = closed_port()
    for e in meta["shardlist"]:
        e["url"] = f"http://127.0.0.1:{port}/{os.path.basename(e['url'])}"
    manifest = tmp_path / "closed.json"
    manifest.write_text(json.dumps(meta))
    took, out = interrupt(tmp_path, str(manifest), workers, {"backoff": 20.0, "retries": 10},
                          until="; retry 1 of 3")
    print(f"exit {took:.2f} s after SIGINT")
    assert took < BOUND, (took, out)
    assert "; retry 1 of 3" in out, out  # it was retrying when interrupted


def test_ctrl_c_during_a_listing_that_retries(tmp_path):
    """No manifest: the open reads each shard's .idx for its count, in this process, and
    retries against the closed port (backoffs of up to 20 s each)."""
    urls = f"http://127.0.0.1:{closed_port()}/x-{{0..3}}.tar"
    took, out = interrupt(tmp_path, urls, 0, {"backoff": 20.0, "retries": 10},
                          until="; retry 1 of 3")
    print(f"exit {took:.2f} s after SIGINT")
    assert took < BOUND, (took, out)
    assert "; retry 1 of 3" in out, out


KILLED = textwrap.dedent("""
    import subprocess, sys, threading
    sys.path.insert(0, sys.argv[1])
    import libshard
    url, own = sys.argv[2], sys.argv[3] == "own"
    if own:  # the negative control: a command started without libshard's lifeline
        subprocess.Popen(["sh", "-c", url[len("pipe:"):]], stdout=subprocess.DEVNULL,
                         start_new_session=True)
    else:
        r = libshard.Reader([url], seed=0, shuffle=0)  # its first sample waits on the command
        threading.Thread(target=lambda: next(iter(r)), daemon=True).start()
    print("ready", flush=True)
    sys.stdin.read()
""")


@pytest.mark.parametrize("who", ["libshard", "own"])
def test_a_pipe_command_ends_with_the_process_that_reads_it(packed, who):
    """A process killed outright (SIGKILL: no handler, no finaliser runs), as a DataLoader
    worker ended by its main process or by the OOM killer is: its pipe: command ends too.
    The control starts the same command without libshard and sees it outlive the process."""
    m = mark()
    p = subprocess.Popen([sys.executable, "-c", KILLED, str(_PYPATH),
                          f"pipe:sleep {m}; cat {packed.shards[0]}", who],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "ready"
        deadline = time.monotonic() + 10 * SLOW
        while not leftovers(m):  # the fetch thread starts the command
            assert time.monotonic() < deadline, "the command never started"
            time.sleep(0.05)
        p.kill()
        p.wait()
        deadline = time.monotonic() + 2 * SLOW
        while leftovers(m) and time.monotonic() < deadline:
            time.sleep(0.05)
        left = leftovers(m)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    for entry in left:
        os.kill(int(entry.split()[0]), signal.SIGKILL)
    if who == "own":
        assert left, "the control's command ended with the process: the test shows nothing"
    else:
        assert left == [], f"the pipe's command outlived its reader's process: {left}"
