"""Google credentials as the client libraries find them, against servers that check them:
the fault server stands in for the GCS endpoint (SHARD_GCS_ENDPOINT) and demands a bearer
token; a token server speaks the OAuth2 JWT-bearer grant and the metadata server's path.
(The GCS emulator ignores credentials, so it cannot show these.)"""
import json
import subprocess
import time

import pytest

import servers
from conftest import BUCKET, strip

SPEC = f"gs://{BUCKET}/data/d-{{000..001}}.tar"


@pytest.fixture(scope="module")
def key(tmp_path_factory):
    d = tmp_path_factory.mktemp("key")
    subprocess.run(["openssl", "genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048",
                    "-out", str(d / "key.pem")], check=True, capture_output=True)
    subprocess.run(["openssl", "pkey", "-in", str(d / "key.pem"), "-pubout", "-out",
                    str(d / "pub.pem")], check=True, capture_output=True)
    return d


@pytest.fixture
def tokens():
    t = servers.TokenServer(prefix="token")
    yield t
    t.close()


def keyfile(key, token_url):
    p = key / f"sa-{time.monotonic_ns()}.json"
    p.write_text(json.dumps({
        "type": "service_account", "project_id": "libshard-test",
        "client_email": "reader@libshard-test.iam.gserviceaccount.com",
        "private_key": (key / "key.pem").read_text(), "token_uri": f"{token_url}/token"}))
    return p


@pytest.fixture(scope="module")
def local(run, root):
    r = run("stream", f"{root}/data/d-{{000..001}}.tar", "--seed", "2")
    assert r.rc == 0
    return strip(r.lines, f"{root}/data")


def test_service_account_key_signs_a_jwt(run, fault, tokens, key, local):
    env = {"SHARD_GCS_ENDPOINT": f"{fault.url}/auth=token-",
           "GOOGLE_APPLICATION_CREDENTIALS": str(keyfile(key, tokens.url))}
    r = run("stream", SPEC, "--seed", "2", env=env)
    assert r.rc == 0, r.err
    assert strip(r.lines, f"gs://{BUCKET}/data") == local
    assert len(tokens.posts) == 1  # one token, shared by every request and thread
    jwt = tokens.posts[0]["assertion"][0]
    head, claims, sig = jwt.split(".")
    assert json.loads(servers.b64url_decode(head)) == {"alg": "RS256", "typ": "JWT"}
    c = json.loads(servers.b64url_decode(claims))
    assert c["iss"] == "reader@libshard-test.iam.gserviceaccount.com"
    assert c["aud"] == f"{tokens.url}/token"
    assert c["scope"].endswith("devstorage.read_only") and c["exp"] - c["iat"] == 3600
    (key / "signed").write_bytes(f"{head}.{claims}".encode())
    (key / "sig").write_bytes(servers.b64url_decode(sig))
    v = subprocess.run(["openssl", "dgst", "-sha256", "-verify", str(key / "pub.pem"),
                        "-signature", str(key / "sig"), str(key / "signed")],
                       capture_output=True, text=True)
    assert v.returncode == 0 and "Verified OK" in v.stdout, v.stdout + v.stderr
    assert all(q["headers"].get("Authorization") == "Bearer token-1" for q in fault.requests)


def test_token_refreshed_before_it_expires(run, fault, key, local):
    tokens = servers.TokenServer(prefix="token", expires_in=2)  # refreshed after 1 s
    try:
        env = {"SHARD_GCS_ENDPOINT": f"{fault.url}/auth=token-,cut=4000,latency=60",
               "GOOGLE_APPLICATION_CREDENTIALS": str(keyfile(key, tokens.url))}
        r = run("stream", SPEC, "--seed", "2", "--backoff", "0.01", env=env)
        assert r.rc == 0, r.err
        assert strip(r.lines, f"gs://{BUCKET}/data") == local
        assert len(tokens.posts) >= 2
        used = {q["headers"]["Authorization"] for q in fault.requests}
        assert len(used) >= 2
    finally:
        tokens.close()


def test_refused_key_is_a_clear_error(run, fault, tokens, key):
    tokens.refuse = True
    env = {"SHARD_GCS_ENDPOINT": f"{fault.url}/auth=token-",
           "GOOGLE_APPLICATION_CREDENTIALS": str(keyfile(key, tokens.url))}
    t0 = time.time()
    r = run("ls", f"gs://{BUCKET}/data/d-000.tar", env=env)
    assert r.rc == 1
    assert f"{tokens.url}/token" in r.err and "invalid_grant" in r.err, r.err
    assert "PRIVATE KEY" not in r.err and time.time() - t0 < 10


def test_metadata_server(run, fault, tokens, local):
    env = {"SHARD_GCS_ENDPOINT": f"{fault.url}/auth=token-",
           "GCE_METADATA_HOST": tokens.url.replace("http://", "")}
    r = run("stream", SPEC, "--seed", "2", env=env)
    assert r.rc == 0, r.err
    assert strip(r.lines, f"gs://{BUCKET}/data") == local
    assert len(tokens.gets) == 1 and tokens.gets[0]["headers"]["Metadata-Flavor"] == "Google"


def test_static_token_and_a_wrong_one(run, fault, local):
    env = {"SHARD_GCS_ENDPOINT": f"{fault.url}/auth=static-", "GOOGLE_OAUTH_ACCESS_TOKEN": "static-1"}
    r = run("stream", SPEC, "--seed", "2", env=env)
    assert r.rc == 0, r.err
    env["GOOGLE_OAUTH_ACCESS_TOKEN"] = "expired-secret-token"
    r = run("ls", f"gs://{BUCKET}/data/d-000.tar", env=env)
    assert r.rc == 1
    assert f"gs://{BUCKET}/data/d-000.tar: access denied (HTTP 401: Invalid Credentials)" in r.err
    assert "expired-secret-token" not in r.err


def test_emulator_gets_no_credentials(run, fault, local):
    env = {"STORAGE_EMULATOR_HOST": fault.url + "/", "GOOGLE_OAUTH_ACCESS_TOKEN": "secret"}
    r = run("stream", SPEC, "--seed", "2", env=env)
    assert r.rc == 0, r.err
    assert strip(r.lines, f"gs://{BUCKET}/data") == local
    assert fault.requests and not any("Authorization" in q["headers"] for q in fault.requests)
    assert all("/storage/v1/b/shards/o/data%2F" in q["path"] for q in fault.requests)


def test_anonymous_when_no_metadata_server(run, fault, local):
    env = {"SHARD_GCS_ENDPOINT": fault.url, "GCE_METADATA_HOST": "127.0.0.1:9"}
    t0 = time.time()
    r = run("stream", SPEC, "--seed", "2", "--backoff", "0.01", env=env)
    assert r.rc == 0, r.err
    assert not any("Authorization" in q["headers"] for q in fault.requests)
    assert time.time() - t0 < 20
