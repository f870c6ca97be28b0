"""shardpack's output, byte for byte, against what it wrote before the pack plan moved into
the library (tests/cli/pack_golden.json, recorded with the shardpack of that day).

The input is made of deterministic bytes with image signatures (shardpack without --verify
checks signatures only), so the recorded digests depend on nothing but shardpack: key
clashes, nested folders, names that need '_', class names in list files, extra columns,
shuffles, parts and joins, size and count limits, zstd frames and SOURCE_DATE_EPOCH.

To record anew (only when the output is meant to change):
    /usr/bin/python3 tests/cli/test_pack_golden.py build/tools/shardpack > tests/cli/pack_golden.json
"""
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
GOLDEN = HERE / "pack_golden.json"

JPEG = b"\xff\xd8\xff\xe0"
PNG = b"\x89PNG\r\n\x1a\n"


def _names():
    names = [f"cat/img_{i:03d}.jpg" for i in range(25)]
    names += ["cat/img_000.png", "cat/a b.JPG", "cat/a_b.jpg"]
    names += [f"dog/sub/x_{i:02d}.jpeg" for i in range(10)]
    names += ["dog/y.v2.jpg"]
    names += [f"zebra/z{i:02d}.png" for i in range(15)]
    return names


def make_input(root):
    """Writes the input tree and its list files under root; returns root/'src'."""
    src = Path(root) / "src"
    for n, rel in enumerate(_names()):
        size = 200 + (n * 7919) % 30000
        head = PNG if rel.endswith(".png") else JPEG
        body = bytes((n * 31 + k * 7) & 255 for k in range(size - len(head)))
        p = src / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(head + body)
    (src / "cat" / "notes.txt").write_text("not an image\n")
    (src / "cat" / ".hidden.jpg").write_bytes(JPEG + b"hidden")
    kinds = {"cat": "feline", "dog": "canine", "zebra": "equine"}
    with open(src / "list.jsonl", "w") as f:
        for i, rel in enumerate(_names()):
            row = {"path": rel, "label": kinds[rel.split("/")[0]]}
            if i % 3 == 0:
                row["caption"] = f"picture {i}"
            if i % 5 == 0:
                row["score"] = i / 4
            f.write(json.dumps(row) + "\n")
    with open(src / "list.tsv", "w") as f:
        f.write("path\tlabel\tsource\n")
        for i, rel in enumerate(_names()):
            f.write(f"{rel}\t{i % 4}\tcamera-{i % 3}\n")
    return src


# name -> (argument lists, extra environment); each list is one shardpack run
CASES = {
    "count": ([["SRC", "-o", "OUT/a-%06d.tar", "--maxcount", "7"]], {}),
    "zstd-size": ([["SRC", "-o", "OUT/b-%06d.tar.zst", "--maxsize", "60K", "--frame-size", "16K"]], {}),
    "shuffle": ([["SRC", "-o", "OUT/c-%06d.tar", "--shuffle", "42", "--maxcount", "10"]], {}),
    "parts": ([["SRC", "-o", "OUT/d-%06d.tar", "--maxcount", "5", "--part", f"{i}/3"] for i in range(3)]
              + [["--join", "-o", "OUT/d.json", "OUT/d.part-0-of-3.json", "OUT/d.part-1-of-3.json",
                  "OUT/d.part-2-of-3.json"]], {}),
    "jsonl": ([["--list", "SRC/list.jsonl", "-o", "OUT/e-%06d.tar", "--maxcount", "8"]], {}),
    "tsv-zstd-shuffle": ([["--list", "SRC/list.tsv", "-o", "OUT/f-%06d.tar.zst", "--maxsize", "40000",
                           "--shuffle", "7", "--level", "5"]], {}),
    "mtime": ([["SRC", "-o", "OUT/g-%06d.tar", "--maxcount", "20", "--maxsize", "200K"]],
              {"SOURCE_DATE_EPOCH": "1700000000"}),
}


def run_case(shardpack, name, root):
    """Runs one case into root/name; returns {file name: sha256} of what it wrote."""
    src = make_input(root) if not (Path(root) / "src").exists() else Path(root) / "src"
    out = Path(root) / name
    out.mkdir()
    runs, extra = CASES[name]
    env = {k: v for k, v in os.environ.items() if k != "SOURCE_DATE_EPOCH"}
    env.update(extra)
    for args in runs:
        args = [a.replace("SRC", str(src)).replace("OUT", str(out)) for a in args]
        cp = subprocess.run([str(shardpack), *args, "--no-fsync", "-q"] if args[0] != "--join"
                            else [str(shardpack), *args], env=env, capture_output=True, timeout=120)
        assert cp.returncode == 0, cp.stderr.decode()
    # the pack's record (.STEM.pack/) names the run's own paths: a note, not output
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(out.iterdir())
            if not p.name.endswith(".pack")}


def test_output_matches_the_recorded_bytes(shardpack, tmp_path):
    golden = json.loads(GOLDEN.read_text())
    assert sorted(golden) == sorted(CASES)
    for name in CASES:
        got = run_case(shardpack, name, tmp_path)
        assert got == golden[name], f"case {name}: shardpack's output changed"


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as d:
        print(json.dumps({n: run_case(sys.argv[1], n, d) for n in CASES}, indent=1, sort_keys=True))
