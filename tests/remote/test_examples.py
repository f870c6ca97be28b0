"""The examples users copy, run as their docstrings say, against the suite's servers on
127.0.0.1 (nginx, the GCS emulator, s3rver): examples/wds_port.py, remote_read.py,
pack_bucket.py and eval_once.py (under torch.distributed.run, 2 ranks).

Each example's docstring holds its command line; the test takes the launcher from it (so a
docstring that drifts from how the example runs fails here), sets PYTHONPATH to the build
($LIBSHARD_PYTHONPATH) and the servers' endpoints and credentials in the environment, and
gives the example the suite's data: root/data's d-000..007.tar (320 JPEGs, 4 classes of
80, 40 a shard) on every server.
"""
import ast
import json
import os
import re
import shlex
import socket
import subprocess

import pytest

import servers
from conftest import BUCKET, CLEAN_ENV, REPO, fetch, gcs_env, s3_env

PYTHON = "/usr/bin/python3"
EXAMPLES = REPO / "examples"
TIMEOUT = 150  # seconds for one example run: a hang fails the test, not the suite
SAMPLES, CLASSES, PER_SHARD = 320, 4, 40


def documented(name):
    """(environment names, launcher argv, arguments) of the command line in the docstring of
    examples/NAME: its first indented block, continuation lines joined."""
    doc = ast.get_docstring(ast.parse((EXAMPLES / name).read_text()))
    block = []
    for line in doc.split("\n"):
        if line.startswith("    "):
            block.append(line.strip())
        elif block:
            break
    assert block, f"{name}: no command line in its docstring"
    words = shlex.split(" ".join(block).replace("\\ ", " "), comments=True)
    at = next(i for i, w in enumerate(words) if w.endswith(f"examples/{name}"))
    env = [w.split("=", 1)[0] for w in words[:at] if re.match(r"[A-Z_][A-Z0-9_]*=", w)]
    launcher = [w for w in words[:at] if not re.match(r"[A-Z_][A-Z0-9_]*=", w)]
    return env, launcher, words[at + 1:]


def example_env(extra=None):
    path = os.environ.get("LIBSHARD_PYTHONPATH", str(REPO / "build" / "python"))
    return {**CLEAN_ENV, "PYTHONPATH": path, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1",
            **(extra or {})}


def run_example(name, args, tmp_path, env=None, launcher=None, expect_rc=0, json_line=True):
    """Runs examples/NAME with args as its docstring says; (returncode, output, the JSON of
    its last JSON line, with json_line)."""
    doc_env, doc_launcher, _ = documented(name)
    assert "PYTHONPATH" in doc_env, f"{name}: the docstring's command sets no PYTHONPATH"
    cmd = [*(launcher or doc_launcher), str(EXAMPLES / name), *map(str, args)]
    try:
        cp = subprocess.run(cmd, capture_output=True, timeout=TIMEOUT, cwd=tmp_path,
                            env=example_env(env), stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"{name} hung for {TIMEOUT} s: {cmd}\n"
                    f"{(e.stderr or b'').decode(errors='replace')[-3000:]}")
    out = cp.stdout.decode(errors="replace")
    log = out + cp.stderr.decode(errors="replace")
    if expect_rc is not None:
        assert cp.returncode == expect_rc, f"{cmd} exited {cp.returncode}:\n{log[-5000:]}"
    if not json_line:
        return cp.returncode, log, None
    # the JSON line (torchrun's --tee prefixes a rank's lines with "[0]:")
    found = [l[l.index("{"):] for l in out.split("\n") if "{" in l and l.rstrip().endswith("}")]
    assert found, f"{name} printed no JSON line:\n{log[-5000:]}"
    return cp.returncode, log, json.loads(found[-1])


def manifest(root, stem="d"):
    return json.loads((root / "data" / f"{stem}.json").read_text())


def test_each_example_documents_the_command_it_is_run_with():
    """Each example's docstring gives its command line: PYTHONPATH set, Debian's python3 (the
    one with torch), the example's path; the tests below run that launcher."""
    for name in ("wds_port.py", "remote_read.py", "pack_bucket.py", "eval_once.py"):
        assert (EXAMPLES / name).exists(), name
        env, launcher, _ = documented(name)
        assert "PYTHONPATH" in env and launcher[0] == PYTHON, (name, env, launcher)


