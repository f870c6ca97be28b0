"""libshard.webdataset reads under the library's limits (limits.py): a GNU sparse tar whose
members declare 1000 MiB each, a zstd bomb (1000 MiB of zeros in 36 KB) and a .tar.zst sample
of three 250 MiB members are refused in a second or two of CPU and without holding their
bytes, each refusal naming the limit, the keyword and the environment variable that raise
it; on the C reader's path and on tarfile's (a pipe:), in DataLoader workers too. The keyword
and the variable do raise it (the controls).
"""
import json
import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

import libshard.webdataset as wds  # noqa: E402

from .conftest import _PYPATH, SLOW, within  # noqa: E402
from .test_torch import write_tar  # noqa: E402

HANG = 60 * SLOW


@pytest.fixture(scope="module")
def bombs(tmp_path_factory):
    """{name: path}: sparse (3 x 1000 MiB, 10 KB), bomb (1000 MiB of zeros, zstd), big
    (a .tar.zst sample of 3 x 250 MiB)."""
    root = tmp_path_factory.mktemp("bombs")
    sh = (f"cd {root} && for f in k.a k.b k.c; do truncate -s 1000M $f; done && "
          f"tar -cSf sparse.tar k.a k.b k.c && rm k.a k.b k.c && "
          f"truncate -s 1000M z.bin && tar -cSf - z.bin | zstd -q -1 -T1 > bomb.tar.zst && "
          f"rm z.bin && for f in b.x b.y b.z; do truncate -s 250M $f; done && "
          f"tar -cSf - b.x b.y b.z | zstd -q -1 -T1 > big.tar.zst && rm b.x b.y b.z")
    subprocess.run(sh, shell=True, check=True, timeout=300)
    assert os.path.getsize(root / "sparse.tar") < 20000
    return {n: str(root / f) for n, f in (("sparse", "sparse.tar"), ("bomb", "bomb.tar.zst"),
                                          ("big", "big.tar.zst"))}


PROBE = r"""
import json, resource, sys, time
import libshard.webdataset as wds
url, workers = sys.argv[1].split(","), int(sys.argv[2])
ds = wds.WebDataset(url, shardshuffle=False)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
cpu = time.process_time()
try:
    got = [s["__key__"] for s in (wds.WebLoader(ds, num_workers=workers, batch_size=None)
                                  if workers else ds)]
    out = {"delivered": got}
except Exception as e:
    out = {"error": type(e).__name__, "text": str(e)}
peak = max(resource.getrusage(who).ru_maxrss  # a worker starts as this process is
           for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
out.update(cpu=time.process_time() - cpu, grew=(peak - before) / 1024)
print(json.dumps(out))
"""


