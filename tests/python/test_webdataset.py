"""libshard.webdataset against WebDataset's own behaviour: the pipelines of its README run on
local shards with the outputs WebDataset gives, each stage's semantics, with_epoch counting
what the pipeline yields, the node and worker splitters, WebLoader, errors and their types;
values recorded once from WebDataset's source for every decoder spec and every module
(wds_reference.py, wds_modules.py), the unshuffled order with 0 and 2 workers among them;
and libshard's C pipeline under the same interface when given libshard's settings.
(WebDataset's own test suite runs through tests/wds_suite/run.py.)

Data: 3 shards of 10 samples written by Python's tarfile (jpg of varied sizes, cls, json on
every sample, txt on every other one), and conftest.packed for the mixes.
"""
import io
import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from PIL import Image  # noqa: E402
from torch.utils.data import DataLoader  # noqa: E402

import libshard.webdataset as wds  # noqa: E402

from .conftest import SLOW, jpeg, textured, within  # noqa: E402
from .test_torch import write_tar  # noqa: E402
from . import wds_modules, wds_reference  # noqa: E402

HANG = 30 * SLOW
N = 30


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    """(brace pattern, {key: {field: bytes}}) of the 3 tarfile shards."""
    root = tmp_path_factory.mktemp("wds")
    expect = {}
    for s in range(3):
        members = []
        for j in range(10):
            i = s * 10 + j
            key = f"w{i:03d}"
            fields = {"jpg": jpeg(textured(30 + i, 20 + i % 5, seed=i)),
                      "cls": str(i % 4).encode(),
                      "json": json.dumps({"i": i, "tags": ["a"] * (i % 3)}).encode()}
            if i % 2:
                fields["txt"] = f"caption {i}".encode()
            expect[key] = fields
            members += [(f"{key}.{k}", v) for k, v in fields.items()]
        write_tar(root / f"w-{s}.tar", members)
    return str(root / "w-{0..2}.tar"), expect


def run(ds, what="a pipeline epoch"):
    return within(HANG, lambda: list(ds), what)


def test_readme_pil_pipeline(shards):
    """README: WebDataset(url).shuffle(n).decode("pil").to_tuple("png", "json"), here jpg."""
    url, expect = shards
    pil_dataset = wds.WebDataset(url, seed=1).shuffle(10).decode("pil").to_tuple("jpg", "json")
    assert isinstance(pil_dataset, torch.utils.data.IterableDataset)
    got = run(pil_dataset)
    assert len(got) == N
    for image, meta in got:
        assert isinstance(image, Image.Image) and image.mode == "RGB"
        want = expect[f"w{meta['i']:03d}"]
        ref = Image.open(io.BytesIO(want["jpg"])).convert("RGB")
        assert image.size == ref.size and np.array_equal(np.asarray(image), np.asarray(ref))
        assert meta == json.loads(want["json"])


def invert(x):
    return 1 - x


def preprocess(sample):
    """The README's preprocess (module level: DataLoader workers may be spawned)."""
    import torchvision.transforms as transforms
    preproc = transforms.Compose([transforms.Resize((24, 24)), transforms.ToTensor(), invert])
    image, meta = sample
    return preproc(image), meta["i"]


def test_readme_map_makes_a_new_pipeline(shards):
    """README: dataset = pil_dataset.map(preprocess); pil_dataset itself is unchanged."""
    url, _ = shards

    pil_dataset = wds.WebDataset(url, seed=1).decode("pil").to_tuple("jpg", "json")
    dataset = pil_dataset.map(preprocess)
    images = run(dataset)
    assert all(x.shape == (3, 24, 24) and isinstance(i, int) for x, i in images)
    assert all(isinstance(im, Image.Image) for im, _ in run(pil_dataset)), "unchanged"
    # ... and in a DataLoader with workers, batched by WebDataset's collation
    loader = DataLoader(dataset.batched(5), batch_size=None, num_workers=2, timeout=HANG)
    batches = run(loader, "a DataLoader over a Python pipeline")
    assert sorted(i for _, ids in batches for i in ids.tolist()) == list(range(N))
    # (the DataLoader's default_convert turns the collated numpy labels into tensors)
    assert all(x.shape[1:] == (3, 24, 24) and isinstance(ids, torch.Tensor) for x, ids in batches)
    x, ids = run(dataset.batched(5))[0]
    assert x.shape == (5, 3, 24, 24) and isinstance(ids, np.ndarray), "WebDataset's collation"


