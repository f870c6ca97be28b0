"""Where the time goes: ds.stats() per stage (list, fetch, decompress, parse, shuffle, batch,
decode, deliver). The
counts agree from stage to stage (up to what the loader has already read ahead into the
next epoch), each stage's busy and waiting time add up to its time,
and the stage made slow is the one named: a fetch throttled by a slow pipe: command, a
decode of huge images on one thread, a training step that sleeps. Per DataLoader worker
through ShardLoader."""
import subprocess
import time

import numpy as np
import pytest
from PIL import Image

torch = pytest.importorskip("torch")

from libshard.torch import ShardDataset, ShardLoader  # noqa: E402

from .conftest import NSAMPLES, pack, within  # noqa: E402

STAGES = ["list", "fetch", "decompress", "parse", "shuffle", "batch", "decode", "deliver"]
FLOW = STAGES[1:]  # list runs once, before the others
KW = dict(seed=0, shuffle=50, batch_size=32, image_size=32)


def epoch(ds, step=0.0):
    for _ in ds:
        if step:
            time.sleep(step)
    return ds.stats()


def test_counts_agree_and_times_add_up(packed):
    st = within(120, lambda: epoch(ShardDataset(str(packed.manifest), **KW)), "an epoch")
    assert list(st["stages"]) == STAGES
    items = [st["stages"][n]["items"] for n in FLOW]
    assert items[-1] == NSAMPLES and items == sorted(items, reverse=True), items
    assert items[-3] - items[-2] <= 8 * 32, items  # decoded ahead: at most the batch buffers
    for name in FLOW:
        g = st["stages"][name]
        parts = g["busy_seconds"] + g["wait_input_seconds"] + g["wait_output_seconds"]
        assert abs(parts - g["seconds"]) <= 0.1 * g["seconds"] + 0.05, (name, g)
        assert g["busy_seconds"] >= 0 and g["queue_fill"] <= g["queue_capacity"], (name, g)
    listed = st["stages"]["list"]
    assert listed["items"] == len(packed.shards) and listed["seconds"] > 0, listed
    assert st["stages"]["decompress"]["bytes"] == 0  # plain tar
    assert st["stages"]["fetch"]["bytes"] >= sum(p.stat().st_size for p in packed.shards)
    assert st["stages"]["deliver"]["bytes"] == NSAMPLES * 32 * 32 * 3
    assert st["stages"]["deliver"]["seconds"] == pytest.approx(st["wall_seconds"], rel=0.01)
    assert st["bottleneck"] in FLOW and st["verdict"].startswith(st["bottleneck"])


def test_compressed_shards_show_their_decompression(shardpack, imagefolder, tmp_path):
    out = tmp_path / "zst"
    out.mkdir()
    cp = subprocess.run([str(shardpack), str(imagefolder), "-o", str(out / "z-%06d.tar.zst"),
                         "-c", "40", "--no-fsync", "-q"], capture_output=True, timeout=120)
    assert cp.returncode == 0, cp.stderr.decode(errors="replace")
    st = within(120, lambda: epoch(ShardDataset(str(out / "z.json"), **KW)), "an epoch")
    fetch, unzstd, parse = (st["stages"][n] for n in ("fetch", "decompress", "parse"))
    stored = sum(p.stat().st_size for p in out.glob("*.tar.zst"))
    assert fetch["bytes"] >= stored and unzstd["bytes"] > stored, (fetch, unzstd)
    assert unzstd["bytes"] >= parse["bytes"] and unzstd["busy_seconds"] > 0, (unzstd, parse)
    assert unzstd["items"] == parse["items"] >= NSAMPLES  # and read ahead into epoch 2


def test_a_slow_training_step_is_named(packed):
    st = within(120, lambda: epoch(ShardDataset(str(packed.manifest), **KW), step=0.15),
                "an epoch")
    assert st["bottleneck"] == "deliver", st["verdict"]
    assert "the pipeline keeps up" in st["verdict"]


def test_a_throttled_fetch_is_named(packed):
    # each shard through a command that stalls before its bytes, one stream: a slow source
    urls = [f"pipe:sleep 0.4; cat '{p}'" for p in packed.shards]
    ds = ShardDataset(urls, streams=1, **KW)
    st = within(120, lambda: epoch(ds), "an epoch")
    assert st["bottleneck"] == "fetch", st["verdict"]
    assert "deliver waits on it" in st["verdict"], st["verdict"]


def test_a_slow_decode_is_named(shardpack, tmp_path):
    src = tmp_path / "huge"
    for i in range(12):
        p = src / "c" / f"{i}.jpg"
        p.parent.mkdir(parents=True, exist_ok=True)
        small = np.random.default_rng(i).integers(0, 256, (60, 80, 3), dtype=np.uint8)
        Image.fromarray(small).resize((3200, 2400), Image.BILINEAR).save(p, quality=85)
    manifest = pack(shardpack, src, tmp_path / "shards", maxcount=4)
    ds = ShardDataset(str(manifest), seed=0, batch_size=4, image_size=32, threads=1,
                      fast=False, crop="center")
    st = within(120, lambda: epoch(ds), "an epoch of huge images")
    assert st["bottleneck"] == "decode", st["verdict"]
    assert st["verdict"].startswith("decode: busy") and "1 thread" in st["verdict"]


