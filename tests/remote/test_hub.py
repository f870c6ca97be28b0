"""hf://datasets/OWNER/NAME[@REVISION]/PATH against the Hugging Face Hub's documented API
served by nginx on 127.0.0.1 (HF_ENDPOINT): the revision resolved to its commit and pinned in
every URL listed, the tree listed page by page through Link headers, each file read through
/resolve/, whose 302 sends it to a second server block (the CDN) where ranges and ETags
are served; the token sent as a bearer and never shown."""
import json
import os
import re
import subprocess
import sys

import pytest

import servers
from conftest import CLEAN_ENV, REPO, TIMEOUT, strip

SHA = "0123456789abcdef0123456789abcdef01234567"
TOKEN = "hf_standinToken0123456789"
FAR, PAST = 4102444800, 1000000000  # CDN links' stated expiry: 2100, 2001


@pytest.fixture(scope="module")
def hub(root, tmp_path_factory):
    """The stand-in: a data set o/n whose data/ folder is root/data, on two tree pages."""
    ng = stand_in(root, tmp_path_factory.mktemp("hub-api"))
    yield ng
    ng.close()


def stand_in(root, api, limit="", rate="1r/s", limited="tree"):
    """The Hub's API for o/n over root/data in nginx (api: a folder for its pages), the CDN
    a second server block; limit: directives (a rate limit at rate) for the tree's pages,
    or with limited="api" for every API call (the revision too)."""
    api.mkdir(parents=True, exist_ok=True)
    every = limit if limited == "api" else ""
    (api / "revision.json").write_text(json.dumps({"id": "o/n", "sha": SHA}))
    data = root / "data"
    entries = [{"type": "file", "oid": f"{i:040x}", "size": p.stat().st_size,
                "path": f"data/{p.name}"}
               for i, p in enumerate(sorted(q for q in data.iterdir() if q.is_file()))]
    half = len(entries) // 2
    (api / "tree1.json").write_text(json.dumps(
        [{"type": "directory", "oid": "0" * 40, "size": 0, "path": "data/sub"}]
        + entries[half:]))  # the pages in no particular order: the listing sorts
    (api / "tree2.json").write_text(json.dumps(entries[:half]))
    cdn = servers.free_port()
    auth = f'if ($http_authorization != "Bearer {TOKEN}") {{ return 401; }}'
    json_type = "default_type application/json;"
    extra = f"""
      location = /api/datasets/o/n/revision/main {{
        {auth} rewrite ^ /_api/revision.json last; }}
      location = /_api/revision.json {{ internal; alias {api}/revision.json; {json_type} {every} }}
      location = /api/datasets/o/n/tree/{SHA}/data {{
        {auth}
        if ($arg_cursor = "2") {{ rewrite ^ /_api/tree2.json last; }}
        rewrite ^ /_api/tree1.json last; }}
      location = /_api/tree1.json {{
        internal; alias {api}/tree1.json; {json_type} {limit}
        add_header Link '<http://$http_host/api/datasets/o/n/tree/{SHA}/data?recursive=true&cursor=2>; rel="next"' always; }}
      location = /_api/tree2.json {{ internal; alias {api}/tree2.json; {json_type} {limit} }}
      location ~ ^/datasets/o/n/resolve/(main|{SHA})/(.*)$ {{
        {auth} return 302 http://127.0.0.1:{cdn}/$2?Expires={FAR}&sig=$request_id; }}
      location ~ ^/datasets/o/stale/resolve/{SHA}/(.*)$ {{
        {auth} return 302 http://127.0.0.1:{cdn}/$1?Expires={PAST}&sig=$request_id; }}
    """
    # The CDN: signed links, each refused once the test revokes it (a file named after its
    # signature in revoked/); the token never sent to it (refused if it were).
    (api / "revoked").mkdir(exist_ok=True)
    cdn_block = f"""server {{ listen 127.0.0.1:{cdn}; root {root};
      location / {{ if ($http_authorization) {{ return 400; }}
                    if (-f {api}/revoked/$arg_sig) {{ return 403; }} }} }}"""
    zone = f"limit_req_zone $binary_remote_addr zone=hub:1m rate={rate};" if limit else ""
    ng = servers.Nginx(root, extra=extra, http=f"{zone} {cdn_block}")
    ng.revoked = api / "revoked"
    return ng


def env(hub, token=TOKEN):
    e = {"HF_ENDPOINT": hub.url}
    if token is not None:
        e["HF_TOKEN"] = token
    return e


def api_calls(hub):
    log = (hub.prefix / "logs" / "access.log").read_text().splitlines()
    return [l for l in log if "/api/" in l]


