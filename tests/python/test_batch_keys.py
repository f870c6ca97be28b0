"""batch_keys and where_is on ShardDataset and ShardLoader: from the order alone, each step's
keys equal what the loader delivered at that step (raw_fields="__key__"), for DataLoader
workers and ranks, plain tars without indexes; where_is inverts it."""
import io
import subprocess
import tarfile

import pytest

import libshard

from libshard.torch import ShardDataset, ShardLoader
from PIL import Image

SIZES = [13, 21, 8, 17, 25, 11]


@pytest.fixture(scope="module")
def spec(tmp_path_factory):
    d = tmp_path_factory.mktemp("bk")
    for s, n in enumerate(SIZES):
        with tarfile.open(d / f"s-{s}.tar", "w") as t:
            for i in range(n):
                b = io.BytesIO()
                Image.new("RGB", (20 + i, 16), (i * 9 % 255, s * 30, 7)).save(b, "PNG")
                for ext, data in (("png", b.getvalue()), ("cls", str(i % 4).encode())):
                    info = tarfile.TarInfo(f"k{s}_{i:03d}.{ext}")
                    info.size = len(data)
                    t.addfile(info, io.BytesIO(data))
    return str(d / "s-{0..5}.tar"), str(d / "idx")


def dataset(spec, **kw):
    urls, cache = spec
    return ShardDataset(urls, **{**dict(seed=3, batch_size=8, image_size=16, shuffle=20,
                                        raw_fields="__key__", index_cache=cache), **kw})


def check(ld, epoch):
    ld.set_epoch(epoch)
    got = [list(f["__key__"]) for _, _, f in ld]
    assert got
    for step, keys in enumerate(got):
        named = ld.batch_keys(epoch, step)
        assert [d["__key__"] for d in named] == keys, (epoch, step)
        assert all(d["step"] == step and d["slot"] == i for i, d in enumerate(named))
    for step in (0, len(got) - 1):
        key = got[step][-1]
        assert any(p["step"] == step and p["slot"] == len(got[step]) - 1
                   for p in ld.where_is(key, epoch))
    with pytest.raises(ValueError, match=f"has {len(got)} steps there \\(the last is "
                                         f"{len(got) - 1}\\)"):
        ld.batch_keys(epoch, len(got))
    return got


@pytest.mark.parametrize("workers", [0, 2])
def test_every_step_is_what_the_loader_delivered(spec, workers):
    ld = ShardLoader(dataset(spec), num_workers=workers)
    for e in (0, 1):
        check(ld, e)


def test_ranks_and_workers(spec):
    """2 ranks x 2 workers, equal mode: each rank's steps, and rank="all" is them together."""
    per_rank = []
    for r in range(2):
        ld = ShardLoader(dataset(spec, rank=r, world_size=2), num_workers=2)
        per_rank.append(check(ld, 0))
    both = ld.batch_keys(0, 1, rank="all")
    assert [d["__key__"] for d in both if d["rank"] == 0] == per_rank[0][1]
    assert [d["__key__"] for d in both if d["rank"] == 1] == per_rank[1][1]
    with pytest.raises(ValueError, match="rank 2, and the job's world size is 2"):
        ld.batch_keys(0, 0, rank=2)


@pytest.mark.parametrize("ranks,workers,mode,mixed", [
    (3, 1, "exact", False), (3, 1, "equal", False), (1, 1, "exact", True),
    (2, 2, "exact", True)])
