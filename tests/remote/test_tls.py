"""https:// with TLS verified by default: a self-signed server is refused until its
certificate is named (CURL_CA_BUNDLE, SSL_CERT_FILE or --ca-bundle); over HTTP/2."""
import pytest

import servers
from conftest import strip

SPEC = "data/z-{000..003}.tar.zst"


@pytest.fixture(scope="module")
def https(root, tmp_path_factory):
    cert, key = servers.self_signed(tmp_path_factory.mktemp("tls"))
    s = servers.Nginx(root, tls=(cert, key))
    s.cert = cert
    yield s
    s.close()


def test_unknown_certificate_is_refused(run, https):
    r = run("ls", f"{https.url}/data/z-000.tar.zst", "--retries", "1", "--backoff", "0.01")
    assert r.rc == 1 and f"{https.url}/data/z-000.tar.zst" in r.err, r.err
    assert "certificate" in r.err.lower(), r.err


@pytest.mark.parametrize("how", ["CURL_CA_BUNDLE", "SSL_CERT_FILE", "--ca-bundle"])
def test_named_certificate_is_trusted(run, https, root, how):
    env = {} if how.startswith("--") else {how: str(https.cert)}
    args = [how, https.cert] if how.startswith("--") else []
    local = run("stream", f"{root}/{SPEC}", "--seed", "4")
    r = run("stream", f"{https.url}/{SPEC}", "--seed", "4", *args, env=env)
    assert r.rc == 0, r.err
    assert strip(r.lines, https.url) == strip(local.lines, str(root))
    log = (https.prefix / "logs" / "access.log").read_text()
    assert '"GET /data/z-000.tar.zst HTTP/2.0"' in log and "HTTP/1.1" not in log