@pytest.mark.parametrize("spec,check", [
    ("rgb8", lambda a, ref: a.dtype == np.uint8 and np.array_equal(a, ref)),
    ("rgb", lambda a, ref: a.dtype == np.float32 and np.allclose(a, ref / 255.0)),
    ("torchrgb8", lambda a, ref: a.dtype == torch.uint8 and np.array_equal(a.numpy().transpose(1, 2, 0), ref)),
    ("torchrgb", lambda a, ref: a.dtype == torch.float32 and a.shape[0] == 3
     and np.allclose(a.numpy().transpose(1, 2, 0), ref / 255.0)),
    ("l8", lambda a, ref: a.ndim == 2 and a.dtype == np.uint8),
])
def test_image_specs_decode_as_webdatasets(shards, spec, check):
    url, expect = shards
    for s in run(wds.WebDataset(url).decode(spec)):
        ref = np.asarray(Image.open(io.BytesIO(expect[s["__key__"]]["jpg"])).convert("RGB"))
        assert check(s["jpg"], ref), (spec, s["__key__"])


def test_basic_handlers_and_custom_ones(shards):
    url, expect = shards

    def upper_txt(key, data):
        return data.decode().upper() if key.endswith(".txt") else None

    for s in run(wds.WebDataset(url).decode(upper_txt)):
        i = int(s["__key__"][1:])
        assert s["cls"] == i % 4 and s["json"]["i"] == i, "cls -> int, json -> objects"
        assert isinstance(s["jpg"], bytes), "no image spec: image bytes stay bytes"
        if i % 2:
            assert s["txt"] == f"CAPTION {i}", "a handler given comes before the basic ones"
    only = run(wds.WebDataset(url).decode(only=["cls"]))
    assert all(isinstance(s["cls"], int) and isinstance(s["json"], bytes) for s in only)
    with pytest.raises(ValueError, match="Unknown imagespec"):
        wds.WebDataset(url).decode("jpeg2")


def test_select_rename_map_dict_map_tuple(shards):
    url, _ = shards
    base = wds.WebDataset(url).decode()
    odd = run(base.select(lambda s: s["cls"] % 2 == 1))
    assert len(odd) == 15 and all(s["cls"] % 2 for s in odd)
    renamed = run(base.rename(image="jpg;png", label="cls"))
    assert all("image" in s and "label" in s and "jpg" not in s and "json" in s for s in renamed)
    only = run(base.rename(image="jpg", label="cls", keep=False))
    assert all(set(s) == {"image", "label"} for s in only)
    doubled = run(base.map_dict(cls=lambda c: 2 * c))
    assert sorted(s["cls"] for s in doubled) == sorted(2 * (i % 4) for i in range(N))
    tuples = run(base.to_tuple("cls", "json").map_tuple(lambda c: c + 100, None))
    assert all(c >= 100 and isinstance(j, dict) for c, j in tuples)
    keyed = run(base.map(lambda s: {"n": s["cls"]}))
    assert all(set(s) == {"n", "__key__"} for s in keyed), "a dict result keeps __key__"
    assert len(run(base.map(lambda s: None if s["cls"] == 0 else s))) == N - 8


def test_to_tuple_missing_field_raises_or_is_handled(shards):
    url, _ = shards
    with pytest.raises(ValueError, match="didn't find"):
        run(wds.WebDataset(url).to_tuple("jpg", "txt"))
    got = run(wds.WebDataset(url).to_tuple("jpg", "txt", handler=wds.ignore_and_continue))
    assert len(got) == 15, "the samples without txt left out by the handler"
    got = run(wds.WebDataset(url).to_tuple("jpg", "txt", missing_is_error=False))
    assert sum(t is None for _, t in got) == 15


