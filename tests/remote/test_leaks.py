"""No credential leaves libshard: every entry point (shardcat stream, ls, info, verify --json,
shardpack into a bucket; the Python Reader, ShardDataset with its trace, statistics and
skips, ShardLoader with DataLoader workers, IndexedShards, libshard.webdataset) against a
server that fails in each way a store fails (403, 401, 500, 503 with a body that reflects
the request's headers and query, a stalled transfer, no answer, a closed connection), with
S3 keys and a session token, a GCS token, and a URL holding a user, a password and a signed
query. Nothing the test configured as secret, nor a signature or token header, may appear
in the output, the exceptions, the log records, the warnings, the statistics or the trace
files; on success too (a URL with a password and a signature served by nginx). A negative
control shows the scan finds a secret that is printed."""
import base64
import json
import re
from concurrent.futures import ThreadPoolExecutor
import os
import subprocess

import pytest

import servers
from conftest import CLEAN_ENV, REPO

SK, AK, ST = "SkSECRETaws0123456789abcdefghij", "AKIDPUBLICID7", "StSESSIONtoken0123456789"
GT, Q, PW = "ya29.GtGCSTOKENsecret0123", "SIGquerySECRET42", "PwPASSWORDsecret"
SECRETS = {"aws secret": SK, "aws session token": ST, "gcs token": GT, "signed query": Q,
           "url password": PW,
           "basic auth": base64.b64encode(f"user:{PW}".encode()).decode().rstrip("=")[:24]}
# what a signature or a token header looks like once derived from the secrets
DERIVED = [r"Signature=[0-9a-f]{16,}", r"Bearer\s+\S+", r"X-Amz-Signature",
           r"x-amz-security-token"]
FAST = ["--retries", "1", "--backoff", "0.01", "--timeout", "2", "--stall-timeout", "1"]
MODES = ["403", "401", "500", "503", "stall", "hang", "close"]

PY = r'''
import glob, io, json, logging, sys, traceback, warnings
sys.path.insert(0, sys.argv[3])
log = io.StringIO()
logging.getLogger().addHandler(logging.StreamHandler(log))
logging.getLogger().setLevel(logging.DEBUG)
warnings.simplefilter("always")
url, trace = sys.argv[1], sys.argv[2]
R = dict(retries=1, backoff=0.01, timeout=2, stall_timeout=1)
out = []

def attempt(name, fn):
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        try:
            out.append(f"{name}: {fn()!r}")
        except BaseException as e:
            out.append(f"{name}: {e!r} {e} " + "".join(traceback.format_exception(e)))
    out.extend(f"{name} warned: {w.message}" for w in said)

def reader():
    import libshard
    r = libshard.Reader(url, seed=1, **R)
    try:
        return [s["__key__"] for s in r]
    finally:
        out.append(repr(r.stats()))

def dataset():
    from libshard.torch import ShardDataset
    ds = ShardDataset(url, seed=1, image_size=16, batch_size=4, trace=trace, skip_errors=True, **R)
    try:
        return sum(1 for _ in ds)
    finally:
        out.append(repr(ds.stats()) + repr(ds.remote_stats()) + repr(ds.skipped))

def loader():
    from libshard.torch import ShardDataset, ShardLoader
    ds = ShardDataset(url, seed=1, image_size=16, batch_size=4, **R)
    ld = ShardLoader(ds, num_workers=2, timeout=60)
    try:
        return sum(1 for _ in ld)
    finally:
        out.append(repr(ld.stats()))

def indexed():
    from libshard.indexed import IndexedShards
    return IndexedShards(url, **R)[0]["__key__"]

def webdataset():
    import libshard.webdataset as wds
    return sum(1 for _ in wds.WebDataset(url, shardshuffle=False, **R).decode("pil"))

for name, fn in [("reader", reader), ("dataset", dataset), ("loader", loader),
                 ("indexed", indexed), ("webdataset", webdataset)]:
    attempt(name, fn)
print("\n".join(out))
print("LOG " + log.getvalue())
for t in glob.glob(trace + "*"):
    print("TRACE " + open(t, errors="replace").read())
'''


def leaks(text):
    """What of the secrets, or of what is derived from them, text holds."""
    return ([k for k, v in SECRETS.items() if v in text] +
            [p for p in DERIVED if re.search(p, text, re.I)])


def pypath():
    return os.environ.get("LIBSHARD_PYTHONPATH", str(REPO / "build" / "python"))


def run(argv, env, timeout=150):
    try:
        cp = subprocess.run(argv, capture_output=True, env={**CLEAN_ENV, **env},
                            timeout=timeout)
        return cp.stdout.decode(errors="replace") + cp.stderr.decode(errors="replace")
    except subprocess.TimeoutExpired as e:
        return (e.stdout or b"").decode(errors="replace") + \
            (e.stderr or b"").decode(errors="replace") + "\nTIMEOUT"


