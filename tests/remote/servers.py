"""Real servers on 127.0.0.1 for the remote-shard tests, each started and stopped here.

- Nginx: Debian's nginx-light, unprivileged, from a temporary prefix, serving a folder.
- FaultServer: an HTTP/1.1 file server written for these tests (standard library only)
  that injects faults chosen by the first path segment: /cut=5000/x.tar cuts every
  response after 5000 body bytes. Faults (joined with ','):
      cut=N       close the connection after N body bytes of each response
      fail=K      answer 503 to the first K requests for each object
      flaky=P     answer 503, or cut mid-body, with probability P (seeded, repeatable)
      stall=N     after N body bytes, stop sending (until the client gives up)
      latency=MS  wait MS milliseconds before answering each request
      norange     ignore Range: always 200 with the whole object
      change=N    after N body bytes of the first response, the object changes (new
                  bytes, new ETag): a resume must notice
      auth=TOKEN  demand "Authorization: Bearer TOKEN..." (401 otherwise)
      bigheader=N send a response header line of N bytes
  It speaks Range, If-Range and ETag as nginx does, and the GCS JSON API's media path
  (/storage/v1/b/B/o/NAME?alt=media) over the same folder, so it can stand in for a GCS
  endpoint where credentials must be checked. Every request is recorded.
- TokenServer: Google's OAuth2 token endpoint (JWT bearer grant) and the GCE metadata
  server's token path, recording what it received.
- NodeServer: the GCS emulator (firebase-tools) and s3rver, from tests/remote/node.
"""
import base64
import hashlib
import http.server
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
NODE_MODULES = HERE / "node" / "node_modules"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, proc=None, timeout=60):
    end = time.time() + timeout
    while time.time() < end:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on port {port} after {timeout} s")


def stop(proc):
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class Nginx:
    def __init__(self, root, extra="", main="", tls=None, http=""):
        """root served at /; extra: server-block directives; main: top-level ones; http:
        http-block ones (a log_format); tls: (certificate, key) to serve https with HTTP/2."""
        self.prefix = Path(tempfile.mkdtemp(prefix="libshard-nginx-"))
        (self.prefix / "logs").mkdir()
        (self.prefix / "tmp").mkdir()
        self.port = free_port()
        conf = self.prefix / "nginx.conf"
        t = self.prefix / "tmp"
        # as root, workers would become nobody, who cannot read a private temporary folder
        user = "user root;" if os.geteuid() == 0 else ""
        conf.write_text(f"""
{main}
daemon off;
{user}
worker_processes 1;
pid {self.prefix}/nginx.pid;
error_log {self.prefix}/logs/error.log;
events {{ worker_connections 256; }}
http {{
  {http}
  access_log {self.prefix}/logs/access.log;
  client_body_temp_path {t}; proxy_temp_path {t}; fastcgi_temp_path {t};
  uwsgi_temp_path {t}; scgi_temp_path {t};
  sendfile on; keepalive_requests 100000;
  server {{
    listen 127.0.0.1:{self.port}{" ssl http2" if tls else ""};
    {f"ssl_certificate {tls[0]}; ssl_certificate_key {tls[1]};" if tls else ""}
    root {root};
    {extra}
  }}
}}
""")
        nginx = shutil.which("nginx") or "/usr/sbin/nginx"
        self.proc = subprocess.Popen([nginx, "-p", str(self.prefix), "-e",
                                      str(self.prefix / "logs" / "error.log"), "-c", str(conf)])
        wait_port(self.port, self.proc)
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{self.port}"

    def close(self):
        stop(self.proc)
        shutil.rmtree(self.prefix, ignore_errors=True)


def self_signed(folder):
    """A certificate for 127.0.0.1 and its key, made with openssl: (cert, key) paths."""
    cert, key = Path(folder) / "cert.pem", Path(folder) / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    return cert, key


class _Server(http.server.ThreadingHTTPServer):
    """A threading server that takes a client closing its connection as the client's right
    (a reader stopping early, a transfer cut on purpose) rather than printing a traceback."""
    daemon_threads = True

    def handle_error(self, request, client_address):
        if not isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError)):
            super().handle_error(request, client_address)


