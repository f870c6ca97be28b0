"""A flaky network loses, duplicates and splices nothing: cuts, 503s, stalls, servers that
ignore Range, objects replaced mid-read; and failures end in bounded time with an error
naming the URL and offset (and never a secret)."""
import time

import pytest

from conftest import BUCKET, gcs_env, s3_env, strip

FAST = ["--backoff", "0.01", "--retries", "8"]
SPEC = "data/d-{000..007}.tar"
ZSPEC = "data/z-{000..007}.tar.zst"


@pytest.fixture(scope="module")
def expect(run, root):
    def expect(spec, *args):
        r = run("stream", f"{root}/{spec}", "--seed", "3", "--shuffle", "40", *args)
        assert r.rc == 0, r.err
        return strip(r.lines, str(root))
    return expect


@pytest.mark.parametrize("spec", [SPEC, ZSPEC])
def test_hundreds_of_cuts_lose_nothing(run, fault, expect, spec):
    base = f"{fault.url}/cut=997"
    r = run("stream", f"{base}/{spec}", "--seed", "3", "--shuffle", "40", "--stats", *FAST)
    assert r.rc == 0, r.err
    assert strip(r.lines, base) == expect(spec)  # nothing lost, nothing twice, same order
    assert r.stat("resumes") >= 100, r.err
    assert r.stat("retries") >= r.stat("resumes")
    ranged = [q for q in fault.requests if "Range" in q["headers"]]
    assert ranged and all(q["headers"].get("If-Range", "").startswith('"') for q in ranged)


def test_503s_and_random_cuts(run, fault, expect):
    base = f"{fault.url}/fail=2,flaky=0.3"
    r = run("stream", f"{base}/{SPEC}", "--seed", "3", "--shuffle", "40", "--stats",
            "--streams", "4", *FAST)
    assert r.rc == 0, r.err
    assert strip(r.lines, base) == expect(SPEC)
    assert r.stat("retries") >= 16  # two 503s per shard at least


def test_stalled_transfer_resumes(run, fault, expect):
    # libcurl judges speed over a few seconds' window: one stall costs about 7 s
    base = f"{fault.url}/stall=120000"
    t0 = time.time()
    r = run("stream", f"{base}/data/d-000.tar", "--seed", "3", "--shuffle", "40",
            "--stats", "--stall-timeout", "1", *FAST)
    assert r.rc == 0, r.err
    assert strip(r.lines, base) == expect("data/d-000.tar")
    assert r.stat("resumes") >= 1
    assert time.time() - t0 < 60


@pytest.mark.parametrize("spec", [SPEC, ZSPEC])
def test_range_answered_whole_is_not_spliced(run, fault, expect, spec):
    base = f"{fault.url}/norange,flaky=0.6"
    r = run("stream", f"{base}/{spec}", "--seed", "3", "--shuffle", "40", "--stats",
            "--backoff", "0.01", "--retries", "20")
    assert r.rc == 0, r.err
    assert strip(r.lines, base) == expect(spec)
    assert r.stat("ranges answered whole") >= 1


def test_no_progress_spends_the_budget(run, fault):
    """Whole answers cut before the byte reached: no progress, so the retries run out."""
    base = f"{fault.url}/norange,cut=20011"
    t0 = time.time()
    r = run("ls", f"{base}/data/d-000.tar", *FAST)
    assert r.rc == 1 and f"{base}/data/d-000.tar: offset 20011" in r.err, r.err
    assert "retries spent" in r.err
    assert time.time() - t0 < 20


def test_replaced_object_is_reported(run, fault):
    base = f"{fault.url}/change=5000,cut=6000"
    r = run("stream", f"{base}/data/d-000.tar", "--seed", "3", "--stats", *FAST)
    assert r.rc == 1
    assert "replaced while being read" in r.err and f"{base}/data/d-000.tar" in r.err, r.err
    assert "offset 6000" in r.err, r.err
    assert r.stat("replaced") == 1


