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

import pytest

import servers
from conftest import BUCKET, CLEAN_ENV, TIMEOUT, gcs_env, s3_env


def fetch(server, kind, key):
    """An object's bytes straight from the test server (None when it does not exist)."""
    if kind == "gs":
        url = f"{server.url}/storage/v1/b/{BUCKET}/o/{urllib.parse.quote(key, safe='')}?alt=media"
    else:
        url = f"{server.url}/{BUCKET}/{key}"  # s3rver serves anonymous GETs
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            return r.read()
    except urllib.error.HTTPError as e:
        if e.code == 404:
            return None
        raise


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
    names = sorted(p.name for p in local.iterdir())
    assert len(names) == 9  # 4 shards, 4 indexes, the manifest
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
        for p in local.iterdir():
            assert up.objects.get(f"res/{p.name}") == p.read_bytes(), p.name
        puts = [rng for verb, rng, _ in up.log if verb == "PUT"]
        assert any(r.startswith("bytes */") for r in puts), "the session was asked what it holds"
        assert [e for e in up.log if e[0] == "POST"][-1] == ("POST", "media", "res/r.json"), \
            "the manifest goes last"
        assert up.log[0] == ("DELETE", "", "res/r.json"), "an earlier manifest goes first"
    finally:
        up.close()
