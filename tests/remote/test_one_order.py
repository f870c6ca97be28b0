"""One order wherever the bytes live: nine uneven plain tars (5, 13, 8, 21, 3, 17, 9, 1 and 11
samples, Python's tarfile, no index and no manifest), and the same with a .idx beside each,
give the same samples in the same order from a folder, nginx, the GCS emulator and s3rver,
in exact and equal mode, seeds 0 and 7, alone and in a mix, through shardcat stream and
ShardDataset; a state taken on the folder resumes on s3rver exactly, and the reverse.
(formats/order.md, section 4: the plan follows the counts, and every uncompressed tar is
counted the same way wherever it is: its headers walked once per machine, the index kept in
the cache.)"""
import io
import os
import re
import subprocess
import tarfile

import pytest

from conftest import BUCKET, CLEAN_ENV, TIMEOUT, gcs_env, s3_env

COUNTS = [5, 13, 8, 21, 3, 17, 9, 1, 11]


@pytest.fixture(scope="module")
def uneven(root, shardcat, gcs, s3):
    """{"plain": prefix, "indexed": prefix} under root (served by nginx) and in both buckets."""
    out = {}
    for kind in ("plain", "indexed"):
        top = root / f"uneven-{kind}"
        top.mkdir(exist_ok=True)
        for s, n in enumerate(COUNTS):
            with tarfile.open(top / f"u-{s:03d}.tar", "w", format=tarfile.GNU_FORMAT) as tf:
                for i in range(n):
                    for ext, data in (("cls", str(i % 3).encode()),
                                      ("bin", bytes([s, i]) * (700 + 37 * i))):
                        info = tarfile.TarInfo(f"s{s}/k{i:03d}.{ext}")
                        info.size = len(data)
                        tf.addfile(info, io.BytesIO(data))
        if kind == "indexed":
            subprocess.run([str(shardcat), "index", str(top / "u-{000..008}.tar")], check=True,
                           capture_output=True, timeout=TIMEOUT)
        for p in sorted(top.iterdir()):
            for server in (gcs, s3):
                server.upload(BUCKET, f"uneven-{kind}/{p.name}", p.read_bytes())
        out[kind] = f"uneven-{kind}"
    return out


def places(root, nginx, prefix):
    """(name, spec of the nine shards, environment) for each place the bytes live."""
    spec = "u-{000..008}.tar"
    return [("folder", str(root / prefix / spec), {}),
            ("http", f"{nginx.url}/{prefix}/{spec}", {}),
            ("gs", f"gs://{BUCKET}/{prefix}/{spec}", "gcs"),
            ("s3", f"s3://{BUCKET}/{prefix}/{spec}", "s3")]


def stream(shardcat, specs, env, tmp_path, *args):
    """shardcat stream's keys (and its stderr), a fresh index cache each run (a new machine)."""
    cache = tmp_path / f"cache-{os.urandom(4).hex()}"
    cp = subprocess.run([str(shardcat), "stream", *specs, *args], capture_output=True, text=True,
                        timeout=TIMEOUT, env={**CLEAN_ENV, **env, "XDG_CACHE_HOME": str(cache)})
    assert cp.returncode == 0, cp.stderr[-2000:]
    return [line.split("\t")[0] for line in cp.stdout.splitlines()], cp.stderr


def env_of(which, gcs, s3):
    return gcs_env(gcs) if which == "gcs" else s3_env(s3) if which == "s3" else {}


