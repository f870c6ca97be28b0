"""Subset views over HTTP (nginx): the chosen samples alone, each read by Range through the
shard's index, the bytes fetched bounded by the chosen samples' own bytes (their members and
headers in the tar) and the indexes; a .tar.zst view exact too (its frames read)."""
import random
import re
import tarfile

import pytest

from conftest import strip

SHARDS = "d-{000..007}.tar"


def sample_bytes(path):
    """Each sample's bytes in the tar at path (its members with their headers), by key."""
    out = {}
    with tarfile.open(path) as tf:
        for m in tf:
            key = m.name.split(".", 1)[0]
            out[key] = out.get(key, 0) + 512 + (m.size + 511) // 512 * 512
    return out


@pytest.fixture(scope="module")
def every(run, root):
    r = run("stream", f"{root / 'data'}/{SHARDS}")
    assert r.rc == 0 and len(r.lines) == 320, r.err
    return [l.split("\t")[0] for l in r.lines]


@pytest.mark.parametrize("share", [0.01, 0.1, 0.5, 1.0])
def test_a_view_over_http_fetches_the_chosen_bytes_alone(run, root, nginx, every, tmp_path,
                                                         share):
    chosen = random.Random(share).sample(every, max(1, int(len(every) * share)))
    keys = tmp_path / "keys.txt"
    keys.write_text("".join(k + "\n" for k in chosen))
    log = nginx.prefix / "logs" / "access.log"
    mark = len(log.read_text())
    r = run("stream", f"{nginx.url}/data/{SHARDS}", "--keys", keys, "--shuffle", 50,
            "--stats")
    assert r.rc == 0, r.err
    assert sorted(l.split("\t")[0] for l in r.lines) == sorted(chosen)
    sizes = {}
    for i in range(8):
        sizes.update(sample_bytes(root / "data" / f"d-{i:03d}.tar"))
    want = sum(sizes[k] for k in chosen)
    got = re.findall(r'"GET /data/d-00\d\.(tar|idx) HTTP/1\.1" 20[06] (\d+)',
                     log.read_text()[mark:])
    tar = sum(int(n) for kind, n in got if kind == "tar")
    opened = int(re.search(r"(\d+) shard opens", r.err).group(1))
    # the shards' bytes: the chosen samples', and at each open two headers proving the index
    # is the shard's (a 512-byte header and the end's); the indexes are counted apart
    assert tar <= 1.05 * want + opened * 1100, (tar, want, opened)
    # consecutive chosen samples in one request: a whole shard chosen, a few a shard
    requests = sum(1 for kind, _ in got if kind == "tar")
    assert requests <= (4 * opened if share == 1.0 else len(chosen) + 2 * opened), requests
    assert sum(int(n) for kind, n in got if kind == "idx") <= 3 * sum(
        (root / "data" / f"d-{i:03d}.idx").stat().st_size for i in range(8))


def test_a_view_of_zstd_shards_over_http_is_exact(run, root, nginx, every, tmp_path):
    chosen = random.Random(9).sample(every, 40)
    keys = tmp_path / "keys.txt"
    keys.write_text("".join(k + "\n" for k in chosen))
    local = run("stream", f"{root / 'data'}/z-{{000..007}}.tar.zst", "--keys", keys,
                "--shuffle", 20, "--seed", 4)
    there = run("stream", f"{nginx.url}/data/z-{{000..007}}.tar.zst", "--keys", keys,
                "--shuffle", 20, "--seed", 4)
    assert local.rc == 0 and there.rc == 0, there.err
    assert sorted(l.split("\t")[0] for l in there.lines) == sorted(chosen)
    assert strip(there.lines, f"{nginx.url}/data") == strip(local.lines, str(root / "data"))
    assert re.search(r"keys: 40 given, 40 samples chosen, 0 keys", there.err), there.err


@pytest.mark.parametrize("scheme", ["gs", "s3"])
def test_a_view_reads_the_chosen_from_buckets(request, run, root, every, tmp_path, scheme):
    """The GCS emulator and s3rver: the chosen samples, in the order the local shards give."""
    from test_webdataset import served
    base, env = served(request, None, scheme)
    chosen = random.Random(11).sample(every, 32)
    keys = tmp_path / "keys.txt"
    keys.write_text("".join(k + "\n" for k in chosen))
    args = ["--keys", keys, "--shuffle", 20, "--seed", 6]
    local = run("stream", f"{root / 'data'}/{SHARDS}", *args)
    there = run("stream", f"{base}/{SHARDS}", *args, env=env)
    assert there.rc == 0, there.err
    assert sorted(l.split("\t")[0] for l in there.lines) == sorted(chosen)
    assert strip(there.lines, base) == strip(local.lines, str(root / "data"))


def test_subset_reads_over_http_and_writes_into_a_bucket(run, root, nginx, s3, every, tmp_path):
    """shardcat subset from nginx into s3rver: the set written there (shards, indexes,
    manifest) streams back the chosen samples."""
    from conftest import BUCKET, s3_env
    chosen = random.Random(13).sample(every, 50)
    keys = tmp_path / "keys.txt"
    keys.write_text("".join(k + "\n" for k in chosen))
    made = run("subset", f"{nginx.url}/data/{SHARDS}", "--keys", keys, "-o",
               f"s3://{BUCKET}/subset/part-%03d.tar", "--count", 20, env=s3_env(s3))
    assert made.rc == 0, made.err
    assert "50 samples in 3 shards" in made.err, made.err
    back = run("stream", f"s3://{BUCKET}/subset/part.json", "--seed", 1, env=s3_env(s3))
    assert back.rc == 0, back.err
    assert sorted(l.split("\t")[0] for l in back.lines) == sorted(chosen)
