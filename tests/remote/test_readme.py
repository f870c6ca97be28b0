"""The README and docs/ run: every code block of README.md and of each page of docs/ is
extracted from it (so the two cannot drift) and run as a user would, page after page in
the order of PAGES, in document order, in one folder: shell blocks with bash, Python
blocks with Debian's python3, the torchrun block under torch.distributed.run by the venv's
interpreter, as the README writes it. Example hosts and buckets (data.example.com,
my-bucket, 10.0.0.1) become nginx, the GCS emulator, s3rver and a Dask scheduler on
127.0.0.1; nothing else is contacted. Blocks are indented or fenced (```).

Each block carries a marker on the line before it, `<!-- readme: KIND ... -->`: sh, python
(`continues`: after the block before it; `distributed`: in a process group of one), torchrun,
background=N (its first N lines are services), or a kind that is not run, with its reason:
ci (the set-up commands, run by CI itself), synopsis, text, c, skip (what CI has not). A
block without a marker fails the test, so a new example cannot go unrun by accident.
"""
import os
import re
import shutil
import socket
import subprocess
import textwrap
import time
from pathlib import Path

import pytest

from conftest import BUCKET, CLEAN_ENV, REPO, gcs_env, s3_env

PYTHON = "/usr/bin/python3"
RUN_KINDS = ("sh", "python", "torchrun")
NOT_RUN = ("ci", "synopsis", "text", "c", "skip")
TIMEOUT = 300


def blocks(text):
    """[(line, kind, options, code)] for every code block of text (indented, or fenced with
    ```), kind and options from the marker before it (None when it has none)."""
    lines = text.split("\n")
    out, i = [], 0
    while i < len(lines):
        fenced = lines[i].startswith("```")
        if fenced or (lines[i].startswith("    ") and (i == 0 or not lines[i - 1].strip())):
            if fenced:
                j = i + 1
                while j < len(lines) and not lines[j].startswith("```"):
                    j += 1
                code = "\n".join(lines[i + 1:j]).strip("\n")
                j += 1
            else:
                j = i
                while j < len(lines) and (lines[j].startswith("    ") or not lines[j].strip()):
                    j += 1
                code = textwrap.dedent("\n".join(l[4:] for l in lines[i:j])).strip("\n")
            k = i - 1
            while k >= 0 and not lines[k].strip():
                k -= 1
            m = re.match(r"<!-- readme: (\w+)([^-]*?)(?: \((.*)\))? -->$", lines[k]) if k >= 0 else None
            kind, opts = (m.group(1), m.group(2).split()) if m else (None, [])
            out.append((i + 1, kind, opts, code))
            i = j
        else:
            i += 1
    return out


# The pages in the order their blocks run (a page's blocks may use what an earlier one made).
PAGES = ["README.md", "docs/getting-started.md", "docs/packing.md", "docs/inspecting.md",
         "docs/training.md", "docs/resume.md", "docs/mixing.md", "docs/remote.md",
         "docs/webdataset.md", "docs/coming-from.md", "docs/performance.md",
         "docs/reliability.md", "docs/c-api.md", "docs/layout.md"]
TEXTS = {page: (REPO / page).read_text() for page in PAGES}
BLOCKS = [(f"{page}:{line}", kind, opts, code) for page in PAGES
          for line, kind, opts, code in blocks(TEXTS[page])]


def test_every_page_runs_here_and_the_readme_links_every_page():
    pages = sorted(f"docs/{p.name}" for p in (REPO / "docs").glob("*.md"))
    assert sorted(p for p in PAGES if p.startswith("docs/")) == pages, "a page PAGES misses"
    unlinked = [p for p in pages if f"]({p})" not in TEXTS["README.md"]]
    assert not unlinked, f"pages the README's map does not link: {unlinked}"


