"""The settings tables (python/libshard/_tables.c, libshard.settings): the type stub gives
every row with its C default; every reader and remote setting is taken by Reader, Loader and
ShardDataset with the table's check and default. A new reader setting is its C field and
default, its row, and its documentation (commits 5489e37 and aba510a add one and take it
away), and the tests here check it with no edit."""
import ast
import importlib
from pathlib import Path

import pytest

import libshard
import libshard.settings
from libshard import _libshard

from .conftest import REPO, within

torch = pytest.importorskip("torch")
from libshard.torch import ShardDataset  # noqa: E402

TABLES = _libshard.settings()
READER = TABLES["reader"] + TABLES["remote"]
TAKEN = [r for r in READER if r["group"] != "placement"]  # by the datasets


def stub_parameters():
    """{class or function: {parameter: default}} of the built stub (its classes' __init__)."""
    tree = ast.parse((Path(libshard.__file__).parent / "_libshard.pyi").read_text())
    out = {}
    for node in tree.body:
        fn = node
        if isinstance(node, ast.ClassDef):
            fn = next((m for m in node.body if isinstance(m, ast.FunctionDef)
                       and m.name == "__init__"), None)
        if not isinstance(fn, ast.FunctionDef):
            continue
        a = fn.args
        positional = a.posonlyargs + a.args
        params = {p.arg: None for p in positional + a.kwonlyargs}
        for p, d in zip(positional[len(positional) - len(a.defaults):], a.defaults):
            params[p.arg] = ast.literal_eval(d)
        for p, d in zip(a.kwonlyargs, a.kw_defaults):
            params[p.arg] = ast.literal_eval(d) if d is not None else None
        out[node.name] = params
    return out


@pytest.mark.parametrize("name,tables,own", [
    ("Reader", ("reader", "remote"), {"self", "urls"}),
    ("Loader", ("reader", "remote", "loader", "transform"), {"self", "urls", "gpu"}),
    ("ShardFiles", ("remote",), {"self", "urls", "open_files", "indexes"}),
    ("list_shards", ("remote",), {"specs", "make_indexes", "index_cache", "manifests", "columns",
                                  "write_manifest", "keys"}),
    ("Writer", ("writer", "bucket"), {"self", "pattern"}),
    ("PackPlan", ("pack", "bucket"), {"self", "src", "pattern", "list", "on_error"}),
    ("Uploader", ("upload",), {"self", "gpu", "loader"}),
])
def test_the_stub_gives_every_setting_its_c_default(name, tables, own):
    params = stub_parameters()[name]
    rows = {r["name"]: r["default"] for t in tables for r in TABLES[t]}
    assert set(params) == set(rows) | own, set(params) ^ (set(rows) | own)
    for setting, default in rows.items():
        assert params[setting] == default, (name, setting, params[setting], default)


@pytest.mark.parametrize("name", ["decode", "crop_box"])
def test_the_stub_gives_the_image_functions_the_transform_defaults(name):
    params = stub_parameters()[name]
    rows = {r["name"]: r["default"] for t in ("output", "transform") for r in TABLES[t]}
    for setting in set(params) & set(rows) - {"layout"}:  # decode's is NHWC, as PIL's
        assert params[setting] == rows[setting], (name, setting)
    assert {"width", "height", "crop", "flip", "scale", "ratio"} <= set(params)


def refused(row):
    """A value of no type any setting accepts, and below the row's minimum where it has one:
    each with the error the row's own check gives."""
    values = [object()]
    if row["minimum"] is not None:
        values.append(row["minimum"] - 1)
    out = []
    for v in values:
        with pytest.raises((TypeError, ValueError)) as e:
            _libshard.check_setting(row, v)
        assert str(e.value).startswith(f"{row['name']}: "), e.value
        out.append((v, e.type, str(e.value)))
    return out


