"""http://, gs:// and s3:// shards read exactly as the same shards read locally: shardcat ls,
shardcat stream (same order for the same seed), prefixes, manifests, resume by index."""
import re
import pytest

from conftest import BUCKET, gcs_env, local_names, s3_env, strip

SETS = {"tar": "d-{000..007}.tar", "zst": "z-{000..007}.tar.zst"}


@pytest.fixture(params=["http", "gs", "s3"])
def remote(request, nginx, root):
    """(base URL of root/data, environment) for each scheme."""
    if request.param == "http":
        return f"{nginx.url}/data", {}
    if request.param == "gs":
        g = request.getfixturevalue("gcs")
        return f"gs://{BUCKET}/data", gcs_env(g)
    s = request.getfixturevalue("s3")
    return f"s3://{BUCKET}/data", s3_env(s)


@pytest.mark.parametrize("which", ["tar", "zst"])
def test_ls_and_stream_match_local(run, root, remote, which):
    base, env = remote
    local = root / "data"
    a = run("ls", f"{local}/{SETS[which]}")
    b = run("ls", f"{base}/{SETS[which]}", env=env)
    assert a.rc == 0 and b.rc == 0, b.err
    assert len(a.lines) == 320 and a.lines == b.lines
    args = ["--seed", "11", "--shuffle", "60", "--streams", "3"]
    a = run("stream", f"{local}/{SETS[which]}", *args)
    b = run("stream", f"{base}/{SETS[which]}", *args, env=env)
    assert b.rc == 0, b.err
    assert strip(a.lines, str(local)) == strip(b.lines, base)
    # a manifest's relative shard names resolve against the manifest's own URL
    m = run("stream", f"{base}/{SETS[which][0]}.json", *args, env=env)
    assert m.rc == 0, m.err
    assert strip(m.lines, base) == strip(a.lines, str(local))


def test_prefix_lists_the_shards(run, root, remote):
    base, env = remote
    r = run("info", "--json", f"{base}/", env=env)
    if base.startswith("http"):
        assert r.rc == 1 and "plain HTTP has no listing" in r.err and base in r.err
        return
    assert r.rc == 0, r.err
    import json
    rows = [json.loads(l) for l in r.lines]
    rows, total = rows[:-1], rows[-1]["total"]  # the totals after the shards
    urls = [row["url"] for row in rows]
    assert [u.rsplit("/", 1)[1] for u in urls] == local_names(root, "*.tar*")
    assert all(row["samples"] == 40 for row in rows) and total["samples"] == 40 * len(rows)


@pytest.mark.parametrize("which", ["tar", "zst"])
def test_resume_reads_only_what_it_needs(run, root, remote, which):
    """--state deep into the epoch: the samples left, by index and ranges, not whole shards."""
    base, env = remote
    spec = SETS[which]
    full = run("stream", f"{root}/data/{spec}", "--seed", "5")
    head = run("stream", f"{root}/data/{spec}", "--seed", "5", "--samples", "300")
    state = re.search(r"^state: (\S+)$", head.err, re.M).group(1)  # the same shards, elsewhere
    resumed = run("stream", f"{base}/{spec}", "--seed", "5", "--state", state, "--stats",
                  env=env)
    assert resumed.rc == 0, resumed.err
    assert strip(resumed.lines, base) == strip(full.lines[300:], f"{root}/data")
    size = sum((root / "data" / n).stat().st_size for n in local_names(root, spec[0] + "-*.t*"))
    fetched = resumed.stat("bytes")
    assert fetched < size / 4, (fetched, size)


@pytest.mark.parametrize("which", ["tar", "zst"])
def test_a_local_state_resumes_on_three_ranks_over_the_network(run, root, remote, which):
    """A state taken on one consumer of local shards restores 3 ranks reading the same
    shards remotely (the elastic order): before and after, every sample once."""
    base, env = remote
    spec = SETS[which]
    args = ["--seed", "5", "--shuffle", "30", "--partitions", "12", "--mode", "exact"]
    head = run("stream", f"{root}/data/{spec}", *args, "--samples", "130")
    state = re.search(r"^state: (\S+)$", head.err, re.M).group(1)
    seen = [l.split("\t")[0] for l in head.lines]
    for rank in range(3):
        r = run("stream", f"{base}/{spec}", *args, "--rank", str(rank), "--world-size", "3",
                "--state", state, env=env)
        assert r.rc == 0, r.err
        seen += [l.split("\t")[0] for l in r.lines]
    assert len(seen) == len(set(seen)) == 320


def test_dataset_matches_local(remote, root, monkeypatch, ShardDataset):  # noqa: N803
    """ShardDataset (raw samples and decoded batches) over each scheme, as over local files."""
    import torch
    base, env = remote
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    spec = SETS["zst"]
    kw = dict(decode=False, seed=9, shuffle=40)
    local = [(s["__key__"], s["jpg"], s["cls"]) for s in ShardDataset(f"{root}/data/{spec}", **kw)]
    ds = ShardDataset(f"{base}/{spec}", **kw)
    got = [(s["__key__"], s["jpg"], s["cls"]) for s in ds]
    assert got == local and len(got) == 320
    assert ds.remote_stats()["requests"] >= 8
    kw = dict(seed=9, batch_size=32, image_size=32, crop="center")
    a = [(x.clone(), y.clone()) for x, y in ShardDataset(f"{root}/data/{spec}", **kw)]
    b = [(x.clone(), y.clone()) for x, y in ShardDataset(f"{base}/{spec}", **kw)]
    assert len(a) == len(b) == 10
    for (xa, ya), (xb, yb) in zip(a, b):
        assert torch.equal(xa, xb) and torch.equal(ya, yb)