def test_every_block_is_marked_run_or_not_with_a_reason():
    unmarked = [(line, code.split("\n")[0]) for line, kind, _, code in BLOCKS if kind is None]
    assert not unmarked, f"blocks without a <!-- readme: KIND --> marker: {unmarked}"
    unknown = [(line, kind) for line, kind, _, _ in BLOCKS if kind not in RUN_KINDS + NOT_RUN]
    assert not unknown, unknown
    reasons = sum(len(re.findall(r"<!-- readme: (?:ci|c|skip) \(.+\) -->", t)) for t in TEXTS.values())
    assert reasons == sum(k in ("ci", "c", "skip") for _, k, _, _ in BLOCKS)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def images(folder, n, classes=("a", "b", "c")):
    from PIL import Image
    for i in range(n):
        d = folder / classes[i % len(classes)]
        d.mkdir(parents=True, exist_ok=True)
        Image.new("RGB", (40 + i % 17, 36 + i % 11), (i * 7 % 256, i * 13 % 256, 90)).save(
            d / f"img{i:04d}.jpg", quality=85)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory, shardpack, shardcat, nginx, gcs, s3, root):
    """A user's folder: ~/imagenet/train (HOME is the folder), the small shard sets the
    mixing example names, and the example hosts' and buckets' data on the servers."""
    ws = tmp_path_factory.mktemp("readme")
    images(ws / "imagenet" / "train", 96)
    pack = lambda src, pattern, *a: subprocess.run(  # noqa: E731
        [str(shardpack), str(src), "-o", str(pattern), "-q", *a], check=True, timeout=TIMEOUT)
    pack(ws / "imagenet" / "train", ws / "data" / "a" / "train-%06d.tar", "-c", "20")
    small = ws / "small"
    images(small, 30)
    pack(small, ws / "x-%d.tar", "-c", "3")
    pack(small, ws / "y-%d.tar", "-c", "10", "--manifest", str(ws / "y.json"))
    pack(small, ws / "z-%d.tar", "-c", "10", "--manifest", str(ws / "z.json"))
    assert sorted(p.name for p in ws.glob("x-*.tar")) == [f"x-{i}.tar" for i in range(10)]
    # https://data.example.com/imagenet/ is nginx's /readme/ (the suite's server root)
    web = root / "readme"
    pack(small, web / "train-%06d.tar", "-c", "10")
    # gs://my-bucket/imagenet/, s3://my-bucket/imagenet/, gs://bucket/train/, gs://b/
    objects = ws / "objects"
    pack(small, objects / "imagenet" / "train-%06d.tar", "-c", "10",
         "--manifest", str(objects / "imagenet" / "train.json"))
    pack(small, objects / "train" / "train-%06d.tar", "-c", "10",
         "--manifest", str(objects / "train" / "train.json"))
    pack(small, objects / "c-%03d.tar", "-c", "10")
    for p in sorted(objects.rglob("*")):
        if p.is_file():
            name = f"readme/{p.relative_to(objects)}"
            gcs.upload(BUCKET, name, p.read_bytes())
            s3.upload(BUCKET, name, p.read_bytes())
    # the venv the README installs into: Debian's interpreter, which sees Debian's torch,
    # with the built package on its path (tests/pip_install_test.sh runs the pip install)
    subprocess.run([PYTHON, "-m", "venv", "--system-site-packages", str(ws / "venv")], check=True,
                   timeout=TIMEOUT)
    site = next((ws / "venv" / "lib").glob("python3*/site-packages"))
    (site / "libshard-build.pth").write_text(
        os.environ.get("LIBSHARD_PYTHONPATH", str(REPO / "build" / "python")) + "\n")
    # urls.tsv: a list file (docs/packing.md packs it into a bucket)
    (ws / "urls.tsv").write_text("path\tlabel\n" + "".join(
        f"{p.relative_to(ws)}\t{i % 3}\n" for i, p in enumerate(sorted((ws / "small").rglob("*.jpg")))))
    tools = ws / "bin"
    tools.mkdir()
    for t in (shardpack, shardcat):
        (tools / Path(t).name).symlink_to(t)
    return ws


def example_hosts(nginx, dask_port):
    """What the README's example hosts and buckets become."""
    return [
        ("'https://data.example.com/imagenet/train-{000000..000146}.tar'",
         f"'{nginx.url}/readme/train-{{000000..000002}}.tar'"),
        ("gs://my-bucket/", f"gs://{BUCKET}/readme/"),
        ("s3://my-bucket/", f"s3://{BUCKET}/readme/"),
        ("gs://bucket/", f"gs://{BUCKET}/readme/"),
        ("gs://b/c-{000..099}.tar", f"gs://{BUCKET}/readme/c-{{000..002}}.tar"),
        ("/local/ssd/shard-cache", "shard-cache"),
        ("/data/imagenet/train", "imagenet/train"),
        ("/data/shards/", "dask-shards/"),
        ("/shared/train", "imagenet/train"),
        ("/shared/shards/", "cluster-shards/"),
        ("--host 10.0.0.1 --port 8786", f"--host 127.0.0.1 --port {dask_port}"),
        ("10.0.0.1:8786", f"127.0.0.1:{dask_port}"),
        ("--nworkers 8", "--nworkers 2"),  # the machine has 2 cores
        ("--nproc_per_node 8", "--nproc_per_node 2"),
        ("12345", "12"),  # the example's sample index, in the small data set
        ("~/crawl", "~/imagenet/train"),
        ("shards/train-{000000..000009}.tar.zst", "shards/train-{000000..000000}.tar.zst"),
        ("n01440764/n01440764_10026", "a/img0000"),
        ("shards/train-{000000..000146}.tar", "shards/train-{000000..000000}.tar"),
        ("examples/", f"{REPO}/examples/"),
        ("source build/tools/doc/", f"source {REPO}/build/tools/doc/"),
    ]