def test_ranks_modes_and_a_mix(spec, shardcat, ranks, workers, mode, mixed):
    """Each rank's delivered steps, named; rank="all" gives them together, and so does
    shardcat batch (a mix: two sources, weights 2:1)."""
    urls, cache = spec
    src = [(urls.replace("{0..5}", "{0..2}"), 2.0), (urls.replace("{0..5}", "{3..5}"), 1.0)] \
        if mixed else urls
    per_rank = []
    for r in range(ranks):
        ld = ShardLoader(ShardDataset(src, seed=3, batch_size=8, image_size=16, shuffle=20,
                                      raw_fields="__key__", index_cache=cache, mode=mode,
                                      rank=r, world_size=ranks), num_workers=workers)
        per_rank.append(check(ld, 0))
    job = [*(["--mix", f"2:{src[0][0]}", "--mix", f"1:{src[1][0]}"] if mixed else [urls]),
           "--index-cache", cache, "--seed", "3", "--shuffle", "20", "--mode", mode,
           "--world-size", str(ranks), "--workers", str(workers), "--batch-size", "8"]
    last = max(len(x) for x in per_rank) - 1
    for step in range(last + 1):
        both = ld.batch_keys(0, step, rank="all")
        for r in range(ranks):
            want = per_rank[r][step] if step < len(per_rank[r]) else []
            assert [d["__key__"] for d in both if d["rank"] == r] == want, (step, r)
        if step in (0, last):  # shardcat batch says the same
            cp = subprocess.run([str(shardcat), "batch", *job, "--step", str(step)],
                                capture_output=True, text=True)
            assert cp.returncode == 0, cp.stderr
            lines = [l.split("\t") for l in cp.stdout.splitlines()]
            assert [(int(f[1]), f[4]) for f in lines] == [(d["rank"], d["__key__"])
                                                          for d in both]


def test_the_dataset_alone(spec):
    ds = dataset(spec)
    got = [list(f["__key__"]) for _, _, f in ds]
    assert [[d["__key__"] for d in ds.batch_keys(0, s)] for s in range(len(got))] == got
    with pytest.raises(libshard.ShardNotFoundError, match="key 'nope' is not in epoch 0"):
        ds.where_is("nope", 0)


def test_skip_errors_names_the_planned_batch(tmp_path):
    """One image that does not decode: the loader fills its place with a marked repeat
    (__pad__), and batch_keys names the planned sample there; every other slot agrees."""
    bad = "k1_004"
    with tarfile.open(tmp_path / "b-0.tar", "w") as t:
        for s in range(2):
            for i in range(10):
                b = io.BytesIO()
                Image.new("RGB", (18, 16), (i * 20, s * 90, 3)).save(b, "PNG")
                png = b"not a png at all" if f"k{s}_{i:03d}" == bad else b.getvalue()
                for ext, data in (("png", png), ("cls", b"1")):
                    info = tarfile.TarInfo(f"k{s}_{i:03d}.{ext}")
                    info.size = len(data)
                    t.addfile(info, io.BytesIO(data))
    ds = ShardDataset(str(tmp_path / "b-0.tar"), seed=4, batch_size=6, image_size=16,
                      shuffle=8, raw_fields="__key__;__pad__", skip_errors=True,
                      index_cache=str(tmp_path / "idx"))
    seen = 0
    with pytest.warns(UserWarning):
        batches = [(list(f["__key__"]), f["__pad__"].tolist()) for _, _, f in ds]
    for step, (keys, pads) in enumerate(batches):
        named = ds.batch_keys(0, step)
        assert len(named) == len(keys)
        for d, k, pad in zip(named, keys, pads):
            if pad:  # the skipped sample's place, a repeat of the batch's in it
                assert d["__key__"] == bad and not d["pad"] and k in keys
                seen += 1
            else:
                assert d["__key__"] == k
    assert seen == 1


def first_steps_on_2x2(spec, steps, **kw):
    """Each rank's first `steps` batches' keys on 2 ranks x 2 workers, and the state rank 0
    saved after them."""
    before, state = {}, None
    for r in range(2):
        ld = ShardLoader(dataset(spec, rank=r, world_size=2, **kw), num_workers=2)
        got = []
        for _, _, f in ld:
            got.append(list(f["__key__"]))
            if len(got) == steps:
                break
        before[r] = got
        if r == 0:
            state = ld.state_dict()
        del ld
    return before, state


