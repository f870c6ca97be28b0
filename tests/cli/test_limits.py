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
    for cmd in (["cat", shard, "s3.txt"], ["stream", shard, "--seed", "1"], ["ls", shard]):
        cp = capped(run_sc, *cmd)
        err = out_text(cp)
        assert cp.returncode == 1 and "rebuild it with 'shardcat index'" in err, (cmd, err)


def png_of(width, height, value=0):
    """A grey PNG of width x height of one value, written row by row through zlib (a
    13000 x 13000 one is a few hundred KB and takes no memory to make)."""
    import struct
    import zlib

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + \
            struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    z = zlib.compressobj(9)
    row = b"\0" + bytes([value]) * width
    idat = b"".join(z.compress(row) for _ in range(height)) + z.flush()
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 0, 0,
                                                              0, 0)) +
            chunk(b"IDAT", idat) + chunk(b"IEND", b""))


def test_decode_limits_bound_time_and_memory(run_sc, tmp_path):
    """verify --decode: a valid progressive JPEG of 200 scans is refused by max_scans (the
    report's 13000 x 13000 of 5000 scans too, well within the time), one of 99 decodes; a
    13000 x 13000 PNG (under max_pixels) is refused by max_decode_memory, a small one
    decodes; a PNG with damaged data is a defect (PNGs are decoded, as the loader would)."""
    from jpegscans import many_scans
    import zlib
    shard = write_tar(tmp_path / "scans.tar", [("a.jpg", many_scans(1000, 1000, 200)),
                                                ("b.jpg", many_scans(1024, 1024, 99))])
    cp = capped(run_sc, "verify", "--decode", shard)
    err = out_text(cp)
    assert cp.returncode == 1 and "member 'a.jpg': a progressive JPEG of more than 100 scans " \
        "(max_scans)" in err and "b.jpg" not in err, err
    big = write_tar(tmp_path / "big.tar", [("m.jpg", many_scans(13000, 13000, 5000))])
    import time
    t0 = time.monotonic()
    cp = capped(run_sc, "verify", "--decode", big)
    assert cp.returncode == 1 and "(max_scans)" in out_text(cp), out_text(cp)
    assert time.monotonic() - t0 < 30
    good = png_of(64, 48, 7)
    bad = bytearray(good)
    at = bad.index(b"IDAT") + 8
    bad[at:at + 4] = b"\xff\xff\xff\xff"  # the deflate stream, checksum made to match
    crc_at = bad.index(b"IEND") - 8
    bad[crc_at:crc_at + 4] = (zlib.crc32(bytes(bad[bad.index(b"IDAT"):crc_at])) &
                              0xFFFFFFFF).to_bytes(4, "big")
    pngs = write_tar(tmp_path / "png.tar", [("a.png", png_of(13000, 13000)), ("b.png", bytes(bad)),
                                            ("c.png", good)])
    cp = capped(run_sc, "verify", "--decode", pngs)
    err = out_text(cp)
    assert cp.returncode == 1, err
    assert "member 'a.png': a PNG of 13000x13000 pixels needs" in err and \
        "(max_decode_memory)" in err, err
    assert "member 'b.png'" in err and "corrupt PNG" in err and "c.png" not in err, err


def test_a_count_of_zero_is_checked_like_any_count(run_sc, tmp_path):
    """A manifest counting 0 samples for a shard that has 5: an error naming both, where
    readers planned nothing for it and read 0 samples without a word; an empty shard
    counted 0 reads as nothing."""
    import json
    full = write_tar(tmp_path / "full.tar", [(f"s{i}.txt", b"x") for i in range(5)])
    empty = write_tar(tmp_path / "empty.tar", [])
    for shard, rc in ((full, 1), (empty, 0)):
        m = tmp_path / "m.json"
        m.write_text(json.dumps({"shardlist": [{"url": shard.name, "nsamples": 0}]}))
        for cmd in (["stream", m, "--seed", "1"], ["ls", m]):
            cp = capped(run_sc, *cmd)
            err = out_text(cp)
            assert cp.returncode == rc, (shard.name, cmd, err)
            if rc:
                assert "m.json: shardlist[0] counts 0 samples, but" in err and \
                    "full.tar holds sample 's0' at offset 0" in err, err