@pytest.mark.parametrize("row", READER, ids=lambda r: r["name"])
def test_every_reader_setting_is_checked_alike_everywhere(packed, row):
    """Reader, Loader and ShardDataset refuse a bad value with the table's message, and
    take the table's default."""
    url = str(packed.manifest)
    makers = [lambda **kw: libshard.Reader(url, **kw), lambda **kw: libshard.Loader(url, **kw)]
    if row["group"] != "placement":  # rank, worker, epoch: the datasets set them
        makers.append(lambda **kw: ShardDataset(url, **kw))
    for make in makers:
        for value, error, message in refused(row):
            with pytest.raises(error) as e:
                make(**{row["name"]: value})
            assert str(e.value) == message
        make(**{row["name"]: row["default"]})


def test_the_defaults_given_are_the_defaults_taken(packed):
    """Every reader setting passed its table default reads what no setting reads: the
    defaults are the C structs'."""
    url = str(packed.manifest)
    defaults = {r["name"]: r["default"] for r in READER if r["name"] != "seed"}

    def keys(**kw):
        return [s["__key__"] for s in libshard.Reader(url, seed=7, **kw)]

    assert within(60, lambda: keys(**defaults), "an epoch") == within(60, keys, "an epoch")
    ds = ShardDataset(url, seed=7, batch_size=50, image_size=32,
                      **{r["name"]: r["default"] for r in TAKEN if r["name"] != "seed"})
    plain = ShardDataset(url, seed=7, batch_size=50, image_size=32)
    assert within(60, lambda: [y.tolist() for _, y in ds], "an epoch") == \
        within(60, lambda: [y.tolist() for _, y in plain], "an epoch")
    assert libshard.settings.DEFAULTS["streams"] == ds.setting("streams") == 4


@pytest.mark.parametrize("module", ["libshard.settings", "libshard.torch.dataset",
                                    "libshard.torch.loader", "libshard.torch.indexed",
                                    "libshard.torch.upload", "libshard.torch.report",
                                    "libshard.torch.skips", "libshard.torch.split",
                                    "libshard.torch.shared"])
def test_the_settings_and_torch_modules_are_documented(module):
    from .test_docs import public
    m = importlib.import_module(module)
    assert (m.__doc__ or "").strip(), module
    missing = [name for name, obj in public(m) if not (obj.__doc__ or "").strip()]
    assert not missing, f"no docstring: {missing}"


def test_a_misspelt_setting_gets_the_closest_name():
    from libshard.indexed import IndexedShards
    from libshard.torch import IndexedShardDataset
    with pytest.raises(TypeError, match=r"ShardDataset: unknown settings 'shufle' \(did you "
                                        r"mean 'shuffle'\?\), 'zzz'$"):
        ShardDataset("x.tar", shufle=100, zzz=1)
    with pytest.raises(TypeError, match=r"'imge_size' \(did you mean 'image_size'\?\)"):
        IndexedShardDataset("x.tar", imge_size=32)
    with pytest.raises(TypeError, match=r"'retrys' \(did you mean 'retries'\?\)"):
        IndexedShards("x.tar", retrys=3)


def test_a_misplaced_keyword_names_its_home():
    from libshard.torch import IndexedShardDataset, ShardLoader
    with pytest.raises(TypeError, match=r"^ShardDataset does not take 'num_workers': it is "
                                        r"ShardLoader's .*ShardLoader\(dataset, num_workers=\.\.\.\)$"):
        ShardDataset("x.tar", num_workers=2)
    with pytest.raises(TypeError, match=r"'persistent_workers': it is ShardLoader's.*; "
                                        r"ShardDataset: unknown settings 'shufle' \(did you mean"):
        ShardDataset("x.tar", persistent_workers=True, shufle=3)
    ds = ShardDataset("x.tar")
    for k in ("image_size", "shuffle", "drop_last", "seed"):
        with pytest.raises(TypeError, match=rf"^ShardLoader does not take '{k}': it is "
                                            rf"ShardDataset's: ShardDataset\(urls, {k}=\.\.\.\)$"):
            ShardLoader(ds, **{k: 1})
    with pytest.raises(TypeError, match=r"IndexedShardDataset does not take 'num_workers': it is "
                                        r"the DataLoader's"):
        IndexedShardDataset("x.tar", num_workers=2)
    # negative control: a DataLoader keyword is ShardLoader's own and passes
    ShardLoader(ds, num_workers=0, persistent_workers=False, pin_memory=False)