def test_to_tuple_and_batched_without_decode_give_bytes(shards):
    url, expect = shards
    batches = run(wds.WebDataset(url, shardshuffle=False).to_tuple("jpg", "cls").batched(8))
    assert [len(b[0]) for b in batches] == [8, 8, 8, 6]
    jpgs, cls = batches[0]
    assert isinstance(jpgs, list) and all(isinstance(j, bytes) for j in jpgs)
    assert cls == [expect[f"w{i:03d}"]["cls"] for i in range(8)], "bytes stay a list"
    assert len(run(wds.WebDataset(url).to_tuple("jpg", "cls").batched(8, partial=False))) == 3


def test_with_epoch_counts_what_the_pipeline_yields(shards):
    url, _ = shards
    samples = run(wds.WebDataset(url).with_epoch(45))
    assert len(samples) == 45, "on into a second pass"
    assert Counter(s["__key__"] for s in samples).most_common(1)[0][1] == 2
    batches = run(wds.WebDataset(url).decode().to_tuple("cls").batched(4).with_epoch(11))
    assert len(batches) == 11, "batches after batched"
    # per DataLoader worker, as in WebDataset
    ds = wds.WebDataset(url).to_tuple("cls").with_epoch(7)
    assert len(run(DataLoader(ds, batch_size=None, num_workers=2, timeout=HANG))) == 14
    assert len(run(wds.WebDataset(url).repeat(2))) == 2 * N


def test_fast_path_with_epoch_counts_batches(packed):
    ds = (wds.WebDataset(str(packed.manifest), shardshuffle=True, seed=3, image_size=224)
          .shuffle(50).decode("torchrgb8").to_tuple("jpg", "cls").batched(32).with_epoch(12))
    # (C batches view libshard's buffers: keep their shapes, not them)
    shapes = within(HANG, lambda: [tuple(x.shape) for x, _ in ds], "a C pipeline with_epoch")
    # as in WebDataset, a pass ends on its partial batch, then the next pass begins
    assert [n for n, *_ in shapes] == [32] * 9 + [12] + [32] * 2


def test_node_splitters(shards, monkeypatch):
    url, expect = shards
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "0")
    with pytest.raises(ValueError, match="explicit nodesplitter"):
        run(wds.WebDataset(url))
    parts = []
    for rank in (0, 1):
        monkeypatch.setenv("RANK", str(rank))
        parts.append([s["__key__"] for s in run(wds.WebDataset(url, seed=2,
                                                               nodesplitter=wds.split_by_node))])
    assert sorted(parts[0] + parts[1]) == sorted(expect), "split_by_node: each sample once"
    assert parts[0] and parts[1]
    everyone = run(wds.WebDataset(url, nodesplitter=None))
    assert len(everyone) == N, "nodesplitter=None: every rank reads everything"
    assert list(wds.split_by_node(range(10))) == [1, 3, 5, 7, 9], "the function as WebDataset's"
    mine = run(wds.WebDataset(url, shardshuffle=False, nodesplitter=lambda src: list(src)[:1]))
    assert len(mine) == 10, "a splitter of one's own: the first shard only"


def test_worker_splitters(shards):
    url, expect = shards
    split = run(DataLoader(wds.WebDataset(url), batch_size=None, num_workers=2, timeout=HANG))
    assert sorted(s["__key__"] for s in split) == sorted(expect)
    whole = run(DataLoader(wds.WebDataset(url, workersplitter=None), batch_size=None,
                           num_workers=2, timeout=HANG))
    assert Counter(Counter(s["__key__"] for s in whole).values()) == {2: N}


def test_webloader_rebatches_the_workers_output(packed):
    ds = (wds.WebDataset(str(packed.manifest), seed=4, image_size=224).decode("torchrgb8")
          .to_tuple("jpg", "cls").batched(16))
    for workers in (0, 2):
        loader = (wds.WebLoader(ds, batch_size=None, num_workers=workers,
                                **({"timeout": HANG} if workers else {}))
                  .unbatched().shuffle(100).batched(50))
        batches = run(loader, "a WebLoader epoch")
        assert [len(y) for _, y in batches] == [50] * 6
        assert all(x.shape == (50, 3, 224, 224) for x, _ in batches)
        labels = Counter(int(v) for _, y in batches for v in y)
        assert labels == packed.label_counts()