def test_a_hub_folder_reads_as_the_local_folder(run, root, hub):
    """Listed once (the revision, then the tree's two pages), pinned to the commit, and every
    sample read as the local shards give it, in the same order for the same seed."""
    before = len(api_calls(hub))
    args = ["--seed", "11", "--shuffle", "60", "--streams", "3"]
    a = run("stream", f"{root / 'data'}/", *args)
    b = run("stream", "hf://datasets/o/n/data/", *args, env=env(hub))
    assert a.rc == 0 and b.rc == 0, b.err
    assert len(a.lines) == 640
    assert strip(b.lines, f"hf://datasets/o/n@{SHA}/data") == strip(a.lines, str(root / "data"))
    calls = api_calls(hub)[before:]
    assert len([c for c in calls if "/revision/main" in c]) == 1, calls
    assert len([c for c in calls if "/tree/" in c]) == 2, calls
    assert TOKEN not in b.out + b.err


def test_a_resume_reads_by_range_through_the_redirect(run, root, hub):
    """A state taken mid-epoch resumes by index: ranges of the shards, asked at /resolve/
    and served by the CDN after its 302."""
    args = ["--seed", "5", "--shuffle", "40"]
    url = f"hf://datasets/o/n@{SHA}/data/d-{{000..007}}.tar"
    whole = run("stream", url, *args, env=env(hub))
    head = run("stream", url, *args, "--samples", "70", env=env(hub))
    state = re.search(r"^state: (\S+)", head.err, re.M).group(1)
    tail = run("stream", url, *args, "--state", state, env=env(hub))
    assert whole.rc == 0 and tail.rc == 0, tail.err
    assert head.lines + tail.lines == whole.lines and len(whole.lines) == 320
    log = (hub.prefix / "logs" / "access.log").read_text()
    assert re.search(r'"GET /datasets/o/n/resolve/[0-9a-f]{40}/data/d-00\d\.tar HTTP/1\.1" 302',
                     log)


def test_an_open_file_is_resolved_once_then_read_at_its_cdn_link(hub, root, monkeypatch):
    """IndexedShards reads a sample a Range: each shard's first request goes through
    /resolve/, the others straight to the CDN link it gave (remote_stats counts both); a link
    the CDN refuses (revoked) is resolved again at once, no retry spent; a link whose stated
    expiry has passed is never asked straight (the control: every range resolved)."""
    from libshard.indexed import IndexedShards
    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    log = hub.prefix / "logs" / "access.log"

    def resolves(since, name="n"):
        return re.findall(rf'"GET /datasets/o/{name}/resolve/{SHA}/data/(d-00\d\.tar) ',
                          log.read_text()[since:])

    local = IndexedShards(f"{root}/data/d-{{000..001}}.tar")

    def here(i):
        return {k: v for k, v in local[i].items() if k not in ("__url__", "__shard__")}

    def there(ds, i):
        return {k: v for k, v in ds[i].items() if k not in ("__url__", "__shard__")}

    mark = len(log.read_text())
    shards = IndexedShards(f"hf://datasets/o/n@{SHA}/data/d-{{000..001}}.tar", retries=0)
    picks = [0, 7, 3, 39, 12, 40, 79, 41, 5, 60]
    assert [there(shards, i) for i in picks] == [here(i) for i in picks]
    st = shards.remote_stats()
    assert sorted(resolves(mark)) == ["d-000.tar", "d-001.tar"], resolves(mark)
    # a resolve a file opened (two shards, their indexes), every other request straight:
    # at most one a sample (its members in one range), after three a shard proving its index
    assert st["resolves"] == 4 and st["direct"] == st["requests"] - 4, st
    assert st["requests"] - 2 <= 2 * 3 + len(picks), st
    assert st["retries"] == 0
    links = re.findall(r'"GET /data/d-000\.tar\?Expires=\d+&sig=(\w+) ', log.read_text()[mark:])
    assert len(set(links)) == 1, links  # one link, asked again
    (hub.revoked / links[0]).touch()
    mark = len(log.read_text())
    assert there(shards, 9) == here(9) and there(shards, 1) == here(1)
    st2 = shards.remote_stats()
    assert resolves(mark) == ["d-000.tar"], resolves(mark)
    assert '" 403 ' in log.read_text()[mark:]  # refused, then resolved again
    assert st2["resolves"] == 5 and st2["retries"] == 0, st2
    stale = IndexedShards(f"hf://datasets/o/stale@{SHA}/data/d-000.tar")
    mark = len(log.read_text())
    assert [there(stale, i) for i in picks[:5]] == [here(i) for i in picks[:5]]
    st3 = stale.remote_stats()
    assert st3["direct"] == 0 and st3["resolves"] == st3["requests"], st3
    assert len(resolves(mark, "stale")) >= len(picks[:5])