def test_skip_errors_counts_a_replaced_shard(run, fault, root):
    base = fault.url
    r = run("stream", f"{base}/data/d-{{000..002}}.tar", f"{base}/change=3000,cut=4000/data/d-003.tar",
            "--seed", "3", "--skip-errors", "--stats", *FAST)
    assert r.rc == 0, r.err
    assert "replaced" in r.err and "skipped" in r.err
    assert len(r.lines) >= 120  # the other shards whole


def test_retry_budget_ends_with_url_and_offset(run, fault):
    base = f"{fault.url}/fail=1000"
    t0 = time.time()
    r = run("ls", f"{base}/data/d-000.tar", "--retries", "3", "--backoff", "0.01")
    assert r.rc == 1
    assert f"{base}/data/d-000.tar" in r.err and "HTTP 503" in r.err, r.err
    assert time.time() - t0 < 10


def test_missing_object_and_unreachable_host(run, nginx, fault):
    r = run("ls", f"{nginx.url}/data/missing.tar", *FAST)
    assert r.rc == 1 and f"{nginx.url}/data/missing.tar: not found (HTTP 404)" in r.err, r.err
    t0 = time.time()
    r = run("ls", "http://127.0.0.1:9/data/d-000.tar", "--retries", "2", "--backoff", "0.05",
            "--timeout", "2")
    assert r.rc == 1 and "http://127.0.0.1:9/data/d-000.tar" in r.err, r.err
    assert "onnect" in r.err, r.err
    assert time.time() - t0 < 15


def test_s3_errors_name_the_url_never_the_secret(run, s3):
    secret = "wrong-secret-key-0123456789"
    r = run("ls", f"s3://{BUCKET}/data/d-000.tar", env=s3_env(s3, secret))
    assert r.rc == 1 and f"s3://{BUCKET}/data/d-000.tar: access denied (HTTP 403" in r.err, r.err
    assert "SignatureDoesNotMatch" in r.err and secret not in r.err
    r = run("ls", f"s3://{BUCKET}/data/missing.tar", env=s3_env(s3))
    assert r.rc == 1 and "not found (HTTP 404: NoSuchKey" in r.err, r.err
    r = run("ls", "s3://no-such-bucket/data/", env=s3_env(s3))
    assert r.rc == 1 and "s3://no-such-bucket/data/" in r.err and "NoSuchBucket" in r.err, r.err


def test_gcs_missing_object(run, gcs):
    r = run("ls", f"gs://{BUCKET}/data/missing.tar", env=gcs_env(gcs))
    assert r.rc == 1 and f"gs://{BUCKET}/data/missing.tar: not found (HTTP 404" in r.err, r.err


def test_python_dataset_survives_faults(fault, root, ShardDataset):  # noqa: N803
    """ShardDataset over a cutting server: the same samples as locally, counted resumes."""
    base = f"{fault.url}/cut=4999"
    kw = dict(decode=False, seed=4, shuffle=30, backoff=0.01, retries=8)
    local = [(s["__key__"], s["jpg"]) for s in ShardDataset(f"{root}/{SPEC}", **kw)]
    ds = ShardDataset(f"{base}/{SPEC}", **kw)
    remote = [(s["__key__"], s["jpg"]) for s in ds]
    assert remote == local and len(local) == 320
    st = ds.remote_stats()
    assert st["resumes"] >= 50 and st["requests"] > st["resumes"], st


ECHO = "/usr/lib/nginx/modules/ngx_http_echo_module.so"


@pytest.fixture(scope="module")
def slow_nginx(root, tmp_path_factory):
    """nginx adding 50 ms to every request under /slow/ (its echo module), logging when each
    request ended and how long it took (timed_log)."""
    import servers
    log = tmp_path_factory.mktemp("slow") / "timed.log"
    s = servers.Nginx(root, main=f"load_module {ECHO};",
                      http='log_format timed "$msec $request_time $request";',
                      extra=f"access_log {log} timed;\n"
                            "    location /slow/ { echo_sleep 0.05; echo_exec @file; }\n"
                            "    location @file { rewrite ^/slow/(.*)$ /$1 break; }")
    s.timed_log = log
    yield s
    s.close()


