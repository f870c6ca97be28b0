"""shardpack --list of http://, gs:// and s3:// URLs: each file fetched through the remote
sources, the images packed byte for byte as from disk, missing files skipped, named and
counted with --on-error skip, or failing the run by default; shardcat verifies the result."""
import json
import shutil
import subprocess
import tarfile

import pytest

from conftest import BUCKET, CLEAN_ENV, TIMEOUT, gcs_env, s3_env


@pytest.fixture(scope="session")
def images(root):
    """The 320 source JPEGs, also under root/img (served by nginx): {relpath: bytes}."""
    src = root.parent / "imgs"
    served = root / "img"
    if not served.exists():
        shutil.copytree(src, served)
    return {str(p.relative_to(src)): p.read_bytes() for p in sorted(src.rglob("*.jpg"))}


@pytest.fixture(params=["http", "gs", "s3"])
def remote(request, nginx, images):
    """(base URL of the images, environment) for each scheme; the images uploaded once."""
    if request.param == "http":
        return f"{nginx.url}/img", {}
    server = request.getfixturevalue("gcs" if request.param == "gs" else "s3")
    if not getattr(server, "images_uploaded", False):
        for rel, data in images.items():
            server.upload(BUCKET, f"img/{rel}", data)
        server.images_uploaded = True
    if request.param == "gs":
        return f"gs://{BUCKET}/img", gcs_env(server)
    return f"s3://{BUCKET}/img", s3_env(server)


def run_sp(shardpack, *args, env=None):
    return subprocess.run([str(shardpack), *map(str, args)], capture_output=True, timeout=TIMEOUT,
                          env={**CLEAN_ENV, **(env or {})})


def samples(paths):
    out = {}
    for p in paths:
        with tarfile.open(p) as tf:
            for m in tf:
                key, field = m.name.rsplit(".", 1)
                out.setdefault(key, {})[field] = tf.extractfile(m).read()
    return out


def test_url_list_packs_the_files_and_counts_the_missing(shardpack, shardcat, remote, images, tmp_path):
    base, env = remote
    rels = sorted(images)
    rows = [f"{base}/{r}\t{r.split('/')[0]}" for r in rels]
    rows.insert(5, f"{base}/class0/missing-1.jpg\tclass0")
    rows.insert(200, f"{base}/nowhere/missing-2.jpg\tclass3")
    lst = tmp_path / "urls.tsv"
    lst.write_text("path\tlabel\n" + "\n".join(rows) + "\n")
    out = tmp_path / "out"
    out.mkdir()
    cp = run_sp(shardpack, lst, "--list", "-o", out / "u-%03d.tar", "-c", "50", "--on-error", "skip",
                "--inflight", "4", env=env)
    err = cp.stderr.decode()
    assert cp.returncode == 0, err
    assert "skipped 2 (2 unreadable)" in err, err
    assert f"skipping {base}/class0/missing-1.jpg: " in err and f"{base}/nowhere/missing-2.jpg" in err
    got = samples(sorted(out.glob("u-*.tar")))
    assert len(got) == 320
    host = base.split("://", 1)[1]
    for rel in rels:
        s = got[f"{host}/{rel[:-4]}".replace(".", "_")]
        assert s["jpg"] == images[rel], rel
        meta = json.loads(s["json"])
        assert meta["url"] == f"{base}/{rel}" and meta["path"] == f"{host}/{rel}"
        assert meta["class"] == rel.split("/")[0] and s["cls"] == str(meta["label"]).encode()
    # the same files listed from disk give the same images in the same order
    local = tmp_path / "local.tsv"
    root_imgs = tmp_path / "imgs"
    for rel, data in images.items():
        (root_imgs / rel).parent.mkdir(parents=True, exist_ok=True)
        (root_imgs / rel).write_bytes(data)
    local.write_text("path\tlabel\n" + "".join(f"imgs/{r}\t{r.split('/')[0]}\n" for r in rels))
    lout = tmp_path / "lout"
    lout.mkdir()
    assert run_sp(shardpack, local, "--list", "-o", lout / "u-%03d.tar", "-c", "50").returncode == 0
    order = lambda d: [m.name.rsplit("/", 1)[-1] for p in sorted(d.glob("u-*.tar"))
                       for m in tarfile.open(p) if m.name.endswith(".jpg")]
    assert order(out) == order(lout)
    v = subprocess.run([str(shardcat), "verify", "--decode", out / "u.json"], capture_output=True,
                       timeout=TIMEOUT, env=CLEAN_ENV)
    assert v.returncode == 0, v.stdout.decode() + v.stderr.decode()


def test_a_missing_url_fails_the_run_by_default(shardpack, remote, images, tmp_path):
    base, env = remote
    rel = sorted(images)[0]
    lst = tmp_path / "urls.jsonl"
    lst.write_text(json.dumps({"path": f"{base}/{rel}"}) + "\n" + json.dumps({"path": f"{base}/gone.jpg"}) + "\n")
    out = tmp_path / "out"
    out.mkdir()
    cp = run_sp(shardpack, lst, "--list", "-o", out / "u-%03d.tar", env=env)
    err = cp.stderr.decode()
    assert cp.returncode == 1, err
    assert f"{base}/gone.jpg" in err
    assert list(out.iterdir()) == [], "nothing written"
