"""Writes through the sinks (libshard/src/sink): ShardWriter, TarWriter and shardpack --join
into a folder, the GCS emulator, s3rver and the tests' GCS upload server (chunked resumable
sessions, with faults): objects byte-identical to a local write, whole or absent; an abort
leaves nothing (a GCS session cancelled); a cut chunk resumes; a 503 storm is ridden out
within the retries and fails cleanly past them; the caller's remote settings reach the
manifest; a killed writer's temporaries are swept by the next run, a live one's are not."""
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import servers
from conftest import BUCKET, CLEAN_ENV, TIMEOUT, gcs_env, s3_env
from test_pack_output import fetch

PYPATH = os.environ.get("LIBSHARD_PYTHONPATH", str(Path(__file__).resolve().parents[2] / "build" / "python"))

# 240 samples of 2..40 KiB (incompressible): shards of 100 samples are ~2 MiB, several parts
WRITE = """
import random, sys
sys.path.insert(0, {pypath!r})
import libshard
rng = random.Random(5)
def samples(n=240):
    for i in range(n):
        yield {{"__key__": f"s{{i:04d}}", "bin": rng.randbytes(rng.randrange(2 << 10, 40 << 10)), "cls": i % 7}}
"""


def py(code, env=None, check=True, **fmt):
    """Runs code in Debian's python3 with the extension on its path and env only."""
    text = WRITE.format(pypath=PYPATH) + textwrap.dedent(code).format(**fmt)
    cp = subprocess.run(["/usr/bin/python3", "-c", text], capture_output=True, timeout=TIMEOUT,
                        env={**CLEAN_ENV, **(env or {})})
    if check:
        assert cp.returncode == 0, cp.stderr.decode()
    return cp


def write_shards(pattern, env=None, check=True, **opts):
    return py("""
        with libshard.ShardWriter({pattern!r}, maxcount=100, manifest={manifest!r}, {opts}) as w:
            for s in samples():
                w.write(s)
        """, env, check, pattern=pattern, manifest=pattern.split("-%")[0] + ".json",
              opts=", ".join(f"{k}={v!r}" for k, v in opts.items()))


def start_writer(pattern, n, env=None, **opts):
    """A ShardWriter in a process of its own, stopped after n samples (its shard open) until
    killed; returns the process once it says so."""
    args = "".join(f", {k}={v!r}" for k, v in opts.items())
    proc = subprocess.Popen(["/usr/bin/python3", "-c", WRITE.format(pypath=PYPATH) + textwrap.dedent(f"""
        import time
        w = libshard.ShardWriter({pattern!r}{args})
        for s in samples({n}):
            w.write(s)
        print("writing", flush=True)
        time.sleep(60)
        """)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**CLEAN_ENV, **(env or {})})
    assert proc.stdout.readline() == b"writing\n", proc.stderr.read().decode()
    return proc


@pytest.fixture(scope="module")
def local(tmp_path_factory):
    """The reference: the same samples written into a folder."""
    d = tmp_path_factory.mktemp("local")
    for ext in (".tar", ".tar.zst"):
        write_shards(str(d / f"{STEM[ext]}-%03d{ext}"))
    return d


STEM = {".tar": "w", ".tar.zst": "z"}


def names(local, ext):
    return sorted(p.name for p in local.iterdir() if p.name.startswith(STEM[ext] + "-") or p.name == STEM[ext] + ".json")


@pytest.fixture
def upload():
    up = servers.GcsUploadServer()
    yield up
    up.release.set()
    up.close()


@pytest.mark.parametrize("kind,ext,part", [("s3", ".tar", None), ("s3", ".tar.zst", None),
                                           ("s3", ".tar", 512 << 10), ("gs", ".tar", None),
                                           ("gs", ".tar.zst", None)],
                         ids=["s3-tar", "s3-zst", "s3-parts", "gs-tar", "gs-zst"])
def test_shardwriter_into_a_bucket_is_byte_identical(local, gcs, s3, kind, ext, part):
    server, env = (s3, s3_env(s3)) if kind == "s3" else (gcs, gcs_env(gcs))
    prefix = f"w-{kind}-{ext[1:].replace('.', '')}-{part or 'whole'}"
    opts = {"upload_part": part} if part else {}
    write_shards(f"{kind}://{BUCKET}/{prefix}/{STEM[ext]}-%03d{ext}", env, **opts)
    want = names(local, ext)
    assert len(want) == 10  # 3 shards, 3 indexes, 3 columns, the manifest
    for name in want:
        assert fetch(server, kind, f"{prefix}/{name}") == (local / name).read_bytes(), \
            f"{name} differs from the local write"


