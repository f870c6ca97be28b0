"""libshard.distributed.pack on a Dask LocalCluster of worker processes: shards, indexes and
manifest byte-identical to shardpack's from the same input and options."""
import json
import os
import subprocess

import pytest

distributed = pytest.importorskip("distributed", reason="python3-distributed (Dask) is not installed")
import dask  # noqa: E402 (with distributed)

from libshard import ShardError  # noqa: E402
from libshard.distributed import pack  # noqa: E402

from .conftest import SLOW, make_imagefolder  # noqa: E402


# The scheduler runs in this process, and its event loop's profiler would stay after the
# cluster closes, calling sys._current_frames every 10 ms for the rest of the session: a
# collection that runs inside it and frees a Reader or Loader (whose free lets go of the GIL
# while it joins the threads) deadlocks the interpreter (a later test hung so, seen with gdb).
NO_PROFILER = {"distributed.worker.profile.enabled": False}


@pytest.fixture(scope="module")
def client():
    with dask.config.set(NO_PROFILER):
        cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                           dashboard_address=None, silence_logs=40)
    with distributed.Client(cluster, timeout=60 * SLOW) as c:
        yield c
    cluster.close()


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    root = tmp_path_factory.mktemp("dask") / "src"
    make_imagefolder(root, n=90)
    (root / "Apple" / "notes.txt").write_text("not an image")
    return root


def files(d):
    # the pack's record (.STEM.pack/: its plan names the run's paths) is no part of the set
    return {p: (d / p).read_bytes() for p in sorted(os.listdir(d)) if (d / p).is_file()}


def shardpack_run(shardpack, src, out, *opts):
    out.mkdir()
    subprocess.run([str(shardpack), str(src), "-o", str(out / "train-%06d.tar"), "-q", *opts], check=True,
                   env={**os.environ, "SOURCE_DATE_EPOCH": ""})
    return files(out)


@pytest.mark.parametrize("opts,kw", [
    (["-c", "16"], dict(maxcount=16)),
    (["-c", "10", "--shuffle", "7", "--checksum", "md5,sha256"], dict(maxcount=10, shuffle=7, checksums="md5,sha256")),
    (["-s", "40000"], dict(maxsize=40_000)),
    (["-c", "32", "--resize", "40", "--quality", "80"], dict(maxcount=32, resize=40, quality=80)),
], ids=["count", "shuffle-md5", "size", "resize"])
def test_pack_is_byte_identical_to_shardpack(client, folder, shardpack, tmp_path, opts, kw):
    want = shardpack_run(shardpack, folder, tmp_path / "sp", *opts)
    out = tmp_path / "dask"  # made by pack, as shardpack makes its output folder
    res = pack(folder, out / "train-%06d.tar", client=client, **kw)
    got = files(out)
    assert sorted(got) == sorted(want)
    assert [p for p in got if got[p] != want[p]] == [], "shards, indexes and manifest as shardpack's"
    assert res.manifest == str(out / "train.json") and res.samples == 90 and res.ignored == 1
    assert res.shards == len(json.loads(got["train.json"])["shardlist"]) > 2
    if "resize" in kw:  # the JPEGs re-encoded, counted as shardpack counts them
        (tmp_path / "spj").mkdir()
        sp = json.loads(subprocess.run([str(shardpack), str(folder), "-o", str(tmp_path / "spj/t-%06d.tar"),
                                        "-q", "--json", *opts], check=True, capture_output=True).stdout)
        assert (res.resized, res.resized_bytes) == \
            (sp["resized"], (sp["resized_bytes_in"], sp["resized_bytes_out"]))
        assert 0 < res.resized and res.resized_bytes[1] < res.resized_bytes[0]
    else:
        assert res.resized == 0
    # tasks of several shards each, and zstd: still the same bytes
    zout, zsp = tmp_path / "daskz", tmp_path / "spz"
    zout.mkdir()
    zsp.mkdir()
    subprocess.run([str(shardpack), str(folder), "-o", str(zsp / "t-%04d.tar.zst"), "-q", *opts], check=True)
    pack(folder, zout / "t-%04d.tar.zst", client=client, shards_per_task=2, **kw)
    assert files(zout) == files(zsp)


def test_list_input_and_skipped_inputs_are_counted(client, tmp_path, shardpack):
    src = tmp_path / "src"
    make_imagefolder(src, n=30)
    rows = [f"{c}/{f}" for c in sorted(os.listdir(src)) for f in sorted(os.listdir(src / c))]
    (src / "empty.jpg").write_bytes(b"")
    (src / "list.tsv").write_text("path\tlabel\n" + "".join(f"{r}\t{r.split('/')[0]}\n" for r in rows)
                                  + "empty.jpg\tApple\nmissing.jpg\tApple\n")
    want = shardpack_run(shardpack, src / "list.tsv", tmp_path / "sp", "--list", "-c", "8", "--on-error", "skip")
    out = tmp_path / "dask"
    out.mkdir()
    res = pack(src / "list.tsv", out / "train-%06d.tar", client=client, list=True, maxcount=8, on_error="skip")
    assert files(out) == want
    assert res.samples == 30
    assert sorted((os.path.basename(p), why) for p, why, _ in res.skipped) == \
        [("empty.jpg", "zero-byte"), ("missing.jpg", "unreadable")]