@pytest.mark.parametrize("mode", ["exact", "equal"])
def test_named_across_an_elastic_resume(spec, mode, shardcat):
    """2 ranks x 2 workers take 3 steps and save; 3 ranks x 1 worker resume and finish.
    Every step of the epoch, before and after, is named on the topology that delivered it,
    from the new job's loaders and from the state they save."""
    saved_at = 3
    before, state = first_steps_on_2x2(spec, saved_at, mode=mode)
    delivered = [k for r in before for b in before[r] for k in b]
    for r in range(3):
        ld = ShardLoader(dataset(spec, rank=r, world_size=3, mode=mode), num_workers=0)
        ld.load_state_dict(state)
        after = [list(f["__key__"]) for _, _, f in ld]
        assert after
        delivered += [k for b in after for k in b]
        for i, keys in enumerate(after):
            assert [d["__key__"] for d in ld.batch_keys(0, saved_at + i)] == keys, (r, i)
        if r < 2:  # the steps before, on the ranks of the job then
            for s in range(saved_at):
                assert [d["__key__"] for d in ld.batch_keys(0, s, rank=r)] == before[r][s]
        with pytest.raises(ValueError, match="rank 2 at step 0, which the job took on 2 ranks"):
            ld.batch_keys(0, 0, rank=2)
        last = ld.state_dict()["state"]
        assert ";resumes=0@2.2@-|3@3.1@" in last, last
        # where_is finds a key of the old job's at its old step, and one of the new job's
        key = before[0][1][0]
        assert any(p["step"] == 1 and p["rank"] == 0 for p in ld.where_is(key, 0))
        key = after[0][-1]
        assert any(p["step"] == saved_at and p["rank"] == r for p in ld.where_is(key, 0))
    if mode == "exact":  # every sample once, across the two topologies
        assert sorted(delivered) == sorted(f"k{s}_{i:03d}" for s, n in enumerate(SIZES)
                                           for i in range(n))
    # shardcat batch, given the state the new job saved, names the same steps
    urls, cache = spec
    cp = subprocess.run([str(shardcat), "batch", urls, "--index-cache", cache, "--seed", "3",
                         "--shuffle", "20", "--mode", mode, "--world-size", "3",
                         "--batch-size", "8", "--state", last, "--step", "1", "--rank", "1"],
                        capture_output=True, text=True)
    assert cp.returncode == 0, cp.stderr
    assert [l.split("\t")[4] for l in cp.stdout.splitlines()] == before[1][1]


def test_a_steps_consumer_restored_delivers_it_first_and_shardcat_draws_it(spec, shardcat,
                                                                          tmp_path):
    """StepPlan.state: the consumer that delivered a step, restored, hands out that very
    batch first; `shardcat batch --show` draws the picture `shardcat show` draws from it."""
    from libshard import _libshard
    urls, cache = spec
    ld = ShardLoader(dataset(spec, rank=1, world_size=2), num_workers=2)
    got = [list(f["__key__"]) for _, _, f in ld]
    plan = _libshard.StepPlan(urls, seed=3, batch_size=8, shuffle=20, mode="equal",
                              index_cache=cache, world_size=2, num_workers=2)
    step = len(got) - 2
    at = plan.state(0, step, 1)
    assert (at["world_size"], at["num_workers"], at["rank"]) == (2, 2, 1)
    r = _libshard.Reader(urls, seed=3, shuffle=20, mode="equal", index_cache=cache,
                         rank=1, world_size=2, worker=at["worker"], num_workers=2)
    r.restore(at["state"])
    first = [next(r)["__key__"] for _ in range(len(got[step]))]
    assert first == got[step]
    job = [urls, "--index-cache", cache, "--seed", "3", "--shuffle", "20", "--mode", "equal",
           "--world-size", "2", "--image-size", "16", "--no-fast"]
    one = subprocess.run([str(shardcat), "batch", *job, "--workers", "2", "--batch-size", "8",
                          "--step", str(step), "--rank", "1", "--show", "-o",
                          str(tmp_path / "a.png")], capture_output=True, text=True)
    assert one.returncode == 0, one.stderr
    two = subprocess.run([str(shardcat), "show", *job, "--workers", "2", "--count", "8",
                          "--rank", "1", "--worker", str(at["worker"]), "--state", at["state"],
                          "-o", str(tmp_path / "b.png")], capture_output=True, text=True)
    assert two.returncode == 0, two.stderr
    assert (tmp_path / "a.png").read_bytes() == (tmp_path / "b.png").read_bytes()
    bad = subprocess.run([str(shardcat), "batch", *job, "--batch-size", "8", "--step", "0",
                          "--show", "-o", str(tmp_path / "c.png")], capture_output=True,
                         text=True)
    assert bad.returncode == 2 and "--rank R (of 2)" in bad.stderr


