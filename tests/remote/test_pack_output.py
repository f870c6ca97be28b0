"""shardpack -o gs://... and s3://...: shards, indexes and manifest uploaded into the GCS
emulator and s3rver, byte-identical to a local pack of the same input; shards over
--upload-part go up in parts (S3 multipart upload on s3rver; GCS resumable upload on the
tests' own upload server, since the emulator completes a resumable upload at its first
chunk, with a cut chunk and a 503 on the way); the manifest is written last and an earlier
one removed first; the result reads back with shardcat."""
import json
import subprocess
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

import servers
from conftest import BUCKET, CLEAN_ENV, TIMEOUT, fetch, gcs_env, s3_env, set_files


@pytest.fixture(params=["gs", "s3"])
def store(request):
    kind = request.param
    server = request.getfixturevalue("gcs" if kind == "gs" else "s3")
    return kind, server, gcs_env(server) if kind == "gs" else s3_env(server)


def run_sp(shardpack, *args, env=None):
    return subprocess.run([str(shardpack), *map(str, args)], capture_output=True, timeout=TIMEOUT,
                          env={**CLEAN_ENV, "SOURCE_DATE_EPOCH": "", **(env or {})})


@pytest.mark.parametrize("ext,part", [(".tar", None), (".tar.zst", None), (".tar", "128K")],
                         ids=["tar", "zst", "tar-in-parts"])
def test_pack_into_a_bucket_is_byte_identical_to_a_local_pack(shardpack, shardcat, root, store, tmp_path,
                                                               ext, part):
    kind, server, env = store
    if kind == "gs" and part:
        pytest.skip("the emulator has no chunked resumable uploads: test_gcs_resumable_upload")
    src = root.parent / "imgs"
    local = tmp_path / "local"
    local.mkdir()
    opts = ["-c", "100", "--shuffle", "1"]
    cp = run_sp(shardpack, src, "-o", local / f"p-%03d{ext}", *opts)
    assert cp.returncode == 0, cp.stderr.decode()
    prefix = f"out-{ext[1:].replace('.', '')}-{part or 'whole'}"
    url = f"{kind}://{BUCKET}/{prefix}/p-%03d{ext}"
    extra = ["--upload-part", part] if part else []
    cp = run_sp(shardpack, src, "-o", url, *opts, *extra, env=env)
    assert cp.returncode == 0, cp.stderr.decode()
    names = sorted(p.name for p in set_files(local))
    assert len(names) == 13  # 4 shards, 4 indexes, 4 columns, the manifest
    for name in names:
        got = fetch(server, kind, f"{prefix}/{name}")
        assert got == (local / name).read_bytes(), f"{name} differs from the local pack"
    if part:
        assert (local / f"p-000{ext}").stat().st_size > 3 * 128 * 1024, "the shard must need several parts"
    man = json.loads(fetch(server, kind, f"{prefix}/p.json"))
    assert [e["url"] for e in man["shardlist"]] == [f"p-{i:03d}{ext}" for i in range(4)]
    v = subprocess.run([str(shardcat), "verify", f"{kind}://{BUCKET}/{prefix}/p.json"], capture_output=True,
                       timeout=TIMEOUT, env={**CLEAN_ENV, **env})
    assert v.returncode == 0, v.stdout.decode() + v.stderr.decode()


def test_an_earlier_manifest_goes_first_and_a_failed_run_writes_none(shardpack, root, store, tmp_path):
    kind, server, env = store
    src = root.parent / "imgs"
    url = f"{kind}://{BUCKET}/again/q-%03d.tar"
    assert run_sp(shardpack, src, "-o", url, "-c", "100", env=env).returncode == 0
    assert fetch(server, kind, "again/q.json") is not None
    # a run that fails on a bad input leaves no manifest, not even the earlier one
    bad = tmp_path / "src"
    subprocess.run(["cp", "-r", str(src), str(bad)], check=True)
    (bad / "class1" / "zz.jpg").write_bytes(b"not a JPEG")
    cp = run_sp(shardpack, bad, "-o", url, "-c", "100", env=env)
    assert cp.returncode == 1 and "zz.jpg" in cp.stderr.decode()
    assert fetch(server, kind, "again/q.json") is None


def test_plain_http_output_is_refused(shardpack, root, nginx, tmp_path):
    cp = run_sp(shardpack, root.parent / "imgs", "-o", f"{nginx.url}/x-%03d.tar")
    assert cp.returncode == 2
    assert "not plain HTTP" in cp.stderr.decode()


