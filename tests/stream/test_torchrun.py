"""A real multi-process test: torchrun starts 3 ranks (gloo, CPU); each rank iterates its
split of one epoch through a DataLoader with 2 workers over an IterableDataset that runs
`shardcat stream` for its (rank, world size, worker, workers); keys are gathered to rank 0,
which checks the partition, and every rank must finish the epoch with the same number of
batches (what keeps DDP from hanging)."""
import json
import os
import re
import shutil
import socket
import subprocess
import textwrap
from collections import Counter
from pathlib import Path

import pytest

from .conftest import BASE_ENV

PYTHON = "/usr/bin/python3"
NPROC = 3
WORKERS = 2
BATCH = 8
TIMEOUT = 240

SCRIPT = textwrap.dedent(r'''
    import json, math, os, subprocess, sys
    from collections import Counter
    from datetime import timedelta

    import torch
    import torch.distributed as dist
    from torch.utils.data import DataLoader, IterableDataset, get_worker_info

    SHARDCAT, MANIFEST, KEYS_FILE, RESULT, WORKERS, BATCH = sys.argv[1:7]
    WORKERS, BATCH = int(WORKERS), int(BATCH)
    ALL = json.load(open(KEYS_FILE))
    PARTITIONS = 6  # every rank and worker the same number


    def rank_and_world():
        if dist.is_available() and dist.is_initialized():
            return dist.get_rank(), dist.get_world_size()
        return int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])


    class ShardStream(IterableDataset):
        def __init__(self, mode_args):
            self.mode_args = mode_args

        def __iter__(self):
            info = get_worker_info()
            worker, workers = (info.id, info.num_workers) if info else (0, 1)
            rank, world = rank_and_world()
            cmd = [SHARDCAT, "stream", MANIFEST, "--seed", "3", "--partitions", str(PARTITIONS),
                   *self.mode_args,
                   "--rank", str(rank), "--world-size", str(world),
                   "--worker", str(worker), "--workers", str(workers), "--json"]
            cp = subprocess.run(cmd, capture_output=True, timeout=60)
            if cp.returncode != 0:
                raise RuntimeError(f"{cmd} failed: {cp.stderr.decode(errors='replace')}")
            for line in cp.stdout.decode().splitlines():
                yield json.loads(line)["__key__"], worker


    def run_epoch(mode_args):
        dl = DataLoader(ShardStream(mode_args), batch_size=BATCH, num_workers=WORKERS)
        keys, batches, workers_seen = [], 0, set()
        for ks, ws in dl:
            batches += 1
            keys += list(ks)
            workers_seen |= set(int(w) for w in ws)
        return keys, batches, sorted(workers_seen)


    def main():
        dist.init_process_group("gloo", timeout=timedelta(seconds=120))
        rank, world = dist.get_rank(), dist.get_world_size()
        assert world == int(os.environ["WORLD_SIZE"]) and rank == int(os.environ["RANK"])
        total = len(ALL)
        errors, report = [], {"world_size": world, "total": total, "modes": {}}
        for name, args in [("equal", ["--mode", "equal"]),
                           ("equal-pad", ["--mode", "equal", "--pad", "--shuffle", "20"]),
                           ("exact", ["--mode", "exact", "--shuffle", "20"])]:
            keys, batches, workers_seen = run_epoch(args)
            gathered = [None] * world
            dist.all_gather_object(gathered, {"keys": keys, "batches": batches,
                                              "workers": workers_seen})
            counts = torch.tensor([batches])
            all_counts = [torch.zeros_like(counts) for _ in range(world)]
            dist.all_gather(all_counts, counts)
            batch_counts = [int(c.item()) for c in all_counts]
            sizes = [len(g["keys"]) for g in gathered]
            report["modes"][name] = {"sizes": sizes, "batches": batch_counts}
            if rank != 0:
                continue
            err = lambda m: errors.append(f"{name}: {m}")
            assert batch_counts == [g["batches"] for g in gathered]
            for r, g in enumerate(gathered):
                if g["workers"] != list(range(WORKERS)):
                    err(f"rank {r} got samples from workers {g['workers']}")
            union = Counter(k for g in gathered for k in g["keys"])
            if not set(union) <= set(ALL):
                err(f"unknown keys {set(union) - set(ALL)}")
            if name == "exact":
                if union != Counter(ALL):
                    err(f"union is not every sample once: missing {len(set(ALL) - set(union))}, "
                        f"duplicated {sum(c - 1 for c in union.values() if c > 1)}")
                if max(sizes) - min(sizes) > 1:
                    err(f"rank sizes {sizes}")
                continue
            # equal mode: every partition the same length, fewer than P samples dropped
            # (or padded)
            kept = (total - total % PARTITIONS if name == "equal"
                    else math.ceil(total / PARTITIONS) * PARTITIONS)
            per = kept // world
            if sizes != [per] * world:
                err(f"rank sizes {sizes}, want {per} each")
            if len(set(batch_counts)) != 1:
                err(f"ranks finished the epoch with different batch counts {batch_counts}")
            dup = sum(c - 1 for c in union.values() if c > 1)
            if name == "equal":
                if dup:
                    err(f"{dup} duplicates without padding")
            else:
                if set(union) != set(ALL):
                    err(f"padding lost samples: {len(set(ALL) - set(union))} missing")
                if dup != per * world - total:
                    err(f"{dup} duplicates, padding explains {per * world - total}")
        verdict = [errors]
        dist.broadcast_object_list(verdict, src=0)
        if rank == 0:
            report["errors"] = errors
            with open(RESULT, "w") as f:
                json.dump(report, f)
        dist.barrier()
        dist.destroy_process_group()
        sys.exit(1 if verdict[0] else 0)


    main()
''')