def test_a_manifest_is_read_within_its_limits(run_sc, tmp_path):
    """Read one shard at a time: over a million shards is refused (a count, at once), a
    manifest nested 200000 deep names the depth, a syntax error its line and column."""
    many = tmp_path / "many.json"
    with open(many, "w") as f:
        f.write('{"shardlist": [' + ",".join(['{"url":"a","nsamples":1}'] * ((1 << 20) + 1)) + "]}")
    deep = tmp_path / "deep.json"
    deep.write_text('{"shardlist": [], "x": ' + "[" * 200000 + "]" * 200000 + "}")
    broken = tmp_path / "broken.json"
    broken.write_text('{"shardlist": [\n  {"url": "a", "nsamples": 1},\n  {"url": "b" "nsamples": 1}]}')
    want = {many: "more than 1048576 shards", deep: "nested more than 256 deep",
            broken: "broken.json: line 3, column"}
    for m, text in want.items():
        cp = capped(run_sc, "ls", m)
        assert cp.returncode == 1 and text in out_text(cp), out_text(cp)


def test_verify_names_what_the_readers_would_drop(run_sc, tmp_path):
    """Links, special files and members named with no field hold data every reader leaves
    out: defects. Folders, hidden and "__" names are left out by design, a tar's zero
    padding is no data: those pass."""
    def info(name, kind, target=""):
        ti = tarfile.TarInfo(name)
        ti.type, ti.linkname = kind, target
        return ti
    bad = write_tar(tmp_path / "bad.tar", [
        ("a.txt", b"1"), (info("a.lnk", tarfile.SYMTYPE, "/etc/passwd"), None),
        (info("b.hard", tarfile.LNKTYPE, "a.txt"), None), (info("c.fifo", tarfile.FIFOTYPE), None),
        ("README", b"words"), ("d.txt", b"2")])
    cp = capped(run_sc, "verify", bad)
    err = out_text(cp)
    assert cp.returncode == 1, err
    for member in ("a.lnk' is a symbolic link", "b.hard' is a hard link",
                   "c.fifo' is not a regular file", "README' is named with no field"):
        assert member in err and "every reader leaves it out" in err, (member, err)
    good = write_tar(tmp_path / "good.tar", [(info("dir", tarfile.DIRTYPE), None),
                                             ("dir/a.txt", b"1"), ("__meta__", b"{}"),
                                             (".hidden", b"x"), ("dir/b.txt", b"2")])
    cp = capped(run_sc, "verify", good)
    assert cp.returncode == 0, out_text(cp)


def test_verify_names_samples_after_the_end_of_the_archive(run_sc, tmp_path):
    """Two tars appended: every reader stops at the first's end-of-archive blocks, so the
    second's samples are lost: a defect. A folder after the last sample, and the zero
    padding GNU tar writes to its record size, are not."""
    a = write_tar(tmp_path / "a.tar", [("a.txt", b"1")])
    b = write_tar(tmp_path / "b.tar", [("b.txt", b"2"), ("c.txt", b"3")])
    both = tmp_path / "both.tar"
    both.write_bytes(a.read_bytes() + b.read_bytes())
    cp = capped(run_sc, "verify", both)
    assert cp.returncode == 1 and "data after the tar's end-of-archive block" in out_text(cp), \
        out_text(cp)
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "k.txt").write_bytes(b"1")
    (tmp_path / "t" / "z").mkdir()
    sh("tar -cf gnu.tar -C t k.txt z", tmp_path)
    cp = capped(run_sc, "verify", tmp_path / "gnu.tar")
    assert cp.returncode == 0, out_text(cp)


def test_verify_names_a_shard_listed_twice(run_sc, tmp_path):
    import json
    write_tar(tmp_path / "s.tar", [("a.txt", b"1")])
    m = tmp_path / "m.json"
    m.write_text(json.dumps({"shardlist": [{"url": "s.tar", "nsamples": 1}] * 2}))
    cp = capped(run_sc, "verify", m)
    assert cp.returncode == 1 and "s.tar: listed more than once" in out_text(cp), out_text(cp)
    m.write_text(json.dumps({"shardlist": [{"url": "s.tar", "nsamples": 1}]}))
    assert capped(run_sc, "verify", m).returncode == 0


