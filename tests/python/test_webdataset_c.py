"""libshard.webdataset's tar stage and image decoders in C, held to WebDataset's Python ones:
the members tarfile gives (tars made by Python's tarfile in GNU and pax formats, GNU tar,
bsdtar, gzip; names WebDataset treats oddly; links, folders, metadata; a tar cut short),
the samples of DataPipeline and fluid pipelines with 0 and 2 DataLoader workers, the pixels
of every image spec against PIL's; and the pipeline's stats() saying which did the work,
with pipe:cat (Python's tarfile) as the negative control. Remote shards: tests/remote/
test_webdataset.py."""
import io
import subprocess
import tarfile
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from PIL import Image  # noqa: E402
from torch.utils.data import DataLoader  # noqa: E402

import libshard.webdataset as wds  # noqa: E402
from libshard import ShardError  # noqa: E402
from libshard.webdataset import tariterators  # noqa: E402

from .conftest import SLOW, jpeg, textured, within  # noqa: E402

HANG = 60 * SLOW

#: member names WebDataset reads as they are: "./", a hidden basename, a dotted folder,
#: upper case, no dot, metadata at the top and below, a long name, UTF-8, an empty field
#: name, a name twice, an empty member
NAMES = ["./a.jpg", "./a.cls", "dir/.hidden.jpg", "b.JPG", "b.Seg.PNG", "nodot", "__meta__",
         "dir/__x__/y.jpg", "c/" + "l" * 150 + ".jpg", "ünï/çødé.txt", "e.", "f.a.b.c",
         "dup.jpg", "dup.jpg", "z/.x.jpg", ".top.jpg", "a.b/.c.jpg", "empty.txt"]


def add(tf, name, data=b"", kind=tarfile.REGTYPE, link=""):
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, link
    info.size = len(data) if kind == tarfile.REGTYPE else 0
    tf.addfile(info, io.BytesIO(data) if kind == tarfile.REGTYPE else None)