def module_stub(module):
    """{class: {parameter: default (or None)}} of a generated .pyi beside module's source."""
    m = importlib.import_module(module)
    tree = ast.parse(Path(m.__file__).with_suffix(".pyi").read_text())
    out = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            fn = next(m for m in node.body if isinstance(m, ast.FunctionDef) and m.name == "__init__")
            a = fn.args
            positional = a.args
            params = {p.arg: None for p in positional + a.kwonlyargs}
            for p, d in zip(positional[len(positional) - len(a.defaults):], a.defaults):
                params[p.arg] = ast.literal_eval(d)
            for p, d in zip(a.kwonlyargs, a.kw_defaults):
                params[p.arg] = ast.literal_eval(d) if d is not None else None
            out[node.name] = (params, {p.arg for p in a.kwonlyargs})
    return out


STUBBED = [("libshard.torch.dataset", "ShardDataset", "DATASET_KEYS", None),
           ("libshard.torch.indexed", "IndexedShardDataset", "INDEXED_DATASET_KEYS", None),
           ("libshard.writer", "ShardWriter", "BUCKET_KEYS", "BUCKET_ROWS"),
           ("libshard.writer", "TarWriter", "BUCKET_KEYS", "BUCKET_ROWS"),
           ("libshard.torch.loader", "ShardLoader", None, None)]


@pytest.mark.parametrize("module,name,keys,rows", STUBBED, ids=[s[1] for s in STUBBED])
def test_the_stubs_give_every_keyword_its_table_default(module, name, keys, rows):
    """An IDE's view (the .pyi made by python/stubgen.py) and help()'s (the runtime
    signature) of each class that takes settings as keywords: the same parameters, every
    setting it takes keyword-only with the table's default."""
    import inspect
    S = libshard.settings
    params, kwonly = module_stub(module)[name]
    cls = getattr(importlib.import_module(module), name)
    runtime = {p.name: p for p in inspect.signature(cls.__init__).parameters.values()}
    assert set(params) == set(runtime), set(params) ^ set(runtime)
    for p, default in params.items():
        if runtime[p].default is not inspect.Parameter.empty and default is not ...:
            assert default == runtime[p].default, (p, default, runtime[p].default)
    if keys is None:   # ShardLoader: the DataLoader's keywords, with the DataLoader's defaults
        theirs = inspect.signature(torch.utils.data.DataLoader.__init__).parameters
        assert set(params) - {"self", "dataset"} <= set(S.DATALOADER_KEYS)
        for p in set(params) - {"self", "dataset", "prefetch_factor"}:
            assert params[p] == theirs[p].default, p
        return
    table = getattr(S, rows) if rows else S.ROWS
    for k in getattr(S, keys):
        assert k in kwonly, (name, k)
        assert params[k] == table[k]["default"], (name, k, params[k], table[k]["default"])


def test_a_setting_added_to_a_table_reaches_the_stubs(tmp_path):
    """stubgen renders @dataset@ from the settings module: a row added there (as a new C
    setting adds one) is a new parameter, with its default, in the rendered stub."""
    import sys
    sys.path.insert(0, str(REPO / "python"))
    try:
        import stubgen
    finally:
        sys.path.pop(0)
    S = libshard.settings
    tables = {**S.TABLES, **stubgen.groups(S)}
    template = (REPO / "python/libshard/torch/dataset.pyi.in").read_text()
    rendered = stubgen.render(template, tables)
    assert "        shuffle: int = 0," in rendered
    row = {**S.ROWS["streams"], "name": "prefetch_shards", "default": 7}
    tables["dataset"] = tables["dataset"] + [row]
    assert "        prefetch_shards: int = 7," in stubgen.render(template, tables)