def test_gcs_resumable_upload_resumes_a_cut_chunk(shardpack, root, tmp_path):
    up = servers.GcsUploadServer()
    try:
        src = root.parent / "imgs"
        local = tmp_path / "local"
        local.mkdir()
        assert run_sp(shardpack, src, "-o", local / "r-%03d.tar", "-c", "160").returncode == 0
        up.faults = ["cut=100000", "503"]  # the first chunk cut after 100000 bytes, the next try refused
        env = {"STORAGE_EMULATOR_HOST": up.url}
        cp = run_sp(shardpack, src, "-o", f"gs://{BUCKET}/res/r-%03d.tar", "-c", "160", "--upload-part", "256K",
                    "-j", "1", env=env)
        assert cp.returncode == 0, cp.stderr.decode()
        for p in set_files(local):
            assert up.objects.get(f"res/{p.name}") == p.read_bytes(), p.name
        puts = [rng for verb, rng, _ in up.log if verb == "PUT"]
        assert any(r.startswith("bytes */") for r in puts), "the session was asked what it holds"
        set_posts = [e for e in up.log if e[0] == "POST" and "/.r.pack/" not in e[2]]
        assert set_posts[-1] == ("POST", "media", "res/r.json"), "the manifest goes last"
        # then the record says the set is complete (a --resume of it does nothing)
        assert any("/.r.pack/done-" in e[2] for e in up.log if e[0] == "POST")
        assert up.log[0] == ("DELETE", "", "res/r.json"), "an earlier manifest goes first"
    finally:
        up.close()


def test_dask_pack_into_s3_is_byte_identical(root, s3, tmp_path, shardpack):
    """libshard.distributed.pack with an s3:// pattern: the workers upload the shards."""
    distributed = pytest.importorskip("distributed", reason="python3-distributed (Dask) is not installed")
    import dask  # with distributed
    import os
    import sys
    sys.path.insert(0, os.environ.get("LIBSHARD_PYTHONPATH", str(Path(__file__).resolve().parents[2] / "build" / "python")))
    from libshard.distributed import pack
    src = root.parent / "imgs"
    local = tmp_path / "local"
    local.mkdir()
    assert run_sp(shardpack, src, "-o", local / "k-%03d.tar", "-c", "64").returncode == 0
    env = s3_env(s3)
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)  # the worker processes inherit the credentials
    try:
        # no profiler thread left in this process (tests/python/test_distributed.py says why)
        with dask.config.set({"distributed.worker.profile.enabled": False}), \
                distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                         dashboard_address=None, silence_logs=40) as cluster, \
                distributed.Client(cluster) as client:
            res = pack(src, f"s3://{BUCKET}/dask/k-%03d.tar", client=client, maxcount=64)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    assert res.manifest == f"s3://{BUCKET}/dask/k.json" and res.shards == 5
    for p in set_files(local):
        assert fetch(s3, "s3", f"dask/{p.name}") == p.read_bytes(), p.name


def test_a_killed_pack_leaves_only_whole_objects_and_no_manifest(shardpack, root, tmp_path):
    """kill -9 while a shard is going up in parts: what the store holds is whole shards (each
    as a local pack writes it) and no manifest; a second run completes the set."""
    import signal
    import time
    up = servers.GcsUploadServer()
    try:
        src = root.parent / "imgs"
        local = tmp_path / "local"
        local.mkdir()
        assert run_sp(shardpack, src, "-o", local / "c-%03d.tar", "-c", "80").returncode == 0
        up.slow_chunk = 3  # the third chunk PUT hangs: the run is killed while it waits
        env = {**CLEAN_ENV, "SOURCE_DATE_EPOCH": "", "STORAGE_EMULATOR_HOST": up.url, "TMPDIR": str(tmp_path)}
        proc = subprocess.Popen([str(shardpack), str(src), "-o", f"gs://{BUCKET}/kill/c-%03d.tar", "-c", "80",
                                 "--upload-part", "256K"], env=env, stderr=subprocess.PIPE)
        deadline = time.time() + 60
        while not up.hanging.is_set() and time.time() < deadline and proc.poll() is None:
            time.sleep(0.05)
        assert up.hanging.is_set(), proc.stderr.read().decode() if proc.poll() is not None else "no hang"
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        up.release.set()
        names = {k.split("/", 1)[1] for k in up.objects
                 if k.startswith("kill/") and not k.startswith("kill/.c.pack/")}
        marked = [k for k in up.objects if k.startswith("kill/.c.pack/shard-")]
        assert "c.json" not in names, "no manifest after a killed run"
        assert names, "the shards before the hang are there"
        for n in names:
            assert up.objects[f"kill/{n}"] == (local / n).read_bytes(), f"{n} is not whole"
        assert f"c-{len([n for n in names if n.endswith('.tar')]):03d}.tar" not in names
        # the record marks each shard that went up whole; --resume keeps those
        assert len(marked) == len([n for n in names if n.endswith(".tar")]) > 0, (marked, names)
        up.slow_chunk = None
        cp = subprocess.run([str(shardpack), str(src), "-o", f"gs://{BUCKET}/kill/c-%03d.tar", "-c", "80",
                             "--upload-part", "256K", "--resume", "--json", "-q"], env=env,
                            capture_output=True, timeout=TIMEOUT)
        assert cp.returncode == 0, cp.stderr.decode()
        assert json.loads(cp.stdout)["kept_shards"] == len(marked)
        for p in set_files(local):
            assert up.objects.get(f"kill/{p.name}") == p.read_bytes(), p.name
    finally:
        up.release.set()
        up.close()


