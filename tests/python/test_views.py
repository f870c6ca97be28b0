"""Subset views (keys=, shardcat --keys): the samples a list of keys chooses, found in the
shards' indexes, planned and read alone: exactly the chosen, once an epoch; a shard with
none chosen not opened; a resume exact on another topology; a state refused by a reader of
another view, naming both; keys that choose nothing counted."""
import random
import re
import subprocess
import warnings

import pytest

from .conftest import make_imagefolder, pack

SHARDS, PER = 20, 50  # 1,000 samples


@pytest.fixture(scope="module")
def twenty(tmp_path_factory, shardpack):
    """20 shards of 50 small JPEGs, with their indexes; and every key in shard order."""
    top = tmp_path_factory.mktemp("views")
    make_imagefolder(top / "imgs", n=SHARDS * PER, size=(16, 24))
    pack(shardpack, top / "imgs", top / "set", maxcount=PER)
    urls = str(top / "set" / "train-{000000..000019}.tar")
    return top, urls


def stream(shardcat, urls, *args):
    cp = subprocess.run([str(shardcat), "stream", urls, "--seed", "7", *map(str, args)],
                        capture_output=True, text=True, timeout=300)
    return cp.returncode, [l.split("\t")[0] for l in cp.stdout.splitlines()], cp.stderr


@pytest.fixture(scope="module")
def every(shardcat, twenty):
    rc, keys, err = stream(shardcat, twenty[1])
    assert rc == 0 and len(keys) == SHARDS * PER, err
    return keys


@pytest.fixture(scope="module")
def shard_of(shardcat, twenty):
    """Each key's shard."""
    cp = subprocess.run([str(shardcat), "stream", twenty[1]], capture_output=True, text=True,
                        timeout=300)
    return dict(l.split("\t") for l in cp.stdout.splitlines())


def key_file(tmp_path, keys, name="keys.txt"):
    path = tmp_path / name
    path.write_text("".join(k + "\n" for k in keys))
    return path


@pytest.mark.parametrize("share", [0.001, 0.01, 0.1, 0.5, 1.0])
def test_a_view_delivers_exactly_the_chosen_samples_once(shardcat, twenty, every, shard_of,
                                                         tmp_path, share):
    chosen = random.Random(share).sample(every, max(1, int(len(every) * share)))
    keys = key_file(tmp_path, chosen + ["not/a-key", "nor/this"])
    rc, got, err = stream(shardcat, twenty[1], "--keys", keys, "--shuffle", 100, "--stats")
    assert rc == 0, err
    assert sorted(got) == sorted(chosen), "every chosen sample once, no other"
    assert f"keys: {len(chosen) + 2} given, {len(chosen)} samples chosen, 2 keys chose no " \
           f"sample" in err
    holding = {shard_of[k] for k in chosen}
    assert int(re.search(r"(\d+) shard opens", err).group(1)) == len(holding), err


def test_shards_with_nothing_chosen_are_not_opened(shardcat, twenty, every, tmp_path):
    """Keys of two shards: two shards opened of twenty (the control: every shard without)."""
    rc, in_order, _ = stream(shardcat, twenty[1], "--shuffle", 0, "--streams", 1,
                             "--partitions", 1)
    chosen = in_order[3:5] + in_order[7 * PER + 1:7 * PER + 2]
    rc, got, err = stream(shardcat, twenty[1], "--keys", key_file(tmp_path, chosen), "--stats")
    assert rc == 0 and sorted(got) == sorted(chosen), err
    assert re.search(r"\b2 shard opens", err), err
    rc, _, err = stream(shardcat, twenty[1], "--stats")
    assert re.search(rf"\b{SHARDS} shard opens", err), err