def most_at_once(lines):
    """The most requests in flight at one time, from log lines "END TOOK METHOD PATH ..."."""
    spans = [(float(end) - float(took), float(end)) for end, took, *_ in (ln.split() for ln in lines)]
    return max((sum(1 for a, b in spans if a <= t < b) for t, _ in spans), default=0)


def test_latency_is_hidden_not_waited_out(run, slow_nginx, expect):
    """50 ms per request, shards opened ahead while others are read, index counts fetched
    side by side: no stream waits on another's paused connection (this hung once), and a
    long brace pattern does not cost one round trip after another."""
    base = f"{slow_nginx.url}/slow"
    for _ in range(3):
        t0 = time.time()
        r = run("stream", f"{base}/{SPEC}", "--seed", "3", "--shuffle", "40", "--streams", "4",
                timeout=30)
        assert r.rc == 0, r.err
        assert strip(r.lines, base) == expect(SPEC)
        assert time.time() - t0 < 5
    seen = len(slow_nginx.timed_log.read_text().splitlines())
    pattern = f"{base}/data/d-{{000..007}}.tar"
    r = run("stream", pattern, pattern, pattern, "--samples", "1", "--seed", "3")
    assert r.rc == 0, r.err
    # the index counts side by side: requests of 50 ms or more in flight together (fetched
    # one after another, never more than one would be), read from the server's own log
    lines = slow_nginx.timed_log.read_text().splitlines()[seen:]
    assert sum(".idx " in ln for ln in lines) >= 8, lines
    assert most_at_once(lines) >= 4, lines
    serial = [f"{0.05 + i * 0.1:.3f} 0.050 GET /slow/data/d-00{i}.idx HTTP/1.1" for i in range(8)]
    assert most_at_once(serial) == 1  # the measure's control: one after another


def test_s3_profile_from_credentials_file(run, s3, tmp_path):
    """AWS_PROFILE's keys from ~/.aws/credentials (signed: a wrong key there is refused);
    the region from ~/.aws/config."""
    aws = tmp_path / ".aws"
    aws.mkdir()
    (aws / "credentials").write_text("[default]\naws_access_key_id = nobody\n"
                                     "aws_secret_access_key = wrong\n\n"
                                     "[ci]\naws_access_key_id = S3RVER\n"
                                     "aws_secret_access_key = S3RVER\n")
    (aws / "config").write_text("[profile ci]\nregion = us-east-1\n")
    env = {"HOME": str(tmp_path), "AWS_ENDPOINT_URL_S3": s3.url, "AWS_PROFILE": "ci"}
    r = run("ls", f"s3://{BUCKET}/data/d-000.tar", env=env)
    assert r.rc == 0 and len(r.lines) == 40, r.err
    env["AWS_PROFILE"] = "default"
    r = run("ls", f"s3://{BUCKET}/data/d-000.tar", env=env)
    assert r.rc == 1 and "access denied (HTTP 403" in r.err and "wrong" not in r.err, r.err


def test_a_server_that_lies_about_the_length_is_reported(run, fault, root):
    """A server that says an object is shorter than it is (and sends only that): the shard
    ends inside a member, an error naming the URL and offset; with --skip-errors the other
    shards arrive whole and the loss is counted."""
    base = f"{fault.url}/short=30000"
    r = run("stream", f"{base}/data/d-000.tar", "--seed", "3", *FAST)
    assert r.rc == 1, r.err
    assert f"{base}/data/d-000.tar" in r.err and "offset" in r.err, r.err
    full = run("stream", f"{root}/data/d-003.tar", "--seed", "3")
    r = run("stream", f"{fault.url}/data/d-{{000..002}}.tar", f"{base}/data/d-003.tar", "--seed", "3",
            "--skip-errors", "--stats", *FAST)
    assert r.rc == 0, r.err
    keys = [l.split()[0] for l in r.lines]
    assert len(keys) == len(set(keys)), "nothing twice"
    lost = 40 - sum(1 for l in full.lines if l.split()[0] in keys)
    assert 120 + 40 - lost == len(keys) and lost > 0
    assert f"{base}/data/d-003.tar" in r.err and "lost" in r.err, r.err