def record_markers(server, kind, prefix):
    """The markers of the pack's record under prefix/.p.pack/ in the store: the shards a run
    finished."""
    import re
    if kind == "gs":
        url = f"{server.url}/storage/v1/b/{BUCKET}/o?prefix={urllib.parse.quote(prefix + '/.p.pack/')}"
        with urllib.request.urlopen(url, timeout=30) as r:
            names = [o["name"] for o in json.loads(r.read()).get("items", [])]
    else:
        url = f"{server.url}/{BUCKET}?prefix={urllib.parse.quote(prefix + '/.p.pack/')}"
        with urllib.request.urlopen(url, timeout=30) as r:
            names = re.findall(r"<Key>([^<]*)</Key>", r.read().decode())
    return sorted(n for n in names if n.rsplit("/", 1)[-1].startswith("shard-"))


def test_a_pack_killed_while_uploading_resumes_byte_identical(shardpack, root, store, tmp_path):
    """SIGKILL at random points of a pack into the GCS emulator and s3rver (6 each: an object
    going up, between objects): the run again with --resume keeps the shards its record
    marks (counted: the rest are packed), and the bucket holds the uninterrupted local
    pack's objects byte for byte, with no record left."""
    import random
    import signal
    import time
    kind, server, env = store
    src = root.parent / "imgs"
    local = tmp_path / "local"
    local.mkdir()
    opts = ["-c", "20", "--shuffle", "2"]
    t0 = time.monotonic()
    cp = run_sp(shardpack, src, "-o", local / "p-%03d.tar.zst", *opts, "-q")
    assert cp.returncode == 0, cp.stderr.decode()
    names = sorted(p.name for p in set_files(local))
    total = sum(n.endswith(".tar.zst") for n in names)
    rng = random.Random(kind)
    for attempt in range(6):
        prefix = f"resume-{attempt}"
        url = f"{kind}://{BUCKET}/{prefix}/p-%03d.tar.zst"
        t0 = time.monotonic()
        proc = subprocess.Popen([str(shardpack), str(src), "-o", url, *opts, "-q", "--resume"],
                                env={**CLEAN_ENV, "SOURCE_DATE_EPOCH": "", **env},
                                stderr=subprocess.DEVNULL)
        if attempt == 0:  # the first run alone: how long a whole pack into this store takes
            proc.wait(timeout=TIMEOUT)
            took = time.monotonic() - t0
            whole = True
        else:
            time.sleep(rng.uniform(0.1, 0.9) * took)
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
            whole = fetch(server, kind, f"{prefix}/p.json") is not None
        marked = record_markers(server, kind, prefix)
        cp = run_sp(shardpack, src, "-o", url, *opts, "-q", "--resume", "--json", env=env)
        assert cp.returncode == 0, cp.stderr.decode()
        got = json.loads(cp.stdout)
        # killed after its manifest: the set complete (every shard kept, nothing written), its
        # markers not gone yet (all kept), or gone before the completion marker (none kept)
        assert got["kept_shards"] in ((0, len(marked), total) if whole else (len(marked),)), \
            (attempt, got, marked)
        assert got["packed_shards"] == total - got["kept_shards"]
        for name in names:
            assert fetch(server, kind, f"{prefix}/{name}") == (local / name).read_bytes(), \
                f"attempt {attempt}: {name} differs from the local pack"
        assert record_markers(server, kind, prefix) == [], "the record outlived the run"


def test_a_nested_object_never_stands_for_a_missing_shard(shardpack, root):
    """A pack into a bucket killed after a few shards, one of them then moved under a
    sub-prefix (p/sub/t-000001.tar): --resume packs p/t-000001.tar again (the listing names
    objects by their path under the prefix, not their base name) and the set reads whole."""
    import signal
    import time
    src = root.parent / "imgs"
    up = servers.GcsUploadServer()
    try:
        env = {**CLEAN_ENV, "STORAGE_EMULATOR_HOST": up.url}
        argv = [str(shardpack), str(src), "-o", "gs://b/p/t-%03d.tar", "-c", "20", "-j", "1", "-q"]
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + TIMEOUT
        while time.time() < deadline and proc.poll() is None and \
                len([k for k in list(up.objects) if k.startswith("p/.t.pack/shard-")]) < 4:
            time.sleep(0.005)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert "p/t-001.tar" in up.objects, sorted(up.objects)
        up.objects["p/sub/t-001.tar"] = up.objects.pop("p/t-001.tar")
        cp = subprocess.run([*argv, "--resume", "--json"], env=env, capture_output=True,
                            timeout=TIMEOUT)
        assert cp.returncode == 0, cp.stderr.decode()
        assert "p/t-001.tar" in up.objects, "the missing shard was not packed again"
        manifest = json.loads(up.objects["p/t.json"])
        assert sum(e["nsamples"] for e in manifest["shardlist"]) == 320
    finally:
        up.close()