def test_shardwriter_gcs_chunked_session_is_byte_identical(local, upload):
    """Shards of ~2 MiB in chunks of 256 KiB: the size is unknown until the last chunk."""
    write_shards(f"gs://{BUCKET}/ch/w-%03d.tar", {"STORAGE_EMULATOR_HOST": upload.url},
                 upload_part=256 << 10)
    for name in names(local, ".tar"):
        if not name.endswith(".json"):
            assert upload.objects.get(f"ch/{name}") == (local / name).read_bytes(), name
    ranges = [r for verb, r, _ in upload.log if verb == "PUT"]
    assert any(r.endswith("/*") for r in ranges) and not any(r.endswith("/*") for r in ranges[-1:])


def test_tarwriter_into_buckets_and_file_urls(local, s3, upload, tmp_path):
    code = """
        with libshard.TarWriter({url!r}, index=True) as t:
            for s in samples(100):
                t.write(s)
        """
    py(code, s3_env(s3), url=f"s3://{BUCKET}/tw/one.tar")
    py(code, {"STORAGE_EMULATOR_HOST": upload.url}, url=f"gs://{BUCKET}/tw/one.tar")
    py(code, url=f"file://{tmp_path}/one.tar")
    py(code, url=str(tmp_path / "50%.tar"))  # a name with % in it is a name
    ref = (local / "w-000.tar").read_bytes()
    assert fetch(s3, "s3", "tw/one.tar") == ref
    assert upload.objects["tw/one.tar"] == ref
    assert (tmp_path / "one.tar").read_bytes() == ref and (tmp_path / "50%.tar").read_bytes() == ref
    assert fetch(s3, "s3", "tw/one.idx") == (local / "w-000.idx").read_bytes()
    # no sample: an empty archive, still written
    py("libshard.TarWriter({url!r}).close()", s3_env(s3), url=f"s3://{BUCKET}/tw/empty.tar")
    assert fetch(s3, "s3", "tw/empty.tar") == b"\0" * 1024


def test_an_abort_leaves_nothing_and_cancels_the_session(local, upload):
    """An exception in the with block mid-shard: completed shards stay, the one being written
    is dropped (its GCS session cancelled), no manifest."""
    cp = py("""
        with libshard.ShardWriter({pattern!r}, maxcount=100, manifest={manifest!r}, upload_part=256 << 10) as w:
            for s in samples(150):
                w.write(s)
            raise SystemExit(3)
        """, {"STORAGE_EMULATOR_HOST": upload.url}, check=False,
            pattern=f"gs://{BUCKET}/ab/w-%03d.tar", manifest=f"gs://{BUCKET}/ab/w.json")
    assert cp.returncode == 3, cp.stderr.decode()
    have = sorted(k for k in upload.objects if k.startswith("ab/"))
    assert have == ["ab/w-000.cols", "ab/w-000.idx", "ab/w-000.tar"], have
    assert upload.objects["ab/w-000.tar"] == (local / "w-000.tar").read_bytes()
    cancelled = [sid for verb, what, sid in upload.log if verb == "DELETE" and what == "session"]
    assert len(cancelled) == 1 and cancelled[0] not in upload.sessions


def test_an_abort_in_s3_aborts_the_multipart_upload(s3):
    """Mid-shard, parts sent: s3rver holds one multipart upload; the exception sends its
    AbortMultipartUpload (DELETE ?uploadId=, which s3rver 5.0.0 answers 405: it does not
    implement it, so its log shows the request) and no object appears."""
    proc = subprocess.Popen(["/usr/bin/python3", "-c", WRITE.format(pypath=PYPATH) + textwrap.dedent(f"""
        with libshard.ShardWriter("s3://{BUCKET}/abs3/w-%03d.tar", maxcount=1000, upload_part=256 << 10) as w:
            for s in samples(150):
                w.write(s)
            print("mid", flush=True)
            sys.stdin.readline()
            raise SystemExit(3)
        """)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**CLEAN_ENV, **s3_env(s3)})
    assert proc.stdout.readline() == b"mid\n", proc.stderr.read().decode()
    uploads = [p for p in (s3.data / BUCKET).iterdir() if "uploads" in p.name]
    assert len(uploads) == 1 and len(list(uploads[0].iterdir())) == 1, "one upload in progress"
    proc.stdin.write(b"go\n")
    proc.stdin.close()
    assert proc.wait(timeout=TIMEOUT) == 3, proc.stderr.read().decode()
    upload_id = next(uploads[0].iterdir()).name
    deadline = time.time() + 10  # the server logs a request once it has answered it
    while f"w-000.tar?uploadId={upload_id} " not in (log := (s3.tmp / "log").read_text()) and time.time() < deadline:
        time.sleep(0.05)
    assert f"w-000.tar?partNumber=1&uploadId={upload_id} 200" in log, "parts were sent"
    assert f"w-000.tar?uploadId={upload_id} " in log, "the upload was aborted"
    assert fetch(s3, "s3", "abs3/w-000.tar") is None