def test_a_slow_server_is_named_the_bottleneck_of_a_dataset(fault, ShardDataset):
    """A throttled fetch (each response from the fault server held back 250 ms, one stream)
    is the stage the statistics name, with the others waiting on it."""
    url = f"{fault.url}/latency=250/data/d-{{000..007}}.tar"
    ds = ShardDataset(url, seed=0, batch_size=16, image_size=32, streams=1, shuffle=0)
    n = sum(len(y) for _, y in ds)
    st = ds.stats()
    assert n == 320 and st["stages"]["deliver"]["items"] == 320
    assert st["bottleneck"] == "fetch", st["verdict"]
    assert "deliver waits on it" in st["verdict"], st["verdict"]


def test_a_host_where_nothing_listens_is_said_within_seconds(run, fault):
    """With the default retries (10), a refused connection and a name that does not resolve
    earn 3 retries (0.5 + 1 + 2 s of backoff at most), not minutes; a 503 keeps the whole
    budget (the control)."""
    for url in ("http://127.0.0.1:9/data/d-000.tar", "http://nothing-here.invalid/d-000.tar"):
        r = run("stream", url, "--stats", timeout=30)
        assert r.rc == 1 and url in r.err, r.err
        # 3 for the shard's .idx (its count), 3 for the walk over its headers that counts a
        # plain tar where it has none (the reading then says what is wrong), 3 for the read
        assert r.stat("retries") == 9, r.err
    r = run("stream", f"{fault.url}/fail=1000/data/d-000.tar", "--stats", "--backoff", "0.001",
            "--timeout", "2")
    assert r.rc == 1 and r.stat("retries") >= 10, r.err


def test_a_closed_port_is_said_within_seconds_each_retry_on_its_own_line(run):
    url = "http://127.0.0.1:9/x.tar"
    t0 = time.time()
    r = run("ls", url, timeout=30)
    took = time.time() - t0
    assert r.rc == 1 and took < 10, (took, r.err)
    retries = [l for l in r.err.splitlines() if "; retry " in l]
    assert [l.split("; retry ")[1].split(" in ")[0] for l in retries] == ["1 of 3", "2 of 3", "3 of 3"], r.err
    assert all(l.startswith(f"shardcat: {url}: ") and "connect" in l.lower() for l in retries), r.err
    last = r.err.strip().splitlines()[-1]
    assert url in last and "offset 0" in last and "retries spent" in last, r.err


def test_each_retry_is_one_line_on_stderr_naming_url_reason_attempt_and_wait(run, fault):
    """The fault server answers two 503s per request: every retry is said, with the URL
    shown without its credentials or query."""
    url = f"http://user:secret@{fault.url.split('://')[1]}/fail=2/data/d-000.tar?sig=hidden"
    r = run("stream", url, "--backoff", "0.01", "--stats")
    assert r.rc == 0, r.err
    lines = [l for l in r.err.splitlines() if "; retry " in l]
    assert len(lines) == r.stat("retries") >= 2, r.err
    shown = f"{fault.url}/fail=2/data/d-000.tar"
    for l in lines:
        assert l.startswith(f"shardcat: {shown}") and "HTTP 503" in l, l
        assert " of 10 in " in l and l.endswith(" s"), l
    assert "secret" not in r.err and "hidden" not in r.err, r.err


