"""Golden orders: the key sequence each consumer reads in epochs 0-2, for fixed shards and
settings, kept as digests in golden_orders.json beside this file. The order is a promise
(docs/resume.md): the same state-format version reads the same order, so a state saved by one
release resumes on the next, and a run can be reproduced. A change to the order fails here
unless the state format's version changes with it (formats/order.md, section 4).

Recording, after a deliberate change of the order and of the state's version:
    SHARD_RECORD_GOLDEN=1 /usr/bin/python3 -m pytest tests/stream/test_golden_orders.py
"""
import hashlib
import io
import json
import os
import struct
import tarfile
import zlib
from pathlib import Path

import pytest

GOLDEN = Path(__file__).with_name("golden_orders.json")
SEED = "7"

# aspect-ratio buckets: which batch a sample is in is part of the order
BUCKETS = ["--aspect-buckets", "24x32,32x24,32x32", "--batch-size", "4"]
# rows: name -> (sources, ranks x workers, the settings `shardcat stream` takes)
ROWS = {
    "exact 1x1": ("a", (1, 1), ["--mode", "exact", "--shuffle", "40"]),
    "exact 3x2": ("a", (3, 2), ["--mode", "exact", "--shuffle", "40"]),
    "equal 3x2": ("a", (3, 2), ["--mode", "equal", "--shuffle", "40"]),
    "equal 2x1 streams 3": ("a", (2, 1), ["--mode", "equal", "--shuffle", "40:5",
                                          "--streams", "3"]),
    "mix 1x1": ("mix", (1, 1), ["--mode", "exact", "--shuffle", "40"]),
    "mix 2x2": ("mix", (2, 2), ["--mode", "exact", "--shuffle", "40"]),
    "buckets 1x1": ("img", (1, 1), ["--mode", "exact", "--shuffle", "40", *BUCKETS]),
    "buckets 3x2": ("img", (3, 2), ["--mode", "exact", "--shuffle", "40", *BUCKETS]),
    "buckets equal 2x2": ("img", (2, 2), ["--mode", "equal", "--shuffle", "40", *BUCKETS]),
    "buckets mix 2x1": ("img mix", (2, 1), ["--mode", "exact", "--shuffle", "40", *BUCKETS]),
}
EPOCHS = (0, 1, 2)


def write_shards(folder, prefix, sizes):
    """Plain tars of tiny members, their bytes fixed (names, sizes, mtimes): a brace spec."""
    folder.mkdir(parents=True, exist_ok=True)
    for s, n in enumerate(sizes):
        with tarfile.open(folder / f"{prefix}-{s:02d}.tar", "w", format=tarfile.USTAR_FORMAT) as t:
            for i in range(n):
                for ext, data in (("txt", f"{prefix}{s}:{i}".encode()), ("cls", str(i % 3).encode())):
                    info = tarfile.TarInfo(f"{prefix}{s:02d}_{i:03d}.{ext}")
                    info.size, info.mtime, info.mode = len(data), 0, 0o644
                    info.uname = info.gname = ""
                    t.addfile(info, io.BytesIO(data))
    return str(folder / f"{prefix}-{{00..{len(sizes) - 1:02d}}}.tar")


def png(width, height):
    """A grey PNG of that size: its header is what the buckets read."""
    def chunk(kind, data):
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data)))
    rows = b"".join(b"\0" + bytes([128]) * width for _ in range(height))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows, 9)) + chunk(b"IEND", b""))


SIZES = [(32, 24), (24, 32), (40, 40), (48, 27), (20, 30), (30, 30), (64, 40)]  # (w, h)