def test_the_token_is_named_never_shown(run, hub):
    none = run("stream", "hf://datasets/o/n/data/", env=env(hub, token=None))
    assert none.rc != 0 and "set HF_TOKEN" in none.err, none.err
    wrong = run("stream", "hf://datasets/o/n/data/", env=env(hub, token="hf_wrongWrongWrong"))
    assert wrong.rc != 0 and "HF_TOKEN" in wrong.err and "hf_wrongWrongWrong" not in wrong.err
    assert "HTTP 401" in wrong.err


def test_the_token_file_is_read_when_hf_token_is_unset(run, hub, tmp_path):
    (tmp_path / "token").write_text(TOKEN + "\n")
    r = run("stream", f"hf://datasets/o/n@{SHA}/data/d-000.tar",
            env={**env(hub, token=None), "HF_HOME": str(tmp_path)})
    assert r.rc == 0 and len(r.lines) == 40, r.err


def test_urls_it_cannot_take_and_writes_are_refused_by_name(run, hub, shardpack, root,
                                                             tmp_path):
    bad = run("stream", "hf://models/o/n/data/", env=env(hub))
    assert bad.rc != 0 and "hf://datasets/OWNER/NAME[@REVISION]/PATH" in bad.err
    cp = subprocess.run([str(shardpack), str(root / "data"), "-o",
                         "hf://datasets/o/n/out/x-%03d.tar", "-q"], capture_output=True,
                        text=True, env={**CLEAN_ENV, **env(hub)}, timeout=TIMEOUT)
    assert cp.returncode != 0 and "not the Hugging Face Hub (hf://, read only)" in cp.stderr, cp.stderr


def test_shard_dataset_reads_the_hub_as_local(hub, root, ShardDataset, monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    kw = dict(seed=3, batch_size=16, image_size=32, raw_fields="__key__")
    here = [(x, list(f["__key__"])) for x, _, f in
            ShardDataset(f"{root / 'data'}/d-{{000..007}}.tar", **kw)]
    there = [(x, list(f["__key__"])) for x, _, f in
             ShardDataset("hf://datasets/o/n/data/d-{000..007}.tar", **kw)]
    assert len(here) == len(there) == 20
    for (a, ka), (b, kb) in zip(here, there):
        assert ka == kb and bool((a == b).all())


def test_a_manifest_written_once_lists_nothing_again(run, root, hub, tmp_path):
    """shardcat manifest lists the Hub's folder once, pinned and counted; a job reading the
    manifest then calls no API and reads the same samples."""
    m = tmp_path / "train.json"
    made = run("manifest", "hf://datasets/o/n/data/", "-o", m, env=env(hub))
    assert made.rc == 0, made.err
    listed = json.loads(m.read_text())["shardlist"]
    assert len(listed) == 16 and all(s["url"].startswith(f"hf://datasets/o/n@{SHA}/data/")
                                     for s in listed)
    assert sum(s["nsamples"] for s in listed) == 640
    before = len(api_calls(hub))
    args = ["--seed", "11", "--shuffle", "60", "--mode", "equal", "--world-size", "2",
            "--rank", "1"]
    a = run("stream", f"{root / 'data'}/", *args)
    b = run("stream", m, *args, env=env(hub))
    assert b.rc == 0, b.err
    assert strip(b.lines, f"hf://datasets/o/n@{SHA}/data") == strip(a.lines, str(root / "data"))
    assert len(api_calls(hub)) == before, "no listing, no revision asked"
    no = run("manifest", "hf://datasets/o/n/data/", env=env(hub))
    assert no.rc == 2 and "manifest wants -o X.json" in no.err


def test_a_dataset_lists_the_hub_once_for_all_its_processes(hub, root, ShardDataset, monkeypatch,
                                                            tmp_path):
    """A ShardDataset given a folder of the Hub lists it once, in the process that makes it:
    its DataLoader workers, and a second dataset of the same run, read the manifest that
    listing wrote (the revision and the tree's two pages asked once, not once a process)."""
    from libshard.torch import ShardLoader
    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "hub-test")
    before = len(api_calls(hub))
    kw = dict(seed=3, batch_size=16, image_size=32, raw_fields="__key__")
    ds = ShardDataset("hf://datasets/o/n/data/", **kw)
    keys = [k for _, _, f in ShardLoader(ds, num_workers=2) for k in f["__key__"]]
    assert sorted(keys) == sorted(k for _, _, f in ShardDataset(f"{root / 'data'}/", **kw)
                                  for k in f["__key__"])
    again = ShardDataset("hf://datasets/o/n/data/", **kw)
    assert len(again) == len(ds)
    calls = api_calls(hub)[before:]
    assert len(calls) == 3, calls  # revision, tree page 1, tree page 2
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "another-run")  # the control: a new run lists
    ShardDataset("hf://datasets/o/n/data/", **kw)
    assert len(api_calls(hub)) - before == 6
    from libshard.indexed import IndexedShards  # random access shares the run's listing
    assert len(IndexedShards("hf://datasets/o/n/data/")) == 640
    assert len(api_calls(hub)) - before == 6