def test_images_the_loader_does_not_decode_are_named(client, tmp_path):
    src = tmp_path / "src"
    make_imagefolder(src, n=12)
    from PIL import Image
    Image.new("RGB", (8, 8)).save(src / "Apple" / "x.bmp")
    out = tmp_path / "out"
    out.mkdir()
    with pytest.warns(UserWarning, match="1 images packed that the loader does not decode"):
        res = pack(src, out / "train-%06d.tar", client=client, maxcount=4)
    assert res.samples == 13 and [(os.path.basename(p), why) for p, why, _ in res.undecoded] == \
        [("x.bmp", "not decoded by the loader")]
    skip = tmp_path / "skip"
    skip.mkdir()
    res = pack(src, skip / "train-%06d.tar", client=client, maxcount=4, on_error="skip")
    assert res.samples == 12 and not res.undecoded
    assert [(os.path.basename(p), why) for p, why, _ in res.skipped] == \
        [("x.bmp", "not decoded by the loader")]


def test_a_bad_input_fails_the_run_and_writes_no_manifest(client, tmp_path):
    src = tmp_path / "src"
    make_imagefolder(src, n=20)
    (src / "Apple" / "bad.jpg").write_bytes(b"this is text, not a JPEG at all")
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(ShardError, match=r"bad\.jpg: not an image"):
        pack(src, out / "train-%06d.tar", client=client, maxcount=4)
    assert "train.json" not in os.listdir(out)
    assert not [p for p in os.listdir(out) if ".tmp-" in p], "no temporaries left"


def test_a_worker_that_plans_differently_refuses(client, tmp_path):
    """The plan's fingerprint guards against a worker seeing other inputs than the client."""
    from libshard import _libshard
    from libshard.distributed import _worker_plan, _write_shards
    src = tmp_path / "src"
    make_imagefolder(src, n=12)
    out = tmp_path / "out"
    out.mkdir()
    pattern = str(out / "t-%d.tar")
    plan = _libshard.PackPlan(str(src), pattern, maxcount=4)
    items = (("maxcount", 4),)
    assert client.submit(_write_shards, str(src), pattern, items, plan.fingerprint(), 0, 1, pure=False).result()
    (src / "Apple" / "new.jpg").write_bytes(next((src / "Apple").iterdir()).read_bytes())
    client.run(_worker_plan.cache_clear)  # the next task plans anew, and finds one more input
    fut = client.submit(_write_shards, str(src), pattern, items, plan.fingerprint(), 0, 1, pure=False)
    with pytest.raises(RuntimeError, match="plan differs from the client's"):
        fut.result()


def test_a_killed_shardpack_run_resumes_on_the_cluster(client, folder, shardpack, tmp_path):
    """shardpack killed mid-run, then pack(resume=True) on the cluster: the shards the record
    marks are kept (counted), the rest packed by the workers, which record theirs; the set is
    an uninterrupted shardpack run's byte for byte."""
    import shutil
    import signal
    import time
    want = shardpack_run(shardpack, folder, tmp_path / "sp", "-c", "4")
    out = tmp_path / "dask"
    cmd = [str(shardpack), str(folder), "-o", str(out / "train-%06d.tar"), "-q", "-c", "4"]
    for k in range(1, 60):
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir()
        p = subprocess.Popen(cmd, env={**os.environ, "SOURCE_DATE_EPOCH": ""},
                             stderr=subprocess.DEVNULL)
        time.sleep(0.004 * k)
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=60)
        marks = sorted((out / ".train.pack").glob("shard-*")) if (out / ".train.pack").exists() else []
        if marks and not (out / "train.json").exists():
            break
    else:
        pytest.skip("no kill landed between the first shard and the manifest")
    res = pack(folder, out / "train-%06d.tar", client=client, maxcount=4, resume=True)
    assert res.kept == len(marks) and res.shards == len(json.loads(want["train.json"])["shardlist"])
    got = files(out)
    assert sorted(got) == sorted(want) and [p for p in got if got[p] != want[p]] == []


def test_dedup_on_the_cluster_is_shardpacks(client, folder, shardpack, tmp_path):
    """dedup=True on the cluster leaves out the inputs shardpack --dedup leaves out (listed in
    the result: path, the path kept, its SHA-256), and packs the same bytes."""
    import shutil
    src = tmp_path / "src"
    shutil.copytree(folder, src)
    first = sorted(p for p in src.rglob("*.jpg"))[0]
    for k, cls in enumerate(sorted(d for d in src.iterdir() if d.is_dir())[:2]):
        shutil.copy(first, cls / f"zz-copy{k}.jpg")
    want = shardpack_run(shardpack, src, tmp_path / "sp", "-c", "16", "--dedup")
    res = pack(src, tmp_path / "dask" / "train-%06d.tar", client=client, maxcount=16, dedup=True)
    got = files(tmp_path / "dask")
    assert sorted(got) == sorted(n for n in want if not n.endswith(".tsv"))
    assert [p for p in got if got[p] != want[p]] == []
    assert [(os.path.basename(d), k) for d, k, _ in res.duplicates] == [
        (f"zz-copy{k}.jpg", str(first)) for k in range(2)]
    assert res.samples == 90


def test_the_cluster_leaves_no_profiler_thread_in_this_process(client):
    """The in-process scheduler's profiler is off (NO_PROFILER): no thread of this process
    calls sys._current_frames for the rest of the session (with it on, a 'Profile' thread
    stays after the cluster closes)."""
    import threading
    assert "Profile" not in {t.name for t in threading.enumerate()}