def reseal(text):
    """A state's text sealed again (formats/order.md, section 4: ;sum= SHA-256's first 16)."""
    import hashlib
    body = text[:text.rindex(";sum=")]
    return body + ";sum=" + hashlib.sha256(body.encode()).hexdigest()[:16]


def test_readings_let_go_are_refused_not_named_wrong(spec):
    """A state whose oldest kept reading began from a cut (the ones before it let go) names
    the steps from the next reading on, and refuses those before, saying so."""
    from libshard import _libshard
    urls, cache = spec
    saved_at = 3
    ld = ShardLoader(dataset(spec, rank=0, world_size=2, mode="exact"), num_workers=2)
    for n, _ in enumerate(ld, 1):
        if n == saved_at:
            break
    state = ld.state_dict()
    del ld
    ld = ShardLoader(dataset(spec, rank=0, world_size=3, mode="exact"), num_workers=0)
    ld.load_state_dict(state)
    for _ in ld:
        break
    text = ld.state_dict()["state"]  # at step 4, on 3 x 1
    head, resumes = text[:text.rindex(";sum=")].split(";resumes=")
    cut_then = resumes.split("|")[1].split("@", 2)[2]  # the 2 x 2 cut the 3 x 1 reading began at
    cut_now = head.split(";", 1)[1].replace(";", "/")  # this state's, on 3 x 1
    # as though older readings were let go: the oldest kept (from step 3) began from a cut
    # whose topology before it is not said; a later one began at step 4 from this state's
    crafted = reseal(f"{head};resumes=3@3.1@{cut_then}|4@3.1@{cut_now};sum=x")
    plan = _libshard.StepPlan(urls, state=crafted, seed=3, batch_size=8, shuffle=20,
                              mode="exact", index_cache=cache, world_size=3, num_workers=1)
    with pytest.raises(ValueError, match="keeps the epoch's last 8 readings, from step 4: "
                                         "step 3 came before them"):
        plan.keys(0, 3, 0)
    assert plan.keys(0, 4, 0)  # from the reading it can name