def test_a_seek_table_without_checksums_is_valid(run_sc, tmp_path):
    """The seekable format lets a table leave checksums out (Checksum_Flag 0) and frames
    carry none: verify holds it valid, and readers seek by it."""
    import struct
    members = [("s0.txt", b"a" * 700), ("s1.txt", b"b" * 900)]
    plain = write_tar(tmp_path / "p.tar", members, fmt=tarfile.USTAR_FORMAT)
    with tarfile.open(plain) as tf:
        cut = tf.getmember("s1.txt").offset
    data = plain.read_bytes()
    frames = []
    for i, part in enumerate((data[:cut], data[cut:])):
        (tmp_path / f"f{i}").write_bytes(part)
        sh(f"zstd -q --no-check -c f{i} > f{i}.zst", tmp_path)
        frames.append(((tmp_path / f"f{i}.zst").read_bytes(), len(part)))
    entries = b"".join(struct.pack("<II", len(c), d) for c, d in frames)
    footer = struct.pack("<IBI", len(frames), 0, 0x8F92EAB1)
    table = struct.pack("<II", 0x184D2A5E, len(entries) + len(footer)) + entries + footer
    shard = tmp_path / "s.tar.zst"
    shard.write_bytes(b"".join(c for c, _ in frames) + table)
    cp = capped(run_sc, "verify", shard)
    assert cp.returncode == 0 and "2 zstd frames checked" in cp.stdout.decode(), \
        cp.stdout.decode() + out_text(cp)
    assert run_sc("index", shard).returncode == 0
    cp = capped(run_sc, "stream", shard, "--seed", "1")
    assert cp.returncode == 0 and len(cp.stdout.splitlines()) == 2, out_text(cp)


def test_extract_refuses_a_member_another_shard_wrote(run_sc, tmp_path):
    a = write_tar(tmp_path / "a.tar", [("k.txt", b"from a"), ("x.txt", b"x")])
    b = write_tar(tmp_path / "b.tar", [("k.txt", b"from b"), ("y.txt", b"y")])
    cp = capped(run_sc, "extract", a, b, "-C", tmp_path / "out")
    err = out_text(cp)
    assert cp.returncode == 1 and "b.tar: offset 512: member 'k.txt' was extracted from" in err \
        and "a.tar already: refused" in err, err
    out = tmp_path / "out"
    assert (out / "k.txt").read_bytes() == b"from a" and (out / "y.txt").read_bytes() == b"y"


def test_ls_lists_from_an_index_proven_to_be_the_shards(run_sc, tmp_path):
    """With its .idx proven (first and last headers, the archive's end), ls lists from the
    index as the headers would, reading no header between: a middle header made unreadable
    shows it (ls without the index fails on it). An index from another shard is refused."""
    members = [(f"s{i}.{f}", bytes([65 + i]) * (300 + 7 * i)) for i in range(6) for f in ("a", "b")]
    shard = write_tar(tmp_path / "s.tar", members, fmt=tarfile.USTAR_FORMAT)
    plain = run_sc("ls", shard)
    assert plain.returncode == 0
    assert run_sc("index", shard).returncode == 0
    listed = run_sc("ls", shard)
    assert listed.returncode == 0 and listed.stdout == plain.stdout
    with tarfile.open(shard) as tf:
        middle = tf.getmember("s3.a").offset
    data = bytearray(shard.read_bytes())
    data[middle:middle + 512] = b"\xee" * 512  # a header no reader can parse
    shard.write_bytes(bytes(data))
    listed = run_sc("ls", shard)
    assert listed.returncode == 0 and listed.stdout == plain.stdout, out_text(listed)
    (tmp_path / "s.idx").unlink()
    cp = run_sc("ls", shard)
    assert cp.returncode == 1, "ls without the index reads the headers"
