"""Fixtures for the remote-shard tests: one small data set packed once, served by real
servers on 127.0.0.1 (servers.py), read back with shardcat and the Python extension.

Run with Debian's interpreter:  /usr/bin/python3 -m pytest tests/remote -q
The tools come from $SHARDCAT / $SHARDPACK (default build/tools), the extension from
$LIBSHARD_PYTHONPATH (default build/python). The Node servers need tests/remote/node's
packages (scripts/test-servers.sh installs them from the lock file).
"""
import os
import random
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from testtools import shardcat, shardpack  # noqa: E402,F401 (fixtures)
import servers  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
TIMEOUT = 120  # seconds for any one tool run: a hang fails the test, not the suite
BUCKET = "shards"

# No credentials or endpoints of the machine's own leak into the runs.
CLEAN_ENV = {k: v for k, v in os.environ.items()
             if not k.startswith(("AWS_", "GOOGLE_", "GCE_", "STORAGE_EMULATOR", "SHARD_GCS",
                                  "CURL_CA_BUNDLE", "SSL_CERT_FILE",
                                  "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD"))}
CLEAN_ENV["LC_ALL"] = "C.UTF-8"
CLEAN_ENV["HOME"] = "/nonexistent"  # no ~/.aws


@pytest.fixture(scope="session")
def root(tmp_path_factory, shardpack):
    """root/data/: d-000..d-007.tar and z-000..z-007.tar.zst (with .idx and a manifest each),
    320 small JPEGs in 4 classes, 40 per shard."""
    from PIL import Image
    top = tmp_path_factory.mktemp("remote")
    imgs = top / "imgs"
    rng = random.Random(7)
    for c in range(4):
        d = imgs / f"class{c}"
        d.mkdir(parents=True)
        for i in range(80):
            im = Image.new("RGB", (48 + rng.randrange(32), 40 + rng.randrange(24)),
                           (rng.randrange(256), rng.randrange(256), rng.randrange(256)))
            for _ in range(6):  # some texture, so the JPEGs are not all alike
                x, y = rng.randrange(im.width), rng.randrange(im.height)
                im.paste((rng.randrange(256),) * 3, (x, y, min(im.width, x + 9), min(im.height, y + 7)))
            im.save(d / f"{i:04d}.jpg", quality=90)
    data = top / "www" / "data"
    data.mkdir(parents=True)
    for pat in ("d-%03d.tar", "z-%03d.tar.zst"):
        args = [str(shardpack), str(imgs), "-o", str(data / pat), "-c", "40", "-q", "--shuffle", "3"]
        if pat.endswith(".zst"):
            args += ["--frame-size", "16384"]
        subprocess.run(args, check=True, timeout=TIMEOUT)
    return top / "www"


def set_files(folder):
    """The files of a packed set in folder: its shards, indexes and manifests, without the
    pack's record (.STEM.pack/: the run's note of what it packed, its own paths in it)."""
    return [p for p in folder.iterdir() if p.is_file()]


@pytest.fixture(scope="session")
def nginx(root):
    s = servers.Nginx(root)
    yield s
    s.close()


@pytest.fixture(scope="session")
def faults(root):
    s = servers.FaultServer(root)
    yield s
    s.close()


@pytest.fixture
def fault(faults):
    faults.reset()
    return faults


@pytest.fixture(scope="session")
def gcs(root):
    s = servers.GcsEmulator()
    for p in sorted(set_files(root / "data")):
        s.upload(BUCKET, f"data/{p.name}", p.read_bytes())
    yield s
    s.close()


@pytest.fixture(scope="session")
def s3(root):
    s = servers.S3Server(BUCKET)
    for p in sorted(set_files(root / "data")):
        s.upload(BUCKET, f"data/{p.name}", p.read_bytes())
    yield s
    s.close()


def s3_env(s3, secret="S3RVER"):
    return {"AWS_ENDPOINT_URL": s3.url, "AWS_ACCESS_KEY_ID": "S3RVER",
            "AWS_SECRET_ACCESS_KEY": secret, "AWS_REGION": "us-east-1"}


def gcs_env(gcs):
    return {"STORAGE_EMULATOR_HOST": gcs.url.replace("http://", "")}  # scheme optional


class Run:
    def __init__(self, cp):
        self.rc = cp.returncode
        self.out = cp.stdout.decode("utf-8", "replace")
        self.err = cp.stderr.decode("utf-8", "replace")
        self.lines = [l for l in self.out.split("\n") if l]

    def stat(self, name):
        """A counter of the 'shardcat: remote:' line (--stats)."""
        import re
        line = [l for l in self.err.split("\n") if l.startswith("shardcat: remote:")]
        assert line, self.err
        m = re.search(r"(\d+(?:\.\d+)?) " + name, line[0])
        assert m, (name, line[0])
        return float(m.group(1))


@pytest.fixture(scope="session")
def run(shardcat):
    def run(*args, env=None, timeout=TIMEOUT):
        cp = subprocess.run([str(shardcat), *map(str, args)], capture_output=True,
                            env={**CLEAN_ENV, **(env or {})}, timeout=timeout)
        return Run(cp)
    return run


def strip(lines, base):
    """Output lines with base + "/" taken out, to compare runs over different locations."""
    return [l.replace(base + "/", "") for l in lines]


@pytest.fixture(scope="session")
def ShardDataset():  # noqa: N802 (the class it gives)
    """libshard.torch.ShardDataset from $LIBSHARD_PYTHONPATH (default build/python),
    imported only by the tests that use it."""
    path = os.environ.get("LIBSHARD_PYTHONPATH", str(REPO / "build" / "python"))
    if path not in sys.path:
        sys.path.insert(0, path)
    from libshard.torch import ShardDataset
    return ShardDataset


def local_names(root, pattern):
    return sorted(p.name for p in (root / "data").glob(pattern))


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