def port_free(port):
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun_path():
    p = shutil.which("torchrun") if not Path("/usr/bin/torchrun").exists() else "/usr/bin/torchrun"
    return p


def torchrun(script_text, args, tmp_path, env=None, nproc=NPROC):
    """Runs script_text on nproc ranks under torchrun with args; (CompletedProcess, log).
    Skips where torch.distributed or torchrun is missing."""
    cp = subprocess.run([PYTHON, "-c", "import torch, torch.distributed.run; "
                         "print(torch.distributed.is_available())"], capture_output=True)
    if cp.returncode != 0:
        pytest.skip(f"torch is not importable by {PYTHON}: {cp.stderr.decode()[-300:]}")
    if cp.stdout.decode().strip() != "True":
        pytest.skip("torch.distributed is not available in this torch build")
    runner = torchrun_path()
    if not runner:
        pytest.skip("torchrun is not installed")
    # torchrun must run Debian's interpreter (the one that has torch).
    head = Path(runner).read_bytes()[:100].split(b"\n")[0].decode(errors="replace")
    launcher = [runner] if "/usr/bin/python3" in head else [PYTHON, "-m", "torch.distributed.run"]

    helptext = subprocess.run([*launcher, "--help"], capture_output=True, text=True).stdout
    nproc_flag = "--nproc-per-node" if "--nproc-per-node" in helptext else "--nproc_per_node"
    # --standalone always rendezvous on port 29400; use a free port if that one is taken.
    if port_free(29400):
        rdzv = ["--standalone"]
    else:
        rdzv = ["--nnodes", "1", "--rdzv_backend", "c10d",
                "--rdzv_endpoint", f"127.0.0.1:{free_port()}"]

    # torch 1.13 on Python 3.11: Std.from_str("0") (the default of --redirects and --tee)
    # gives None, as Python 3.11 no longer iterates a Flag's zero member, and the launcher
    # then fails in to_map. The mapping form avoids the zero value: tee rank 0's stdout.
    probe = subprocess.run([PYTHON, "-c", "from torch.distributed.elastic.multiprocessing.api "
                            "import Std; print(Std.from_str('0') is None)"],
                           capture_output=True, text=True)
    std_flags = ["--redirects", "0:1", "--tee", "0:1"] if probe.stdout.strip() == "True" else []

    script = tmp_path / "rank_script.py"
    script.write_text(script_text)
    e = dict(BASE_ENV, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1", **(env or {}))
    e.pop("MASTER_ADDR", None)
    e.pop("MASTER_PORT", None)
    cmd = [*launcher, nproc_flag, str(nproc), *rdzv, *std_flags, str(script), *map(str, args)]
    try:
        cp = subprocess.run(cmd, capture_output=True, timeout=TIMEOUT, env=e, cwd=tmp_path,
                            stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as ex:
        pytest.fail(f"torchrun hung for {TIMEOUT} s: {' '.join(cmd)}\n"
                    f"{(ex.stderr or b'').decode(errors='replace')[-3000:]}")
    return cp, (cp.stdout + cp.stderr).decode(errors="replace")


def test_torchrun_three_ranks_two_workers(shardcat, ds, tmp_path):
    keys_file = tmp_path / "keys.json"
    keys_file.write_text(json.dumps(ds.all_keys))
    result = tmp_path / "result.json"
    cp, log = torchrun(SCRIPT, [shardcat, ds.manifest, keys_file, result, WORKERS, BATCH],
                       tmp_path)
    assert result.exists(), f"rank 0 wrote no result (exit {cp.returncode}):\n{log[-5000:]}"
    report = json.loads(result.read_text())
    assert report["errors"] == [], f"partition checks failed: {report}"
    assert cp.returncode == 0, f"torchrun exited {cp.returncode}:\n{log[-5000:]}"

    total = ds.total
    assert report["world_size"] == NPROC and report["total"] == total
    modes = report["modes"]
    assert modes["equal"]["sizes"] == [(total - total % 6) // NPROC] * NPROC
    assert len(set(modes["equal"]["batches"])) == 1
    assert len(set(modes["equal-pad"]["batches"])) == 1
    assert sum(modes["exact"]["sizes"]) == total
    # Each rank's batches: its 2 workers each batch their share separately.
    per_worker = [total // NPROC // WORKERS + (w < (total // NPROC) % WORKERS) for w in range(WORKERS)]
    assert modes["equal"]["batches"][0] == sum(-(-n // BATCH) for n in per_worker)


DATASET_SCRIPT = textwrap.dedent(r'''
    import json, os, sys, warnings
    from datetime import timedelta

    import torch
    import torch.distributed as dist

    sys.path.insert(0, os.environ["LIBSHARD_PYTHONPATH"])
    from libshard.torch import ShardDataset, UnequalRanksWarning

    MANIFEST, RESULT, BATCH = sys.argv[1], sys.argv[2], int(sys.argv[3])

    dist.init_process_group("gloo", timeout=timedelta(seconds=120))
    rank, world = dist.get_rank(), dist.get_world_size()
    report = {}
    for name, kw in [("default", {}), ("exact", {"mode": "exact"})]:
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            ds = ShardDataset(MANIFEST, seed=3, batch_size=BATCH, image_size=16, **kw)
            batches = sum(1 for _ in ds)  # rank and world size from torch.distributed
            length = len(ds)
        said = [str(x.message) for x in w if issubclass(x.category, UnequalRanksWarning)]
        gathered = [None] * world
        dist.all_gather_object(gathered, {"batches": batches, "len": length, "said": said})
        report[name] = gathered
    if rank == 0:
        with open(RESULT, "w") as f:
            json.dump(report, f)
    dist.barrier()
    dist.destroy_process_group()
''')


def test_torchrun_three_ranks_get_equal_batch_counts_by_default(ds, tmp_path):
    """ShardDataset under torchrun, rank and world size from torch.distributed: by default
    every rank the same number of batches; mode='exact', the negative control, leaves them
    unequal here (307 samples over 3 ranks in batches of 102) and warns."""
    pypath = os.environ.get("LIBSHARD_PYTHONPATH")
    if not pypath:
        pytest.skip("LIBSHARD_PYTHONPATH names no built libshard Python package")
    total = ds.total
    batch = total // NPROC
    assert total % NPROC and batch == 102
    result = tmp_path / "result.json"
    cp, log = torchrun(DATASET_SCRIPT, [ds.manifest, result, batch], tmp_path,
                       env={"LIBSHARD_PYTHONPATH": pypath})
    assert cp.returncode == 0 and result.exists(), f"exit {cp.returncode}:\n{log[-5000:]}"
    report = json.loads(result.read_text())
    default, exact = report["default"], report["exact"]
    assert [r["batches"] for r in default] == [r["len"] for r in default] == [1] * NPROC, report
    assert all(r["said"] == [] for r in default), report
    assert sorted(r["batches"] for r in exact) == [1, 1, 2], report
    assert len(exact[0]["said"]) == 1 and "mode='equal'" in exact[0]["said"][0], report


ELASTIC_SCRIPT = textwrap.dedent(r'''
    import json, os, sys, warnings
    from datetime import timedelta

    import torch
    import torch.distributed as dist
    from torch.distributed.algorithms.join import Join
    from torch.nn.parallel import DistributedDataParallel

    sys.path.insert(0, os.environ["LIBSHARD_PYTHONPATH"])
    from libshard.torch import ShardDataset, ShardLoader, UnequalRanksWarning

    MANIFEST, PHASE, STATE, OUT, MODE, WORKERS = sys.argv[1:7]
    dist.init_process_group("gloo", timeout=timedelta(seconds=120))
    rank, world = dist.get_rank(), dist.get_world_size()
    warnings.simplefilter("always", UnequalRanksWarning)
    # the defaults: no partition count chosen for the topologies to come
    ds = ShardDataset(MANIFEST, seed=3, batch_size=8, image_size=16, shuffle=20, mode=MODE,
                      raw_fields="__key__;__pad__")
    loader = ShardLoader(ds, num_workers=int(WORKERS), timeout=120)
    if PHASE == "after":
        loader.load_state_dict(torch.load(STATE)["data"])
    model = DistributedDataParallel(torch.nn.Linear(16 * 16 * 3, 5))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    keys, steps, length = [], 0, len(loader)
    with warnings.catch_warnings(record=True) as said, Join([model]):
        # Join: in exact mode a rank may end a batch before the others
        for images, labels, fields in loader:
            real = ~fields["__pad__"]  # equal mode's repeats stay out of the loss
            losses = torch.nn.functional.cross_entropy(model(images.float().flatten(1) / 255),
                                                       labels, reduction="none")
            loss = (losses * real).sum() / real.sum().clamp(min=1)
            opt.zero_grad()
            loss.backward()
            opt.step()
            keys += [(k, bool(p)) for k, p in zip(fields["__key__"], fields["__pad__"].tolist())]
            steps += 1
            if PHASE == "before" and steps == 5:
                if rank == 0:  # rank 0 saves for all
                    torch.save({"data": loader.state_dict()}, STATE)
                break
    warned = [str(w.message) for w in said if w.category is UnequalRanksWarning]
    gathered = [None] * world
    dist.all_gather_object(gathered, {"keys": keys, "steps": steps, "len": length,
                                      "warned": warned})
    if rank == 0:
        with open(OUT, "w") as f:
            json.dump(gathered, f)
    dist.barrier()
    del model  # DDP's reducer before the group (examples/ddp_resume.py says why)
    import gc
    gc.collect()
    dist.destroy_process_group()
''')


@pytest.mark.parametrize("mode,before,after", [
    ("equal", (2, 2), (3, 1)), ("exact", (2, 2), (3, 1)), ("equal", (3, 1), (2, 2)),
    ("exact", (1, 2), (4, 1))], ids=lambda v: v if isinstance(v, str) else f"{v[0]}x{v[1]}")
def test_torchrun_a_ddp_checkpoint_resumes_on_another_world_size_with_the_defaults(
        shardcat, ds, tmp_path, mode, before, after):
    """DDP ranks with DataLoader workers train 5 steps, rank 0 saves the ShardLoader's
    state, and a job of another world size and worker count loads it and finishes the epoch
    (a hang is the failure), the defaults throughout. Over the two runs every sample of the
    epoch comes exactly once (equal mode: fewer than its partitions dropped, the repeats
    marked and kept out of the loss, fewer than a batch a rank); in equal mode the ranks
    take the same number of steps, in exact mode at most one apart (Join), with the
    warning exactly when they differ; len() is the steps each rank then takes."""
    pypath = os.environ.get("LIBSHARD_PYTHONPATH")
    if not pypath:
        pytest.skip("LIBSHARD_PYTHONPATH names no built libshard Python package")
    env = {"LIBSHARD_PYTHONPATH": pypath}
    state = tmp_path / "ckpt.pt"
    runs = []
    for phase, (nproc, workers) in (("before", before), ("after", after)):
        out = tmp_path / f"{phase}.json"
        cp, log = torchrun(ELASTIC_SCRIPT, [ds.manifest, phase, state, out, mode, workers],
                           tmp_path, env=env, nproc=nproc)
        assert cp.returncode == 0 and out.exists(), f"{phase}: exit {cp.returncode}:\n{log[-5000:]}"
        runs.append(json.loads(out.read_text()))
    first, rest = runs
    assert [r["steps"] for r in first] == [5] * before[0]
    delivered = [k for run in runs for r in run for k, pad in r["keys"] if not pad]
    partitions = re.search(r"[,:]partitions=(\d+)", torch_state(state)).group(1)
    epoch = subprocess.run([str(shardcat), "stream", str(ds.manifest), "--seed", "3",
                            "--shuffle", "20", "--partitions", partitions, "--mode", mode],
                           capture_output=True, text=True, check=True).stdout
    want = [line.split("\t")[0] for line in epoch.splitlines()]
    p = int(partitions)
    assert len(want) == (ds.total if mode == "exact" else ds.total - ds.total % p)
    twice = [k for k, n in Counter(delivered).items() if n > 1]
    assert not twice, f"delivered twice: {twice}"
    assert sorted(delivered) == sorted(want), f"missing {set(want) - set(delivered)}"
    steps = [r["steps"] for r in rest]
    assert [r["len"] for r in rest] == steps, rest
    pads = [sum(pad for _, pad in r["keys"]) for r in rest]
    assert all(n <= 8 for n in pads), pads
    if mode == "equal":
        assert len(set(steps)) == 1, steps
    else:
        assert max(steps) - min(steps) <= 1, steps
        # said once, by rank 0, exactly when the ranks differ
        assert bool(rest[0]["warned"]) == (len(set(steps)) > 1), rest
        assert not any(r["warned"] for r in rest[1:]), rest


def torch_state(path):
    """The reader state inside a checkpoint."""
    cp = subprocess.run([PYTHON, "-c", "import sys, torch; "
                         "print(torch.load(sys.argv[1])['data']['state'])", str(path)],
                        capture_output=True, text=True, check=True)
    return cp.stdout.strip()


@pytest.mark.parametrize("before,after", [((2, 2), (3, 1)), ((2, 2), (1, 3)), ((1, 1), (2, 1))],
                         ids=["2x2-3x1", "2x2-1x3", "1x1-2x1"])
def test_the_ddp_example_resumes_on_another_world_size(shardcat, ds, tmp_path, before, after):
    """examples/ddp_resume.py as its docstring runs it, the defaults throughout: stopped
    after 3 steps, then another world size and worker count load the checkpoint and finish
    the epoch, onto one rank and from one rank too (the state's mode taken: equal from 2
    ranks, exact from 1); every sample of the epoch trains once (equal mode: fewer than its
    partitions dropped), the repeats out."""
    pypath = os.environ.get("LIBSHARD_PYTHONPATH")
    if not pypath:
        pytest.skip("LIBSHARD_PYTHONPATH names no built libshard Python package")
    example = (Path(__file__).resolve().parents[2] / "examples" / "ddp_resume.py").read_text()
    ckpt, log = tmp_path / "ckpt.pt", tmp_path / "keys.jsonl"
    common = [ds.manifest, "--batch-size", "8", "--image-size", "16", "--every", "2",
              "--checkpoint", ckpt, "--log", log]
    for (nproc, workers), extra in ((before, ["--stop-after", "3"]), (after, [])):
        cp, out = torchrun(example, [*common, "--workers", str(workers), *extra], tmp_path,
                           env={"PYTHONPATH": pypath}, nproc=nproc)
        assert cp.returncode == 0, f"{nproc} ranks: exit {cp.returncode}:\n{out[-5000:]}"
    assert f"resumed in epoch 0 on {after[0]} ranks x {after[1]} workers" in out, out[-3000:]
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(x["world"], x["rank"]) for x in lines] == \
        [(before[0], r) for r in range(before[0])] + [(after[0], r) for r in range(after[0])]
    keys = [k for x in lines for k in x["keys"]]
    state = torch_state(ckpt)
    p = int(re.search(r"[,:]partitions=(\d+)", state).group(1))
    mode = "equal" if before[0] > 1 else "exact"
    epoch = subprocess.run([str(shardcat), "stream", str(ds.manifest), "--seed", "0",
                            "--shuffle", "1000", "--partitions", str(p), "--mode", mode],
                           capture_output=True, text=True, check=True).stdout
    want = sorted(line.split("\t")[0] for line in epoch.splitlines())
    assert len(want) == (ds.total - ds.total % p if mode == "equal" else ds.total)
    assert sorted(keys) == want, (len(keys), len(set(keys)), len(want))


NOSEED_SCRIPT = textwrap.dedent(r'''
    import json, os, sys
    from datetime import timedelta

    import torch.distributed as dist

    sys.path.insert(0, os.environ["LIBSHARD_PYTHONPATH"])
    from libshard.torch import ShardDataset, ShardLoader

    MANIFEST, RESULT, WORKERS = sys.argv[1], sys.argv[2], int(sys.argv[3])
    dist.init_process_group("gloo", timeout=timedelta(seconds=120))
    rank, world = dist.get_rank(), dist.get_world_size()
    # no seed=: each rank draws one, rank 0's is taken by all
    ds = ShardDataset(MANIFEST, batch_size=8, image_size=16, shuffle=50,
                      raw_fields="__key__;__pad__")
    kw = {"timeout": 120} if WORKERS else {}
    keys = [k for _, _, f in ShardLoader(ds, num_workers=WORKERS, **kw)
            for k, p in zip(f["__key__"], f["__pad__"].tolist()) if not p]
    gathered = [None] * world
    dist.all_gather_object(gathered, {"seed": ds.seed, "keys": keys})
    if rank == 0:
        with open(RESULT, "w") as f:
            json.dump(gathered, f)
    dist.barrier()
    dist.destroy_process_group()
''')


@pytest.mark.parametrize("workers", [0, 2])
def test_ranks_without_a_seed_agree_on_one(ds, tmp_path, workers):
    """2 ranks under torchrun, no seed=: both use rank 0's drawn seed, and the epoch's samples
    come once each across the ranks (equal mode: fewer than its partitions dropped)."""
    pypath = os.environ.get("LIBSHARD_PYTHONPATH")
    if not pypath:
        pytest.skip("LIBSHARD_PYTHONPATH names no built libshard Python package")
    result = tmp_path / "seed.json"
    cp, log = torchrun(NOSEED_SCRIPT, [ds.manifest, result, workers], tmp_path,
                       env={"LIBSHARD_PYTHONPATH": pypath}, nproc=2)
    assert cp.returncode == 0 and result.exists(), f"exit {cp.returncode}:\n{log[-5000:]}"
    ranks = json.loads(result.read_text())
    assert ranks[0]["seed"] == ranks[1]["seed"], ranks
    keys = ranks[0]["keys"] + ranks[1]["keys"]
    assert len(keys) == len(set(keys)), "a sample on both ranks"
    assert len(keys) >= ds.total - 8 and set(keys) <= set(ds.all_keys)


def test_ranks_without_a_seed_or_a_group_are_refused(ds, tmp_path):
    """The negative control: two processes told they are ranks 0 and 1 of 2 (torchrun's
    environment), no process group, no seed=: each is refused, naming seed=, before it reads
    (each would draw its own and the shares would overlap); with seed= both read."""
    pypath = os.environ.get("LIBSHARD_PYTHONPATH")
    if not pypath:
        pytest.skip("LIBSHARD_PYTHONPATH names no built libshard Python package")
    code = ("import sys; sys.path.insert(0, sys.argv[2]); "
            "from libshard.torch import ShardDataset; "
            "kw = {'seed': 4} if sys.argv[3] == 'seed' else {}; "
            "ds = ShardDataset(sys.argv[1], batch_size=8, image_size=16, **kw); "
            "print(sum(len(y) for _, y in ds))")
    for rank in (0, 1):
        env = dict(BASE_ENV, RANK=str(rank), WORLD_SIZE="2", LOCAL_RANK=str(rank))
        cp = subprocess.run([PYTHON, "-c", code, str(ds.manifest), pypath, "none"],
                            capture_output=True, text=True, env=env, timeout=120)
        assert cp.returncode != 0 and "pass seed=" in cp.stderr, cp.stderr[-2000:]
        cp = subprocess.run([PYTHON, "-c", code, str(ds.manifest), pypath, "seed"],
                            capture_output=True, text=True, env=env, timeout=120)
        assert cp.returncode == 0 and int(cp.stdout) > 0, cp.stderr[-2000:]
