"""shardcat verify --json: "error" holds what kept a shard from being read, else the first
defect's message, null for a shard without defects; "defect_messages" lists the defects
(counted in "defects", and said on stderr as they are found)."""
import json

from conftest import bulk_tree


def test_error_says_the_first_defect_or_why_a_shard_was_not_read(run_sp, run_sc, tmp_path):
    bulk_tree(tmp_path / "src", per_class=2)
    cp = run_sp(tmp_path / "src", "-o", tmp_path / "tr-%03d.tar", "-c", "3", "-q")
    assert cp.returncode == 0, cp.stderr
    good = tmp_path / "tr-000.tar"
    bad = tmp_path / "bad.tar"
    data = bytearray(good.read_bytes())
    data[10] ^= 0xFF  # the first member's name: its header checksum fails
    bad.write_bytes(bytes(data))
    cut = tmp_path / "cut.tar"
    cut.write_bytes(good.read_bytes()[:3000])
    missing = tmp_path / "gone.tar"
    for _ in range(3):  # the value once came from memory never written: not the same each run
        cp = run_sc("verify", "--json", bad, cut, missing, good)
        rows = [json.loads(line) for line in cp.stdout.decode().splitlines()]
        assert cp.returncode == 1 and [r["ok"] for r in rows] == [False, False, False, True]
        said = [l[len("shardcat: "):] for l in cp.stderr.decode().splitlines()]
        for r, name in zip(rows[:2], ("bad.tar", "cut.tar")):
            assert r["defects"] >= 1 and len(r["defect_messages"]) == r["defects"], r
            assert r["error"] == r["defect_messages"][0] and name in r["error"], r
            assert all(m in said for m in r["defect_messages"]), (r, said)
        assert rows[2]["defects"] == 1 and "gone.tar" in rows[2]["error"], rows[2]
        assert rows[3]["error"] is None and rows[3]["defects"] == 0
        assert rows[3]["defect_messages"] == []