def test_random_mix_and_round_robin_are_webdatasets(shards):
    """RandomMix draws each item's dataset at random and stops at the first to run out
    (longest=True: goes on with the others); RoundRobin takes one of each in turn."""
    url, _ = shards
    a = wds.WebDataset(url, shardshuffle=False).to_tuple("__key__")
    b = wds.DataPipeline(lambda: iter([("extra",)] * 5))
    mixed = run(wds.RandomMix([a, b], [1, 1], longest=True))
    assert len(mixed) == N + 5 and mixed.count(("extra",)) == 5
    shortest = run(wds.RandomMix([a, b]))
    assert shortest.count(("extra",)) <= 5 and len(shortest) < N + 5
    assert run(wds.RoundRobin([a, b]))[:4] == [("w000",), ("extra",), ("w001",), ("extra",)]


# ---- against WebDataset's own output, recorded ---------------------------------------------

REFERENCE = json.loads((Path(__file__).parent / "data" / "wds_reference.json").read_text())


@pytest.fixture(scope="module")
def reference_shards(tmp_path_factory):
    return wds_reference.make_shards(str(tmp_path_factory.mktemp("wds-ref")))


def test_the_reference_was_recorded_with_webdataset():
    assert REFERENCE["webdataset"] == wds_reference.RECORDED
    assert len(REFERENCE["cases"]) == len(wds_reference.SPECS) * (1 + len(wds_reference.BATCHED))
    assert len(REFERENCE["modules"]) >= 50


@pytest.fixture(scope="module")
def module_cases(tmp_path_factory):
    cases = within(HANG, lambda: wds_modules.cases(wds, str(tmp_path_factory.mktemp("wds-mod"))),
                   "the module cases")
    return json.loads(json.dumps(cases))  # as the recording holds them


@pytest.mark.parametrize("case", sorted(REFERENCE["modules"]))
def test_every_module_gives_what_webdatasets_gives(module_cases, case):
    """Each module on fixed input against what WebDataset 1.0.2's gave (wds_modules.py): the
    unshuffled order of a brace pattern read directly and through DataLoader workers (0 and
    2), the filters, the shard lists and splitters, the tar iterators, the decoders, tenbin,
    the writer's members, the mixes, the cache's names, the utilities."""
    assert module_cases[case] == REFERENCE["modules"][case]


def test_the_order_cases_would_see_a_different_order(module_cases):
    """A negative control: the recorded orders differ between 0 and 2 workers, so the cases
    above could tell a pipeline that ignores the worker split."""
    zero = REFERENCE["modules"]["order/WebDataset(shardshuffle=False) workers=0"]
    two = REFERENCE["modules"]["order/WebDataset(shardshuffle=False) workers=2"]
    assert sorted(zero) == sorted(two) and zero != two


@pytest.mark.parametrize("case", sorted(REFERENCE["cases"]))
def test_every_decoder_spec_gives_what_webdataset_gives(reference_shards, case):
    """Each decoder spec WebDataset documents, alone and batched, against the values
    WebDataset 1.0.2 gave on the same shards (tests/python/wds_reference.py): types (numpy,
    torch, PIL), dtypes, shapes, ranges and a digest of every value."""
    ours = wds_reference.pipelines(wds, reference_shards)[case]
    got = [wds_reference.describe(x) for x in within(HANG, lambda: list(ours), case)]
    assert got == REFERENCE["cases"][case]