# What a user's program has around the README's lines: its imports, and the names the
# examples leave to it (whether to resume, the epochs, the samples to write).
PRELUDE = """\
import torch
import libshard
from libshard.torch import ShardDataset
resuming, epochs = False, 2
samples = [(f"s{i:03d}", bytes([255, 216, 255, 217]), i % 3, {"i": i}) for i in range(25)]
"""
DISTRIBUTED = """\
import torch.distributed as dist
dist.init_process_group("gloo", init_method="tcp://127.0.0.1:{port}", rank=0, world_size=1)
"""


def test_the_readme_runs(workspace, nginx, gcs, s3, tmp_path, capsys):
    dask_port = free_port()
    swaps = example_hosts(nginx, dask_port)
    pythonpath = os.environ.get("LIBSHARD_PYTHONPATH", str(REPO / "build" / "python"))
    env = dict(CLEAN_ENV, HOME=str(workspace), PYTHONPATH=pythonpath, OMP_NUM_THREADS="1",
               PATH=f"{workspace / 'bin'}:{os.environ['PATH']}", **gcs_env(gcs), **s3_env(s3))
    ran, not_run, previous = [], [], ""

    def run(cmd, what, timeout=TIMEOUT):
        cp = subprocess.run(cmd, cwd=workspace, env=env, capture_output=True, timeout=timeout,
                            stdin=subprocess.DEVNULL)
        log = (cp.stdout + cp.stderr).decode(errors="replace")
        assert cp.returncode == 0, f"{what} failed (exit {cp.returncode}):\n{log[-4000:]}"
        return log

    for line, kind, opts, code in BLOCKS:
        if kind in NOT_RUN:
            not_run.append((line, kind))
            continue
        for a, b in swaps:
            code = code.replace(a, b)
        assert "example.com" not in code and "10.0.0.1" not in code and "my-bucket" not in code
        what = f"{line} ({kind})\n{code}"
        if kind == "sh":
            # torch's launcher on a free port: --standalone's 29400 may be another test's
            code = code.replace("--standalone", f"--nnodes 1 --rdzv_backend c10d --rdzv_endpoint "
                                                f"127.0.0.1:{free_port()}")
            background = int(next((o.split("=")[1] for o in opts if o.startswith("background=")), 0))
            lines = code.split("\n")
            services = [subprocess.Popen(["bash", "-c", l.split("#")[0]], cwd=workspace, env=env,
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                         start_new_session=True)
                        for l in lines[:background]]
            try:
                if services:  # the scheduler listens, and a worker has joined it
                    wait_for_dask(dask_port, env)
                run(["bash", "-e", "-c", "\n".join(lines[background:])], what)
            finally:
                for p in services:
                    os.killpg(p.pid, 15)
                    p.wait(timeout=30)
        elif kind == "python":
            source = PRELUDE
            if "distributed" in opts:
                source += DISTRIBUTED.format(port=free_port())
            if "continues" in opts:
                source += previous
            source += code + "\n"
            script = tmp_path / f"block_{re.sub(r'[^a-z0-9]', '_', line)}.py"
            script.write_text(source)
            run([PYTHON, str(script)], what)
            previous = code + "\n"
        elif kind == "torchrun":
            # the launch line, then train.py; a launch line alone runs the block before it
            command, program = code.split("\n", 1) if "\n" in code else (code, previous)
            (workspace / "train.py").write_text(PRELUDE + program.strip() + "\n")
            assert command.startswith("venv/bin/python -m torch.distributed.run ") and \
                command.endswith(" train.py"), command
            run(["bash", "-e", "-c", command.replace(
                "--standalone", f"--nnodes 1 --rdzv_backend c10d --rdzv_endpoint "
                                f"127.0.0.1:{free_port()}")],
                what)
            previous = program.strip() + "\n"
        ran.append((line, kind))
    with capsys.disabled():  # the count in the suite's own output
        print(f"\nREADME and docs/: {len(ran)} blocks run, {len(not_run)} not run: "
              + ", ".join(f"{l} ({k})" for l, k in not_run))
    assert len(ran) >= 12, ran
    # what the blocks made, as they say
    assert (workspace / "shards" / "train.json").exists()
    assert (workspace / "out" / "train.json").exists()
    assert (workspace / "dask-shards" / "train.json").exists()
    assert (workspace / "cluster-shards" / "train.json").exists()
    assert (workspace / "ckpt.pt").exists()


def wait_for_dask(port, env, timeout=60):
    """Until a worker has joined the scheduler on port."""
    probe = ("import sys; from distributed import Client\n"
             f"c = Client('tcp://127.0.0.1:{port}', timeout=5)\n"
             "c.wait_for_workers(1, timeout=30); c.close()")
    end = time.time() + timeout
    while True:
        cp = subprocess.run([PYTHON, "-c", probe], env=env, capture_output=True, timeout=60)
        if cp.returncode == 0:
            return
        if time.time() > end:
            pytest.fail(f"no Dask worker joined 127.0.0.1:{port}: {cp.stderr.decode()[-2000:]}")
        time.sleep(1)