# -- wds_port.py ---------------------------------------------------------------------------

def wds_batch_sizes(counts, workers, batch):
    """WebDataset's batches for shards of these sample counts read by DataLoader workers:
    split_by_worker gives worker w the shards w, w + workers, ...; each worker batches its
    own samples and ends on its own partial batch."""
    sizes = []
    for w in range(workers):
        n = sum(counts[w::workers])
        sizes += [batch] * (n // batch) + ([n % batch] if n % batch else [])
    return sorted(sizes)


def test_wds_port_reads_an_epoch_with_webdatasets_split_and_batches(root, nginx, tmp_path):
    _, _, doc_args = documented("wds_port.py")
    assert len(doc_args) == 1 and "{" in doc_args[0], "the docstring passes one brace pattern"
    shards = 5  # an odd count: the two workers read 3 and 2 shards
    url = f"{nginx.url}/data/d-{{000..{shards - 1:03d}}}.tar"
    _, log, out = run_example("wds_port.py", [url], tmp_path)
    counts = [s["nsamples"] for s in manifest(root)["shardlist"][:shards]]
    assert sum(counts) == shards * PER_SHARD
    # 120 and 80 samples: 7 + 1 and 5 batches; a sample-wise split (100 and 100) would give
    # 7 + 7, a split that gave both workers every shard 400 samples
    want = wds_batch_sizes(counts, workers=2, batch=16)
    assert want == sorted([16] * 12 + [8])
    for style in ("pipeline", "fluid"):
        assert out[style]["samples"] == sum(counts), (style, out[style])
        assert sorted(out[style]["sizes"]) == want, (style, out[style])
    assert log.rstrip().endswith(f"samples: {sum(counts)}"), log[-500:]
    assert "first batch images (16, 3, 64, 64) torch.float32" in log, log[-2000:]


# -- remote_read.py ------------------------------------------------------------------------

@pytest.fixture(scope="module")
def https(root, tmp_path_factory):
    cert, key = servers.self_signed(tmp_path_factory.mktemp("tls"))
    s = servers.Nginx(root, tls=(cert, key))
    s.cert = cert
    yield s
    s.close()


@pytest.mark.parametrize("scheme", ["s3", "gs", "https"])
def test_remote_read_gives_every_sample_each_epoch_and_the_cache_serves_the_next_run(
        request, root, tmp_path, scheme):
    if scheme == "https":
        server = request.getfixturevalue("https")
        url, env = f"{server.url}/data/d.json", {"CURL_CA_BUNDLE": str(server.cert)}
    else:
        server = request.getfixturevalue("gcs" if scheme == "gs" else "s3")
        url = f"{scheme}://{BUCKET}/data/d.json"
        env = gcs_env(server) if scheme == "gs" else s3_env(server)
    doc_env, _, doc_args = documented("remote_read.py")
    assert {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"} <= set(doc_env)
    assert "--cache-dir" in doc_args
    cache = tmp_path / "cache"
    args = [url, "--cache-dir", cache]
    _, log, out = run_example("remote_read.py", [*args, "--epochs", "2"], tmp_path, env=env)
    m = manifest(root)
    sizes = sorted(s["filesize"] for s in m["shardlist"])
    assert out["url"] == url and len(out["epochs"]) == 2
    for e in out["epochs"]:
        assert e["samples"] == m["libshard"]["nsamples"] == SAMPLES, e
        assert e["batches"] == -(-SAMPLES // 32), e
        assert e["classes"] == [SAMPLES // CLASSES] * CLASSES, e
    first = out["epochs"][0]["remote"]
    assert first["cache_misses"] == len(sizes) and first["bytes"] >= sum(sizes), first
    # each shard kept whole in the cache folder
    assert sorted(p.stat().st_size for p in cache.iterdir() if p.suffix == ".tar") == sizes
    assert "bottleneck" in log and "remote: bytes" in log, log[-2000:]
    # the next run reads the shards from the cache: only the manifest (and indexes) come
    # over the network (its first epoch: remote_stats' counters start with the process)
    _, log, again = run_example("remote_read.py", args, tmp_path, env=env)
    e = again["epochs"][0]
    assert e["samples"] == SAMPLES and e["classes"] == [SAMPLES // CLASSES] * CLASSES, e
    rs = e["remote"]
    assert rs["cache_misses"] == 0 and rs["cache_hits"] >= len(sizes), rs
    assert rs["bytes"] < sizes[0], f"a shard came over the network again: {rs}"


def test_remote_read_takes_its_credentials_from_the_environment(s3, tmp_path):
    """The same run with a wrong secret fails, naming the shard: the example sends the
    environment's credentials, and s3rver checks them."""
    rc, log, _ = run_example("remote_read.py", [f"s3://{BUCKET}/data/d.json", "--cache-dir", "",
                                                "--retries", "1"],
                             tmp_path, env=s3_env(s3, secret="WRONG"), expect_rc=None,
                             json_line=False)
    assert rc != 0 and "d.json" in log, log[-2000:]
    assert "WRONG" not in log, "a credential in the error"


# -- pack_bucket.py ------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["gs", "s3"])
def test_pack_bucket_packs_the_folder_twice_byte_identical_and_verified(
        request, root, shardpack, shardcat, tmp_path, kind):
    pytest.importorskip("distributed", reason="python3-distributed (Dask) is not installed")
    server = request.getfixturevalue("gcs" if kind == "gs" else "s3")
    env = gcs_env(server) if kind == "gs" else s3_env(server)
    src = root.parent / "imgs"
    images = sorted(src.rglob("*.jpg"))
    assert len(images) == SAMPLES
    dest = f"{kind}://{BUCKET}/examples-pack"
    _, log, out = run_example("pack_bucket.py", [src, dest, "--maxcount", "100",
                                                 "--shardpack", shardpack, "--shardcat", shardcat],
                              tmp_path, env=env)
    for how in ("shardpack", "dask"):
        assert out[how] == {"samples": SAMPLES, "shards": 4, "verified": True,
                            "manifest": f"{dest}/{how}/train.json"}, out
    names = [f"train-{i:06d}{ext}" for i in range(4) for ext in (".tar", ".idx")] + ["train.json"]
    for name in names:
        a = fetch(server, kind, f"examples-pack/shardpack/{name}")
        b = fetch(server, kind, f"examples-pack/dask/{name}")
        assert a is not None and a == b, f"{name}: the two sets differ"
    man = json.loads(fetch(server, kind, "examples-pack/dask/train.json"))
    assert man["libshard"]["nsamples"] == SAMPLES
    assert [s["nsamples"] for s in man["shardlist"]] == [100, 100, 100, 20]
    assert man["libshard"]["classes"] == [f"class{c}" for c in range(CLASSES)]

    # the check the example ends with can fail: a shard cut short in the bucket is caught
    shard = fetch(server, kind, "examples-pack/dask/train-000001.tar")
    server.upload(BUCKET, "examples-pack/dask/train-000001.tar", shard[:len(shard) * 3 // 5])
    ok, text = example_verify(shardcat, f"{dest}/dask/train.json", env)
    assert not ok and "train-000001.tar" in text and "Truncated" in text, text[-3000:]


def example_verify(shardcat, manifest, env):
    """pack_bucket.verify(shardcat, manifest), the example's own check: (ok, its output)."""
    code = (f"import sys; sys.path.insert(0, {str(EXAMPLES)!r}); import pack_bucket\n"
            f"sys.exit(0 if pack_bucket.verify({str(shardcat)!r}, {manifest!r}) else 3)")
    cp = subprocess.run([PYTHON, "-c", code], capture_output=True, timeout=TIMEOUT,
                        env=example_env(env), stdin=subprocess.DEVNULL)
    assert cp.returncode in (0, 3), (cp.stdout + cp.stderr).decode(errors="replace")[-3000:]
    return cp.returncode == 0, (cp.stdout + cp.stderr).decode(errors="replace")


def test_pack_bucket_verify_catches_a_flipped_byte_in_a_bucket(root, s3, shardcat):
    """A byte flipped in a JPEG's data in a bucket: the tar stays well formed, only the
    manifest's SHA-256 can tell, and verify says so for a shard in a bucket as for a local
    one."""
    import io
    import tarfile
    src = root / "data"
    for p in sorted(src.glob("d*")):
        s3.upload(BUCKET, f"examples-flip/{p.name}", p.read_bytes())
    shard = bytearray((src / "d-001.tar").read_bytes())
    jpg = next(m for m in tarfile.open(fileobj=io.BytesIO(bytes(shard))) if m.name.endswith(".jpg"))
    shard[jpg.offset_data + jpg.size // 2] ^= 0xFF
    s3.upload(BUCKET, "examples-flip/d-001.tar", bytes(shard))
    ok, text = example_verify(shardcat, f"s3://{BUCKET}/examples-flip/d.json", s3_env(s3))
    assert not ok and "SHA-256" in text, text[-3000:]


# -- eval_once.py --------------------------------------------------------------------------

def port_free(port):
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun_launcher(documented_launcher):
    """The docstring's launcher made to work on this machine: --standalone's fixed port 29400
    swapped for a free one when it is taken, and on torch 1.13 with Python 3.11 the
    --redirects/--tee mapping form (the launcher cannot parse its own default, "0")."""
    cp = subprocess.run([PYTHON, "-c", "import torch.distributed as d, torch.distributed.run; "
                         "print(d.is_available())"], capture_output=True, text=True)
    if cp.returncode != 0 or cp.stdout.strip() != "True":
        pytest.skip(f"torch.distributed is not available to {PYTHON}: {cp.stderr[-300:]}")
    launcher = list(documented_launcher)
    assert launcher[:3] == [PYTHON, "-m", "torch.distributed.run"], launcher
    assert "--standalone" in launcher and launcher[launcher.index("--nproc_per_node") + 1] == "2"
    if not port_free(29400):
        i = launcher.index("--standalone")
        launcher[i:i + 1] = ["--nnodes", "1", "--rdzv_backend", "c10d",
                             "--rdzv_endpoint", f"127.0.0.1:{free_port()}"]
    probe = subprocess.run([PYTHON, "-c", "from torch.distributed.elastic.multiprocessing.api "
                            "import Std; print(Std.from_str('0') is None)"],
                           capture_output=True, text=True)
    if probe.stdout.strip() == "True":
        launcher += ["--redirects", "0:1", "--tee", "0:1"]
    return launcher


@pytest.fixture(scope="module")
def eval_run(s3):
    """Runs eval_once.py on 2 ranks over the s3:// manifest with extra arguments."""
    _, doc_launcher, _ = documented("eval_once.py")
    launcher = torchrun_launcher(doc_launcher)

    def run(tmp_path, *args, expect_rc):
        return run_example("eval_once.py", [f"s3://{BUCKET}/data/d.json", *args], tmp_path,
                           env=s3_env(s3), launcher=launcher, expect_rc=expect_rc)
    return run


def test_eval_once_sees_every_sample_exactly_once_on_two_ranks(eval_run, tmp_path):
    _, log, out = eval_run(tmp_path, expect_rc=0)
    assert out["world_size"] == 2 and out["mode"] == "exact", out
    assert out["expected"] == SAMPLES and out["total"] == SAMPLES, out
    assert sum(out["per_rank"]) == SAMPLES and min(out["per_rank"]) > 0, out
    assert out["repeated"] == out["missing"] == out["padded"] == 0 and out["errors"] == [], out
    assert "OK: every sample exactly once" in log


@pytest.mark.parametrize("pad", [True, False], ids=["equal-pad", "equal-drop"])
def test_eval_once_catches_a_split_that_repeats_or_drops(eval_run, tmp_path, pad):
    """The negative control: equal mode over 6 partitions (320 = 6 x 53 + 2) pads the set to
    324 with 4 repeats, or drops 2; the example's check fails, and says how."""
    rc, log, out = eval_run(tmp_path, "--mode", "equal", "--partitions", "6",
                            *(["--pad"] if pad else []), expect_rc=1)
    assert out["expected"] == SAMPLES and out["errors"], out
    assert out["per_rank"][0] == out["per_rank"][1], "equal mode: the same count per rank"
    if pad:
        assert out["total"] == 324 and out["repeated"] == 4 and out["padded"] == 4, out
    else:
        assert out["total"] == 318 and out["missing"] == 2 and out["repeated"] == 0, out
    assert "FAILED" in log