@pytest.mark.parametrize("spec", ["rgb8", "rgb", "torchrgb8", "torchrgb", "torch"])
def test_the_c_path_gives_webdatasets_types_and_crops_only_when_asked(reference_shards, spec):
    """With image_size (a crop asked for) the pipeline runs in C: its batches have the types,
    dtypes, layout and value range WebDataset's give, the images at image_size; without it
    the images are WebDataset's own (the case above)."""
    want = REFERENCE["cases"][f"decode({spec}).to_tuple(png,cls).batched(4)"][0]["items"]
    ds = (wds.WebDataset(reference_shards, shardshuffle=False, image_size=8, crop="none")
          .decode(spec).to_tuple("png", "cls").batched(4))
    assert ds._fast()[2] is not None, "runs in C"
    first = within(HANG, lambda: next(iter(ds)), "a C batch")
    assert isinstance(first, tuple) and len(first) == 2
    images, labels = (wds_reference.describe(x) for x in first)
    assert (images["kind"], images["dtype"]) == (want[0]["kind"], want[0]["dtype"])
    channels_last = want[0]["shape"][-1] == 3
    assert images["shape"] == ([4, 8, 8, 3] if channels_last else [4, 3, 8, 8])
    if "range" in want[0]:
        assert 0 <= images["range"][0] and images["range"][1] <= 1
    assert (labels["kind"], labels["dtype"]) == (want[1]["kind"], want[1]["dtype"]) == \
        ("numpy", "int64")
    assert list(first[1]) == [0, 1, 2, 0]