def test_one_plan_answers_threads_in_turn(spec):
    """Calls on one StepPlan from several threads take turns: each answer is whole."""
    import threading
    from libshard import _libshard
    urls, cache = spec
    plan = _libshard.StepPlan(urls, seed=3, batch_size=8, shuffle=20, mode="equal",
                              index_cache=cache, world_size=2, num_workers=2)
    steps = plan.steps(0, 0)
    want = {s: [d["__key__"] for d in plan.keys(0, s, -1)] for s in range(steps)}
    bad = []

    def ask():
        for s in list(range(steps)) * 3:
            if [d["__key__"] for d in plan.keys(0, s, -1)] != want[s]:
                bad.append(s)

    threads = [threading.Thread(target=ask) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not bad


BUCKETS = "16x16,16x24,16x32"


@pytest.mark.filterwarnings("ignore::libshard.torch.UnequalRanksWarning")
@pytest.mark.parametrize("ranks,workers,mode", [(1, 2, "exact"), (2, 2, "equal"),
                                                (3, 1, "exact")])
def test_bucketed_steps_are_named_as_the_loader_delivered_them(spec, ranks, workers, mode):
    """aspect_buckets: a step's batch is one bucket's, planned on the epoch's line; named
    from the order alone by walking the consumer's batches, it is the loader's."""
    for r in range(ranks):
        ld = ShardLoader(dataset(spec, rank=r, world_size=ranks, mode=mode, batch_size=4,
                                 aspect_buckets=BUCKETS), num_workers=workers)
        for e in (0, 1):
            got = check(ld, e)
            assert len(got) == len(ld)
        # the control: without the buckets the same steps are other samples
        plain = ShardLoader(dataset(spec, rank=r, world_size=ranks, mode=mode, batch_size=4),
                            num_workers=workers)
        assert any([d["__key__"] for d in plain.batch_keys(1, s)] != keys
                   for s, keys in enumerate(got[:-1]))


@pytest.mark.filterwarnings("ignore::libshard.torch.UnequalRanksWarning")
@pytest.mark.parametrize("mode", ["exact", "equal"])
def test_bucketed_steps_named_across_an_elastic_resume(spec, mode, shardcat, tmp_path):
    """aspect_buckets, 2 ranks x 2 workers take 3 steps and save; 3 x 1 resume and finish:
    every step named on the topology that delivered it, by the loaders and by shardcat
    batch, which also draws a step's batch as the loader made it."""
    kw = dict(mode=mode, batch_size=4, aspect_buckets=BUCKETS, raw_fields="__key__;__bucket__")
    saved_at = 3
    before, state = first_steps_on_2x2(spec, saved_at, **kw)
    delivered = [k for r in before for b in before[r] for k in b]
    buckets = set()
    for r in range(3):
        ld = ShardLoader(dataset(spec, rank=r, world_size=3, **kw), num_workers=0)
        ld.load_state_dict(state)
        after = []
        for images, _, f in ld:
            after.append(list(f["__key__"]))
            buckets.add(tuple(f["__bucket__"]))
        assert after
        delivered += [k for b in after for k in b]
        for i, keys in enumerate(after):
            assert [d["__key__"] for d in ld.batch_keys(0, saved_at + i)] == keys, (r, i)
        if r < 2:
            for s in range(saved_at):
                assert [d["__key__"] for d in ld.batch_keys(0, s, rank=r)] == before[r][s]
        key = after[-1][-1]
        assert any(p["step"] == saved_at + len(after) - 1 and p["rank"] == r
                   for p in ld.where_is(key, 0))
        last = ld.state_dict()["state"]
    assert len(buckets) > 1, "batches of several buckets"
    if mode == "exact":
        assert sorted(delivered) == sorted(f"k{s}_{i:03d}" for s, n in enumerate(SIZES)
                                           for i in range(n))
    urls, cache = spec
    job = [urls, "--index-cache", cache, "--seed", "3", "--shuffle", "20", "--mode", mode,
           "--batch-size", "4", "--aspect-buckets", BUCKETS, "--image-size", "16"]
    cp = subprocess.run([str(shardcat), "batch", *job, "--world-size", "3", "--state", last,
                         "--step", "1", "--rank", "1"], capture_output=True, text=True)
    assert cp.returncode == 0, cp.stderr
    assert [l.split("\t")[4] for l in cp.stdout.splitlines()] == before[1][1]
    # the step's batch drawn: the consumer restored to where it delivered it hands it first
    from libshard import _libshard
    plan = _libshard.StepPlan(urls, seed=3, batch_size=4, shuffle=20, mode=mode,
                              index_cache=cache, world_size=2, num_workers=2, image_size=16,
                              aspect_buckets=BUCKETS)
    at = plan.state(0, 2, 1)
    r = _libshard.Reader(urls, seed=3, shuffle=20, mode=mode, index_cache=cache, rank=1,
                         world_size=2, worker=at["worker"], num_workers=2, batch_size=4,
                         aspect_buckets=BUCKETS, aspect_side=16)
    r.restore(at["state"])
    assert [next(r)["__key__"] for _ in before[1][2]] == before[1][2]
    png = tmp_path / "step.png"
    cp = subprocess.run([str(shardcat), "batch", *job, "--world-size", "2", "--workers", "2",
                         "--step", "2", "--rank", "1", "--show", "-o", str(png)],
                        capture_output=True, text=True)
    assert cp.returncode == 0 and png.stat().st_size, cp.stderr