def test_a_cut_chunk_resumes_from_what_the_session_holds(local, upload):
    upload.faults = ["cut=300000", "cut=10"]  # a chunk cut past its first 256 KiB, the next early
    write_shards(f"gs://{BUCKET}/cut/w-%03d.tar", {"STORAGE_EMULATOR_HOST": upload.url},
                 upload_part=512 << 10, backoff=0.01)
    assert upload.objects["cut/w-000.tar"] == (local / "w-000.tar").read_bytes()
    puts = [r for verb, r, _ in upload.log if verb == "PUT"]
    assert "bytes */*" in puts, "the session was asked what it holds"
    # the first chunk kept 256 KiB of its 512: the next send starts there
    assert f"bytes {256 << 10}-{(512 << 10) - 1}/*" in puts, puts[:6]


@pytest.mark.parametrize("storm,retries,ok", [(6, 8, True), (40, 3, False)], ids=["ridden-out", "past-retries"])
def test_a_503_storm(local, upload, storm, retries, ok):
    upload.faults = ["503"] * storm
    cp = write_shards(f"gs://{BUCKET}/st{storm}/w-%03d.tar", {"STORAGE_EMULATOR_HOST": upload.url}, check=False,
                      upload_part=256 << 10, retries=retries, backoff=0.001)
    if ok:
        assert cp.returncode == 0, cp.stderr.decode()
        assert upload.objects[f"st{storm}/w-002.tar"] == (local / "w-002.tar").read_bytes()
    else:
        err = cp.stderr.decode()
        assert cp.returncode != 0 and f"gs://{BUCKET}/st{storm}/w-000.tar" in err and "503" in err, err
        assert not any(k.startswith(f"st{storm}/") for k in upload.objects), "nothing half-written"
        assert any(v == "DELETE" and w == "session" for v, w, _ in upload.log), "the session was cancelled"


def test_the_manifest_goes_up_with_the_callers_settings(upload, tmp_path):
    """retries=0 given by the caller: a manifest upload refused once fails. A remote made from
    the environment (10 retries) would have ridden it out."""
    upload.post_faults = {"cs/w.json": 1}
    cp = write_shards(f"gs://{BUCKET}/cs/w-%03d.tar", {"STORAGE_EMULATOR_HOST": upload.url}, check=False,
                      retries=0)
    err = cp.stderr.decode()
    assert cp.returncode != 0 and f"gs://{BUCKET}/cs/w.json" in err and "503" in err, err
    assert "cs/w-002.tar" in upload.objects and "cs/w.json" not in upload.objects
    # shards in a folder, the manifest in a bucket: the same settings reach it
    upload.post_faults = {"cs/local.json": 1}
    cp = py("""
        with libshard.ShardWriter({pattern!r}, maxcount=100, manifest={manifest!r}, retries=0) as w:
            for s in samples():
                w.write(s)
        """, {"STORAGE_EMULATOR_HOST": upload.url}, check=False, pattern=str(tmp_path / "w-%03d.tar"),
            manifest=f"gs://{BUCKET}/cs/local.json")
    assert cp.returncode != 0 and f"gs://{BUCKET}/cs/local.json" in cp.stderr.decode(), cp.stderr.decode()
    upload.post_faults = {"cs2/w.json": 1}
    write_shards(f"gs://{BUCKET}/cs2/w-%03d.tar", {"STORAGE_EMULATOR_HOST": upload.url}, retries=1, backoff=0.001)
    assert "cs2/w.json" in upload.objects


def test_join_reads_and_writes_part_manifests_in_a_bucket(shardpack, shardcat, root, s3, tmp_path):
    env = s3_env(s3)
    src = root.parent / "imgs"
    for part in ("0/2", "1/2"):
        cp = subprocess.run([str(shardpack), str(src), "-o", f"s3://{BUCKET}/join/j-%03d.tar", "-c", "50",
                             "--part", part], capture_output=True, timeout=TIMEOUT, env={**CLEAN_ENV, **env})
        assert cp.returncode == 0, cp.stderr.decode()
    parts = [f"s3://{BUCKET}/join/j.part-{i}-of-2.json" for i in range(2)]
    cp = subprocess.run([str(shardpack), "--join", "-o", f"s3://{BUCKET}/join/j.json", *parts],
                        capture_output=True, timeout=TIMEOUT, env={**CLEAN_ENV, **env})
    assert cp.returncode == 0, cp.stderr.decode()
    man = json.loads(fetch(s3, "s3", "join/j.json"))
    assert [e["url"] for e in man["shardlist"]] == [f"j-{i:03d}.tar" for i in range(7)]
    v = subprocess.run([str(shardcat), "verify", f"s3://{BUCKET}/join/j.json"], capture_output=True,
                       timeout=TIMEOUT, env={**CLEAN_ENV, **env})
    assert v.returncode == 0, v.stdout.decode() + v.stderr.decode()