def test_shard_shuffle_follows_the_seed_and_detshuffle_the_pass(shards):
    """As in WebDataset: shardshuffle=n shuffles the shards with the seed, the same order every
    pass; detshuffle=True reshuffles each pass from seed and the pass."""
    url, _ = shards

    def shard_order(ds):
        return [int(k[1:]) // 10 for k, in run(ds)][::10]

    fixed = wds.WebDataset(url, shardshuffle=3, seed=5).to_tuple("__key__")
    assert shard_order(fixed) == shard_order(fixed)
    det = wds.WebDataset(url, shardshuffle=3, seed=5, detshuffle=True).to_tuple("__key__")
    again = wds.WebDataset(url, shardshuffle=3, seed=5, detshuffle=True).to_tuple("__key__")
    passes = [shard_order(det) for _ in range(4)]
    assert passes == [shard_order(again) for _ in range(4)], "the same passes from the same seed"
    assert len({tuple(p) for p in passes}) > 1, "a new order on some pass"


def test_fast_path_each_pass_is_the_next_epoch(packed):
    """libshard's pipeline (given libshard's settings): each pass the next epoch, the same
    passes again from the same seed."""
    def orders(seed):
        ds = (wds.WebDataset(str(packed.manifest), shardshuffle=True, seed=seed, streams=1,
                             image_size=16).to_tuple("__key__"))
        return [[k for k, in within(HANG, lambda: list(ds), "a pass")] for _ in range(2)]

    first = orders(5)
    assert first[0] != first[1] and sorted(first[0]) == sorted(first[1])
    assert orders(5) == first


# ---- WebDataset's behaviour where libshard's used to differ --------------------------------

def test_a_misspelt_keyword_names_the_entry_point_and_webdatasets_name(shards):
    url, _ = shards
    with pytest.raises(TypeError, match=r"libshard.webdataset.WebDataset: unknown keyword "
                                        r"'shardshufle' \(did you mean 'shardshuffle'\?\)"):
        wds.WebDataset(url, shardshufle=False)


def test_context_manager_ignore_and_stop_and_a_cut_shard(shards, tmp_path):
    import tarfile
    url, _ = shards
    with wds.WebDataset(url, shardshuffle=False) as ds:
        assert len(run(ds)) == N
    first = url.replace("{0..2}", "0")
    cut = f"pipe:head -c 5000 {first}"
    with pytest.raises(tarfile.ReadError):
        run(wds.WebDataset(cut, shardshuffle=False))
    got = run(wds.WebDataset(cut, shardshuffle=False, handler=wds.ignore_and_stop))
    assert 0 < len(got) < 10, "the samples before the cut, then a quiet stop"


def test_one_shard_over_four_workers_is_webdatasets_valueerror(shards):
    url, _ = shards
    one = url.replace("{0..2}", "1")
    with pytest.raises(ValueError, match="fewer shards than workers"):
        run(DataLoader(wds.WebDataset(one, shardshuffle=False), batch_size=None, num_workers=4,
                       timeout=HANG))
    ds = wds.WebDataset(one, shardshuffle=False, empty_check=False)
    assert len(run(DataLoader(ds, batch_size=None, num_workers=4, timeout=HANG))) == 10


def test_tar_writer_gzip_tenbin_and_a_pipe(tmp_path):
    for name in ("w.tgz", "w.tar.bz2", "w.tar"):
        with wds.TarWriter(str(tmp_path / name)) as sink:
            sink.write({"__key__": "a", "ten": [np.ones(3), np.zeros((2, 2))], "txt.gz": "x" * 100,
                        "cls": 3})
        (s,) = run(wds.DataPipeline(wds.SimpleShardList(str(tmp_path / name)),
                                    wds.tarfile_to_samples(), wds.decode()))
        assert [a.shape for a in s["ten"]] == [(3,), (2, 2)] and s["txt.gz"] == "x" * 100
        assert s["cls"] == 3
    with wds.TarWriter(f"pipe:cat > {tmp_path}/p.tar") as sink:
        sink.write({"__key__": "b", "txt": "through a pipe"})
    assert run(wds.WebDataset(str(tmp_path / "p.tar"), shardshuffle=False).decode())[0]["txt"] == \
        "through a pipe"


def test_cached_and_lmdb_cached_give_the_first_pass_again(shards, tmp_path):
    pytest.importorskip("lmdb")
    url, _ = shards
    for stage in (wds.Cached(), wds.LMDBCached(str(tmp_path / "c.lmdb"))):
        ds = wds.DataPipeline(wds.SimpleShardList(url), wds.tarfile_to_samples(), stage)
        first, second = run(ds), run(ds)
        assert [s["__key__"] for s in first] == [s["__key__"] for s in second] and len(first) == N


def test_the_alias_makes_import_webdataset_this_package(tmp_path):
    import subprocess
    import sys
    (tmp_path / "webdataset.py").write_text(
        "from libshard.webdataset import as_webdataset; as_webdataset()\n")
    pkg = str(Path(wds.__file__).resolve().parents[2])
    code = ("import webdataset, webdataset.filters, libshard.webdataset as w\n"
            "assert webdataset is w and webdataset.filters is w.filters, webdataset\n"
            "from webdataset.filters import _shuffle, _rsample\n"
            "from webdataset.tariterators import url_opener, tar_file_expander, base_plus_ext\n"
            "from webdataset.utils import pytorch_worker_seed\n"
            "from webdataset.shardlists import expand_urls\n"
            "print(webdataset.__file__)\n")
    env = {**__import__("os").environ, "PYTHONPATH": f"{tmp_path}:{pkg}"}
    cp = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert cp.returncode == 0, cp.stderr
    assert "libshard" in cp.stdout


def test_a_user_stage_subclassing_pipelinestage(shards):
    url, _ = shards

    class EveryOther(wds.PipelineStage):
        def invoke(self, src):
            return (s for i, s in enumerate(src) if i % 2 == 0)

    ds = wds.DataPipeline(wds.SimpleShardList(url), wds.tarfile_to_samples(), EveryOther(),
                          wds.to_tuple("__key__"))
    assert [k for k, in run(ds)] == [f"w{i:03d}" for i in range(0, N, 2)]


def test_multiloader_splits_the_shards_between_its_processes(shards):
    """multi.MultiLoader (over ZeroMQ): each worker process told its number, so that
    split_by_worker gives each its shards; every sample once."""
    pytest.importorskip("zmq")
    from libshard.webdataset.multi import MultiLoader
    url, expect = shards
    ds = wds.DataPipeline(wds.SimpleShardList(url), wds.split_by_worker, wds.tarfile_to_samples(),
                          wds.to_tuple("__key__"))
    got = run(MultiLoader(ds, workers=2))
    assert sorted(k for k, in got) == sorted(expect)