def test_a_view_resumes_exactly_on_another_topology(shardcat, twenty, every, tmp_path):
    """A state taken on 2 ranks x 2 workers resumed on 3 ranks: the chosen samples, each
    once (0 repeated, 0 lost); in the same order on the topology it was taken on."""
    chosen = random.Random(3).sample(every, 300)
    keys = key_file(tmp_path, chosen)
    common = ["--keys", keys, "--shuffle", 40, "--mode", "exact"]
    heads, state = [], None
    for rank in range(2):
        for worker in range(2):
            rc, got, err = stream(shardcat, twenty[1], *common, "--world-size", 2, "--rank", rank,
                                  "--workers", 2, "--worker", worker, "--samples", 30)
            assert rc == 0 and len(got) == 30, err
            heads += got
            state = state or re.search(r"^state: (\S+)", err, re.M).group(1)
    assert "view=300-" in state
    tails = []
    for rank in range(3):
        rc, got, err = stream(shardcat, twenty[1], *common, "--world-size", 3, "--rank", rank,
                              "--state", state)
        assert rc == 0, err
        tails += got
    assert len(heads) + len(tails) == 300 and sorted(heads + tails) == sorted(chosen)
    rc, whole, _ = stream(shardcat, twenty[1], "--keys", keys, "--shuffle", 40)
    rc, head, err = stream(shardcat, twenty[1], "--keys", keys, "--shuffle", 40, "--samples", 77)
    one = re.search(r"^state: (\S+)", err, re.M).group(1)
    rc, tail, err = stream(shardcat, twenty[1], "--keys", keys, "--shuffle", 40, "--state", one)
    assert head + tail == whole, "the same order, resumed where it was taken"


def test_a_state_of_another_view_is_refused_naming_both(shardcat, twenty, every, tmp_path):
    keys = key_file(tmp_path, every[:100])
    rc, _, err = stream(shardcat, twenty[1], "--keys", keys, "--samples", 10)
    state = re.search(r"^state: (\S+)", err, re.M).group(1)
    other = key_file(tmp_path, every[:60], "other.txt")
    rc, _, err = stream(shardcat, twenty[1], "--keys", other, "--state", state)
    assert rc != 0 and re.search(r"keys= chose .* is 100-[0-9a-f]{16} in the state and "
                                 r"60-[0-9a-f]{16} here", err), err
    rc, _, err = stream(shardcat, twenty[1], "--state", state)  # no view at all
    assert rc != 0 and "100-" in err and "and - here" in err, err
    same = key_file(tmp_path, list(reversed(every[:100])), "same.txt")  # the same set
    rc, got, err = stream(shardcat, twenty[1], "--keys", same, "--state", state)
    assert rc == 0 and len(got) == 90, err


def test_shard_dataset_reads_a_view_from_a_list_of_keys(twenty, every):
    from libshard.torch import ShardDataset, ShardLoader
    from libshard.torch.plan import KeysWarning
    chosen = random.Random(5).sample(every, 64) + ["missing/key"]
    kw = dict(batch_size=8, image_size=16, seed=2, raw_fields="__key__")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ds = ShardDataset(twenty[1], keys=chosen, **kw)
        assert len(ds) == 8
    assert any(issubclass(w.category, KeysWarning) and "1 of the 65 keys" in str(w.message)
               for w in caught), [str(w.message) for w in caught]
    got = [k for _, _, f in ShardLoader(ds, num_workers=2) for k in f["__key__"]]
    assert sorted(got) == sorted(chosen[:-1])
    with pytest.raises(TypeError, match="keys"):
        ShardDataset(twenty[1], keys=["a\nb"], **kw)


def test_keys_with_what_a_view_does_not_serve_yet_are_refused_by_name(shardcat, twenty, every,
                                                                      tmp_path):
    keys = key_file(tmp_path, every[:10])
    for args, name in ((["--mode", "resampled"], "resampled mode"),
                       (["--aspect-buckets", "sdxl", "--batch-size", 4], "aspect_buckets")):
        rc, _, err = stream(shardcat, twenty[1], "--keys", keys, *args)
        assert rc != 0 and f"keys (a view of the samples) with {name}" in err, err
    rc, _, err = stream(shardcat, twenty[1], "--keys", tmp_path / "absent.txt")
    assert rc != 0 and "absent.txt" in err, err


