"""Which samples were in step N (`shardcat batch`, shard_step_keys): from the order alone,
each step's keys equal what the job's consumers deliver (`shardcat stream` per rank and
worker, batched as the loader batches them and handed out as a DataLoader takes its workers'
batches in turn), and `--key` inverts it."""
import io
import os
import subprocess
import tarfile

import pytest

from .conftest import BASE_ENV, TIMEOUT

SEED = "7"
SIZES = [31, 17, 40, 23, 36, 29, 44, 19, 38, 30]  # 307 samples, uneven shards

# name -> (ranks, workers, batch size, drop_last, epoch, settings)
ROWS = {
    "exact 1x1": (1, 1, 8, False, 0, ["--mode", "exact", "--shuffle", "40"]),
    "exact 1x1 epoch 2": (1, 1, 8, False, 2, ["--mode", "exact", "--shuffle", "40"]),
    "exact 2x2": (2, 2, 8, False, 0, ["--mode", "exact", "--shuffle", "40"]),
    "exact 3x1": (3, 1, 6, False, 1, ["--mode", "exact", "--shuffle", "40"]),
    "equal 3x2 drop_last": (3, 2, 8, True, 0, ["--mode", "equal", "--shuffle", "40"]),
    "equal 3x1 pad": (3, 1, 7, False, 0, ["--mode", "equal", "--shuffle", "40", "--pad"]),
    "exact 2x2 streams 3": (2, 2, 5, False, 1, ["--mode", "exact", "--shuffle", "40:5",
                                                "--streams", "3"]),
    "mix 2x2": (2, 2, 6, False, 0, ["--mode", "exact", "--shuffle", "40", "--mix",
                                    "2:{a}/a-{{00..04}}.tar", "--mix", "1:{a}/a-{{05..09}}.tar"]),
}


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    """Plain tars (no .idx: indexed once into the cache), as Python's tarfile writes them."""
    d = tmp_path_factory.mktemp("steps")
    for s, n in enumerate(SIZES):
        with tarfile.open(d / f"a-{s:02d}.tar", "w", format=tarfile.USTAR_FORMAT) as t:
            for i in range(n):
                for ext, data in (("txt", f"a{s}:{i}".encode()), ("cls", str(i % 3).encode())):
                    info = tarfile.TarInfo(f"a{s:02d}_{i:03d}.{ext}")
                    info.size = len(data)
                    t.addfile(info, io.BytesIO(data))
    return d


def run(shardcat, *args):
    cp = subprocess.run([str(shardcat), *map(str, args)], env=BASE_ENV, capture_output=True,
                        text=True, timeout=TIMEOUT, stdin=subprocess.DEVNULL)
    return cp


def job_args(shards, row):
    ranks, workers, bs, drop, epoch, extra = ROWS[row]
    extra = [x.format(a=shards) for x in extra]
    src = [] if "--mix" in extra else [f"{shards}/a-{{00..09}}.tar"]
    return [*src, "--index-cache", shards / "idx", "--seed", SEED, "--epoch", epoch,
            "--world-size", ranks, "--workers", workers, *extra]


def delivered(shardcat, shards, row):
    """Each rank's steps: its workers' streams cut in batches, one from each in turn."""
    ranks, workers, bs, drop, _, _ = ROWS[row]
    steps = []
    for r in range(ranks):
        per = []
        for w in range(workers):
            cp = run(shardcat, "stream", *job_args(shards, row), "--rank", r, "--worker", w)
            assert cp.returncode == 0, cp.stderr
            keys = [l.split("\t")[0] for l in cp.stdout.splitlines()]
            b = [keys[i:i + bs] for i in range(0, len(keys), bs)]
            if drop and b and len(b[-1]) < bs:
                b.pop()
            per.append(b)
        mine = []
        for k in range(max(len(b) for b in per)):
            mine += [b[k] for b in per if k < len(b)]
        steps.append(mine)
    return steps


def batch(shardcat, shards, row, *more):
    _, _, bs, drop, _, _ = ROWS[row]
    return run(shardcat, "batch", *job_args(shards, row), "--batch-size", bs,
               *(["--drop-last"] if drop else []), *more)