def test_a_killed_writers_temporary_is_swept_by_the_next_run_a_live_ones_is_not(shardpack, root, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    # a writer killed mid-shard leaves its temporary
    proc = start_writer(str(out / "p-%03d.tar"), 100, maxcount=1000, sync=False)
    tmps = [p.name for p in out.iterdir()]
    assert len(tmps) == 1 and tmps[0].startswith(".p-000.tar.tmp-"), tmps
    # a live writer beside it, writing the same name
    live = start_writer(str(out / "p-%03d.tar"), 10, maxcount=1000, sync=False)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    both = {p.name for p in out.iterdir()}
    assert len(both) == 2
    killed = (set(tmps) & both).pop()
    cp = subprocess.run([str(shardpack), str(root.parent / "imgs"), "-o", str(out / "p-%03d.tar"), "-c", "400"],
                        capture_output=True, timeout=TIMEOUT, env=CLEAN_ENV)
    assert cp.returncode == 0, cp.stderr.decode()
    left = {p.name for p in out.iterdir()}
    assert killed not in left, "the killed writer's temporary is swept"
    assert (both - {killed}) <= left, "the live writer's temporary is left alone"
    live.send_signal(signal.SIGKILL)
    live.wait(timeout=30)


def test_shardcat_index_writes_into_the_bucket(shardcat, local, s3, gcs):
    for kind, server, env in (("s3", s3, s3_env(s3)), ("gs", gcs, gcs_env(gcs))):
        server.upload(BUCKET, "ix/w-000.tar", (local / "w-000.tar").read_bytes())
        cp = subprocess.run([str(shardcat), "index", f"{kind}://{BUCKET}/ix/w-000.tar"], capture_output=True,
                            timeout=TIMEOUT, env={**CLEAN_ENV, **env})
        assert cp.returncode == 0, cp.stderr.decode()
        assert fetch(server, kind, "ix/w-000.idx") == (local / "w-000.idx").read_bytes(), kind


@pytest.mark.parametrize("kind", ["s3", "gs"])
def test_an_abort_in_the_emulators_leaves_only_completed_shards(local, gcs, s3, kind):
    """Objects that fit in one request (the GCS emulator, s3rver): the shard being written
    when the exception comes was never sent; the completed ones are whole; no manifest."""
    server, env = (s3, s3_env(s3)) if kind == "s3" else (gcs, gcs_env(gcs))
    cp = py("""
        with libshard.ShardWriter({pattern!r}, maxcount=100, manifest={manifest!r}) as w:
            for s in samples(150):
                w.write(s)
            raise SystemExit(3)
        """, env, check=False, pattern=f"{kind}://{BUCKET}/ab2/w-%03d.tar", manifest=f"{kind}://{BUCKET}/ab2/w.json")
    assert cp.returncode == 3, cp.stderr.decode()
    assert fetch(server, kind, "ab2/w-000.tar") == (local / "w-000.tar").read_bytes()
    assert fetch(server, kind, "ab2/w-001.tar") is None and fetch(server, kind, "ab2/w-001.idx") is None
    assert fetch(server, kind, "ab2/w.json") is None


def test_a_writer_killed_mid_multipart_leaves_no_object_and_a_rerun_completes(local, s3):
    env = s3_env(s3)

    def uploads():
        return {u.name for p in (s3.data / BUCKET).iterdir() if "uploads" in p.name for u in p.iterdir()}

    before = uploads()
    proc = start_writer(f"s3://{BUCKET}/kill/w-%03d.tar", 150, env, maxcount=100, upload_part=256 << 10,
                        manifest=f"s3://{BUCKET}/kill/w.json")
    assert uploads() - before, "the second shard is going up in parts"
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert fetch(s3, "s3", "kill/w-000.tar") == (local / "w-000.tar").read_bytes()
    assert fetch(s3, "s3", "kill/w-001.tar") is None, "no half shard"
    assert fetch(s3, "s3", "kill/w.json") is None, "no manifest"
    write_shards(f"s3://{BUCKET}/kill/w-%03d.tar", env, upload_part=256 << 10)
    for name in names(local, ".tar"):
        assert fetch(s3, "s3", f"kill/{name}") == (local / name).read_bytes(), name