@pytest.mark.parametrize("kind", ["plain", "indexed"])
@pytest.mark.parametrize("mode", ["exact", "equal"])
@pytest.mark.parametrize("seed", ["0", "7"])
def test_the_same_order_from_every_place(shardcat, root, nginx, gcs, s3, uneven, tmp_path,
                                         kind, mode, seed):
    orders = {}
    for name, spec, which in places(root, nginx, uneven[kind]):
        keys, _ = stream(shardcat, [spec], env_of(which, gcs, s3), tmp_path, "--seed", seed,
                         "--shuffle", "10", "--mode", mode, "--world-size", "1")
        orders[name] = keys
    want = sum(COUNTS)
    assert (len(orders["folder"]) == want if mode == "exact"
            else 0 < want - len(orders["folder"]) < want // 2 or len(orders["folder"]) == want)
    for name, keys in orders.items():
        assert keys == orders["folder"], f"{name} gives another order than the folder"


def test_the_same_order_in_a_mix_and_across_ranks(shardcat, root, nginx, gcs, s3, uneven,
                                                  tmp_path):
    """A mix of the first five and the last four shards, 2 ranks in equal mode: each rank's
    sequence is the same from every place."""
    seen = {}
    for name, spec, which in places(root, nginx, uneven["plain"]):
        base = spec.rsplit("/", 1)[0]
        mix = ["--mix", f"1:{base}/u-{{000..004}}.tar", "--mix", f"2:{base}/u-{{005..008}}.tar"]
        for rank in ("0", "1"):
            keys, _ = stream(shardcat, [], env_of(which, gcs, s3), tmp_path, *mix, "--seed", "7",
                             "--shuffle", "10", "--rank", rank, "--world-size", "2")
            seen.setdefault(rank, {})[name] = keys
    for rank, by_place in seen.items():
        for name, keys in by_place.items():
            assert keys and keys == by_place["folder"], f"rank {rank}: {name} differs"


@pytest.mark.parametrize("there,back", [("folder", "s3"), ("s3", "folder")])
def test_a_state_taken_in_one_place_resumes_in_another(shardcat, root, nginx, gcs, s3, uneven,
                                                       tmp_path, there, back):
    where = {name: (spec, which) for name, spec, which in places(root, nginx, uneven["plain"])}
    args = ["--seed", "7", "--shuffle", "10", "--world-size", "1"]
    whole, _ = stream(shardcat, [where[there][0]], env_of(where[there][1], gcs, s3), tmp_path,
                      *args)
    head, err = stream(shardcat, [where[there][0]], env_of(where[there][1], gcs, s3), tmp_path,
                       *args, "--samples", "30")
    state = re.search(r"^state: (\S+)$", err, re.M).group(1)
    tail, _ = stream(shardcat, [where[back][0]], env_of(where[back][1], gcs, s3), tmp_path,
                     *args, "--state", state)
    assert head + tail == whole, f"a state from the {there} resumed on {back} differently"


def test_shard_dataset_gives_the_folders_order_from_a_bucket(ShardDataset, root, s3, uneven,
                                                              tmp_path, monkeypatch):
    for k, v in s3_env(s3).items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    spec = "u-{000..008}.tar"
    got = {}
    for name, url in (("folder", str(root / uneven["plain"] / spec)),
                      ("s3", f"s3://{BUCKET}/{uneven['plain']}/{spec}")):
        ds = ShardDataset(url, decode=False, seed=0, shuffle=10, rank=0, world_size=1)
        got[name] = [s["__key__"] for s in ds]
    assert got["s3"] == got["folder"] and len(got["folder"]) == sum(COUNTS)


def test_a_state_of_an_uncounted_remote_plan_resumes_with_make_indexes_never(
        shardcat, root, nginx, uneven, tmp_path):
    """libshard 0.4 planned remote plain tars in exact mode without counts; such a state
    resumes exactly with --make-indexes never (docs/resume.md), and with the defaults (the
    tars now counted) is refused or resumes exactly, never silently otherwise."""
    url = f"{nginx.url}/{uneven['plain']}/u-{{000..008}}.tar"
    old = ["--seed", "7", "--shuffle", "10", "--world-size", "1", "--make-indexes", "never"]
    whole, _ = stream(shardcat, [url], {}, tmp_path, *old)
    head, err = stream(shardcat, [url], {}, tmp_path, *old, "--samples", "30")
    state = re.search(r"^state: (\S+)$", err, re.M).group(1)
    tail, _ = stream(shardcat, [url], {}, tmp_path, *old, "--state", state)
    assert head + tail == whole and len(whole) == sum(COUNTS)
    cp = subprocess.run([str(shardcat), "stream", url, *old[:-2], "--state", state],
                        capture_output=True, text=True, timeout=TIMEOUT,
                        env={**CLEAN_ENV, "XDG_CACHE_HOME": str(tmp_path / "fresh")})
    got = [line.split("\t")[0] for line in cp.stdout.splitlines()]
    assert (cp.returncode != 0 and "(--make-indexes never restores it)" in cp.stderr) or \
        got == tail, (cp.returncode, cp.stderr[-800:], got[:5], tail[:5])