def test_a_429_with_retry_after_is_waited_out_and_said(run, root, tmp_path):
    """The tree's pages limited to one a second (nginx limit_req, 429 with Retry-After: 1):
    the second page's 429 is said, waited out for the second the Hub asked, and the listing
    goes on."""
    ng = stand_in(root, tmp_path, limit="limit_req zone=hub; limit_req_status 429; "
                                        "add_header Retry-After 1 always;")
    try:
        r = run("stream", "hf://datasets/o/n/data/", "--seed", "1", env=env(ng))
        assert r.rc == 0 and len(r.lines) == 640, r.err
        assert re.search(r"HTTP 429; retry 1 of \d+ in 1\.00 s", r.err), r.err
        log = (ng.prefix / "logs" / "access.log").read_text()
        assert '" 429 ' in log
    finally:
        ng.close()


def test_webdataset_pipelines_read_the_hub(hub, root):
    """libshard.webdataset: hf:// shards read through libshard (no curl, no huggingface_hub),
    the local samples in the local order; a folder listed by libshard; a missing file
    WebDataset's IOError."""
    from test_webdataset import PATTERN, keys_of
    local = keys_of(str(root / "data" / PATTERN), {})
    base = f"hf://datasets/o/n@{SHA}/data"
    samples, urls, missing = keys_of(f"{base}/{PATTERN}", env(hub))
    assert samples == local[0] and len(samples) == 120
    assert urls == [f"{base}/d-{i:03d}.tar" for i in range(3)]
    assert missing.startswith("IOError"), missing
    code = ("import sys, warnings; warnings.simplefilter('ignore'); "
            "import libshard.webdataset as wds; "
            "print(len(list(wds.WebDataset(sys.argv[1], shardshuffle=False))))")
    path = os.environ.get("LIBSHARD_PYTHONPATH", str(REPO / "build" / "python"))
    cp = subprocess.run([sys.executable, "-c", code, "hf://datasets/o/n/data/"],
                        capture_output=True, text=True, timeout=TIMEOUT,
                        env={**CLEAN_ENV, **env(hub), "PYTHONPATH": path})
    assert cp.returncode == 0 and cp.stdout.strip() == "640", cp.stderr[-800:]


def test_webdataset_curl_pipes_of_the_hub_are_read_as_hf(hub, root):
    """`pipe:curl -s -L RESOLVE-URL -H 'Authorization:Bearer TOKEN'`, as the Hub's guide
    writes it, is read by libshard (its user agent in the log, no curl run; the token is
    the one it would send); a pipe with anything more runs curl as written (the control)."""
    from test_webdataset import PATTERN
    code = ("import json, sys, warnings; warnings.simplefilter('ignore'); "
            "import libshard.webdataset as wds; "
            "print(json.dumps([k for k, in wds.WebDataset(sys.argv[1], shardshuffle=False)"
            ".to_tuple('__key__')]))")
    path = os.environ.get("LIBSHARD_PYTHONPATH", str(REPO / "build" / "python"))

    def keys(url, extra):
        cp = subprocess.run([sys.executable, "-c", code, url], capture_output=True, text=True,
                            timeout=TIMEOUT, env={**CLEAN_ENV, **extra, "PYTHONPATH": path})
        assert cp.returncode == 0, cp.stderr[-800:]
        return json.loads(cp.stdout)

    local = keys(str(root / "data" / PATTERN), {})
    log = hub.prefix / "logs" / "access.log"
    resolve = f"{hub.url}/datasets/o/n/resolve/{SHA}/data"
    for pipe, agent in ((f"pipe:curl -s -L {resolve}/{PATTERN} -H 'Authorization:Bearer "
                         f"{TOKEN}'", "libshard/"),
                        (f"pipe:curl -f -s -L -H 'Authorization:Bearer {TOKEN}' -A curl/x "
                         f"{resolve}/{PATTERN}", "curl/x")):
        mark = len(log.read_text())
        assert keys(pipe, env(hub)) == local and len(local) == 120, pipe
        asked = re.findall(r'"GET /datasets/o/n/resolve/\S+ HTTP/1\.1" 302 \d+ "-" "([^"]*)"',
                           log.read_text()[mark:])
        assert len(asked) >= 3 and all(a.startswith(agent) for a in asked), asked


