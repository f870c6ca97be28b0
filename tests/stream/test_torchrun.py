"""A real multi-process test: torchrun starts 3 ranks (gloo, CPU); each rank iterates its
split of one epoch through a DataLoader with 2 workers over an IterableDataset that runs
`shardcat stream` for its (rank, world size, worker, workers); keys are gathered to rank 0,
which checks the partition, and every rank must finish the epoch with the same number of
batches (what keeps DDP from hanging)."""
import json
import shutil
import socket
import subprocess
import textwrap
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
            cmd = [SHARDCAT, "stream", MANIFEST, "--seed", "3", *self.mode_args,
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
            per = total // world if name == "equal" else math.ceil(total / world)
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


def test_torchrun_three_ranks_two_workers(shardcat, ds, tmp_path):
    cp = subprocess.run([PYTHON, "-c", "import torch, torch.distributed.run; "
                         "print(torch.distributed.is_available())"], capture_output=True)
    if cp.returncode != 0:
        pytest.skip(f"torch is not importable by {PYTHON}: {cp.stderr.decode()[-300:]}")
    if cp.stdout.decode().strip() != "True":
        pytest.skip("torch.distributed is not available in this torch build")
    torchrun = torchrun_path()
    if not torchrun:
        pytest.skip("torchrun is not installed")
    # torchrun must run Debian's interpreter (the one that has torch).
    head = Path(torchrun).read_bytes()[:100].split(b"\n")[0].decode(errors="replace")
    launcher = [torchrun] if "/usr/bin/python3" in head else [PYTHON, "-m", "torch.distributed.run"]

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

    script = tmp_path / "check_split.py"
    script.write_text(SCRIPT)
    keys_file = tmp_path / "keys.json"
    keys_file.write_text(json.dumps(ds.all_keys))
    result = tmp_path / "result.json"
    env = dict(BASE_ENV, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    env.pop("MASTER_ADDR", None)
    env.pop("MASTER_PORT", None)
    cmd = [*launcher, nproc_flag, str(NPROC), *rdzv, *std_flags, str(script), str(shardcat),
           str(ds.manifest), str(keys_file), str(result), str(WORKERS), str(BATCH)]
    try:
        cp = subprocess.run(cmd, capture_output=True, timeout=TIMEOUT, env=env, cwd=tmp_path,
                            stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"torchrun hung for {TIMEOUT} s: {' '.join(cmd)}\n"
                    f"{(e.stderr or b'').decode(errors='replace')[-3000:]}")
    log = (cp.stdout + cp.stderr).decode(errors="replace")
    assert result.exists(), f"rank 0 wrote no result (exit {cp.returncode}):\n{log[-5000:]}"
    report = json.loads(result.read_text())
    assert report["errors"] == [], f"partition checks failed: {report}"
    assert cp.returncode == 0, f"torchrun exited {cp.returncode}:\n{log[-5000:]}"

    total = ds.total
    assert report["world_size"] == NPROC and report["total"] == total
    modes = report["modes"]
    assert modes["equal"]["sizes"] == [total // NPROC] * NPROC
    assert len(set(modes["equal"]["batches"])) == 1
    assert len(set(modes["equal-pad"]["batches"])) == 1
    assert sum(modes["exact"]["sizes"]) == total
    # Each rank's batches: its 2 workers each batch their share separately.
    per_worker = [total // NPROC // WORKERS + (w < (total // NPROC) % WORKERS) for w in range(WORKERS)]
    assert modes["equal"]["batches"][0] == sum(-(-n // BATCH) for n in per_worker)