def test_the_steps_of_a_view_are_named_as_delivered(shardcat, twenty, every, tmp_path):
    """shardcat batch --keys (batch_keys) names each step's samples of a view as the
    consumers deliver them: 2 ranks x 2 workers, steps 0..5."""
    keys = key_file(tmp_path, random.Random(8).sample(every, 200))
    job = ["--keys", keys, "--batch-size", 8, "--world-size", 2, "--workers", 2, "--mode",
           "exact", "--shuffle", 30]
    batches = {}
    for rank in range(2):
        for worker in range(2):
            rc, got, err = stream(shardcat, twenty[1], *job, "--rank", rank, "--worker", worker)
            assert rc == 0, err
            batches[rank, worker] = [got[i:i + 8] for i in range(0, len(got), 8)]
    for step in range(6):
        cp = subprocess.run([str(shardcat), "batch", twenty[1], "--seed", "7", "--step",
                             str(step), *map(str, job)], capture_output=True, text=True,
                            timeout=120)
        assert cp.returncode == 0, cp.stderr
        rows = [l.split("\t") for l in cp.stdout.splitlines()]
        for rank in range(2):
            named = [r[4] for r in rows if r[1] == str(rank)]
            assert named == batches[rank, step % 2][step // 2], (step, rank)


def test_a_mix_of_views_shares_by_weight_over_the_chosen(shardcat, twenty, every, shard_of,
                                                         tmp_path):
    """--mix with --keys: each source's view is its chosen samples, the epoch the views'
    sizes together, each source its weight's share of it (a small view repeated as its
    weight asks); a resume goes on exactly."""
    base = twenty[1].rsplit("/", 1)[0]
    a, b = f"{base}/train-{{000000..000009}}.tar", f"{base}/train-{{000010..000019}}.tar"
    chosen = random.Random(4).sample(every, 120)
    keys = key_file(tmp_path, chosen)
    mix = ["--mix", f"1:{a}", "--mix", f"3:{b}", "--keys", str(keys), "--shuffle", "20"]
    cp = subprocess.run([str(shardcat), "stream", *mix, "--seed", "5"], capture_output=True,
                        text=True, timeout=120)
    assert cp.returncode == 0, cp.stderr
    got = [l.split("\t") for l in cp.stdout.splitlines()]
    assert len(got) == 120 and {k for k, _ in got} <= set(chosen)
    from_a = sum(1 for _, url in got if int(url[-10:-4]) < 10)
    assert from_a == 30, from_a  # a quarter of the 120
    head = subprocess.run([str(shardcat), "stream", *mix, "--seed", "5", "--samples", "50"],
                          capture_output=True, text=True, timeout=120)
    state = re.search(r"^state: (\S+)", head.stderr, re.M).group(1)
    tail = subprocess.run([str(shardcat), "stream", *mix, "--seed", "5", "--state", state],
                          capture_output=True, text=True, timeout=120)
    assert head.stdout + tail.stdout == cp.stdout
    fixed = subprocess.run([str(shardcat), "stream", a, "--keys", str(keys), "--seed", "5",
                            "--epoch-samples", "40"], capture_output=True, text=True,
                           timeout=120)
    drawn = [l.split("\t")[0] for l in fixed.stdout.splitlines()]
    assert fixed.returncode == 0 and len(drawn) == 40 and set(drawn) <= set(chosen), fixed.stderr


def members(paths):
    """Every regular member's name and bytes of the tars at paths, by name."""
    import tarfile
    out = {}
    for p in paths:
        with tarfile.open(p) as tf:
            for m in tf:
                if m.isreg():
                    out[m.name] = tf.extractfile(m).read()
    return out


def test_subset_writes_the_chosen_members_as_a_set(shardcat, twenty, every, tmp_path):
    """shardcat subset: the chosen samples' members byte for byte, in shards of --count
    with their indexes and columns, the manifest beside them; the keys that chose nothing
    said; a set already there refused."""
    import json
    top, urls = twenty
    chosen = random.Random(12).sample(every, 130)
    keys = key_file(tmp_path, chosen + ["no/such"])
    out = tmp_path / "sub"
    cp = subprocess.run([str(shardcat), "subset", urls, "--keys", str(keys), "-o",
                         str(out / "part-%03d.tar"), "--count", "50"], capture_output=True,
                        text=True, timeout=300)
    assert cp.returncode == 0, cp.stderr
    assert "130 samples in 3 shards" in cp.stderr and "1 chose no sample" in cp.stderr
    manifest = json.loads((out / "part.json").read_text())
    assert [s["nsamples"] for s in manifest["shardlist"]] == [50, 50, 30]
    assert all((out / f"part-{i:03d}.{x}").exists() for i in range(3) for x in ("idx", "cols"))
    source = members(sorted((top / "set").glob("*.tar")))
    written = members(sorted(out.glob("*.tar")))
    assert written == {n: b for n, b in source.items() if n.split(".")[0] in set(chosen)}
    rc, got, err = stream(shardcat, str(out / "part.json"))
    assert rc == 0 and sorted(got) == sorted(chosen), err
    again = subprocess.run([str(shardcat), "subset", urls, "--keys", str(keys), "-o",
                            str(out / "part-%03d.tar")], capture_output=True, text=True,
                           timeout=300)
    assert again.returncode == 2 and "there already" in again.stderr
    no_keys = subprocess.run([str(shardcat), "subset", urls, "-o", str(tmp_path / "x-%d.tar")],
                             capture_output=True, text=True, timeout=60)
    assert no_keys.returncode == 2 and "subset wants --keys FILE" in no_keys.stderr


def test_indexed_access_to_a_view(twenty, every, shard_of, tmp_path):
    """IndexedShards(keys=) and wids' ShardListDataset(keys=): the chosen samples alone,
    indexed 0..len-1 in shard order, each read by index (its number in its shard kept)."""
    from libshard.indexed import IndexedShards
    from libshard.wids import ShardListDataset
    top, urls = twenty
    chosen = random.Random(14).sample(every, 77)
    whole = IndexedShards(urls)
    view = IndexedShards(urls, keys=chosen + ["not/there"])
    assert len(view) == 77 and len(whole) == SHARDS * PER
    got = [view[i]["__key__"] for i in range(len(view))]
    assert sorted(got) == sorted(chosen)
    order = {whole[i]["__key__"]: i for i in range(len(whole))}
    assert [order[k] for k in got] == sorted(order[k] for k in chosen), "shard order"
    one = view[5]
    assert one == {**whole[order[one["__key__"]]], "__index__": 5}
    ds = ShardListDataset(str(top / "set" / "train.json"), keys=str(key_file(tmp_path, chosen)),
                          transformations=[])
    assert len(ds) == 77 and sorted(ds[i]["__key__"] for i in range(77)) == sorted(chosen)
    from libshard.torch import IndexedShardDataset
    mapped = IndexedShardDataset(urls, keys=chosen, image_size=16, crop="center")
    assert len(mapped) == 77 and mapped.raw(5)["__key__"] == got[5]


def test_a_view_makes_the_indexes_a_manifests_shards_lack(shardcat, twenty, every, tmp_path):
    """Shards listed by a manifest, without their .idx beside them: the view makes each one's
    index (into the index cache) to find its keys; a gzip shard is refused, named."""
    import shutil
    top, urls = twenty
    bare = tmp_path / "bare"
    shutil.copytree(top / "set", bare)
    for idx in bare.glob("*.idx"):
        idx.unlink()
    chosen = random.Random(15).sample(every, 40)
    keys = key_file(tmp_path, chosen)
    cache = tmp_path / "cache"
    rc, got, err = stream(shardcat, str(bare / "train.json"), "--keys", keys, "--index-cache",
                          cache)
    assert rc == 0 and sorted(got) == sorted(chosen), err
    gz = tmp_path / "gz"
    gz.mkdir()
    subprocess.run(["gzip", "-c", str(top / "set" / "train-000000.tar")],
                   stdout=open(gz / "train-000000.tar.gz", "wb"), check=True)
    rc, _, err = stream(shardcat, str(gz / "train-000000.tar.gz"), "--keys", keys)
    assert rc != 0 and "train-000000.tar.gz: a view reads its samples by index" in err, err
