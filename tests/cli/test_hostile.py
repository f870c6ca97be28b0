"""Hostile input: shards built to hurt a reader, each met with a clear error naming the
shard, offset and member (or a documented, counted skip), in bounded time and memory.
Shards are written by Python's tarfile (or by hand where tarfile refuses); the readers are
shardcat's commands, which go through the same library as training."""
import io
import tarfile

from conftest import out_text

TIMEOUT = 60  # seconds for any one command: a case that hangs fails, not the suite


def write_tar(path, members, fmt=tarfile.PAX_FORMAT):
    """A tar of (name, bytes) members, or (TarInfo, bytes) for special entries."""
    with tarfile.open(path, "w", format=fmt) as tf:
        for name, data in members:
            ti = name if isinstance(name, tarfile.TarInfo) else tarfile.TarInfo(name)
            if data is not None:
                ti.size = len(data)
            tf.addfile(ti, io.BytesIO(data) if data is not None else None)
    return path


def test_a_sample_of_many_fields_reads_and_its_duplicate_is_found(run_sc, tmp_path):
    """100,000 fields in one sample: read whole (the duplicate check is a hash lookup, not
    a scan of the fields before); one field given twice, in another case, is named."""
    n = 100_000
    fields = [(f"k.f{i:06d}", b"x") for i in range(n)]
    many = write_tar(tmp_path / "many.tar", fields, fmt=tarfile.USTAR_FORMAT)
    cp = run_sc("ls", many, timeout=TIMEOUT)
    assert cp.returncode == 0, out_text(cp)
    assert cp.stdout.decode().count(" f0") == n, "every field listed"
    twice = write_tar(tmp_path / "twice.tar", fields[:60000] + [("k.F054321", b"y")] + fields[60000:],
                      fmt=tarfile.USTAR_FORMAT)
    cp = run_sc("ls", twice, timeout=TIMEOUT)
    assert cp.returncode == 1
    err = out_text(cp)
    assert "twice.tar" in err and "member 'k.F054321'" in err and "field 'f054321' twice" in err


def test_fields_compare_as_formats_shard_md_says(run_sc, tmp_path):
    """formats/shard.md 2.2: readers lower-case ASCII A-Z in field names and nothing else,
    whatever the locale; verify reads fields as stored and compares them byte-wise."""
    shard = write_tar(tmp_path / "case.tar", [("a.JPG", b"upper"), ("b.\u00c9x", b"e-acute")])
    for name in ("a.JPG", "a.jpg", "a.Jpg"):
        cp = run_sc("cat", shard, name)
        assert cp.returncode == 0 and cp.stdout == b"upper", name
    cp = run_sc("cat", shard, "b.\u00e9x")  # not ASCII: not folded
    assert cp.returncode == 1 and cp.stdout == b"" and "no field" in out_text(cp)
    # an index whose ext differs from the stored field only in case is a defect
    one = write_tar(tmp_path / "one.tar", [("b.JPG", b"data")])
    cp = run_sc("index", one)
    assert cp.returncode == 0, out_text(cp)
    idx = tmp_path / "one.idx"
    idx.write_text(idx.read_text().replace("JPG 512", "jpg 512"))
    cp = run_sc("verify", one)
    assert cp.returncode == 1 and "one.idx: line 2: member 'b.JPG' is not field 'jpg'" in \
        out_text(cp), out_text(cp)
    # two fields that are one for the (lower-casing) readers
    both = write_tar(tmp_path / "both.tar", [("c.JPG", b"1"), ("c.jpg", b"2")])
    cp = run_sc("verify", both)
    assert cp.returncode == 1 and "field 'jpg' twice for readers" in out_text(cp), out_text(cp)


ESC = "\x1b]0;owned\x07\x1b[31m"  # set the terminal title, turn the text red


def test_names_never_reach_the_terminal_raw(run_sc, tmp_path):
    """Keys and members with terminal escape sequences: every command prints them escaped
    (\\xNN), on stdout and in messages alike."""
    shard = write_tar(tmp_path / "esc.tar", [(f"a{ESC}b.jpg", b"x"), (f"a{ESC}b.txt", b"y"),
                                              (f"k.f{ESC}", b"z"), ("k2.jpg", b"1"),
                                              ("k2.jpg", b"2")])
    outs = []
    for args in (["ls", shard], ["ls", "--json", shard], ["stream", shard, "--seed", "1"],
                 ["verify", shard], ["info", shard], ["cat", shard, f"a{ESC}b.txt"]):
        cp = run_sc(*args, timeout=TIMEOUT)
        outs.append(cp)
        both = cp.stdout + cp.stderr
        assert b"\x1b" not in both and b"\x07" not in both, (args, both)
    ls, _, stream, verify, _, _ = outs
    assert b"a\\x1b]0;owned\\x07\\x1b[31mb" in ls.stdout + ls.stderr
    assert b"\\x1b" in stream.stdout and b"twice" in stream.stderr
    assert verify.returncode == 1 and b"key breaks the key rules" in verify.stderr