def every_entry_point(shardcat, url, env, tmp_path, tag):
    """{entry point: its text} for one URL and environment."""
    got = {}
    for args in (["stream", url, "--seed", "1", "--stats"], ["ls", url], ["ls", "--json", url],
                 ["info", url], ["info", "--json", url], ["verify", "--json", url]):
        got[f"shardcat {args[0]}{' --json' if '--json' in args else ''}"] = \
            run([str(shardcat), *args, *FAST], env, timeout=60)
    got["python"] = run(["/usr/bin/python3", "-c", PY, url, str(tmp_path / f"{tag}.json"),
                         pypath()], env)
    return got


@pytest.mark.parametrize("mode", MODES)
def test_no_credential_leaves_libshard_when_a_store_fails(shardcat, shardpack, tmp_path, mode,
                                                          root):
    srv = servers.FailingServer(mode)
    try:
        kinds = {
            "s3": ("s3://shards/d-{000..001}.tar",
                   {"AWS_ENDPOINT_URL": srv.url, "AWS_ACCESS_KEY_ID": AK,
                    "AWS_SECRET_ACCESS_KEY": SK, "AWS_SESSION_TOKEN": ST,
                    "AWS_REGION": "us-east-1"}),
            "gs": ("gs://shards/d-{000..001}.tar",
                   {"SHARD_GCS_ENDPOINT": srv.url, "GOOGLE_OAUTH_ACCESS_TOKEN": GT}),
            "url": (f"http://user:{PW}@127.0.0.1:{srv.port}/d-000.tar?X-Amz-Signature={Q}"
                    f"&X-Amz-Security-Token={ST}", {}),
        }
        def one(kind):
            url, env = kinds[kind]
            texts = every_entry_point(shardcat, url, env, tmp_path, f"{mode}-{kind}")
            if kind != "url":  # into a bucket: a listing's and an upload's failures
                base = url.split("d-")[0]
                texts["shardcat info PREFIX/"] = run([str(shardcat), "info", base + "prefix/",
                                                      *FAST], env, 60)
                texts["shardpack"] = run([str(shardpack), str(root.parent / "imgs"), "-o",
                                          base + "o/t-%03d.tar", "-c", "100", "--json", *FAST],
                                         env, 90)
            return [(kind, entry, leaks(t), t[-600:]) for entry, t in texts.items() if leaks(t)]

        with ThreadPoolExecutor(3) as pool:  # the runs mostly wait on the server
            found = [f for fs in pool.map(one, kinds) for f in fs]
        assert not found, json.dumps(found, indent=1)[:6000]
        # the runs reached the server with the credentials (the test is not vacuous)
        sent = [r for r in srv.requests if "Authorization" in r or "authorization" in r]
        assert sent or mode in ("hang", "close"), f"{mode}: no request carried credentials"
    finally:
        srv.close()


def test_no_credential_in_the_output_of_a_run_that_succeeds(shardcat, nginx, tmp_path):
    """stream, ls --json, info and verify name each sample's shard: the URL as given, less
    its password and query; a sample's own __url__ in Python keeps the URL as given."""
    url = (f"http://user:{PW}@127.0.0.1:{nginx.port}/data/d-000.tar?X-Amz-Signature={Q}"
           f"&X-Amz-Security-Token={ST}")
    for args in (["stream", url, "--seed", "1"], ["stream", "--json", url, "--seed", "1"],
                 ["ls", "--json", url], ["info", url], ["info", "--json", url],
                 ["verify", url], ["verify", "--json", url]):
        text = run([str(shardcat), *args], {}, timeout=60)
        assert not leaks(text), (args, text[-800:])
        assert f"127.0.0.1:{nginx.port}/data/d-000.tar?..." in text, (args, text[-800:])
    code = ("import sys; sys.path.insert(0, sys.argv[2]); import libshard; "
            "print(next(iter(libshard.Reader(sys.argv[1], seed=1)))['__url__'])")
    text = run(["/usr/bin/python3", "-c", code, url, pypath()], {}, timeout=60)
    assert text.strip() == url, text  # data, as given


def test_the_control_the_scan_sees_a_printed_secret(tmp_path):
    """The same scan over a run that prints the URL as given finds the password, the signed
    query and the token header: the tests above would see a leak."""
    url = f"http://user:{PW}@127.0.0.1:9/d.tar?X-Amz-Signature={Q}&X-Amz-Security-Token={ST}"
    text = run(["/usr/bin/python3", "-c", "import sys; print(sys.argv[1])", url], {})
    assert set(leaks(text)) >= {"url password", "signed query", "aws session token",
                                "X-Amz-Signature", "x-amz-security-token"}, leaks(text)
    shown = run(["/usr/bin/python3", "-c", "import sys; sys.path.insert(0, sys.argv[2]); "
                 "from libshard.redact import shown; print(shown(sys.argv[1]))", url,
                 pypath()], {})
    assert not leaks(shown) and shown.strip() == "http://127.0.0.1:9/d.tar?...", shown
