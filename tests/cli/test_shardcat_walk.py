"""shardcat's one walk over the shards its commands are given (tools/shardcat_walk.c): what
each command does when one shard of several fails, when the list cannot be made, and the
order of the checks before it; and which members extract refuses (by their skip reason)."""
import io
import json
import shutil
import tarfile

import pytest

from conftest import bulk_tree


def err_text(cp):
    return cp.stderr.decode("utf-8", "replace")


def out_text(cp):
    return cp.stdout.decode("utf-8", "replace")


@pytest.fixture(scope="module")
def three(run_sp, tmp_path_factory):
    """3 shards of 2 samples each, with their .idx files and manifest."""
    root = tmp_path_factory.mktemp("walk")
    bulk_tree(root / "src", per_class=2)
    cp = run_sp(root / "src", "-o", root / "tr-%03d.tar", "-c", "2", "-q")
    assert cp.returncode == 0, err_text(cp)
    shards = sorted(root.glob("tr-*.tar"))
    assert len(shards) == 3
    return root, shards


def keys(run_sc, shard):
    cp = run_sc("ls", shard)
    assert cp.returncode == 0, err_text(cp)
    return [line.split()[0] for line in out_text(cp).splitlines()]


@pytest.mark.parametrize("cmd", ["ls", "info", "verify", "index", "extract"])
def test_a_shard_that_fails_does_not_stop_the_others(three, run_sc, tmp_path, cmd):
    root, shards = three
    work = tmp_path / "w"
    work.mkdir()
    for s in shards:
        shutil.copy(s, work)
    good = [work / shards[0].name, work / shards[2].name]
    missing = work / "gone.tar"
    extra = []
    if cmd == "extract":
        (tmp_path / "x").mkdir()
        extra = ["-C", tmp_path / "x"]
    cp = run_sc(cmd, good[0], missing, good[1], *extra)
    err, out = err_text(cp), out_text(cp)
    assert cp.returncode == 1, err
    assert err.count("gone.tar") == 1, err
    if cmd == "ls":
        assert out.split() and [l.split()[0] for l in out.splitlines()] == (
            keys(run_sc, good[0]) + keys(run_sc, good[1]))
    elif cmd == "info":
        assert str(good[0]) in out and str(good[1]) in out and "gone.tar" not in out
    elif cmd == "verify":
        lines = out.splitlines()
        assert lines[0].startswith(f"{good[0]}: ok: 2 samples"), out
        assert lines[1] == f"{missing}: FAILED (1 defect)", out
        assert lines[2].startswith(f"{good[1]}: ok: 2 samples"), out
        assert lines[3:] == ["3 shards, 1 failed"], out
    elif cmd == "index":
        assert out.splitlines() == [f"{good[0].with_suffix('.idx')}: 2 samples",
                                    f"{good[1].with_suffix('.idx')}: 2 samples"], out
    else:
        files = sorted(str(p.relative_to(tmp_path / "x"))
                       for p in (tmp_path / "x").rglob("*") if p.is_file())
        assert len(files) == 2 * 2 * 3, files  # 2 shards, 2 samples, 3 members each
        assert err.rstrip().endswith(f"shardcat: extracted 12 files into {tmp_path / 'x'}"), err


def test_cat_stops_at_the_first_shard_holding_the_key_or_failing(three, run_sc, tmp_path):
    root, shards = three
    for i in (0, 2):  # the middle one is missing
        shutil.copy(shards[i], tmp_path / shards[i].name)
    pattern = str(tmp_path / "tr-{000..002}.tar")
    first, last = keys(run_sc, shards[0])[0], keys(run_sc, shards[2])[0]
    with tarfile.open(shards[0]) as tf:
        want = tf.extractfile(f"{first}.cls").read()
    cp = run_sc("cat", pattern, f"{first}.cls")  # found before the missing one is reached
    assert cp.returncode == 0 and cp.stdout == want, err_text(cp)
    cp = run_sc("cat", pattern, f"{last}.cls")  # the missing one ends the search
    err = err_text(cp)
    assert cp.returncode == 1 and cp.stdout == b"", err
    assert "tr-001.tar" in err and "no sample" not in err and "tr-002" not in err, err
    cp = run_sc("cat", root / "tr.json", "zz/none.cls")
    assert cp.returncode == 1 and err_text(cp) == "shardcat: no sample 'zz/none' in any of 3 shards\n"
    cp = run_sc("cat", shards[0], "zz/none.cls")
    assert cp.returncode == 1 and err_text(cp) == f"shardcat: {shards[0]}: no sample 'zz/none'\n"


@pytest.mark.parametrize("cmd", ["ls", "info", "verify", "index", "extract", "cat"])
def test_a_list_that_cannot_be_made_is_said_once_and_nothing_is_visited(three, run_sc,
                                                                        tmp_path, cmd):
    root, shards = three
    args = {"cat": ["x.cls"], "extract": ["-C", tmp_path / "nodir"]}.get(cmd, [])
    cp = run_sc(cmd, tmp_path / "gone.json", *args)
    err = err_text(cp)
    assert cp.returncode == 1 and cp.stdout == b"", err
    assert len(err.splitlines()) == 1 and "gone.json" in err, err


