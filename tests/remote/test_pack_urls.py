"""shardpack --list of http://, gs:// and s3:// URLs: each file fetched through the remote
sources, the images packed byte for byte as from disk, missing files skipped, named and
counted with --on-error skip, or failing the run by default; shardcat verifies the result."""
import json
import shutil
import subprocess
import tarfile

import pytest

from conftest import BUCKET, CLEAN_ENV, TIMEOUT, fetch, gcs_env, s3_env


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


PW, SIG = "PwSECRETpass9", "SIGsecretQUERY42"


def secrets_in(text):
    """The secrets text holds (a str or bytes)."""
    if isinstance(text, bytes):
        text = text.decode("latin-1")
    return [s for s in (PW, SIG) if s in text]


def signed_list(path, base, rels, sig=SIG, extra=None):
    """A URL list of rels under base (http://HOST:PORT/img) with a user, a password and a
    signed query; extra: {index: query parameters added to that URL}."""
    host = base.split("://", 1)[1]
    rows = [f"http://reader:{PW}@{host}/{r}?X-Amz-Signature={sig}&X-Amz-Expires=60"
            f"{(extra or {}).get(i, '')}\t{i % 3}" for i, r in enumerate(rels)]
    path.write_text("path\tlabel\n" + "\n".join(rows) + "\n")


def store_objects(server, prefix):
    """{name: bytes} of every object under prefix in the GCS emulator."""
    import urllib.parse
    import urllib.request
    url = f"{server.url}/storage/v1/b/{BUCKET}/o?prefix={urllib.parse.quote(prefix)}"
    with urllib.request.urlopen(url, timeout=30) as r:
        names = [o["name"] for o in json.loads(r.read()).get("items", [])]
    return {n: fetch(server, "gs", n) for n in names}


def everything_written(out, server, prefix):
    """{name: bytes} of every file or object a pack wrote (the record and hidden ones too)."""
    if server is not None:
        return store_objects(server, prefix)
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


def tar_texts(blobs):
    """Every member name and every member's bytes of the tars among blobs."""
    import io
    out = []
    for name, data in blobs.items():
        if name.endswith(".tar"):
            with tarfile.open(fileobj=io.BytesIO(data)) as tf:
                for m in tf:
                    out += [m.name, tf.extractfile(m).read().decode("latin-1")]
    return out


@pytest.mark.parametrize("where", ["folder", "gs"])
def test_a_signed_url_list_packs_no_secret(shardpack, shardcat, nginx, images, gcs, tmp_path,
                                           where):
    """URLs with a user, a password and X-Amz-Signature packed into a folder and into a
    bucket: no secret in any shard member's name or bytes, index, manifest, the record of a
    killed run, or any message (a run, a --resume of the list signed anew, which keeps the
    finished shards, a --resume refused for a changed version, two URLs of one key refused);
    the control: the same scan finds them in the list itself."""
    import signal
    import time
    rels = sorted(images)[:60]
    lst = tmp_path / "urls.tsv"
    signed_list(lst, f"{nginx.url}/img", rels)
    assert secrets_in(lst.read_text()) == [PW, SIG], "the control: the scan sees them"
    env = gcs_env(gcs) if where == "gs" else {}
    out = tmp_path / "out"
    prefix = f"signed-{where}/"
    pattern = f"gs://{BUCKET}/{prefix}t-%03d.tar" if where == "gs" else str(out / "t-%03d.tar")
    server = gcs if where == "gs" else None
    said = []
    # a run killed once its record is up: the record as a resume reads it
    proc = subprocess.Popen([str(shardpack), lst, "--list", "-o", pattern, "-c", "1", "-j", "1"],
                            env={**CLEAN_ENV, **env}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    deadline = time.time() + TIMEOUT
    while time.time() < deadline and proc.poll() is None:
        got = everything_written(out, server, prefix) if (where == "gs" or out.exists()) else {}
        if sum("pack/shard-" in n for n in got) >= 2:
            break
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    said += [x.decode() for x in proc.communicate(timeout=30)]
    record = {n: b for n, b in everything_written(out, server, prefix).items() if ".t.pack/" in n}
    assert any(n.endswith("/plan") for n in record), sorted(record)
    for name, data in record.items():
        assert not secrets_in(name) and not secrets_in(data), (name, secrets_in(data))
    # the list signed anew resumes, keeping what the killed run finished
    signed_list(lst, f"{nginx.url}/img", rels, sig=SIG[::-1])
    cp = run_sp(shardpack, lst, "--list", "-o", pattern, "-c", "1", "-j", "1", "--resume",
                "--json", env=env)
    said += [cp.stdout.decode(), cp.stderr.decode()]
    assert cp.returncode == 0, cp.stderr.decode()
    assert json.loads(cp.stdout)["kept_shards"] >= 2, cp.stdout.decode()
    written = everything_written(out, server, prefix)
    assert sum(n.endswith(".tar") for n in written) == len(rels)
    for name, data in written.items():
        assert not secrets_in(name) and not secrets_in(data), (name, secrets_in(data))
        assert SIG[::-1] not in data.decode("latin-1"), name
    for text in tar_texts(written):
        assert not secrets_in(text) and SIG[::-1] not in text, text[:200]
    # a member's .json keeps the URL as a log shows it
    meta = [json.loads(t) for t in tar_texts(written) if t.startswith("{")]
    assert meta and all(m["url"].startswith("http://127.0.0.1:") and "?..." in m["url"]
                        for m in meta), meta[:2]
    # a changed version (not a signature) is another object: refused, without a secret
    killed = tmp_path / "again"
    again = f"gs://{BUCKET}/{prefix}again/t-%03d.tar" if where == "gs" else str(killed / "t-%03d.tar")
    signed_list(lst, f"{nginx.url}/img", rels)
    proc = subprocess.Popen([str(shardpack), lst, "--list", "-o", again, "-c", "1", "-j", "1"],
                            env={**CLEAN_ENV, **env}, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.time() + TIMEOUT
    while time.time() < deadline and proc.poll() is None:
        got = everything_written(killed, server, prefix + "again/") \
            if (where == "gs" or killed.exists()) else {}
        if sum("pack/shard-" in n for n in got) >= 1:
            break
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    said += [x.decode() for x in proc.communicate(timeout=30)]
    signed_list(lst, f"{nginx.url}/img", rels, extra={len(rels) - 1: "&versionId=2"})
    cp = run_sp(shardpack, lst, "--list", "-o", again, "-c", "1", "-j", "1", "--resume", env=env)
    said += [cp.stdout.decode(), cp.stderr.decode()]
    assert cp.returncode == 1 and "cannot resume: the input changed" in cp.stderr.decode(), \
        cp.stderr.decode()
    # two URLs of one object (signed twice): one key, refused naming both
    host = nginx.url.split("://", 1)[1]
    dup = tmp_path / "dup.tsv"
    dup.write_text("path\n" + "".join(f"http://reader:{PW}@{host}/img/{rels[0]}?X-Amz-Signature="
                                      f"{s}\n" for s in (SIG, SIG[::-1])))
    cp = run_sp(shardpack, dup, "--list", "-o", tmp_path / "dup" / "d-%03d.tar", env=env)
    said += [cp.stdout.decode(), cp.stderr.decode()]
    assert cp.returncode == 1 and "give one sample key" in cp.stderr.decode(), cp.stderr.decode()
    assert cp.stderr.decode().count(f"/img/{rels[0]}") == 2, cp.stderr.decode()
    for text in said:
        assert not secrets_in(text) and SIG[::-1] not in text, text[-400:]