@pytest.mark.parametrize("which", ["tar", "zst"])
def test_indexed_dataset_matches_local_and_reads_only_the_sample(remote, root, monkeypatch,
                                                                 which, ShardDataset):  # noqa: N803
    """IndexedShardDataset and libshard.wids over each scheme: every 7th sample as the same
    index reads locally, each through a Range request for its bytes (tar.zst: its frames),
    far less than the shards. (ShardDataset: the fixture puts libshard on sys.path.)"""
    from libshard.torch import IndexedShardDataset
    from libshard.wids import ShardListDataset
    base, env = remote
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    spec = SETS[which]
    local = IndexedShardDataset(f"{root}/data/{spec}", image_size=32, crop="center")
    ds = IndexedShardDataset(f"{base}/{spec}", image_size=32, crop="center", open_files=3)
    assert len(ds) == len(local) == 320
    picks = list(range(0, 320, 7))
    for i in picks:
        a, b = local.raw(i), ds.raw(i)
        assert (a["__key__"], a["jpg"], a["cls"]) == (b["__key__"], b["jpg"], b["cls"])
        xa, ya = local[i]
        xb, yb = ds[i]
        assert ya == yb and bool((xa == xb).all())
    # four samples from four shards: their bytes (and indexes), not the shards'
    few = IndexedShardDataset(f"{base}/{spec}", image_size=32, crop="center")
    for i in (5, 90, 170, 300):
        few.raw(i)
    st = few.remote_stats()
    size = sum(p.stat().st_size for p in (root / "data").glob(spec.replace("{000..007}", "*")))
    assert st["bytes"] < size / 8, (st, size)
    manifest = {"tar": "d.json", "zst": "z.json"}[which]
    w = ShardListDataset(f"{base}/{manifest}", transformations=[])
    assert len(w) == 320 and w[33]["__key__"] == local.raw(33)["__key__"]
    assert w[33][".jpg"].read() == local.raw(33)["jpg"]


def test_a_mix_of_remote_and_local_sources_reads_as_all_local(run, root, remote):
    """shardcat stream --mix with a remote source (its manifest, or braces) beside a local
    one: the sequence of the same mix read locally."""
    base, env = remote
    local = root / "data"
    args = ["--seed", "4", "--shuffle", "50", "--rank", "1", "--world-size", "2"]
    want = run("stream", "--mix", f"3:{local}/d-{{000..007}}.tar", "--mix",
               f"1:{local}/z-{{000..007}}.tar.zst", *args)
    assert want.rc == 0, want.err
    assert len(want.lines) == 320
    assert 78 <= sum(".tar.zst" in l for l in want.lines) <= 82, "about a quarter of rank 1's"
    for spec in (f"{base}/z.json", f"{base}/z-{{000..007}}.tar.zst"):
        got = run("stream", "--mix", f"3:{local}/d-{{000..007}}.tar", "--mix", f"1:{spec}",
                  *args, env=env)
        assert got.rc == 0, got.err
        assert strip(strip(got.lines, base), str(local)) == strip(want.lines, str(local)), spec


def test_a_remote_manifest_reaches_no_local_file(run, root, nginx):
    """A manifest served over http listing a local path or a file:// URL is refused, as a
    pipe: entry is, unless allowed (--allow-manifest-local); read locally, it lists local
    shards as ever."""
    import json
    local = root / "data"
    for i, url in enumerate((str(local / "d-000.tar"), f"file://{local}/d-001.tar")):
        (root / f"reach{i}.json").write_text(json.dumps({"shardlist": [{"url": url,
                                                                        "nsamples": 40}]}))
        m = run("stream", f"{nginx.url}/reach{i}.json", "--seed", "1")
        assert m.rc == 1 and "shardlist[0] is a local file" in m.err and \
            "--allow-manifest-local" in m.err and not m.lines, m.err
        ok = run("stream", f"{nginx.url}/reach{i}.json", "--seed", "1", "--allow-manifest-local")
        assert ok.rc == 0 and len(ok.lines) == 40, ok.err
        m = run("stream", str(root / f"reach{i}.json"), "--seed", "1")
        assert m.rc == 0 and len(m.lines) == 40, m.err


def test_a_remote_manifests_commands_need_their_own_leave_alone(run, root, nginx):
    """A pipe: entry of a manifest served over http is a command, not a local file: allowed by
    --allow-manifest-commands alone, and refused without it, named as a command."""
    import json
    local = root / "data"
    (root / "cmd.json").write_text(json.dumps({"shardlist": [
        {"url": f"pipe:cat {local}/d-000.tar", "nsamples": 40}]}))
    m = run("stream", f"{nginx.url}/cmd.json", "--seed", "1")
    assert m.rc == 1 and "is a command" in m.err and "local file" not in m.err and not m.lines, m.err
    ok = run("stream", f"{nginx.url}/cmd.json", "--seed", "1", "--allow-manifest-commands")
    assert ok.rc == 0 and len(ok.lines) == 40, ok.err