def test_verify_holds_keys_to_the_key_rules(run_sc, tmp_path):
    for key in ("../../x", "/etc/x", "a/./b", "sp ace", "ctl\x01x"):
        shard = write_tar(tmp_path / "k.tar", [(f"{key}.txt", b"1")])
        cp = run_sc("verify", shard, timeout=TIMEOUT)
        assert cp.returncode == 1, (key, out_text(cp))
        assert "key breaks the key rules" in out_text(cp), (key, out_text(cp))
    good = write_tar(tmp_path / "g.tar", [("n01/img_1.txt", b"1")])
    assert run_sc("verify", good).returncode == 0


def test_verify_decode_refuses_an_image_field_that_is_no_image(run_sc, tmp_path):
    from conftest import image_bytes
    png = image_bytes(1, "PNG")
    shard = write_tar(tmp_path / "fake.tar", [("a.jpg", b"this is not a JPEG"), ("b.jpg", png),
                                              ("c.png", image_bytes(2)), ("d.jpg", image_bytes(3))])
    cp = run_sc("verify", "--decode", shard, timeout=TIMEOUT)
    err = out_text(cp)
    assert cp.returncode == 1, err
    assert "member 'a.jpg': named as a JPEG, it holds no image format libshard knows" in err
    assert "member 'b.jpg': named as a JPEG, it holds an image in png" in err
    assert "member 'c.png': named as a PNG, it holds an image in jpeg" in err
    assert "d.jpg" not in err


def test_a_count_that_disagrees_with_the_shard_is_an_error(run_sc, tmp_path):
    """A manifest's nsamples (or an index header) too low would drop the samples past it
    without a word, too high would end the shard early: both are errors naming the shard."""
    import json
    shard = write_tar(tmp_path / "five.tar", [(f"s{i}.txt", b"%d" % i) for i in range(5)])
    for n, want in ((4, "has more than 4 samples"), (6, "ends after 5 samples, 6 were expected")):
        m = tmp_path / f"m{n}.json"
        m.write_text(json.dumps({"shardlist": [{"url": "five.tar", "nsamples": n}]}))
        cp = run_sc("stream", m, "--seed", "1", timeout=TIMEOUT)
        assert cp.returncode == 1 and want in out_text(cp) and "five.tar" in out_text(cp), out_text(cp)
        cp = run_sc("stream", m, "--seed", "1", "--skip-errors", timeout=TIMEOUT)
        assert cp.returncode == 0 and "skipped" in out_text(cp) and want in out_text(cp)
        assert len(cp.stdout.splitlines()) == min(n, 5)
    m = tmp_path / "m5.json"
    m.write_text(json.dumps({"shardlist": [{"url": "five.tar", "nsamples": 5}]}))
    cp = run_sc("stream", m, "--seed", "1", timeout=TIMEOUT)
    assert cp.returncode == 0 and len(cp.stdout.splitlines()) == 5, out_text(cp)


def test_a_manifest_runs_no_command_unless_allowed(run_sc, tmp_path):
    """pipe: shards inside a manifest would run whatever the manifest's author wrote: refused
    unless the user allows it. A pipe: spec given on the command line is the user's own."""
    import json
    shard = write_tar(tmp_path / "one.tar", [("a.txt", b"1")])
    marker = tmp_path / "ran"
    m = tmp_path / "m.json"
    m.write_text(json.dumps({"shardlist": [{"url": f"pipe:touch {marker}; cat {shard}",
                                            "nsamples": 1}]}))
    for args in (["ls", m], ["stream", m, "--seed", "1"]):
        cp = run_sc(*args, timeout=TIMEOUT)
        assert cp.returncode != 0 and "runs commands only when allowed" in out_text(cp), args
        assert not marker.exists(), "the command ran"
    cp = run_sc("stream", m, "--seed", "1", "--allow-manifest-commands", timeout=TIMEOUT)
    assert cp.returncode == 0 and marker.exists() and len(cp.stdout.splitlines()) == 1
    cp = run_sc("ls", f"pipe:cat {shard}", timeout=TIMEOUT)
    assert cp.returncode == 0, out_text(cp)


