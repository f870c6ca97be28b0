"""shardpack --resume: a pack killed with SIGKILL at random points (plain and .tar.zst with
--jobs, whole runs and parts) and run again with --resume gives a set byte-identical to an
uninterrupted run, every time, packing only the shards the killed run did not record as
finished; a changed input or option is refused, naming it; the record goes with the run's
end. --dedup: exact duplicates across classes and shards packed once, reported, the same
for any --jobs.
"""
import json
import random
import shutil
import signal
import subprocess
import time

import pytest

from conftest import BASE_ENV, bulk_tree, out_text

IMAGES = 360  # 3 classes x 120: 40 shards of 9


@pytest.fixture(scope="module")
def src(tmp_path_factory):
    root = tmp_path_factory.mktemp("resume-src")
    bulk_tree(root, per_class=IMAGES // 3, sizes=[(64, 48), (80, 60), (48, 64)])
    return root


def visible(d):
    """{name: bytes} of a folder's files but the hidden ones (the record, locks)."""
    return {p.name: p.read_bytes() for p in sorted(d.iterdir())
            if p.is_file() and not p.name.startswith(".")}


def cmd(shardpack, src, out, ext, extra):
    return [str(shardpack), str(src), "-o", str(out / f"train-%03d{ext}"), "-c", "9",
            "--shuffle", "3", *extra]


def finish(shardpack, src, out, ext, extra):
    """The run again with --resume, to its end: its JSON summary."""
    cp = subprocess.run(cmd(shardpack, src, out, ext, [*extra, "--resume", "--json", "-q"]),
                        capture_output=True, env=BASE_ENV, timeout=120)
    assert cp.returncode == 0, out_text(cp)
    return json.loads(cp.stdout)


def finished(record):
    """Whether a run's record says it finished: its plans and a completion marker alone."""
    names = sorted(p.name for p in record.iterdir()) if record.is_dir() else []
    return any(n.startswith("done") for n in names) and \
        all(n.startswith(("plan", "done")) for n in names)


def markers(out, record=".train.pack"):
    """The shards the record says are finished."""
    d = out / record
    return sorted(int(p.name.split("-")[1]) for p in d.glob("shard-*")) if d.exists() else []


@pytest.mark.parametrize("ext,extra,part", [(".tar", [], None), (".tar.zst", ["-j", "2"], None),
                                            (".tar", ["-j", "2"], "1/2")],
                         ids=["tar", "zst-jobs", "part"])
def test_a_killed_pack_resumes_to_the_uninterrupted_set(shardpack, src, tmp_path, ext, extra,
                                                        part):
    """18 kill points each (54 in all): after each, a resume keeps exactly the shards with a
    marker and packs the others; the set is the uninterrupted run's byte for byte, its record
    its plan and a completion marker. Every other kill is followed by another killed run first (a resume killed
    in its turn)."""
    extra = [*extra, "--part", part] if part else extra
    record = ".train.pack"
    ref = tmp_path / "ref"
    ref.mkdir()
    t0 = time.monotonic()
    cp = subprocess.run(cmd(shardpack, src, ref, ext, [*extra, "-q"]), capture_output=True,
                        env=BASE_ENV, timeout=120)
    took = time.monotonic() - t0
    assert cp.returncode == 0, out_text(cp)
    want = visible(ref)
    total = sum(n.endswith(ext) for n in want)
    assert total >= (20 if part else 40) and finished(ref / record), "the record says no end"
    out = tmp_path / "out"
    rng = random.Random(f"{ext}{extra}")
    resumed_with_some = 0
    for attempt in range(18):
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir()
        for _ in range(1 + attempt % 2):
            p = subprocess.Popen(cmd(shardpack, src, out, ext, [*extra, "--resume", "-q"]),
                                 env=BASE_ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            time.sleep(rng.uniform(0.05, 0.95) * took)
            p.send_signal(signal.SIGKILL)
            p.wait(timeout=60)
        done = markers(out, record)
        # killed after the manifest: the run was whole, its record (or what was left of it
        # as it went) done with
        complete = any(n.endswith(".json") for n in visible(out))
        for j in done if not complete else ():  # a marker comes after its shard and index
            name = f"train-{j:03d}{ext}"
            assert visible(out).get(name) == want[name], f"attempt {attempt}: {name} marked, not whole"
        got = finish(shardpack, src, out, ext, extra)
        if complete:  # killed after its manifest: the set complete (nothing packed), its
            # markers not gone yet (all kept), or gone before the completion marker (all packed)
            assert got["kept_shards"] in (0, len(done), total), got
        else:
            assert got["kept_shards"] == len(done), f"attempt {attempt}: {got}"
            resumed_with_some += bool(done)
        assert got["packed_shards"] == total - got["kept_shards"], got
        now = visible(out)
        assert now.keys() == want.keys(), f"attempt {attempt}: {sorted(now.keys() ^ want.keys())}"
        assert all(now[n] == want[n] for n in want), f"attempt {attempt}: not byte-identical"
        assert finished(out / record), f"attempt {attempt}: the record says no end"
    assert resumed_with_some >= 3, "too few kills landed mid-run to show a resume"


def bad_last(root):
    """src with one file that is not an image, listed last: a run without skip fails there,
    after the shards before it."""
    (root / "zzz").mkdir()
    (root / "zzz" / "broken.jpg").write_bytes(b"not an image at all" * 50)


def test_a_changed_input_or_option_is_refused_and_a_plain_run_replaces_the_record(
        shardpack, src, tmp_path):
    data = tmp_path / "src"
    shutil.copytree(src, data)
    bad_last(data)
    out = tmp_path / "out"
    base = [str(shardpack), str(data), "-o", str(out / "train-%03d.tar"), "-c", "9", "-q", "-j", "1"]
    cp = subprocess.run([*base, "--resume"], capture_output=True, env=BASE_ENV, timeout=120)
    assert cp.returncode != 0 and "broken.jpg" in cp.stderr.decode(), out_text(cp)
    assert len(markers(out)) >= 30, "the failed run recorded the shards it finished"
    # an option changed
    cp = subprocess.run([*base, "--resume", "--shuffle", "5"], capture_output=True, env=BASE_ENV,
                        timeout=120)
    err = cp.stderr.decode()
    assert cp.returncode != 0 and "cannot resume" in err and "shuffle" in err, err
    # an input changed: its bytes (and so its size)
    victim = sorted((data / "ant").iterdir())[3]
    victim.write_bytes(victim.read_bytes() + b"\0" * 7)
    cp = subprocess.run([*base, "--resume"], capture_output=True, env=BASE_ENV, timeout=120)
    err = cp.stderr.decode()
    # named down to the shard that holds it (the record keeps a digest per shard)
    assert cp.returncode != 0 and "the input changed" in err and "train-000.tar" in err, err
    # control: refused runs touched nothing; a run without --resume packs anew
    assert len(markers(out)) >= 30
    shutil.rmtree(data / "zzz")
    cp = subprocess.run([*base, "--json"], capture_output=True, env=BASE_ENV, timeout=120)
    assert cp.returncode == 0, out_text(cp)
    assert json.loads(cp.stdout)["kept_shards"] == 0 and finished(out / ".train.pack")


def test_a_plan_cut_on_its_way_up_is_an_earlier_run_with_nothing_to_keep(
        shardpack, src, tmp_path):
    """A store that keeps what came of a killed upload (s3rver) may hold a cut plan: its run
    wrote no shard after it, so --resume packs the set anew (a plan cut at a line's end read
    as "fewer shards" refused the resume before); a whole plan of another input still
    refuses it (the control)."""
    data = tmp_path / "src"
    shutil.copytree(src, data)
    bad_last(data)
    out = tmp_path / "out"
    base = [str(shardpack), str(data), "-o", str(out / "train-%03d.tar"), "-c", "9", "-q"]
    cp = subprocess.run([*base, "--resume"], capture_output=True, env=BASE_ENV, timeout=120)
    assert cp.returncode != 0 and len(markers(out)) >= 30
    plan = out / ".train.pack" / "plan"
    text = plan.read_text()
    assert text.endswith("\nend\n")
    for marker in (out / ".train.pack").glob("shard-*"):
        marker.unlink()  # a run cut while its plan went up had written no shard
    shutil.rmtree(data / "zzz")
    whole = plan.read_text()
    plan.write_text(whole[:whole.index("\nshard 30 ") + 1])  # cut at a line's end
    cp = subprocess.run([*base, "--resume", "--json"], capture_output=True, env=BASE_ENV,
                        timeout=120)
    assert cp.returncode == 0, out_text(cp)
    assert json.loads(cp.stdout)["kept_shards"] == 0
    fresh = tmp_path / "fresh"
    cp = subprocess.run([*base[:3], str(fresh / "train-%03d.tar"), *base[4:]],
                        capture_output=True, env=BASE_ENV, timeout=120)
    assert cp.returncode == 0 and visible(out) == visible(fresh), out_text(cp)
    bad_last(data)  # control: a whole plan of another input is refused
    cp = subprocess.run([*base, "--resume"], capture_output=True, env=BASE_ENV, timeout=120)
    (data / "zzz" / "broken.jpg").unlink()
    (data / "zzz").rmdir()
    plan.parent.mkdir(exist_ok=True)
    plan.write_text(whole.replace("\nshard 30 ", "\nshard 30 1", 1))
    cp = subprocess.run([*base, "--resume"], capture_output=True, env=BASE_ENV, timeout=120)
    assert cp.returncode != 0 and "cannot resume" in cp.stderr.decode(), out_text(cp)


def test_a_part_run_into_a_complete_set_removes_the_set_manifest(shardpack, src, tmp_path):
    """A --part run into a folder holding a whole set replaces it: the set's manifest goes
    (it would read half-new shards), the new part's manifest names only new shards."""
    out = tmp_path / "out"
    base = [str(shardpack), str(src), "-o", str(out / "train-%03d.tar"), "-q"]
    subprocess.run([*base, "-c", "9"], check=True, env=BASE_ENV, timeout=120)
    assert (out / "train.json").exists()
    cp = subprocess.run([*base, "-c", "7", "--part", "0/2"], capture_output=True, env=BASE_ENV,
                        timeout=120)
    assert cp.returncode == 0, out_text(cp)
    assert not (out / "train.json").exists(), "the earlier set's manifest beside new shards"
    part = json.loads((out / "train.part-0-of-2.json").read_text())
    names = [s["url"] for s in part["shardlist"]]
    assert names and all((out / n.split("/")[-1]).exists() for n in names)


def dup_tree(root, src):
    """The module's images, with exact copies across classes and shards: 12 duplicates (4 of
    them copies of one image, in three classes)."""
    shutil.copytree(src, root)
    ants = sorted((root / "ant").iterdir())
    for k in range(8):  # copies of ant images under other names and classes
        cls = ["bee", "cow"][k % 2]
        shutil.copy(ants[10 * k], root / cls / f"zcopy{k}.jpg")
    for k in range(4):  # four more copies of one image
        shutil.copy(ants[0], root / ["bee", "cow", "ant", "bee"][k] / f"zagain{k}.jpg")
    return 12


def test_dedup_packs_each_image_once_the_same_for_any_jobs(shardpack, run_sc, src, tmp_path):
    data = tmp_path / "src"
    ndup = dup_tree(data, src)
    sets = []
    for jobs in ("1", "4"):
        out = tmp_path / f"out{jobs}"
        cp = subprocess.run([str(shardpack), str(data), "-o", str(out / "train-%03d.tar"), "-c",
                             "9", "--shuffle", "1", "--dedup", "-j", jobs, "--json", "-q"],
                            capture_output=True, env=BASE_ENV, timeout=120)
        assert cp.returncode == 0, out_text(cp)
        got = json.loads(cp.stdout)
        assert got["duplicates"] == ndup and got["samples"] == IMAGES, got
        rows = (out / "train.duplicates.tsv").read_text().splitlines()
        assert rows[0] == "dropped\tkept\tsha256\tdropped_label\tkept_label" and \
            len(rows) == ndup + 1
        relabelled = 0
        for row in rows[1:]:
            dropped, kept, _, dl, kl = row.split("\t")
            assert open(dropped, "rb").read() == open(kept, "rb").read()
            assert "/ant/img" in kept, "the first in input order is kept (ant/img* comes first)"
            assert kl == "0" and dl == str(["ant", "bee", "cow"].index(dropped.split("/")[-2]))
            relabelled += dl != kl
        # the copies in other classes are said: their label gave way to the kept copy's
        assert relabelled == 11
        cp = subprocess.run([str(shardpack), str(data), "-o", str(out / "train-%03d.tar"),
                             "-c", "9", "--shuffle", "1", "--dedup"], capture_output=True,
                            env=BASE_ENV, timeout=120)
        assert "11 of them of another label than the copy packed" in out_text(cp), out_text(cp)
        cp = run_sc("ls", out / "train.json")
        assert cp.returncode == 0, out_text(cp)
        listed = cp.stdout.decode()
        assert "zcopy" not in listed and "zagain" not in listed
        sets.append(visible(out))
    assert sets[0].keys() == sets[1].keys() and all(sets[0][n] == sets[1][n] for n in sets[0]), \
        "--jobs changed the set"
    # control: without --dedup the copies are packed
    plain = tmp_path / "plain"
    cp = subprocess.run([str(shardpack), str(data), "-o", str(plain / "train-%03d.tar"), "-c", "9",
                         "--shuffle", "1", "--json", "-q"],
                        capture_output=True, env=BASE_ENV, timeout=120)
    assert json.loads(cp.stdout)["samples"] == IMAGES + ndup


def test_verify_on_a_manifest_reports_the_set_as_a_whole(shardpack, run_sc, src, tmp_path):
    """shardcat verify MANIFEST: a shard listed but gone, a gap in the numbering the manifest
    leaves, a shard of its numbering beside it that it does not list: each named, exit 1;
    the whole set (the control) passes."""
    out = tmp_path / "out"
    subprocess.run([str(shardpack), str(src), "-o", str(out / "train-%03d.tar"), "-c", "40", "-q"],
                   check=True, env=BASE_ENV, timeout=120)
    manifest = out / "train.json"
    cp = run_sc("verify", "--json", manifest)
    assert cp.returncode == 0 and json.loads(cp.stdout.splitlines()[-1])["ok"], out_text(cp)
    m = json.loads(manifest.read_text())
    del m["shardlist"][4]  # a gap: train-004 no longer listed (still there: not said twice)
    manifest.write_text(json.dumps(m))
    (out / "train-006.tar").unlink()  # listed, gone
    shutil.copy(out / "train-001.tar", out / "train-012.tar")  # beside it, of its numbering
    shutil.copy(out / "train-001.tar", out / "other-000.tar")  # another set's: not this one's
    cp = run_sc("verify", "--json", manifest)
    assert cp.returncode == 1
    whole = json.loads(cp.stdout.splitlines()[-1])
    assert whole["missing"] == ["train-006.tar"] and whole["gaps"] == ["train-004.tar"]
    assert whole["unlisted"] == ["train-012.tar"] and not whole["ok"], whole
    err = cp.stderr.decode()
    assert "listed, not there: train-006.tar" in err and "not listed: train-004.tar" in err
    assert "beside it, not listed: train-012.tar" in err and "other-000" not in err


def test_repair_gives_back_what_the_set_holds(shardpack, run_sc, src, tmp_path):
    """Each kind of damage: an index gone, an index of another shard, the manifest gone, a
    shard cut short (made again as NAME.repaired.tar with its whole samples, the original
    kept), a shard listed but gone (named: it cannot come back). After the repair the
    readers read the set without an error; its samples are the pack's, but those lost."""
    for ext in (".tar", ".tar.zst"):
        out = tmp_path / ext.replace(".", "")
        # zstd frames of 16 KiB: what lies before a cut frame can be read back
        frames = ["--frame-size", "16K"] if ext == ".tar.zst" else []
        subprocess.run([str(shardpack), str(src), "-o", str(out / f"train-%03d{ext}"), "-c", "40",
                        "-q", *frames], check=True, env=BASE_ENV, timeout=120)
        manifest = out / "train.json"
        before = json.loads(manifest.read_text())
        classes = before["libshard"]["classes"]
        keys = [l.split()[0] for l in run_sc("ls", manifest).stdout.decode().splitlines()]
        assert len(keys) == IMAGES
        (out / "train-001.idx").unlink()
        shutil.copy(out / "train-003.idx", out / "train-002.idx")
        damaged = out / f"train-004{ext}"
        data = damaged.read_bytes()
        damaged.write_bytes(data[:len(data) * 2 // 3])
        (out / f"train-007{ext}").unlink()
        (out / "train-007.idx").unlink()
        cols = (out / "train-006.cols").read_bytes()
        (out / "train-006.cols").unlink()
        lines = (out / "train-005.cols").read_text().splitlines()
        lines[3] = "1 1"
        (out / "train-005.cols").write_text("\n".join(lines) + "\n")
        manifest.unlink()
        cp = run_sc("repair", manifest)
        said = cp.stdout.decode()
        assert cp.returncode == 1, out_text(cp)  # train-007 could not come back
        assert "train.json: gone: made again" in said
        assert "train-001" in said and "train-002" in said and \
            "index and image sizes (.cols) made again" in said
        assert f"train-006{ext}: image sizes (.cols) made again" in said, said
        assert f"train-005{ext}: index and image sizes (.cols) made again" in said, said
        assert (out / "train-006.cols").read_bytes() == cols
        assert (out / "train-005.cols").read_text().splitlines()[3] != "1 1"
        assert f"train-004{ext}: damaged: its first" in said and f"train-004.repaired{ext}" in said
        assert damaged.read_bytes() == data[:len(data) * 2 // 3], "the original kept"
        after = json.loads(manifest.read_text())
        urls = [s["url"] for s in after["shardlist"]]
        assert f"train-004.repaired{ext}" in urls and f"train-007{ext}" not in urls
        # a second repair knows what is gone from the manifest it made: nothing more to do
        # but to name what was lost
        cp = run_sc("verify", manifest)
        assert cp.returncode == 0 or "train-007" in cp.stderr.decode(), out_text(cp)
        read = [l.split()[0] for l in run_sc("ls", manifest).stdout.decode().splitlines()]
        cp = run_sc("stream", manifest)
        assert cp.returncode == 0, out_text(cp)
        assert set(read) < set(keys) and len(read) == len(set(read))
        lost = set(keys) - set(read)
        assert 40 < len(lost) < 80, len(lost)  # train-007's 40, and train-004's last third
        # with the manifest there (its classes kept), the repair is the same; the gap is
        # named again, the damaged original left alone
        (out / "train-005.idx").unlink()
        cp = run_sc("repair", manifest)
        said = cp.stdout.decode()
        assert cp.returncode == 1 and f"train-007{ext}: a gap in the numbering" in said, said
        assert "1 repaired, 1 could not be" in said and "damaged" not in said, said
        again = json.loads(manifest.read_text())
        assert again["shardlist"] == after["shardlist"]
        assert classes and before["libshard"]["classes"] == classes


def test_a_set_of_another_extension_and_the_same_stem_is_refused_not_overwritten(
        shardpack, run_sc, src, tmp_path):
    """A .tar set at maxcount 40, then a .tar.zst set of the same stem at 20 in the same
    folder: their indexes would share STEM-NNN.idx, so the second pack is refused, naming
    the first set's shard and the index, and writes nothing; the first set still verifies
    and reads. Under another stem both verify and read. verify names a shared index as the
    cause where two sets came to share one (written by hand here)."""
    out = tmp_path / "out"
    base = [str(shardpack), str(src), "-q"]
    subprocess.run([*base, "-c", "40", "-o", str(out / "d-%06d.tar")], check=True, env=BASE_ENV,
                   timeout=120)
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    cp = subprocess.run([*base, "-c", "20", "-o", str(out / "d-%06d.tar.zst")],
                        capture_output=True, env=BASE_ENV, timeout=120)
    err = cp.stderr.decode()
    assert cp.returncode == 1 and "d-000000.tar (another set) would share its index d-000000.idx" \
        in err, err
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before
    cp = run_sc("verify", out / "d.json")
    assert cp.returncode == 0, out_text(cp)
    # another stem: both sets live side by side
    subprocess.run([*base, "-c", "20", "-o", str(out / "z-%06d.tar.zst")], check=True,
                   env=BASE_ENV, timeout=120)
    for m in ("d.json", "z.json"):
        cp = run_sc("verify", out / m)
        assert cp.returncode == 0, out_text(cp)
        n = len(run_sc("stream", out / m, "--seed", "0").stdout.splitlines())
        assert n == IMAGES, (m, n)
    # two sets that share an index (as an older shardpack let them): verify names the cause
    shutil.copy(out / "z-000000.tar.zst", out / "d-000000.tar.zst")
    cp = run_sc("verify", out / "d-000000.tar.zst")
    assert cp.returncode == 1 and "its index" in cp.stderr.decode() and \
        "d-000000.tar's (one stem, another set)" in cp.stderr.decode(), out_text(cp)


def tree_sums(root):
    """{relative path: SHA-256} of every file under root (links not followed)."""
    import hashlib
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and not p.is_symlink()}


@pytest.mark.parametrize("plant", ["link", "fifo", "file", "link-inside", "foreign-inside"])
@pytest.mark.parametrize("resume", [False, True], ids=["plain", "resume"])
def test_a_record_place_that_is_not_ours_is_refused_and_nothing_outside_is_touched(
        shardpack, src, tmp_path, plant, resume):
    """A symlink, a FIFO or a file at .train.pack, or a symlink or a foreign file inside it:
    the run is refused naming it, and every file of a victim folder (and the planted
    things) is as it was, checksum for checksum. Control: the same run into a clean folder
    packs, clears its record and leaves the victim as it was."""
    import os
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "thesis.tex").write_text("thesis draft\n")
    (victim / "plan").write_text("a file named as the record's plan\n")
    (victim / "shard-0-9-1-1-none-none").write_text("named as a marker\n")
    out = tmp_path / "out"
    out.mkdir()
    record = out / ".train.pack"
    if plant == "link":
        record.symlink_to(victim)
    elif plant == "fifo":
        os.mkfifo(record)
    elif plant == "file":
        record.write_text("someone's file\n")
    else:
        record.mkdir()
        if plant == "link-inside":
            (record / "plan").symlink_to(victim / "plan")
        else:
            (record / "notes.txt").write_text("not the record's\n")
    before = tree_sums(tmp_path)
    extra = ["--resume"] if resume else []
    cp = subprocess.run(cmd(shardpack, src, out, ".tar", [*extra, "-q"]), capture_output=True,
                        env=BASE_ENV, timeout=120)
    said = cp.stderr.decode()
    assert cp.returncode == 1 and ".train.pack" in said, out_text(cp)
    assert "not the folder shardpack makes" in said or "in the pack record's folder" in said, said
    assert tree_sums(tmp_path) == before, "a file outside the record changed"
    assert not list(out.glob("train-*.tar")), "shards were written beside a refused record"
    # control: a clean output folder packs, and the victim stays as it was
    clean = tmp_path / "clean"
    cp = subprocess.run(cmd(shardpack, src, clean, ".tar", ["-q"]), capture_output=True,
                        env=BASE_ENV, timeout=120)
    assert cp.returncode == 0 and finished(clean / ".train.pack"), out_text(cp)
    assert len(list(clean.glob("train-*.tar"))) == IMAGES // 9
    assert {k: v for k, v in tree_sums(tmp_path).items() if k in before} == before


@pytest.mark.parametrize("tamper", ["bytes", "index-of-another", "index-empty", "link",
                                    "columns-gone", "columns-wrong"])
def test_a_kept_shard_changed_since_is_packed_again(shardpack, src, tmp_path, tamper):
    """A run killed after some shards, then one of its finished shards changed in place at
    its size, given another shard's or an empty index, its columns gone or wrong, or replaced
    by a link to a file of its size: --resume reads each kept shard back (SHA-256, count,
    index, columns), packs the changed
    one again, and the set is the uninterrupted run's byte for byte (the control, untouched
    shards all kept: test_a_killed_pack_resumes_to_the_uninterrupted_set)."""
    import os
    ref = tmp_path / "ref"
    cp = subprocess.run(cmd(shardpack, src, ref, ".tar", ["-q"]), env=BASE_ENV, timeout=120)
    assert cp.returncode == 0
    out = tmp_path / "out"
    proc = subprocess.Popen(cmd(shardpack, src, out, ".tar", ["-q", "-j", "1"]), env=BASE_ENV,
                            stderr=subprocess.DEVNULL)
    deadline = time.time() + 60
    while time.time() < deadline and proc.poll() is None and len(markers(out)) < 6:
        time.sleep(0.002)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done = markers(out)
    assert len(done) >= 2, "the run finished too soon to be cut"
    victim = out / f"train-{done[1]:03d}.tar"
    if tamper == "bytes":
        b = bytearray(victim.read_bytes())
        b[3000:3008] = b"\x55" * 8
        victim.write_bytes(bytes(b))
    elif tamper == "index-of-another":
        shutil.copy(out / f"train-{done[0]:03d}.idx", victim.with_suffix(".idx"))
    elif tamper == "index-empty":
        victim.with_suffix(".idx").write_text("")
    elif tamper == "columns-gone":  # killed between the index and its columns
        victim.with_suffix(".cols").unlink()
    elif tamper == "columns-wrong":
        lines = victim.with_suffix(".cols").read_text().splitlines()
        lines[1] = "7 7"
        victim.with_suffix(".cols").write_text("\n".join(lines) + "\n")
    else:
        twin = tmp_path / "twin.tar"
        twin.write_bytes(b"\0" * victim.stat().st_size)
        victim.unlink()
        os.symlink(twin, victim)
    got = finish(shardpack, src, out, ".tar", [])
    assert got["kept_shards"] == len(done) - 1, got
    assert visible(out) == visible(ref), "the resumed set differs from the uninterrupted run"
    assert not victim.is_symlink()


def test_resume_on_a_finished_set_writes_nothing_and_refuses_changed_options(shardpack, src,
                                                                           tmp_path):
    """--resume on a set a run finished: nothing written (every file's mtime and bytes as
    they were), said; with another option it is refused, naming it, and the set stays; a
    manifest edited since is no longer the record's: the run keeps nothing it cannot prove
    and writes the set again (the control)."""
    import os
    out = tmp_path / "out"
    cp = subprocess.run(cmd(shardpack, src, out, ".tar", ["-q"]), env=BASE_ENV, timeout=120)
    assert cp.returncode == 0

    def stamps():
        return {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in out.rglob("*")
                if p.is_file()}

    before = stamps()
    time.sleep(0.05)
    cp = subprocess.run(cmd(shardpack, src, out, ".tar", ["--resume", "--json"]),
                        capture_output=True, env=BASE_ENV, timeout=120)
    assert cp.returncode == 0, out_text(cp)
    assert "the set is complete" in out_text(cp), out_text(cp)
    assert json.loads(cp.stdout)["packed_shards"] == 0
    assert stamps() == before, "a finished set was written again"
    cp = subprocess.run(cmd(shardpack, src, out, ".tar", ["--resume", "-c", "7"]),
                        capture_output=True, env=BASE_ENV, timeout=120)
    assert cp.returncode == 1 and "the options changed: maxcount 9 then, 7 now" in out_text(cp)
    assert stamps() == before
    manifest = out / "train.json"
    manifest.write_text(manifest.read_text().replace('"name": "train"', '"name": "edited"'))
    got = finish(shardpack, src, out, ".tar", [])
    assert got["packed_shards"] + got["kept_shards"] == IMAGES // 9 and \
        "edited" not in manifest.read_text()


def test_a_huge_record_plan_is_refused_without_reading_it(shardpack, src, tmp_path):
    """A 900 MB plan (sparse) ending in its end line: --resume reads no more than its own
    plan's size and a margin before refusing, in a fraction of the memory."""
    out = tmp_path / "out"
    (out / ".train.pack").mkdir(parents=True)
    plan = out / ".train.pack" / "plan"
    with open(plan, "wb") as f:
        f.truncate(900 << 20)
        f.seek(0, 2)
        f.write(b"end\n")
    # its own peak, from a process that runs nothing else
    probe = ("import resource, subprocess, sys; cp = subprocess.run(sys.argv[1:], "
             "capture_output=True); print(cp.returncode, resource.getrusage("
             "resource.RUSAGE_CHILDREN).ru_maxrss); sys.stderr.write(cp.stderr.decode())")
    cp = subprocess.run(["/usr/bin/python3", "-c", probe,
                         *cmd(shardpack, src, out, ".tar", ["-q", "--resume"])],
                        capture_output=True, env=BASE_ENV, timeout=120)
    rc, peak = map(int, cp.stdout.split())
    assert rc == 1 and "larger than this run's" in cp.stderr.decode(), out_text(cp)
    assert peak < 200 << 10, f"peak RSS {peak} KiB"


def test_ctrl_c_says_what_finished_and_how_to_go_on(shardpack, src, tmp_path):
    """SIGINT mid-run: the run dies of it (exit status 130 in a shell) after one line naming
    the shards finished and --resume; the resume keeps that many."""
    out = tmp_path / "out"
    proc = subprocess.Popen(cmd(shardpack, src, out, ".tar", ["-q", "-j", "1"]), env=BASE_ENV,
                            stderr=subprocess.PIPE)
    deadline = time.time() + 60
    while time.time() < deadline and proc.poll() is None and len(markers(out)) < 5:
        time.sleep(0.002)
    proc.send_signal(signal.SIGINT)
    err = proc.communicate(timeout=60)[1].decode()
    assert proc.returncode == -signal.SIGINT, (proc.returncode, err)
    import re
    m = re.search(r"interrupted: (\d+) of 40 shards finished.*--resume keeps them", err)
    assert m, err
    got = finish(shardpack, src, out, ".tar", [])
    assert got["kept_shards"] >= int(m.group(1)), (got, err)
