"""Uploads carry the checksum each store checks: S3 a Content-MD5 of every body (AWS refuses
a body that does not match it with BadDigest; s3rver, the test server, keeps no check, so
here the headers are checked against the bodies as a relay sees them), GCS an X-Goog-Hash of
every media upload (CRC-32C and MD5) and of a resumable session's whole object with its last
chunk (CRC-32C: MD5 is not kept for objects sent in chunks). GCS answers the upload that
completes an object with the CRC-32C it holds: libshard compares it with its own, and an
object whose bytes differ from those sent is removed and the write fails (the tests' GCS
upload server keeping a byte changed); the control: the server did keep other bytes."""
import base64
import hashlib
import http.client
import http.server
import threading

import pytest

import servers
from conftest import BUCKET, s3_env
from test_sink import local, upload, write_shards  # noqa: F401 (fixtures)


class _Relay(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def _forward(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else b""
        self.server.seen.append((self.command, self.path, dict(self.headers), body))
        conn = http.client.HTTPConnection("127.0.0.1", self.server.target, timeout=60)
        conn.request(self.command, self.path, body=body or None, headers=dict(self.headers))
        r = conn.getresponse()
        data = r.read()
        self.send_response(r.status)
        for k, v in r.getheaders():
            if k.lower() not in ("transfer-encoding", "content-length", "connection"):
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        conn.close()

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward


@pytest.fixture
def relay(s3):
    """A relay to s3rver that keeps what it passes on: (method, path, headers, body)."""
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Relay)
    srv.daemon_threads = True
    srv.seen, srv.target = [], int(s3.url.rsplit(":", 1)[1])
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield srv
    srv.shutdown()
    srv.server_close()


def md5_b64(data):
    return base64.b64encode(hashlib.md5(data).digest()).decode()


@pytest.mark.parametrize("part", [None, 512 << 10], ids=["whole", "parts"])
def test_every_s3_body_carries_its_content_md5(relay, s3, part):
    env = {**s3_env(s3), "AWS_ENDPOINT_URL": f"http://127.0.0.1:{relay.server_address[1]}"}
    write_shards(f"s3://{BUCKET}/md5-{part or 'whole'}/w-%03d.tar", env,
                 **({"upload_part": part} if part else {}))
    puts = [(path, h, b) for m, path, h, b in relay.seen if m == "PUT" and b]
    assert len(puts) >= 7, [p for p, _, _ in puts]  # 3 shards (in parts), 3 indexes, manifest
    if part:
        assert any("partNumber=" in p for p, _, _ in puts)
    for path, headers, body in puts:
        sent = {k.lower(): v for k, v in headers.items()}.get("content-md5")
        assert sent == md5_b64(body), f"{path}: Content-MD5 {sent}, the body's {md5_b64(body)}"


def test_gcs_uploads_carry_their_crc32c_and_a_changed_object_is_refused(local, upload):
    write_shards(f"gs://{BUCKET}/h/w-%03d.tar", {"STORAGE_EMULATOR_HOST": upload.url},
                 upload_part=256 << 10)
    media = [(n, h, b) for n, h, b in upload.hashes if b is not None]
    last = [(sid, h) for sid, h, b in upload.hashes if b is None]
    assert media and last, upload.hashes
    for name, header, body in media:  # small objects: one request, both hashes
        assert header == f"crc32c={servers.crc32c_b64(body)},md5={md5_b64(body)}", name
    for sid, header in last:  # sessions: the whole object's CRC-32C with its last chunk
        whole = upload.objects[upload.sessions[sid]["name"]]
        assert header == f"crc32c={servers.crc32c_b64(whole)}", sid
    # a store that keeps other bytes: the write fails and the object is gone
    for shard in ("h2/w-000.tar", "h2/w-000.idx"):  # a session's object, a media one's
        upload.flip[shard] = True
        cp = write_shards(f"gs://{BUCKET}/h2/w-%03d.tar", {"STORAGE_EMULATOR_HOST": upload.url},
                          check=False, upload_part=256 << 10)
        err = cp.stderr.decode()
        assert cp.returncode != 0 and "holds other bytes than were sent" in err, err[-2000:]
        assert shard not in upload.objects, f"{shard} left in the bucket"
        # the control: the server did keep a changed byte (caught only by the check)
        assert shard not in upload.flip
    # and a clean write goes through
    write_shards(f"gs://{BUCKET}/h3/w-%03d.tar", {"STORAGE_EMULATOR_HOST": upload.url},
                 upload_part=256 << 10)
    assert upload.objects["h3/w-000.tar"] == (local / "w-000.tar").read_bytes()