# ---- bombs: every limit holds within a hard memory cap ------------------------------------

CAP = 1536 << 20  # address space for a command below: far under what the bombs would take


def capped(run_sc, *args):
    """shardcat with its address space capped (prlimit): a limit that failed to hold shows
    as an out-of-memory failure or a kill, not as swapping. (Not under AddressSanitizer,
    whose shadow memory alone takes terabytes of address space.)"""
    import os
    prefix = () if "ASAN_OPTIONS" in os.environ else ("prlimit", f"--as={CAP}")
    return run_sc(*args, prefix=prefix, timeout=TIMEOUT)


def jpeg_claiming(w, h):
    """A small real JPEG whose frame header claims w x h pixels."""
    from conftest import image_bytes
    data = bytearray(image_bytes(5, "JPEG", size=(16, 16)))
    for i in range(len(data) - 9):
        if data[i] == 0xFF and data[i + 1] in (0xC0, 0xC2):  # SOF0 / SOF2
            data[i + 5:i + 9] = bytes([h >> 8, h & 255, w >> 8, w & 255])
            return bytes(data)
    raise AssertionError("no SOF marker")


def test_a_jpeg_declaring_65500_squared_pixels_is_refused(run_sc, tmp_path):
    bomb = jpeg_claiming(65500, 65500)
    shard = write_tar(tmp_path / "bomb.tar", [("a.jpg", bomb), ("b.txt", b"1")])
    cp = capped(run_sc, "verify", "--decode", shard)
    err = out_text(cp)
    assert cp.returncode == 1 and "member 'a.jpg'" in err and "65500x65500 pixels" in err, err


def test_a_member_declaring_more_than_the_limit_is_refused_unread(run_sc, tmp_path):
    """A sparse 4 GiB member (GNU tar --sparse: a tiny tar) and the same 4 GiB declared by a
    pax header: refused by max_member_size before a byte is kept."""
    big = tmp_path / "s.bin"
    with open(big, "wb") as f:
        f.truncate(4 << 30)
        f.write(b"x")
    sparse = tmp_path / "sparse.tar"
    subprocess_ok(["tar", "-cSf", str(sparse), "-C", str(tmp_path), "s.bin"])
    assert sparse.stat().st_size < 1 << 20
    cp = capped(run_sc, "ls", sparse)
    err = out_text(cp)
    assert cp.returncode == 1 and "member 's.bin' declares 4294967296 bytes" in err, err
    assert "max_member_size" in err


def test_compression_bombs_are_refused(run_sc, tmp_path):
    """1.25 GiB of zeros in one member, compressed by zstd (a 40 KiB shard) and gzip."""
    big = tmp_path / "z.bin"
    with open(big, "wb") as f:
        f.truncate(1280 << 20)
    for ext, tool in (("tar.zst", ["zstd", "-q", "-1", "-T2"]), ("tar.gz", ["gzip", "-1"])):
        shard = tmp_path / f"bomb.{ext}"
        subprocess_ok(["sh", "-c", f"tar -cf - -C {tmp_path} z.bin | {' '.join(tool)} > {shard}"])
        cp = capped(run_sc, "ls", shard)
        err = out_text(cp)
        assert cp.returncode == 1 and "member 'z.bin' declares 1342177280 bytes" in err, (ext, err)


def test_names_counts_and_sizes_past_the_limits(run_sc, tmp_path):
    # a pax path of 300 KB passes libarchive and meets max_name; one of 1 MB, libarchive's
    # own limit: either way an error naming the shard and the offset, never a dropped name
    for n, want in ((300_000, "a member name of 300002 bytes"), (1 << 20, "Special header too large")):
        long = write_tar(tmp_path / "long.tar", [("a.txt", b"0"), ("k." + "x" * n, b"1")])
        cp = capped(run_sc, "ls", long)
        assert cp.returncode == 1 and want in out_text(cp) and "offset 1024" in out_text(cp), out_text(cp)
    many = write_tar(tmp_path / "many.tar", [(f"k.f{i:06d}", b"") for i in range(100_001)],
                     fmt=tarfile.USTAR_FORMAT)
    cp = capped(run_sc, "ls", many)
    assert cp.returncode == 1 and "has more than 100000 members" in out_text(cp), out_text(cp)
    for size in ("-5", str(1 << 63), str((1 << 40) + 1)):
        ti = tarfile.TarInfo("k.bin")
        ti.pax_headers = {"size": size}
        shard = write_tar(tmp_path / "pax.tar", [(ti, b"")])
        cp = capped(run_sc, "ls", shard)
        err = out_text(cp)
        # refused by libarchive (a negative size, at the header) or by max_member_size
        assert cp.returncode == 1 and ("member 'k.bin' declares" in err or
                                       "offset 0: the first header" in err), (size, err)