def write_images(folder, prefix, counts):
    """Plain tars of small PNGs of several aspect ratios, their bytes fixed: a brace spec."""
    folder.mkdir(parents=True, exist_ok=True)
    for s, n in enumerate(counts):
        with tarfile.open(folder / f"{prefix}-{s:02d}.tar", "w", format=tarfile.USTAR_FORMAT) as t:
            for i in range(n):
                w, h = SIZES[(7 * s + 3 * i + i // 5) % len(SIZES)]
                for ext, data in (("png", png(w, h)), ("cls", str(i % 3).encode())):
                    info = tarfile.TarInfo(f"{prefix}{s:02d}_{i:03d}.{ext}")
                    info.size, info.mtime, info.mode = len(data), 0, 0o644
                    info.uname = info.gname = ""
                    t.addfile(info, io.BytesIO(data))
    return str(folder / f"{prefix}-{{00..{len(counts) - 1:02d}}}.tar")


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    d = tmp_path_factory.mktemp("golden")
    # uneven shards, 307 samples in all (prime: no world size divides it)
    a = write_shards(d / "a", "a", [31, 17, 40, 23, 36, 29, 44, 19, 38, 30])
    b = write_shards(d / "b", "b", [12, 25, 18, 21])
    i = write_images(d / "i", "i", [21, 13, 30, 17, 26, 19, 24, 11])
    j = write_images(d / "j", "j", [14, 23, 9])
    idx = ["--index-cache", str(d / "idx")]
    return {"a": [*idx, a], "mix": [*idx, "--mix", f"2:{a}", "--mix", f"1:{b}"],
            "img": [*idx, i], "img mix": [*idx, "--mix", f"2:{i}", "--mix", f"1:{j}"]}


def digest(keys):
    return hashlib.sha256("\n".join(keys).encode()).hexdigest()[:20]


def orders(stream, sources):
    runs, where = [], []
    for name, (src, (ranks, workers), extra) in ROWS.items():
        for e in EPOCHS:
            for r in range(ranks):
                for w in range(workers):
                    runs.append([*sources[src], "--seed", SEED, "--epoch", str(e), "--rank",
                                 str(r), "--world-size", str(ranks), "--worker", str(w),
                                 "--workers", str(workers), *extra])
                    where.append((name, f"rank {r} worker {w}", f"epoch {e}"))
    out = {}
    for (name, who, e), res in zip(where, stream.many(runs)):
        keys = res.ok().keys
        assert keys, f"{name}, {who}, {e}: no samples"
        out.setdefault(name, {}).setdefault(who, {})[e] = digest(keys)
    return out


def state_version(stream, sources):
    state = stream(*sources["a"], "--seed", SEED, "--samples", "1").ok().state
    return state.split(":", 1)[0]


def test_the_orders_are_the_recorded_ones(stream, sources):
    now = orders(stream, sources)
    version = state_version(stream, sources)
    if os.environ.get("SHARD_RECORD_GOLDEN") == "1":
        GOLDEN.write_text(json.dumps({"state_version": version, "orders": now}, indent=1,
                                     sort_keys=True) + "\n")
        pytest.skip(f"recorded {GOLDEN.name} for state format {version}")
    golden = json.loads(GOLDEN.read_text())
    changed = [f"{name}, {who}, {e}" for name, row in golden["orders"].items()
               for who, epochs in row.items() for e, d in epochs.items()
               if now.get(name, {}).get(who, {}).get(e) != d]
    missing = [name for name in ROWS if name not in golden["orders"]]
    assert not missing, (f"no recorded orders for {missing}: record them (SHARD_RECORD_GOLDEN=1, "
                         f"see this file's docstring)")
    if version == golden["state_version"]:
        assert not changed, (
            f"the order changed while the state format stays {version}: a state saved by the "
            f"last release would resume on other samples, and a run would not reproduce. "
            f"Raise the state format's version with the change (formats/order.md, section 4) "
            f"and record the orders again (SHARD_RECORD_GOLDEN=1). Changed: "
            + "; ".join(changed[:6]) + (f" and {len(changed) - 6} more" if len(changed) > 6 else ""))
    else:
        pytest.fail(f"the state format is {version} now, the orders were recorded for "
                    f"{golden['state_version']}: record them again (SHARD_RECORD_GOLDEN=1) "
                    f"after checking that {version} reads or refuses the older states "
                    f"({len(changed)} consumer-epochs changed)")


def test_every_consumer_of_a_row_reads_a_different_order(stream, sources):
    """The digests could not all match by accident: the control that they tell orders apart."""
    now = orders(stream, sources)
    for name, row in now.items():
        digests = [d for epochs in row.values() for d in epochs.values()]
        assert len(set(digests)) == len(digests), f"{name}: two consumer-epochs read one order"