def test_extract_makes_a_missing_folder_after_the_list_and_reports_only_a_walk(three, run_sc,
                                                                               tmp_path):
    """As shardpack makes its output folder, extract makes DIR (and the folders above it)
    once the list is made; one it cannot make is said, after the list."""
    root, shards = three
    nodir = tmp_path / "nodir" / "deeper"
    cp = run_sc("extract", shards[0], "-C", nodir)
    assert cp.returncode == 0, err_text(cp)
    assert err_text(cp) == f"shardcat: extracted 6 files into {nodir}\n"
    (tmp_path / "file").write_text("not a folder")
    cp = run_sc("extract", shards[0], "-C", tmp_path / "file" / "x")
    assert cp.returncode == 1 and err_text(cp) == f"shardcat: {tmp_path / 'file' / 'x'}: Not a directory\n"
    (tmp_path / "x").mkdir()
    cp = run_sc("extract", root / "tr.json", "-C", tmp_path / "x")
    assert cp.returncode == 0
    assert err_text(cp) == f"shardcat: extracted 18 files into {tmp_path / 'x'}\n"


def test_verify_sums_up_several_shards_only_in_text(three, run_sc):
    root, shards = three
    cp = run_sc("verify", shards[0])
    assert cp.returncode == 0 and len(out_text(cp).splitlines()) == 1, out_text(cp)
    cp = run_sc("verify", root / "tr.json")
    assert cp.returncode == 0 and out_text(cp).splitlines()[-2] == "3 shards, 0 failed"
    cp = run_sc("verify", "--json", root / "tr.json")
    assert cp.returncode == 0 and "shards," not in out_text(cp)
    lines = [json.loads(l) for l in out_text(cp).splitlines()]
    assert len(lines) == 4 and lines[-1]["set"] == str(root / "tr.json") and lines[-1]["ok"]


@pytest.mark.parametrize("args, says", [
    # a remote setting the library refuses is said before the command's operands are looked at
    (["ls", "--timeout", "0"], "shardcat: remote settings:"),
    (["nope", "--json", "x.tar"], "shardcat: --json goes with ls, info, verify and stream"),
    (["nope", "x.tar"], "shardcat: unknown command 'nope'"),
    (["ls", "--seed", "1", "x.tar"], "shardcat: that option goes with stream"),
    (["stream", "--decode"], "shardcat: no shards given"),
    (["stream", "--decode", "x.tar"], "shardcat: --decode and -C do not go with stream"),
    (["stream", "--mix", "1:x.tar", "y.tar"],
     "shardcat: give the shards as arguments or with --mix, not both"),
    (["cat", "--json", "x.tar", "a.b"], "shardcat: --json goes with"),
    (["extract", "--decode", "x.tar"], "shardcat: --decode goes with verify"),
    (["extract", "x.tar"], "shardcat: extract wants -C DIR"),
])
def test_checks_come_in_their_order(run_sc, tmp_path, args, says):
    cp = run_sc(*args, cwd=tmp_path)
    assert cp.returncode == 2 and cp.stdout == b""
    assert err_text(cp).startswith(says), err_text(cp)


def test_extract_refuses_links_and_passes_over_other_members_left_out(run_sc, tmp_path):
    """The members a shard leaves out of its samples: the links are refused and said (exit
    1), folders, FIFOs and names that are not fields passed over in silence."""
    p = tmp_path / "mixed.tar"
    with tarfile.open(p, "w", format=tarfile.PAX_FORMAT) as tf:
        def add(name, data=None, kind=tarfile.REGTYPE, link=""):
            ti = tarfile.TarInfo(name)
            ti.type, ti.linkname = kind, link
            if data is not None:
                ti.size = len(data)
            tf.addfile(ti, None if data is None else io.BytesIO(data))
        add("a/s1.txt", b"one")
        add("a", kind=tarfile.DIRTYPE)
        add("a/fifo.txt", kind=tarfile.FIFOTYPE)
        add("noext", b"no dot")
        add("a/.hidden.txt", b"hidden")
        add("a/sym.txt", kind=tarfile.SYMTYPE, link="/etc/passwd")
        add("a/hard.txt", kind=tarfile.LNKTYPE, link="a/s1.txt")
        add("a/s2.txt", b"two")
    dest = tmp_path / "x"
    dest.mkdir()
    cp = run_sc("extract", p, "-C", dest)
    lines = err_text(cp).splitlines()
    assert cp.returncode == 1, lines
    assert len(lines) == 3, lines
    assert lines[0].endswith("member 'a/sym.txt' is a symbolic link: refused"), lines
    assert lines[1].endswith("member 'a/hard.txt' is a hard link: refused"), lines
    assert lines[2] == f"shardcat: extracted 2 files into {dest}"
    got = sorted(str(q.relative_to(dest)) for q in dest.rglob("*") if not q.is_dir())
    assert got == ["a/s1.txt", "a/s2.txt"] and not any(q.is_symlink() for q in dest.rglob("*"))


def test_a_misspelt_command_or_option_gets_the_closest(run_sc, run_sp, tmp_path):
    """A typo is answered with the closest command or option, in two lines (no screenful of
    help pushing the error away); a word near nothing is not guessed at."""
    cases = [(run_sc, ["lss", "x.tar"], "unknown command 'lss' (did you mean 'ls'?)"),
             (run_sc, ["stream", "--sede", "3", "x.tar"], "unknown option '--sede' (did you mean "
                                                           "'--seed'?)"),
             (run_sp, ["--maxcont", "3", "src", "-o", "x-%06d.tar"],
              "unknown option '--maxcont' (did you mean '--maxcount'?)"),
             (run_sc, ["frob", "x.tar"], "unknown command 'frob' (ls, cat, info, verify, index, "
                                         "repair, manifest, subset, extract, stream, show, batch, "
                                         "bench)")]
    for run, args, said in cases:
        cp = run(*args)
        err = cp.stderr.decode()
        assert cp.returncode == 2 and said in err and len(err.splitlines()) == 2, err