@pytest.fixture(scope="module")
def tars(tmp_path_factory):
    """{name: path} of tars of every kind the stage must read as tarfile does."""
    root = tmp_path_factory.mktemp("wdsc")
    out = {}
    for fmt, name in ((tarfile.GNU_FORMAT, "gnu"), (tarfile.PAX_FORMAT, "pax"),
                      (tarfile.USTAR_FORMAT, "ustar")):
        path = root / f"{name}.tar"
        with tarfile.open(path, "w", format=fmt) as tf:
            for i, n in enumerate(NAMES):
                if fmt == tarfile.USTAR_FORMAT and (len(n) > 100 or not n.isascii()):
                    continue
                add(tf, n, b"" if n == "empty.txt" else n.encode() * (i + 1))
            add(tf, "dir2", kind=tarfile.DIRTYPE)
            add(tf, "sym.jpg", kind=tarfile.SYMTYPE, link="a.jpg")
            add(tf, "hard.jpg", kind=tarfile.LNKTYPE, link="b.JPG")
            add(tf, "last.jpg", b"L" * 1000)
        out[name] = path
    with tarfile.open(root / "latin.tar", "w", format=tarfile.GNU_FORMAT,
                      encoding="latin-1") as tf:
        add(tf, "caf\xe9.jpg", b"1")  # not UTF-8: surrogate-escaped, as tarfile gives it
    out["latin"] = root / "latin.tar"
    subprocess.run(f"gzip -c {out['gnu']} > {root}/gz.tar.gz", shell=True, check=True)
    out["gz"] = root / "gz.tar.gz"
    src = root / "src"
    (src / "sub").mkdir(parents=True)
    for n in ("s1.jpg", "s1.cls", "sub/s2.jpg", "sub/s2.txt"):
        (src / n).write_bytes(n.encode() * 100)
    subprocess.run(["tar", "cf", str(root / "gnutar.tar"), "."], cwd=src, check=True)
    subprocess.run(f"bsdtar cf {root}/bsdtar.tar *", shell=True, cwd=src, check=True)
    out["gnutar"], out["bsdtar"] = root / "gnutar.tar", root / "bsdtar.tar"
    whole = out["pax"].read_bytes()
    at = whole.index(b"L" * 1000)
    (root / "cut.tar").write_bytes(whole[:at + 500])  # inside last.jpg's data
    (root / "noend.tar").write_bytes(whole[:(at + 1000 + 511) // 512 * 512])  # no end blocks
    out["cut"], out["noend"] = root / "cut.tar", root / "noend.tar"
    return out


def expanded(url):
    """The tar stage's members of url ({"fname", "data"}, the end marker), the error type
    at the end if one; and the stage's counts."""
    stage = wds.filters.pipelinefilter(tariterators.tar_file_expander)()
    out = []
    try:
        for m in stage(tariterators.url_opener([dict(url=str(url))])):
            out.append({k: v for k, v in m.items() if k != "__url__"})
    except Exception as exn:  # noqa: BLE001 (the type is what is compared)
        out.append(exn)
    return out, stage.counts.as_dict()


@pytest.mark.parametrize("name", ["gnu", "pax", "ustar", "latin", "gz", "gnutar", "bsdtar",
                                  "noend"])
def test_members_are_tarfiles(tars, name):
    c, counts = expanded(tars[name])
    python, pcounts = expanded(f"pipe:cat '{tars[name]}'")
    assert c == python and len(c) > 1
    assert counts["shards_c"] == 1 and counts["members_c"] >= len(c) - 1
    assert counts["members_python"] == 0
    assert pcounts["shards_python"] == 1 and pcounts["members_c"] == 0, "the negative control"


def test_names_as_webdataset_reads_them(tars):
    """What WebDataset 1.0.2 makes of the odd names (its tar_file_iterator and
    base_plus_ext), read through C: "./" kept, a hidden basename split at its leading dot
    when the folder has no dot, metadata and no-dot names left out, links and folders too."""
    got = [m["fname"] for m in expanded(tars["gnu"])[0] if m]
    assert "./a.jpg" in got and "__meta__" not in got and "dir/__x__/y.jpg" in got
    assert not {"dir2", "sym.jpg", "hard.jpg"} & set(got)
    assert [m["fname"] for m in expanded(tars["latin"])[0] if m] == ["caf\udce9.jpg"]
    samples = list(wds.DataPipeline(wds.SimpleShardList(str(tars["pax"])),
                                    wds.tarfile_to_samples(handler=wds.ignore_and_continue)))
    keys = [s["__key__"] for s in samples]
    assert "./a" in keys and "z/" in keys and "b" in keys
    assert samples[keys.index("b")].keys() >= {"jpg", "seg.png"}, "lower-cased extensions"


def test_a_cut_tar_is_tarfiles_error_after_the_same_members(tars):
    c, counts = expanded(tars["cut"])
    python, _ = expanded(f"pipe:cat '{tars['cut']}'")
    assert c[:-1] == python[:-1] and len(c) > 10
    assert isinstance(python[-1], tarfile.ReadError)
    assert isinstance(c[-1], tarfile.ReadError), "code that catches tarfile's error catches it"
    assert isinstance(c[-1], ShardError) and c[-1].member == "last.jpg"
    assert "cut.tar" in str(c[-1]) and "last.jpg" in str(c[-1]) and "offset" in str(c[-1])
    assert counts["shards_c"] == 1


def to_python(src):
    """A user's stage between opener and expander: the stream read whole into a BytesIO
    (which Python's tarfile reads)."""
    for s in src:
        s["stream"] = io.BytesIO(s["stream"].read())
        yield s


def test_handlers_see_the_same_calls(tars, tmp_path):
    """warn_and_continue-like handlers over a missing shard, a cut one and a whole one: the
    same samples and the same handler calls (exception types, in order) as Python's path."""
    def run(*between):
        seen = []

        def handler(exn):
            seen.append(tarfile.ReadError if isinstance(exn, tarfile.ReadError) else type(exn))
            return True
        urls = [str(u) for u in (tmp_path / "missing.tar", tars["cut"], tars["gnutar"])]
        got = list(wds.DataPipeline(
            wds.SimpleShardList(urls), wds.filters.pipelinefilter(tariterators.url_opener)(
                handler=handler), *between,
            wds.filters.pipelinefilter(tariterators.tar_file_expander)(handler=handler),
            wds.filters.pipelinefilter(tariterators.group_by_keys)(handler=handler)))
        return [s["__key__"] for s in got], seen
    keys, seen = run()
    assert (keys, seen) == run(to_python)
    assert set(keys[-2:]) == {"./s1", "./sub/s2"} and seen[0] is FileNotFoundError


def test_a_stage_between_opener_and_expander_sees_webdatasets_stream(tars):
    """Between url_opener and tar_file_expander the stream is a file object, read as it is:
    one peeked at or read from is Python's to go on with, the same members."""
    url = str(tars["gnutar"])
    whole, _ = expanded(url)

    def peek(src):
        for s in src:
            assert isinstance(s["stream"], io.BufferedReader) and s["url"] == url
            s["stream"].peek(10)
            yield s

    for stage in (peek, to_python):
        expand = wds.filters.pipelinefilter(tariterators.tar_file_expander)()
        got = list(wds.DataPipeline(wds.SimpleShardList(url), tariterators.url_opener, stage,
                                    expand))
        assert [{k: v for k, v in m.items() if k != "__url__"} for m in got] == whole
        assert expand.counts.as_dict()["members_python"] == 4
        assert expand.counts.as_dict()["members_c"] == 0


@pytest.fixture(scope="module")
def photo_shards(tmp_path_factory, photos):
    """3 shards of real photographs as JPEGs (4:2:0, 4:4:4, progressive, grey), a CMYK JPEG
    and a PNG (PIL's to decode), with cls."""
    root = tmp_path_factory.mktemp("wdsc-photos")
    images = []
    for i, (name, rgb) in enumerate(sorted(photos.items())):
        images.append(jpeg(rgb, quality=85, subsampling=2 if i % 2 else 0))
        if i < 2:
            b = io.BytesIO()
            Image.fromarray(rgb).save(b, "JPEG", progressive=True, quality=80)
            images.append(b.getvalue())
            b = io.BytesIO()
            Image.fromarray(rgb).convert("L").save(b, "JPEG", quality=90)
            images.append(b.getvalue())
    b = io.BytesIO()
    Image.fromarray(textured(40, 30)).convert("CMYK").save(b, "JPEG")
    images.append(b.getvalue())
    b = io.BytesIO()
    Image.fromarray(textured(40, 30)).save(b, "PNG")
    png = b.getvalue()
    for s in range(3):
        with tarfile.open(root / f"p-{s}.tar", "w") as tf:
            for j, data in enumerate(images):
                key = f"s{s}-{j:02d}"
                add(tf, f"{key}.jpg", data)
                add(tf, f"{key}.cls", str(j % 3).encode())
            add(tf, f"s{s}-png.png", png)
    return str(root / "p-{0..2}.tar"), len(images) + 1


def reference(spec, data):
    """WebDataset 1.0.2's ImageHandler on data, as its source has it: PIL decodes."""
    atype, etype, mode = wds.autodecode.imagespecs[spec]
    with io.BytesIO(data) as stream:
        img = Image.open(stream)
        img.load()
        img = img.convert(mode.upper())
    if atype == "pil":
        return img
    a = np.asarray(img)
    if etype == "float":
        a = a.astype(np.float32) / 255.0
    if atype == "numpy":
        return a
    return torch.from_numpy(a.transpose(2, 0, 1).copy() if a.ndim == 3 else a.copy())


def same(x, y):
    if isinstance(x, Image.Image):
        return type(x) is type(y) and x == y and x.readonly == y.readonly
    if isinstance(x, np.ndarray):
        return (type(y) is np.ndarray and x.dtype == y.dtype and np.array_equal(x, y)
                and x.flags.writeable == y.flags.writeable)
    return type(y) is torch.Tensor and x.dtype == y.dtype and torch.equal(x, y)


@pytest.mark.parametrize("spec", sorted(wds.autodecode.imagespecs))
def test_every_image_spec_gives_pils_values(photo_shards, spec):
    url, per_shard = photo_shards
    handler = wds.autodecode.ImageHandler(spec)
    samples = list(wds.DataPipeline(wds.SimpleShardList(url), wds.tarfile_to_samples()))
    assert len(samples) == 3 * per_shard
    for s in samples:
        field = "jpg" if "jpg" in s else "png"
        assert same(reference(spec, s[field]), handler("." + field, s[field])), s["__key__"]
    counts = handler.counts.as_dict()
    if spec in ("pill", "pilrgba"):  # PIL images but RGB ones: PIL's own decode
        assert counts["decodes_c"] == 0 and counts["decodes_python"] == 3 * per_shard
    else:
        assert counts["decodes_python"] == 3 * 2, "the CMYK JPEG and the PNG: PIL's"
        assert counts["decodes_c"] == 3 * (per_shard - 2)


def epoch(dataset, workers):
    loader = DataLoader(dataset, num_workers=workers, batch_size=None)
    return within(HANG, lambda: list(loader), "an epoch")


def digest(sample):
    out = {}
    for k, v in sample.items():
        if k in ("__url__", "__local_path__"):  # pipe:cat's names the command, sets no path
            continue
        if isinstance(v, torch.Tensor):
            v = v.numpy()
        out[k] = v.tobytes() if isinstance(v, np.ndarray) else v
    return out


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("kind", ["pipeline", "fluid"])
def test_pipelines_give_pythons_samples_and_say_c_did_it(photo_shards, kind, workers):
    url, per_shard = photo_shards
    warnings.simplefilter("ignore")

    def make(urls):
        if kind == "fluid":
            return wds.WebDataset(urls, shardshuffle=False).decode("torchrgb8")
        return wds.DataPipeline(wds.SimpleShardList(urls), wds.split_by_worker,
                                wds.tarfile_to_samples(), wds.decode("rgb8"))
    ours = make(url)
    python = make([f"pipe:cat {u}" for u in wds.utils.braceexpand(url)])
    a, b = epoch(ours, workers), epoch(python, workers)
    key = lambda s: s["__key__"]  # noqa: E731 (workers interleave shards)
    assert [digest(s) for s in sorted(a, key=key)] == [digest(s) for s in sorted(b, key=key)]
    assert len(a) == 3 * per_shard
    c, p = ours.stats(), python.stats()
    assert c["shards_c"] == 3 and c["members_c"] == 3 * (2 * per_shard - 1)
    assert c["shards_python"] == c["members_python"] == 0
    assert c["decodes_c"] == 3 * (per_shard - 2) and c["decodes_python"] == 6
    assert p["shards_c"] == p["members_c"] == 0 and p["members_python"] == c["members_c"], \
        "pipe:cat: Python's tarfile read them"


def test_a_file_that_is_no_tar_is_tarfiles_error(tmp_path):
    junk = tmp_path / "junk.tar"
    junk.write_bytes(bytes(range(256)) * 40)
    c, counts = expanded(junk)
    python, _ = expanded(f"pipe:cat '{junk}'")
    assert len(c) == len(python) == 1
    assert isinstance(python[0], tarfile.ReadError) and isinstance(c[0], tarfile.ReadError)
    assert isinstance(c[0], ShardError) and "junk.tar" in str(c[0])


def test_stats_count_spawned_workers_too(photo_shards):
    """Workers started by spawn (the stage pickled as they start) add to the same counts; a
    stage pickled any other way counts apart."""
    import pickle
    url, per_shard = photo_shards
    pipe = wds.DataPipeline(wds.SimpleShardList(url), wds.split_by_worker,
                            wds.tarfile_to_samples(), wds.decode("rgb8"))
    loader = DataLoader(pipe, num_workers=2, batch_size=None, multiprocessing_context="spawn")
    got = within(HANG * 2, lambda: list(loader), "an epoch in spawned workers")
    assert len(got) == 3 * per_shard
    stats = pipe.stats()
    assert stats["shards_c"] == 3 and stats["decodes_c"] == 3 * (per_shard - 2)
    apart = pickle.loads(pickle.dumps(pipe))
    list(apart)
    assert pipe.stats() == stats and apart.stats()["shards_c"] == 2 * 3


@pytest.mark.parametrize("workers", [0, 2])
def test_the_c_pipelines_stats_count_what_it_read(photo_shards, workers):
    """WebDataset(..., image_size=...) runs in C: its stats() (and its WebLoader's) count the
    shards and the images it decoded, in DataLoader workers too, where they said zeros; raw
    samples count members and bytes. The control: before any epoch, zeros."""
    url, per_shard = photo_shards
    ds = (wds.WebDataset(url, shardshuffle=False, image_size=32, skip_errors=True)
          .decode("torchrgb8").to_tuple("jpg", "cls").batched(4))
    assert ds.stats()["shards_c"] == 0
    loader = wds.WebLoader(ds, batch_size=None, num_workers=workers,
                           **({"timeout": HANG} if workers else {}))
    n = within(HANG * 2, lambda: sum(len(y) for _, y in loader), "a C epoch")
    stats = loader.stats()
    # a worker's share may end inside a shard the next worker goes on in: each reads it
    assert (stats["shards_c"] >= 3 if workers else stats["shards_c"] == 3), stats
    assert stats["decodes_c"] == n > 0, stats
    raw = wds.WebDataset(url, shardshuffle=False, seed=1, streams=1)
    samples = within(HANG, lambda: list(raw), "a raw epoch")
    st = raw.stats()
    assert st["shards_c"] == 3 and st["members_c"] == sum(
        len([k for k in s if not k.startswith("__")]) for s in samples), st
