"""Limits that bound memory whatever a shard or its index says (formats/shard.md 2.5.1):
a sample's members added up (max_sample_size), and an index's lines held to the limits and
to the tar they describe, on every path: in order, headers only, by index, and verify."""
import os
import subprocess
import tarfile

from conftest import out_text
from test_hostile import capped, write_tar

TIMEOUT = 60


def sh(cmd, cwd):
    cp = subprocess.run(["sh", "-c", cmd], cwd=cwd, capture_output=True, timeout=TIMEOUT)
    assert cp.returncode == 0, cp.stderr.decode(errors="replace")


def three_members(tmp_path, mib=200):
    """One sample 'k' of three sparse members of mib MiB each: each under max_member_size
    (256 MiB), together over max_sample_size (256 MiB); as a sparse tar, .tar.zst, .tar.gz."""
    for f in ("k.a", "k.b", "k.c"):
        with open(tmp_path / f, "wb") as out:
            out.truncate(mib << 20)
    sh("tar -cSf s.tar k.a k.b k.c && tar -cf - k.a k.b k.c | zstd -q -1 -T2 > s.tar.zst && "
       "tar -cf - k.a k.b k.c | gzip -1 > s.tar.gz && rm k.a k.b k.c", tmp_path)
    return [tmp_path / n for n in ("s.tar", "s.tar.zst", "s.tar.gz")]


def test_a_sample_of_members_each_under_the_limit_is_refused_on_every_command(run_sc, tmp_path):
    for shard in three_members(tmp_path):
        for cmd in (["ls"], ["stream", "--seed", "1"], ["verify"], ["cat"], ["info"]):
            cp = capped(run_sc, *cmd, shard, *(["k.c"] if cmd == ["cat"] else []))
            err = out_text(cp)
            assert cp.returncode == 1, (shard.name, cmd, err)
            if cmd == ["info"]:
                continue  # counts nothing past the headers it needs
            assert "max_sample_size" in err and shard.name in err, (shard.name, cmd, err)
            if cmd[0] == "stream":  # the reader's share of memory_budget is less: 32 MiB
                assert "member 'k.a'" in err and "raise memory_budget" in err, err
            else:
                assert "member 'k.b'" in err and "sample 'k' to 419430400" in err, (cmd, err)


def shard_and_index(run_sc, tmp_path, n=5):
    shard = write_tar(tmp_path / "s.tar", [(f"s{i}.{f}", bytes([65 + i]) * 700)
                                           for i in range(n) for f in ("cls", "txt")],
                      fmt=tarfile.USTAR_FORMAT)
    cp = run_sc("index", shard)
    assert cp.returncode == 0, out_text(cp)
    idx = tmp_path / "s.idx"
    return shard, idx, idx.read_text().splitlines()


def write_lines(idx, lines):
    idx.write_text("\n".join(lines) + "\n")


def test_an_index_that_lies_is_refused_before_it_is_trusted(run_sc, tmp_path):
    shard, idx, lines = shard_and_index(run_sc, tmp_path)
    head, body = lines[0], lines[1:]
    cls = body[0].split()[:4]
    cases = {
        # 5000 fields at one member's bytes: the amplification of a small index
        "amplify": [f"v1.2 1", " ".join(f"f{i} {cls[1]} {cls[2]} s0.f{i}" for i in range(5000))],
        "shifted": [head] + [" ".join(str(int(t) + 512) if t.isdigit() and k % 4 == 1 else t
                                      for k, t in enumerate(l.split())) for l in body],
        "repeated": ["v1.2 6", body[0], body[1], body[1], body[2], body[3], body[4]],
        "too_few": ["v1.2 3"] + body[:3],
        "other_key": [head, body[0].replace("s0.txt", "s9.txt")] + body[1:],
        "many_fields": ["v1.2 1", " ".join(f"f{i} {512 + 1024 * i} 1 s0.f{i}"
                                           for i in range(100_001))],
    }
    want = {
        "amplify": "after the member before it",
        "shifted": "no tar header at offset",
        "repeated": "line 4: member 's1.cls' at offset",
        "too_few": "the tar goes on at offset",
        "other_key": "is not of sample 's0'",
        "many_fields": "more than 100000 members (max_fields)",
    }
    for name, text in cases.items():
        write_lines(idx, text)
        for cmd in (["cat", shard, "s0.cls"], ["stream", shard, "--seed", "1"]):
            cp = capped(run_sc, *cmd)
            err = out_text(cp)
            assert cp.returncode == 1 and want[name] in err and "s.idx" in err or \
                "s.tar" in err and want[name] in err, (name, cmd, err)
        if name != "shifted":
            cp = capped(run_sc, "verify", shard)
            assert cp.returncode == 1, (name, out_text(cp))


def test_an_index_beside_the_shard_of_another_run_is_refused(run_sc, tmp_path):
    """The kill-after-rename pairing: a new run's index beside an older run's shard (same
    keys, other bytes) is caught at open, before a sample is read by it."""
    shard, idx, lines = shard_and_index(run_sc, tmp_path)
    newer = write_tar(tmp_path / "new.tar", [(f"s{i}.{f}", bytes([97 + i]) * (900 + 40 * i))
                                             for i in range(5) for f in ("cls", "txt")],
                      fmt=tarfile.USTAR_FORMAT)
    assert run_sc("index", newer).returncode == 0
    os.replace(tmp_path / "new.idx", idx)
    for cmd in (["cat", shard, "s3.txt"], ["stream", shard, "--seed", "1"]):
        cp = capped(run_sc, *cmd)
        err = out_text(cp)
        assert cp.returncode == 1 and "rebuild it with 'shardcat index'" in err, (cmd, err)