def test_each_dataloader_worker_reports(packed):
    loader = ShardLoader(ShardDataset(str(packed.manifest), **KW), num_workers=2)
    n = within(120, lambda: sum(len(y) for _, y in loader), "a ShardLoader epoch")
    st = loader.stats()
    assert n == NSAMPLES and sorted(st["workers"]) == [0, 1]
    for w in st["workers"].values():
        assert list(w["stages"]) == STAGES and w["stages"]["decode"]["items"] > 0
    assert sum(w["stages"]["deliver"]["items"] for w in st["workers"].values()) == NSAMPLES


def test_the_periodic_report(packed, capfd, caplog):
    got = []
    ds = ShardDataset(str(packed.manifest), report_every=0.2, report=got.append, **KW)
    within(120, lambda: epoch(ds, step=0.1), "an epoch")
    assert len(got) >= 3, got
    for r in got:
        assert r["interval_seconds"] >= 0.2 and r["samples_per_second"] > 0
        assert r["bottleneck"] in STAGES and r["verdict"] and "decode" in r["queues"]
    assert sum(r["samples_per_second"] * r["interval_seconds"] for r in got) <= NSAMPLES + 1
    ds = ShardDataset(str(packed.manifest), report_every=0.2, report="stderr", **KW)
    within(120, lambda: epoch(ds, step=0.1), "an epoch")
    err = capfd.readouterr().err
    assert "libshard: " in err and "samples/s" in err and "bottleneck deliver" in err, err
    with caplog.at_level("INFO", logger="libshard"):
        within(120, lambda: epoch(ShardDataset(str(packed.manifest), report_every=0.2, **KW),
                                  step=0.1), "an epoch")
    assert any("samples/s" in r.getMessage() for r in caplog.records)
    with pytest.raises(ValueError, match="report_every"):
        ShardDataset(str(packed.manifest), report_every=0, **KW)


def test_a_trace_in_the_chrome_trace_event_format(packed, tmp_path):
    import json
    path = tmp_path / "run.json"
    within(120, lambda: epoch(ShardDataset(str(packed.manifest), trace=path, **KW)), "an epoch")
    doc = json.loads(path.read_text())
    events = doc["traceEvents"]
    spans = [e for e in events if e["ph"] == "X"]
    # decompress is counted, not traced: it interleaves with reading and parsing by the block
    assert {e["name"] for e in spans} == set(STAGES) - {"decompress"}
    assert all(e["ts"] >= 0 and e["dur"] >= 0 and e["cat"] == "libshard" for e in spans)
    # the next epoch's first batches may be read ahead already
    assert sum(1 for e in spans if e["name"] == "decode") >= NSAMPLES
    assert sum(e["args"]["samples"] for e in spans if e["name"] == "deliver") == NSAMPLES
    threads = {e["tid"]: e["args"]["name"] for e in events if e["name"] == "thread_name"}
    assert {"shard-decode", "shard-fetch", "shard-produce"} <= set(threads.values()), threads
    for e in spans:  # each stage on its own threads
        want = {"decode": "shard-decode", "fetch": "shard-fetch", "batch": "shard-produce",
                "shuffle": "shard-produce"}.get(e["name"])
        assert want is None or threads[e["tid"]] == want, e
    assert doc["otherData"]["dropped_spans"] == 0
    # DataLoader workers: one file each
    loader = ShardLoader(ShardDataset(str(packed.manifest), trace=tmp_path / "w.json", **KW),
                         num_workers=2)
    within(120, lambda: sum(1 for _ in loader), "a ShardLoader epoch")
    decoded = 0
    for w in (0, 1):
        doc = json.loads((tmp_path / f"w.worker-{w}.json").read_text())
        decoded += sum(e["args"]["samples"] for e in doc["traceEvents"]
                       if e.get("name") == "deliver")
    assert decoded == NSAMPLES


def test_a_memory_budget_bounds_the_read_ahead_not_the_result(packed):
    def run(**kw):
        ds = ShardDataset(str(packed.manifest), raw_fields="__key__", **{**KW, **kw})
        keys, fills = [], []
        for x, y, f in ds:
            keys += f["__key__"]
            fills.append(ds.stats()["stages"]["fetch"]["queue_fill"])
        return keys, fills

    keys, _ = within(120, run, "an epoch")
    import libshard
    largest = max(sum(len(v) for k, v in s.items() if not k.startswith("__"))
                  for s in libshard.Reader(str(packed.manifest)))
    # each stream's half share holds the largest sample: about one sample a stream queued
    budget = 2 * 2 * largest
    # (no shuffle buffer: the budget holds it too, to the same bound)
    tight, fills = within(120, lambda: run(memory_budget=budget, streams=2, shuffle=0),
                          "an epoch on a budget")
    assert sorted(tight) == sorted(keys) and len(keys) == NSAMPLES
    assert max(fills) <= 4, fills
    with pytest.raises(ValueError, match="memory_budget"):
        ShardDataset(str(packed.manifest), memory_budget=-1)