def probe(url, workers=0, env=None):
    """What a fresh interpreter makes of url through WebDataset: the error or the keys, its
    CPU seconds, and how far its peak RSS grew (MiB) past the interpreter's own with
    libshard.webdataset imported."""
    path = os.pathsep.join([str(_PYPATH), os.environ.get("PYTHONPATH", "")])
    cp = subprocess.run([sys.executable, "-c", PROBE, url, str(workers)], capture_output=True,
                        text=True, timeout=HANG,
                        env=dict(os.environ, PYTHONPATH=path, **(env or {})))
    assert cp.returncode == 0, cp.stderr[-2000:]
    return json.loads(cp.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("name,limit", [("sparse", "max_member_size"),
                                        ("bomb", "max_member_size"),
                                        ("big", "max_sample_size")])
@pytest.mark.parametrize("path", ["c", "tarfile"])
def test_hostile_shards_are_refused_fast_and_small(bombs, name, limit, path):
    url = bombs[name] if path == "c" else f"pipe:cat {bombs[name]}"
    if path == "tarfile" and name != "sparse":  # tarfile reads a .tar.zst through no pipe
        url = f"pipe:zstd -dc {bombs[name]}"
    got = probe(url)
    assert got.get("error") in ("TarReadError", "ReadError"), got
    text = got["text"]
    assert f"({limit})" in text and f"{limit}=N" in text, text
    assert f"LIBSHARD_{limit.upper()}" in text, text
    assert got["cpu"] <= 2.0 * SLOW, got
    assert got["grew"] <= 64, got


def test_refused_in_dataloader_workers_too(bombs):
    got = probe(f"{bombs['big']},{bombs['big']}", workers=2)
    assert "max_sample_size" in got.get("text", ""), got
    assert got["grew"] <= 64, got


@pytest.fixture(scope="module")
def fat(tmp_path_factory):
    """One shard of 3 samples, each two members of 300 KB."""
    root = tmp_path_factory.mktemp("fat")
    write_tar(root / "f.tar", [(f"s{i}.{ext}", bytes([i]) * 300_000)
                               for i in range(3) for ext in ("a", "b")])
    return str(root / "f.tar")


def test_the_keyword_and_the_variable_set_the_limit(fat, monkeypatch):
    """A sample of 600 KB: refused under 500 KB given by keyword or by the environment
    (C path and tarfile's), delivered under the default (the control)."""
    keys = lambda ds: [s["__key__"] for s in within(HANG, lambda: list(ds), "an epoch")]  # noqa
    assert keys(wds.WebDataset(fat, shardshuffle=False)) == ["s0", "s1", "s2"]
    for url in (fat, f"pipe:cat {fat}"):
        with pytest.raises(Exception, match=r"takes its sample to|takes sample 's0'") as e:
            keys(wds.WebDataset(url, shardshuffle=False, max_sample_size=500_000))
        assert "(max_sample_size)" in str(e.value)
        monkeypatch.setenv("LIBSHARD_MAX_SAMPLE_SIZE", "500K")
        with pytest.raises(Exception, match="max_sample_size"):
            keys(wds.WebDataset(url, shardshuffle=False))
        # the keyword over the variable
        assert keys(wds.WebDataset(url, shardshuffle=False, max_sample_size=1 << 20)) == \
            ["s0", "s1", "s2"]
        monkeypatch.setenv("LIBSHARD_MAX_SAMPLE_SIZE", "lots")
        with pytest.raises(ValueError, match="LIBSHARD_MAX_SAMPLE_SIZE='lots'"):
            wds.WebDataset(url, shardshuffle=False)
        monkeypatch.delenv("LIBSHARD_MAX_SAMPLE_SIZE")


def test_a_member_past_its_limit_is_refused_by_name(fat):
    with pytest.raises(Exception, match=r"member 's0.a' declares 300000 bytes.*max_member_size"):
        list(wds.WebDataset(fat, shardshuffle=False, max_member_size=100_000))


def test_decode_memory_is_bounded_and_raised_by_keyword(tmp_path, monkeypatch):
    from PIL import Image
    import io
    buf = io.BytesIO()
    Image.new("RGB", (400, 300), (9, 9, 9)).save(buf, "PNG")
    write_tar(tmp_path / "p.tar", [("i.png", buf.getvalue())])
    url = str(tmp_path / "p.tar")
    with pytest.raises(Exception, match=r"max_decode_memory.*max_decode_memory=N.*"
                                        r"LIBSHARD_MAX_DECODE_MEMORY"):
        list(wds.WebDataset(url, shardshuffle=False).decode("rgb8", max_decode_memory=100_000))
    monkeypatch.setenv("LIBSHARD_MAX_DECODE_MEMORY", "100000")
    with pytest.raises(Exception, match="max_decode_memory"):
        list(wds.WebDataset(url, shardshuffle=False).decode("rgb8"))
    monkeypatch.delenv("LIBSHARD_MAX_DECODE_MEMORY")
    (s,) = list(wds.WebDataset(url, shardshuffle=False).decode("rgb8"))
    assert s["png"].shape == (300, 400, 3)
