"""Prefix listings page by page: 1001 shards under one prefix, more than one page of GCS's
and S3's listings (1000 names a page), every one listed once and in name order."""
import io
import tarfile
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import BUCKET, gcs_env, s3_env

N = 1001


def tiny_shard():
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as t:
        data = b"7"
        info = tarfile.TarInfo("s0.cls")
        info.size = len(data)
        t.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def names():
    return [f"many/m-{i:05d}.tar" for i in range(N)]


@pytest.fixture(params=["gs", "s3"])
def many(request):
    store = request.getfixturevalue("gcs" if request.param == "gs" else "s3")
    data = tiny_shard()
    done = getattr(store, "many_uploaded", False)
    if not done:
        with ThreadPoolExecutor(8) as ex:
            list(ex.map(lambda n: store.upload(BUCKET, n, data), names()))
        store.upload(BUCKET, "many/m.json.not-a-shard", b"{}")
        store.many_uploaded = True
    env = gcs_env(store) if request.param == "gs" else s3_env(store)
    return f"{request.param}://{BUCKET}/many/", env


def test_prefix_over_several_pages(run, many):
    prefix, env = many
    r = run("ls", "--json", prefix, env=env, timeout=300)
    assert r.rc == 0, r.err
    import json
    urls = [json.loads(l)["__url__"] for l in r.lines]
    assert urls == [prefix + n.split("/", 1)[1] for n in names()]