def subprocess_ok(cmd):
    import subprocess
    cp = subprocess.run(cmd, capture_output=True, timeout=TIMEOUT)
    assert cp.returncode == 0, cp.stderr.decode(errors="replace")


def test_extract_replaces_what_is_there_and_never_waits(run_sc, tmp_path):
    """shardcat extract into a folder holding, under the members' names, a hard link to a
    file elsewhere and a FIFO: the outside file is untouched, nothing blocks."""
    import os
    shard = write_tar(tmp_path / "x.tar", [("a.txt", b"from the shard"), ("b.txt", b"bee")])
    out = tmp_path / "out"
    out.mkdir()
    precious = tmp_path / "precious"
    precious.write_bytes(b"keep me")
    os.link(precious, out / "a.txt")
    os.mkfifo(out / "b.txt")
    cp = run_sc("extract", shard, "-C", out, timeout=TIMEOUT)
    assert cp.returncode == 0, out_text(cp)
    assert precious.read_bytes() == b"keep me", "written through the hard link"
    assert (out / "a.txt").read_bytes() == b"from the shard"
    assert (out / "b.txt").read_bytes() == b"bee"
    assert sorted(p.name for p in out.iterdir()) == ["a.txt", "b.txt"], "no temporary left"


def test_a_zstd_frame_that_fails_its_checksum_gives_none_of_its_samples(run_sc, shardpack, tmp_path):
    """The frame's last 4 bytes (its XXH64 checksum) altered: libzstd finds it at the frame's
    end, and the reader decompresses each frame whole first, so no sample of it comes out;
    the error names the frame's offset."""
    import subprocess
    from conftest import bulk_tree, parse_seek_table
    src = tmp_path / "src"
    bulk_tree(src, per_class=10, sizes=[(64, 48)])
    out = tmp_path / "out"
    out.mkdir()
    cp = subprocess.run([str(shardpack), str(src), "-o", str(out / "z-%03d.tar.zst"), "-q",
                         "--frame-size", "8KiB"], capture_output=True)
    assert cp.returncode == 0, cp.stderr
    shard = out / "z-000.tar.zst"
    data = bytearray(shard.read_bytes())
    frames, _ = parse_seek_table(bytes(data))
    assert len(frames) >= 4
    # the samples that lie wholly in frames 0 and 1 (frames end on sample boundaries)
    first_bad = sum(d for _, d, _ in frames[:2])  # tar offset where frame 2 begins
    lines = (out / "z-000.idx").read_text().splitlines()[1:]
    before = sum(int(line.split()[1]) < first_bad for line in lines)
    assert 0 < before < len(lines)
    offset = sum(c for c, _, _ in frames[:2])  # frame 2's compressed offset
    data[offset + frames[2][0] - 1] ^= 0xFF  # the last byte of its checksum
    shard.write_bytes(bytes(data))
    (out / "z-000.idx").unlink()  # read in order, not through the index
    cp = run_sc("ls", shard, timeout=TIMEOUT)
    err = out_text(cp)
    assert cp.returncode == 1 and f"zstd frame at offset {offset}" in err, err
    assert "checksum" in err.lower(), err
    # the last sample of frame 1 ends where frame 2's first header would be read: it goes
    # with the error (a sample is whole only once the next header says so)
    assert len(cp.stdout.decode().splitlines()) == before - 1, "a sample of the damaged frame came out"


def test_brace_ranges_that_wrap_are_refused(run_sc):
    """A fuzzer's finding: strtoull read {-16..-1} as 2^64-16 .. 2^64-1, and the loop to the
    largest number wrapped around, producing names until memory ran out."""
    cp = run_sc("ls", "x-{-16..-1}.tar", timeout=TIMEOUT)
    assert cp.returncode == 1 and "is not a range" in out_text(cp), out_text(cp)
    cp = run_sc("ls", "x-{18446744073709551614..18446744073709551615}.tar", timeout=TIMEOUT)
    assert cp.returncode == 1 and out_text(cp).count("cannot open") == 2, out_text(cp)