class _FaultHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def do_HEAD(self):
        self.handle_get(body=False)

    def do_GET(self):
        self.handle_get(body=True)

    def _parse(self):
        u = urllib.parse.urlsplit(self.path)
        parts = u.path.lstrip("/").split("/")
        faults = {}
        if parts and "=" in parts[0] or parts and parts[0] == "norange":
            for f in parts[0].split(","):
                k, _, v = f.partition("=")
                faults[k] = v
            parts = parts[1:]
        path = "/".join(parts)
        q = urllib.parse.parse_qs(u.query)
        if path.startswith("storage/v1/b/"):  # GCS JSON API media download
            rest = path[len("storage/v1/b/"):]
            bucket, _, obj = rest.partition("/o/")
            path = urllib.parse.unquote(obj)
        return faults, urllib.parse.unquote(path), q

    def _fail(self, code, text):
        body = text.encode()
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Content-Type", "text/plain")
        self.end_headers()
        self.wfile.write(body)

    def handle_get(self, body):
        srv = self.server.owner
        faults, name, q = self._parse()
        with srv.lock:
            srv.requests.append({"path": self.path, "name": name,
                                 "headers": dict(self.headers.items())})
            key = (tuple(sorted(faults.items())), name)
            srv.count[key] = srv.count.get(key, 0) + 1
            nth = srv.count[key]
            roll = srv.rng.random()
        if "latency" in faults:
            time.sleep(int(faults["latency"]) / 1000)
        if "auth" in faults and not self.headers.get("Authorization", "").startswith(
                f"Bearer {faults['auth']}"):
            return self._fail(401, '{"error": {"code": 401, "message": "Invalid Credentials"}}')
        if "fail" in faults and nth <= int(faults["fail"]):
            return self._fail(503, "try again")
        flaky = float(faults.get("flaky", 0))
        if flaky and roll < flaky / 2:
            return self._fail(503, "try again")
        data, etag = srv.content(name, faults)
        if data is None:
            return self._fail(404, "no such object")
        if "short" in faults:  # a server that says (and sends) a shorter object than it holds
            data = data[:int(faults["short"])]
        start, end, status = 0, len(data), 200
        rng = self.headers.get("Range")
        if_range = self.headers.get("If-Range")
        if rng and "norange" not in faults and (if_range is None or if_range == etag):
            spec = rng.split("=", 1)[1]
            a, _, b = spec.partition("-")
            start = int(a)
            end = min(int(b) + 1, len(data)) if b else len(data)
            if start >= len(data):
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{len(data)}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            status = 206
        self.send_response(status)
        self.send_header("Content-Length", str(end - start))
        self.send_header("ETag", etag)
        self.send_header("Accept-Ranges", "bytes")
        if status == 206:
            self.send_header("Content-Range", f"bytes {start}-{end - 1}/{len(data)}")
        if "bigheader" in faults:  # one header line of that many bytes
            self.send_header("X-Big", "x" * int(faults["bigheader"]))
        self.end_headers()
        if not body:
            return
        limit = end - start
        if "cut" in faults:
            limit = min(limit, int(faults["cut"]))
        if flaky and flaky / 2 <= roll < flaky:
            limit = min(limit, max(1, (end - start) // 3))
        stall = int(faults["stall"]) if "stall" in faults else None
        change = int(faults["change"]) if "change" in faults and nth == 1 else None
        sent = 0
        try:
            while sent < limit:
                if stall is not None and sent >= stall:
                    time.sleep(3600)  # the client's stall timeout ends this
                chunk = min(65536, limit - sent)
                if stall is not None and sent < stall:
                    chunk = min(chunk, stall - sent)
                if change is not None and sent < change:
                    chunk = min(chunk, change - sent)
                self.wfile.write(data[start + sent:start + sent + chunk])
                sent += chunk
                if change is not None and sent >= change:
                    srv.replace(name)
                    change = None
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
            return
        if sent < end - start:  # a cut: drop the connection mid-body
            self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class FaultServer:
    def __init__(self, root, seed=1):
        self.root = Path(root)
        self.lock = threading.Lock()
        self.requests = []
        self.count = {}
        self.rng = random.Random(seed)
        self.changed = {}
        self.httpd = _Server(("127.0.0.1", 0), _FaultHandler)
        self.httpd.daemon_threads = True
        self.httpd.owner = self
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def content(self, name, faults):
        with self.lock:
            if name in self.changed:
                data = self.changed[name]
                return data, '"' + hashlib.md5(data).hexdigest() + '"'
        p = self.root / name
        if not p.is_file():
            return None, None
        data = p.read_bytes()
        return data, '"' + hashlib.md5(data).hexdigest() + '"'

    def replace(self, name):
        data = (self.root / name).read_bytes()
        with self.lock:
            self.changed[name] = data[::-1]

    def reset(self):
        with self.lock:
            self.requests.clear()
            self.count.clear()
            self.changed.clear()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


class _FailingHandler(http.server.BaseHTTPRequestHandler):
    """Every request fails in the server's mode, and an error body reflects what the client
    sent (its path and query, every header), as S3's SignatureDoesNotMatch does with its
    CanonicalRequest: a client that prints a body prints its own credentials."""
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def _reflect(self):
        sent = "".join(f"{k}:{v}\n" for k, v in self.headers.items())
        return (f"<Error><Code>SignatureDoesNotMatch</Code><CanonicalRequest>{self.command} "
                f"{self.path}\n{sent}</CanonicalRequest></Error>").encode()

    def do_GET(self, head=False):
        self.server.owner.requests.append(dict(self.headers))
        n = int(self.headers.get("Content-Length") or 0)
        if n:
            self.rfile.read(n)
        mode = self.server.owner.mode
        if mode == "hang":
            self.server.owner.stop.wait(120)
            return
        if mode == "close":
            self.close_connection = True
            self.connection.close()
            return
        if mode == "stall":
            self.send_response(200)
            self.send_header("Content-Length", "1000000")
            self.end_headers()
            self.wfile.write(b"\0" * 1000)
            self.wfile.flush()
            self.server.owner.stop.wait(120)
            return
        body = self._reflect()
        self.send_response(int(mode))
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("X-Echo-Auth", self.headers.get("Authorization", ""))
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def do_HEAD(self):
        self.do_GET(head=True)

    do_PUT = do_POST = do_DELETE = do_GET


class FailingServer:
    """127.0.0.1: every request fails: mode "403", "401", "500", "503" (an error whose body
    reflects the request), "stall" (200, then silence), "hang" (no answer), "close" (the
    connection closed unanswered)."""

    def __init__(self, mode):
        self.mode, self.requests, self.stop = mode, [], threading.Event()
        self.httpd = _Server(("127.0.0.1", 0), _FailingHandler)
        self.httpd.owner = self
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.stop.set()
        self.httpd.shutdown()
        self.httpd.server_close()


def _crc_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_CRC32C = _crc_table()


def crc32c(data, crc=0):
    """CRC-32C (Castagnoli), as GCS keeps it for every object."""
    crc ^= 0xFFFFFFFF
    table = _CRC32C
    for b in data:
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def crc32c_b64(data):
    return base64.b64encode(crc32c(data).to_bytes(4, "big")).decode()


class _UploadHandler(http.server.BaseHTTPRequestHandler):
    """GCS's upload protocol as the JSON API documents it, which the emulator lacks: media
    uploads, resumable sessions taking chunks (the total "*" until the last, each chunk then a
    multiple of 256 KiB; 308 with the Range held, 200 when whole), the status query, session
    cancels (DELETE, 499), deletes, listings by prefix and media downloads; an object's
    CRC-32C in the answer
    that completes it, as GCS gives it; with faults armed by the test."""
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def _reply(self, code, body=b"", headers=()):
        self.send_response(code)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _body(self, cut=None):
        n = int(self.headers.get("Content-Length", 0))
        if cut is not None and cut < n:  # read part of it, then drop the connection
            data = self.rfile.read(cut)
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return data, True
        return self.rfile.read(n), False

    def do_POST(self):
        srv = self.server.owner
        u = urllib.parse.urlsplit(self.path)
        q = urllib.parse.parse_qs(u.query)
        name = q.get("name", [""])[0]
        body, _ = self._body()
        with srv.lock:
            srv.log.append(("POST", q.get("uploadType", [""])[0], name))
            if q.get("uploadType") == ["media"]:
                srv.hashes.append((name, self.headers.get("X-Goog-Hash"), body))
        if q.get("uploadType") == ["media"]:
            with srv.lock:
                refuse = srv.post_faults.get(name, 0)
                if refuse:
                    srv.post_faults[name] = refuse - 1
                else:
                    if srv.flip.pop(name, None):  # a store that keeps other bytes
                        body = bytes([body[0] ^ 1]) + body[1:]
                    srv.objects[name] = body
            if refuse:
                return self._reply(503, b"try again")
            return self._reply(200, json.dumps({"name": name, "size": str(len(body)),
                                                "crc32c": crc32c_b64(body)}).encode())
        if q.get("uploadType") == ["resumable"]:
            with srv.lock:
                sid = f"s{len(srv.sessions)}"
                srv.sessions[sid] = {"name": name, "data": bytearray(), "done": False}
            return self._reply(200, headers=[("Location", f"{srv.url}/upload/session/{sid}")])
        return self._reply(400, b"unknown upload type")

    def do_PUT(self):
        srv = self.server.owner
        sid = self.path.rsplit("/", 1)[-1]
        rng = self.headers.get("Content-Range", "")
        with srv.lock:
            srv.log.append(("PUT", rng, sid))
            if self.headers.get("X-Goog-Hash"):
                srv.hashes.append((sid, self.headers.get("X-Goog-Hash"), None))
            fault = srv.faults.pop(0) if srv.faults and rng and not rng.startswith("bytes */") else None
            srv.chunks += 1
            hang = srv.slow_chunk is not None and srv.chunks == srv.slow_chunk
        if hang:  # hold the request until the test lets go (it kills the client meanwhile)
            srv.hanging.set()
            srv.release.wait(120)
        sess = srv.sessions.get(sid)
        if sess is None:
            self._body()
            return self._reply(404, b"no such session")
        if fault == "503":
            self._body()
            return self._reply(503, b"try again")
        body, cut = self._body(cut=int(fault[4:]) if fault and fault.startswith("cut=") else None)
        m = re.match(r"bytes (\d+)-(\d+)/(\d+|\*)$", rng)
        with srv.lock:
            held = len(sess["data"])
            if m:
                a, total = int(m.group(1)), m.group(3)
                if a > held:
                    return self._reply(400, b"a chunk past what the session holds")
                if total == "*" and len(body) % (256 << 10) and not cut:
                    return self._reply(400, b"a chunk of unknown total must be a multiple of 256 KiB")
                sess["data"] += body[held - a:]  # overlap with what is held is dropped
                if cut:  # of a chunk of unknown total, GCS keeps whole 256 KiB blocks only
                    if total == "*":
                        del sess["data"][len(sess["data"]) // (256 << 10) * (256 << 10):]
                    return
                if total != "*" and len(sess["data"]) >= int(total):
                    sess["done"] = True
                    if srv.flip.pop(sess["name"], None):
                        sess["data"][0] ^= 1
                    srv.objects[sess["name"]] = bytes(sess["data"][:int(total)])
            elif re.match(r"bytes \*/(\d+|\*)$", rng):
                total = rng[8:]
                if total != "*" and held == int(total) and not sess["done"]:  # the last chunk was empty
                    sess["done"] = True
                    srv.objects[sess["name"]] = bytes(sess["data"])
            else:
                return self._reply(400, b"no Content-Range")
            if sess["done"]:
                return self._reply(200, json.dumps({"name": sess["name"], "crc32c": crc32c_b64(
                    srv.objects[sess["name"]])}).encode())
            held = len(sess["data"])
        return self._reply(308, headers=[("Range", f"bytes=0-{held - 1}")] if held else [])

    def do_DELETE(self):
        srv = self.server.owner
        if self.path.startswith("/upload/session/"):  # a session cancelled: its bytes dropped
            sid = self.path.rsplit("/", 1)[-1]
            with srv.lock:
                srv.log.append(("DELETE", "session", sid))
                gone = srv.sessions.pop(sid, None)
            return self._reply(499 if gone is not None else 404)
        name = urllib.parse.unquote(self.path.split("/o/", 1)[-1])
        with srv.lock:
            srv.log.append(("DELETE", "", name))
            gone = srv.objects.pop(name, None)
        return self._reply(204 if gone is not None else 404)

    def do_GET(self):
        srv = self.server.owner
        u = urllib.parse.urlsplit(self.path)
        if re.fullmatch(r"/storage/v1/b/[^/]+/o", u.path):  # a listing, by prefix
            prefix = urllib.parse.parse_qs(u.query).get("prefix", [""])[0]
            with srv.lock:
                items = [{"name": k, "size": str(len(v))} for k, v in sorted(srv.objects.items())
                         if k.startswith(prefix)]
            return self._reply(200, json.dumps({"kind": "storage#objects", "items": items}).encode())
        name = urllib.parse.unquote(u.path.split("/o/", 1)[-1])
        data = srv.objects.get(name)
        if data is None:
            return self._reply(404, b"no such object")
        return self._reply(200, data, [("x-goog-generation", "1")])


class GcsUploadServer:
    """An in-memory store speaking GCS's upload protocol (_UploadHandler). faults: a list of
    what the next chunk PUTs get, in turn: "503", or "cut=N" (N bytes read, then the
    connection dropped). slow_chunk = K: the K-th chunk PUT waits for release (hanging is
    set meanwhile). post_faults: {name: K}, the next K media uploads of name answered 503.
    flip: {name: True}, the object kept with its first byte changed."""

    def __init__(self):
        self.lock = threading.Lock()
        self.objects, self.sessions, self.log, self.faults, self.post_faults = {}, {}, [], [], {}
        self.hashes, self.flip = [], {}  # X-Goog-Hash sent (name or session, header, body)
        self.chunks, self.slow_chunk = 0, None
        self.hanging, self.release = threading.Event(), threading.Event()
        self.httpd = _Server(("127.0.0.1", 0), _UploadHandler)
        self.httpd.daemon_threads = True
        self.httpd.owner = self
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


class _TokenHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def _reply(self, code, obj):
        body = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        srv = self.server.owner
        n = int(self.headers.get("Content-Length", 0))
        form = urllib.parse.parse_qs(self.rfile.read(n).decode())
        with srv.lock:
            srv.posts.append(form)
            k = len(srv.posts)
        if form.get("grant_type") != ["urn:ietf:params:oauth:grant-type:jwt-bearer"]:
            return self._reply(400, {"error": "unsupported_grant_type"})
        if srv.refuse:
            return self._reply(400, {"error": "invalid_grant",
                                     "error_description": "Invalid JWT Signature."})
        self._reply(200, {"access_token": f"{srv.prefix}-{k}", "expires_in": srv.expires_in,
                          "token_type": "Bearer"})

    def do_GET(self):
        srv = self.server.owner
        with srv.lock:
            srv.gets.append({"path": self.path, "headers": dict(self.headers.items())})
            k = len(srv.gets)
        if (self.path != "/computeMetadata/v1/instance/service-accounts/default/token" or
                self.headers.get("Metadata-Flavor") != "Google"):
            return self._reply(404, {"error": "not found"})
        self._reply(200, {"access_token": f"{srv.prefix}-{k}", "expires_in": srv.expires_in,
                          "token_type": "Bearer"})


class TokenServer:
    def __init__(self, prefix="token", expires_in=3600):
        self.lock = threading.Lock()
        self.posts, self.gets = [], []
        self.prefix, self.expires_in, self.refuse = prefix, expires_in, False
        self.httpd = _Server(("127.0.0.1", 0), _TokenHandler)
        self.httpd.daemon_threads = True
        self.httpd.owner = self
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def b64url_decode(s):
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


class NodeServer:
    """A Node.js server of tests/remote: the GCS emulator or s3rver."""

    def __init__(self, script, args, port, env=None, node_args=()):
        if not NODE_MODULES.is_dir():
            raise RuntimeError(f"{NODE_MODULES} is missing: run scripts/test-servers.sh")
        self.tmp = Path(tempfile.mkdtemp(prefix="libshard-node-"))
        self.port = port
        self.log = open(self.tmp / "log", "w")
        self.proc = subprocess.Popen(["node", *node_args, str(HERE / script), *args],
                                     stdout=self.log, stderr=subprocess.STDOUT,
                                     env={**os.environ, "TMPDIR": str(self.tmp), **(env or {})})
        wait_port(port, self.proc)
        self.url = f"http://127.0.0.1:{port}"

    def close(self):
        stop(self.proc)
        self.log.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


class GcsEmulator(NodeServer):
    def __init__(self):
        port = free_port()
        super().__init__("gcs_emulator.js", ["127.0.0.1", str(port)], port)

    def upload(self, bucket, name, data):
        q = urllib.parse.urlencode({"uploadType": "media", "name": name})
        req = urllib.request.Request(f"{self.url}/upload/storage/v1/b/{bucket}/o?{q}", data=data,
                                     method="POST")
        with urllib.request.urlopen(req) as r:
            assert r.status == 200


class S3Server(NodeServer):
    def __init__(self, bucket):
        port = free_port()
        self.data = Path(tempfile.mkdtemp(prefix="libshard-s3-"))
        # its listing's continuation tokens use a cipher OpenSSL 3 keeps in its legacy provider
        super().__init__("s3_server.js", ["-d", str(self.data), "-a", "127.0.0.1", "-p", str(port),
                                          "--configure-bucket", bucket], port,
                         node_args=["--openssl-legacy-provider"])

    def upload(self, bucket, key, data):
        # anonymous writes are allowed by s3rver: the reads under test are the signed ones
        req = urllib.request.Request(f"{self.url}/{bucket}/{urllib.parse.quote(key)}", data=data,
                                     method="PUT")
        with urllib.request.urlopen(req) as r:
            assert r.status == 200

    def close(self):
        super().close()
        shutil.rmtree(self.data, ignore_errors=True)
