"""Outputs that are not files a rename may replace (a device node, a FIFO, a socket) are
refused, naming them, and left as they were: shardcat show -o, shardpack --manifest and
-o, shardcat index; `-o -` writes show's PNG to standard output and is refused, named, where
an output is written whole and renamed into place."""
import os
import socket
import stat
import subprocess

import pytest

from conftest import BASE_ENV, bulk_tree


@pytest.fixture(scope="module")
def packed(tmp_path_factory, shardpack):
    root = tmp_path_factory.mktemp("outputs")
    bulk_tree(root / "src", per_class=4)
    subprocess.run([str(shardpack), str(root / "src"), "-o", str(root / "d" / "d-%03d.tar"),
                    "-c", "8", "-q"], check=True, env=BASE_ENV, timeout=120)
    return root


def plant(path, kind):
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "socket":
        s = socket.socket(socket.AF_UNIX)
        s.bind(str(path))
        s.close()
    else:
        os.mknod(path, 0o644 | stat.S_IFCHR, os.makedev(1, 3))  # /dev/null's numbers
    return os.lstat(path)


@pytest.mark.parametrize("kind", ["fifo", "socket", "device"])
def test_an_output_that_is_no_file_is_refused_and_left_alone(shardpack, shardcat, packed, tmp_path,
                                                             kind):
    if kind == "device" and os.geteuid() != 0:
        pytest.skip("making a device node needs root")
    words = {"fifo": "a FIFO", "socket": "a socket", "device": "a device"}[kind]
    runs = {
        "show": [str(shardcat), "show", str(packed / "d" / "d-000.tar"), "--seed", "0",
                 "--count", "4", "--image-size", "32", "-o"],
        "manifest": [str(shardpack), str(packed / "src"), "-o", str(tmp_path / "p-%03d.tar"),
                     "-c", "8", "-q", "--manifest"],
    }
    for what, argv in runs.items():
        target = tmp_path / f"{what}-{kind}"
        before = plant(target, kind)
        cp = subprocess.run([*argv, str(target)], capture_output=True, env=BASE_ENV,
                            timeout=120)
        err = cp.stderr.decode()
        assert cp.returncode == 1 and f"{target}: {words}, not a file" in err, (what, err)
        after = os.lstat(target)
        assert (after.st_mode, after.st_ino, after.st_rdev) == \
            (before.st_mode, before.st_ino, before.st_rdev), f"{what} replaced the {kind}"
    # the control: a file there is replaced as an output is
    target = tmp_path / "plain.png"
    target.write_bytes(b"old")
    cp = subprocess.run([*runs["show"], str(target)], capture_output=True, env=BASE_ENV,
                        timeout=120)
    assert cp.returncode == 0 and target.read_bytes()[:4] == b"\x89PNG"


def test_dash_is_standard_output_where_the_format_allows(shardpack, shardcat, packed, tmp_path):
    cp = subprocess.run([str(shardcat), "show", str(packed / "d" / "d-000.tar"), "--seed", "0",
                         "--count", "4", "--image-size", "32", "-o", "-"], capture_output=True,
                        env=BASE_ENV, timeout=120)
    assert cp.returncode == 0 and cp.stdout[:8] == b"\x89PNG\r\n\x1a\n", cp.stderr.decode()
    assert not (tmp_path / "-").exists() and not os.path.exists("-")
    cp = subprocess.run([str(shardpack), str(packed / "src"), "-o", str(tmp_path / "p-%03d.tar"),
                         "-c", "8", "-q", "--manifest", "-"], capture_output=True, env=BASE_ENV,
                        timeout=120, cwd=tmp_path)
    assert cp.returncode == 1 and "-: standard output cannot take this output" in \
        cp.stderr.decode(), cp.stderr.decode()
    assert not (tmp_path / "-").exists()


def test_a_manifest_name_it_cannot_write_is_refused_before_anything_is_touched(shardpack, packed,
                                                                              tmp_path):
    """--manifest - is refused before the run starts: a file of that name stays, and no shard
    is written."""
    (tmp_path / "-").write_text("mine")
    cp = subprocess.run([str(shardpack), str(packed / "src"), "-o", str(tmp_path / "p-%03d.tar"),
                         "-c", "8", "-q", "--manifest", "-"], capture_output=True, env=BASE_ENV,
                        timeout=120, cwd=tmp_path)
    assert cp.returncode == 1 and "-: standard output cannot take this output" in \
        cp.stderr.decode(), cp.stderr.decode()
    assert (tmp_path / "-").read_text() == "mine"
    assert not list(tmp_path.glob("p-*.tar")), "shards written before the manifest was refused"


def test_show_is_sized_to_memory(shardcat, packed, tmp_path):
    """4096 tiles of 4096 x 4096 (2 x 206 GB of batches) are refused before any is made,
    naming what they need; the control: 16 tiles of 64 are drawn."""
    base = [str(shardcat), "show", str(packed / "d" / "d-000.tar"), "--seed", "0", "-o",
            str(tmp_path / "g.png")]
    cp = subprocess.run([*base, "--count", "4096", "--image-size", "4096"], capture_output=True,
                        env=BASE_ENV, timeout=60)
    assert cp.returncode == 1 and "more than show's limit" in cp.stderr.decode(), \
        cp.stderr.decode()
    assert not (tmp_path / "g.png").exists()
    cp = subprocess.run([*base, "--count", "16", "--image-size", "64"], capture_output=True,
                        env=BASE_ENV, timeout=60)
    assert cp.returncode == 0 and (tmp_path / "g.png").exists(), cp.stderr.decode()