def test_webdataset_lists_a_hub_folder_once_a_job(hub, root, tmp_path):
    """Two processes of one run (TORCHELASTIC_RUN_ID) making WebDataset("hf://.../data/")
    list the folder once: the second reads the first's listing; another run lists again."""
    code = ("import sys, warnings; warnings.simplefilter('ignore'); "
            "import libshard.webdataset as wds; "
            "print(len(list(wds.WebDataset(sys.argv[1], shardshuffle=False))))")
    path = os.environ.get("LIBSHARD_PYTHONPATH", str(REPO / "build" / "python"))
    before = len(api_calls(hub))
    for run_id in ("one", "one", "two"):
        cp = subprocess.run([sys.executable, "-c", code, "hf://datasets/o/n/data/"],
                            capture_output=True, text=True, timeout=TIMEOUT,
                            env={**CLEAN_ENV, **env(hub), "PYTHONPATH": path,
                                 "XDG_CACHE_HOME": str(tmp_path), "TORCHELASTIC_RUN_ID": run_id})
        assert cp.returncode == 0 and cp.stdout.strip() == "640", cp.stderr[-800:]
    assert len(api_calls(hub)) - before == 6  # revision and two pages, once a run


JOB = r'''
import json, os, sys
import torch, torch.distributed as dist
sys.path.insert(0, os.environ["LIBSHARD_PYTHONPATH"])
from libshard import _libshard
from libshard.torch import ShardDataset, ShardLoader
per_worker, out = sys.argv[1] == "per-worker", sys.argv[2]
dist.init_process_group("gloo")
ds = ShardDataset("hf://datasets/o/n/data/", seed=3, batch_size=8, image_size=32,
                  raw_fields="__key__;__url__")
def lists_again(_):  # the control: every worker lists the folder itself, as WebDataset's do
    try:
        _libshard.list_shards(["hf://datasets/o/n/data/"], retries=0)
    except Exception:
        pass  # refused (429): what the control counts
ld = ShardLoader(ds, num_workers=4, worker_init_fn=lists_again if per_worker else None)
keys = [u + " " + k for _, _, f in ld for k, u in zip(f["__key__"], f["__url__"])]
got = [None] * dist.get_world_size()
dist.all_gather_object(got, keys)
if dist.get_rank() == 0:
    json.dump(got, open(out, "w"))
dist.destroy_process_group()
'''


@pytest.mark.parametrize("who", ["job", "per-worker"])
def test_sixteen_consumers_list_the_hub_once(root, tmp_path, who):
    """4 ranks x 4 DataLoader workers under torchrun (gloo) against a Hub that takes 8 API
    calls at once, then one a minute (nginx limit_req, 429 with Retry-After): the job lists
    once (rank 0 lists and broadcasts the manifest, the workers read it) and meets no 429;
    the control, every worker listing on its own, draws 429s."""
    from stream.test_torchrun import torchrun
    ng = stand_in(root, tmp_path / "api", limit="limit_req zone=hub burst=8 nodelay; "
                  "limit_req_status 429; add_header Retry-After 1 always;",
                  rate="1r/m", limited="api")
    try:
        out = tmp_path / "keys.json"
        cp, log = torchrun(JOB, [who, out], tmp_path, nproc=4, env={
            **env(ng), "XDG_CACHE_HOME": str(tmp_path / "cache"),
            "LIBSHARD_PYTHONPATH": os.environ.get("LIBSHARD_PYTHONPATH",
                                                  str(REPO / "build" / "python"))})
        assert cp.returncode == 0, log[-4000:]
        keys = [k for rank in json.loads(out.read_text()) for k in rank]
        assert len(keys) == len(set(keys)) and 600 <= len(keys) <= 640
        calls = api_calls(ng)
        limited = [c for c in calls if '" 429 ' in c]
        if who == "job":
            assert len(calls) == 3 and not limited, calls  # the revision, two tree pages
        else:
            assert limited, "the control: 16 workers listing on their own meet the limit"
        assert TOKEN not in log
    finally:
        ng.close()