@pytest.mark.parametrize("row", list(ROWS))
def test_every_step_names_what_the_job_delivers(shardcat, shards, row):
    want = delivered(shardcat, shards, row)
    ranks = ROWS[row][0]
    nsteps = max(len(s) for s in want)
    for step in range(nsteps):
        cp = batch(shardcat, shards, row, "--step", step)
        assert cp.returncode == 0, cp.stderr
        got = [[] for _ in range(ranks)]
        for line in cp.stdout.splitlines():
            f = line.split("\t")
            assert int(f[0]) == step
            got[int(f[1])].append(f[4])
        for r in range(ranks):
            assert got[r] == (want[r][step] if step < len(want[r]) else []), (row, step, r)
    # the key's every place, from --key, is where the steps put it
    r0 = want[0]
    for step in (0, len(r0) // 2, len(r0) - 1):
        key = r0[step][-1]
        cp = batch(shardcat, shards, row, "--key", key, "--json")
        assert cp.returncode == 0, cp.stderr
        import json
        places = [json.loads(l) for l in cp.stdout.splitlines()]
        for p in places:
            assert want[p["rank"]][p["step"]][p["slot"]] == key
        assert any(p["rank"] == 0 and p["step"] == step for p in places), places


def test_pads_are_marked(shardcat, shards):
    """Equal mode with pad: 307 samples over 3 ranks give 309, two of them marked repeats."""
    import json
    row = "equal 3x1 pad"
    want = delivered(shardcat, shards, row)
    samples = []
    for step in range(len(want[0])):
        cp = batch(shardcat, shards, row, "--step", step, "--json")
        assert cp.returncode == 0, cp.stderr
        samples += [json.loads(l) for l in cp.stdout.splitlines()]
    assert len(samples) == 309
    pads = [x for x in samples if x["pad"]]
    assert len(pads) == 2, pads
    firsts = {x["__key__"] for x in samples if not x["pad"]}
    assert len(firsts) == 307 and all(x["__key__"] in firsts for x in pads)


def test_bad_questions_say_what_is_wrong(shardcat, shards):
    row = "exact 2x2"
    want = delivered(shardcat, shards, row)
    n = len(want[0])
    cp = batch(shardcat, shards, row, "--step", n, "--rank", 0)
    assert cp.returncode == 1 and f"has {n} steps there (the last is {n - 1})" in cp.stderr
    cp = batch(shardcat, shards, row, "--step", 0, "--rank", 2)
    assert cp.returncode == 2 and "--rank=2 is not below --world-size=2" in cp.stderr
    cp = batch(shardcat, shards, row, "--key", "a03_999")
    assert cp.returncode == 1 and "key 'a03_999' is not in epoch 0" in cp.stderr
    cp = batch(shardcat, shards, row, "--step", 0, "--state", "x")
    assert cp.returncode == 1 and "cut short or edited" in cp.stderr
    # a state of another job's settings: refused as a restore refuses it, naming them
    other = run(shardcat, "stream", *[("60" if a == "40" else a) for a in job_args(shards, row)],
                "--samples", 20)
    state = [l[7:] for l in other.stderr.splitlines() if l.startswith("state: ")][0]
    cp = batch(shardcat, shards, row, "--step", 0, "--state", state)
    assert cp.returncode == 1 and "shuffle_buffer (shuffle=) is 60 in the state and 40 here" \
        in cp.stderr, cp.stderr
    args = [a for a in job_args(shards, row)]
    i = args.index("--seed")
    del args[i:i + 2]
    cp = run(shardcat, "batch", *args, "--batch-size", 8, "--step", 0)
    assert cp.returncode == 2 and "--seed" in cp.stderr
    cp = run(shardcat, "batch", *args, "--batch-size", 8, "--step", 0, "--mode", "resampled",
             "--seed", 1)
    assert cp.returncode == 1 and "resampled" in cp.stderr


def test_no_sample_byte_is_read(shardcat, shards, tmp_path):
    """With an .idx beside each shard, the shards' bytes may be anything: only the indexes
    and the shards' names are read."""
    for s in range(len(SIZES)):
        src = shards / f"a-{s:02d}.tar"
        assert run(shardcat, "index", src).returncode == 0
        (tmp_path / src.name).write_bytes(b"\xff" * src.stat().st_size)
        (tmp_path / f"a-{s:02d}.idx").write_bytes((shards / f"a-{s:02d}.idx").read_bytes())
        (shards / f"a-{s:02d}.idx").unlink()
    row = "exact 2x2"
    cp = batch(shardcat, shards, row, "--step", 3)
    assert cp.returncode == 0, cp.stderr
    args = [str(a).replace(str(shards) + "/a-", str(tmp_path) + "/a-") for a in
            job_args(shards, row)]
    cp2 = run(shardcat, "batch", *args, "--batch-size", 8, "--step", 3)
    assert cp2.returncode == 0, cp2.stderr
    strip = lambda out: [l.split("\t")[:5] for l in out.splitlines()]
    assert strip(cp.stdout) == strip(cp2.stdout)
    # the control: the loader itself, reading those bytes, fails
    cp3 = run(shardcat, "stream", *args, "--rank", 0, "--worker", 0)
    assert cp3.returncode == 1