def test_retries_go_to_the_libshard_logger(fault, ShardDataset, caplog):  # noqa: N803
    import logging
    caplog.set_level(logging.WARNING, logger="libshard")
    url = f"{fault.url}/fail=1/data/d-000.tar"
    ds = ShardDataset(url, seed=0, decode=False, backoff=0.01, shuffle=0)
    assert sum(1 for _ in ds) > 0
    said = [r for r in caplog.records if r.name == "libshard" and "; retry " in r.getMessage()]
    assert said and all(url[:-4] in r.getMessage() and "HTTP 503" in r.getMessage()
                        for r in said), \
        [r.getMessage() for r in caplog.records]
    assert said[0].levelno == logging.WARNING


@pytest.mark.parametrize("kind", ["reader", "dataset"])
def test_ctrl_c_while_the_in_process_reader_waits_on_a_stalled_server(fault, kind):
    """The server stalls each response after 1000 bytes: SIGINT to a process reading in its
    own thread (no DataLoader workers) ends it at once, not after the stall timeouts."""
    import os
    import signal
    import subprocess
    import sys
    from conftest import REPO
    path = os.environ.get("LIBSHARD_PYTHONPATH", str(REPO / "build" / "python"))
    child = ("import sys\nimport libshard\nfrom libshard.torch import ShardDataset\n"
             "print('READY', flush=True)\n"
             "it = libshard.Reader(sys.argv[2], seed=1) if sys.argv[1] == 'reader' else "
             "ShardDataset(sys.argv[2], seed=1, decode=False, batch_size=8)\n"
             "for s in it:\n    pass\n")
    p = subprocess.Popen([sys.executable, "-c", child, kind,
                          f"{fault.url}/stall=1000/data/d-{{000..007}}.tar"],
                         env=dict(os.environ, PYTHONPATH=path), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    assert p.stdout.readline() == b"READY\n"
    time.sleep(2)  # into the stall
    assert p.poll() is None, p.stderr.read().decode()
    t0 = time.monotonic()
    p.send_signal(signal.SIGINT)
    p.wait(timeout=60)
    assert time.monotonic() - t0 < 5, "the stall kept the process past Ctrl-C"
    assert b"KeyboardInterrupt" in p.stderr.read()


def test_a_response_header_too_large_is_named_for_what_it_is(run, fault):
    """A 300 KB response header: libcurl gives up on it as "out of memory"; the error says
    the response could not be held, naming the URL, not that this process ran out."""
    r = run("stream", f"{fault.url}/bigheader=300000/data/d-000.tar", "--seed", "1", *FAST)
    assert r.rc == 1 and "d-000.tar" in r.err and "could not hold the response" in r.err and \
        "response header over its 100 KB limit" in r.err, r.err


def test_a_server_that_ignores_range_is_said(run, fault, ShardDataset):
    """Ranges answered whole cost bytes: shardcat stream says so without --stats, and
    ShardDataset warns once at the epoch's end; the control: a server that honours Range
    draws no word."""
    import warnings
    base = f"{fault.url}/norange,flaky=0.6"  # each cut resumes at an offset
    r = run("stream", f"{base}/{SPEC}", "--seed", "3", "--shuffle", "40", *FAST)
    assert r.rc == 0 and "Range requests were answered with the whole object" in r.err, r.err
    ctl = run("stream", f"{fault.url}/flaky=0.6/{SPEC}", "--seed", "3", "--shuffle", "40",
              *FAST)
    assert ctl.rc == 0 and "Range" not in ctl.err, ctl.err
    for url, said in ((f"{base}/{SPEC}", True), (f"{fault.url}/flaky=0.6/{SPEC}", False)):
        ds = ShardDataset(url, decode=False, seed=3, shuffle=40, partitions=8, retries=8,
                          backoff=0.01)
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            n = sum(1 for _ in ds)
        hits = [w for w in seen if "answered with the whole object" in str(w.message)]
        assert n > 0 and bool(hits) == said, [str(w.message) for w in seen]
