"""What WebDataset's modules give on fixed inputs, one case each, recorded once from
WebDataset's source with wds_reference.py (into data/wds_reference.json, "modules") and held
against libshard.webdataset by test_webdataset.py: the unshuffled order of a brace pattern
read directly, through DataPipeline and through DataLoader workers (0 and 2); each filter;
the shard lists and splitters; the tar iterators; the decoders; tenbin; the writer's
members; the mixes; the cache's names; the utilities. Every case is a function of the module
(webdataset or libshard.webdataset) and a folder of shards, returning what JSON holds."""
import hashlib
import io
import os
import pickle
import tarfile

import numpy as np

NSHARDS, PER = 3, 5


def order_shards(root):
    """Three shards of five samples (cls, txt), written by Python's tarfile; their pattern."""
    for s in range(NSHARDS):
        with tarfile.open(os.path.join(root, f"ord-{s}.tar"), "w", format=tarfile.USTAR_FORMAT) as tf:
            for j in range(PER):
                i = s * PER + j
                for ext, data in (("cls", str(i % 4).encode()), ("txt", f"t{i}".encode())):
                    info = tarfile.TarInfo(f"o/{i:03d}.{ext}")
                    info.size = len(data)
                    tf.addfile(info, io.BytesIO(data))
    return os.path.join(root, "ord-{0..%d}.tar" % (NSHARDS - 1))


def _digest(b):
    return hashlib.sha256(bytes(b)).hexdigest()[:16]


def plain(x):
    """x as JSON holds it: arrays and tensors as (dtype, shape, values), bytes as text."""
    import torch
    if isinstance(x, torch.Tensor):
        x = x.numpy()
    if isinstance(x, np.ndarray):
        return {"array": str(x.dtype), "shape": list(x.shape), "values": x.ravel().tolist()}
    if isinstance(x, (bytes, bytearray, memoryview)):
        return {"bytes": bytes(x).decode("latin-1")}
    if isinstance(x, dict):
        return {str(k): plain(v) for k, v in sorted(x.items(), key=lambda kv: str(kv[0]))}
    if isinstance(x, (list, tuple)):
        return [plain(v) for v in x]
    if isinstance(x, (np.integer, np.floating)):
        return x.item()
    return x


def _keys(it):
    return [s["__key__"] if isinstance(s, dict) else s[0] for s in it]


def _loader(ds, workers):
    from torch.utils.data import DataLoader
    return DataLoader(ds, batch_size=None, num_workers=workers,
                      **({"timeout": 120} if workers else {}))


def order_cases(wds, pattern):
    out = {}
    for workers in (0, 2):
        ds = wds.WebDataset(pattern, shardshuffle=False, empty_check=False).to_tuple("__key__")
        out[f"order/WebDataset(shardshuffle=False) workers={workers}"] = _keys(_loader(ds, workers))
        pipe = wds.DataPipeline(wds.SimpleShardList(pattern), wds.split_by_worker,
                                wds.tarfile_to_samples(), wds.to_tuple("__key__", "cls"))
        out[f"order/DataPipeline split_by_worker workers={workers}"] = [
            [k, c.decode()] for k, c in _loader(pipe, workers)]
    out["order/WebDataset(nodesplitter=split_by_node)"] = _keys(
        wds.WebDataset(pattern, shardshuffle=False, nodesplitter=wds.split_by_node))
    out["order/tarfile_samples eof markers"] = [
        sorted(s) for s in wds.tarfile_samples([{"url": pattern.replace("{0..2}", "1")}])]
    return out


def filters_cases(filters):
    data = [{"__key__": f"k{i}", "a": i, "b.x": i * 2, "c": np.arange(i, i + 2)} for i in range(7)]
    out = {
        "filters/_shuffle(seed=3)": list(filters._shuffle(iter(range(40)), bufsize=10, initial=4, seed=3)),
        "filters/_batched tuples": plain(list(filters._batched(iter([(i, float(i), np.ones(2) * i)
                                                                      for i in range(7)]), 3))),
        "filters/_batched dicts, partial=False": plain(list(filters._batched(
            iter([{"a": i, "t": "x"} for i in range(7)]), 3, partial=False))),
        "filters/_batched no collation": plain(list(filters._batched(iter(range(5)), 2,
                                                                     collation_fn=None))),
        "filters/_unbatched": plain(list(filters._unbatched(iter([([1, 2], ["a", "b"]),
                                                                  {"x": [3, 4]}])))),
        "filters/_rename keep": plain(list(filters._rename(iter(data[:2]), z="a;b.x"))),
        "filters/_rename keep=False": plain(list(filters._rename(iter(data[:2]), keep=False, z="b.x"))),
        "filters/_map_dict": plain(list(filters._map_dict(iter(data[:2]), a=lambda v: v + 100))),
        "filters/_to_tuple": plain(list(filters._to_tuple(iter(data[:2]), "a c;b.x",
                                                          missing_is_error=False))),
        "filters/_select": plain(list(filters._select(iter(data), lambda s: s["a"] % 3 == 0))),
        "filters/_map keeps __key__": plain(list(filters._map(iter(data[:2]), lambda s: {"n": s["a"]}))),
        "filters/_extract_keys": plain(list(filters._extract_keys(iter(data[:2]), "a", "*.x", "c"))),
        "filters/_rename_keys": plain(list(filters._rename_keys(iter(data[:2]), ("y", "*.x"),
                                                                keep_unselected=True))),
        "filters/_xdecode": plain(list(filters._xdecode(iter([{"__key__": "k", "t.txt": b"hi",
                                                               "b.bin": b"\x00\x01"}])))),
        "filters/default_collation_fn no combining": plain(filters.default_collation_fn(
            [(1, np.zeros(1)), (2, np.ones(1))], combine_tensors=False, combine_scalars=False)),
        "filters/getfirst": filters.getfirst({"b": 2, "c": 3}, "a;c"),
        "filters/transform_with": plain(filters.transform_with((1, 2, 3), [lambda x: x * 10, None])),
        "filters/islice curried": list(filters.slice(2, 6)(iter(range(10)))),
    }
    return out


def shardlist_cases(wds):
    sl = wds.shardlists
    urls = [f"u{i}" for i in range(10)]
    out = {
        "shardlists/expand_urls": sl.expand_urls("a-{0..2}.tar::b-{x,y}.tar"),
        "shardlists/SimpleShardList(seed=5)": [d["url"] for d in sl.SimpleShardList(urls, seed=5)],
        "shardlists/ResampledShards deterministic": [
            d["url"] for d in sl.ResampledShards(urls, nshards=8, seed=3, worker_seed=lambda: 11,
                                                 deterministic=True)],
        "shardlists/split_by_node(range(10)) one rank": list(sl.split_by_node(iter(range(10)))),
        "shardlists/non_empty": list(sl.non_empty(iter([1, 2]))),
    }
    pipe = wds.DataPipeline(wds.SimpleShardList("{000..019}"), wds.detshuffle(5, seed=1))
    out["shardlists/detshuffle two passes"] = [[d["url"] for d in pipe] for _ in range(2)]
    return out


def tariterator_cases(wds, pattern):
    ti = wds.tariterators
    names = ["a/b.c.d", "x.jpg", "noext", "dir.v2/name.tar.gz", "p/q/r.PNG", ".hidden"]
    members = [{"fname": "k1.jpg", "data": b"1", "__url__": "u"},
               {"fname": "k1.CLS", "data": b"2", "__url__": "u"},
               {}, {"fname": "k1.txt", "data": b"3", "__url__": "v"},
               {"fname": "nodot", "data": b"4", "__url__": "v"},
               {"fname": "k2.txt", "data": b"5", "__url__": "v"}]
    return {
        "tariterators/base_plus_ext": [list(ti.base_plus_ext(n)) for n in names],
        "tariterators/group_by_keys": plain(list(ti.group_by_keys(iter(members)))),
        "tariterators/valid_sample": [ti.valid_sample(x) for x in (None, {}, {"a": 1},
                                                                   {"a": 1, "__bad__": True})],
        "tariterators/tar_file_expander": plain([
            {k: v for k, v in m.items() if k != "__local_path__"}
            for m in ti.tar_file_expander(iter([{"url": "u", "stream": open(
                pattern.replace("{0..2}", "0"), "rb")}]))][:4]),
    }


def autodecode_cases(wds):
    ad = wds.autodecode
    sample = {"__key__": b"k", "__url__": "u", "cls": b"7", "txt": b"caf\xc3\xa9", "json": b'{"a": [1]}',
              "npy": _npy(np.arange(6, dtype=np.int16).reshape(2, 3)), "txt.gz": _gz(b"zipped"),
              "ten": bytes(wds.tenbin.encode_buffer([np.arange(4, dtype=np.float32)])),
              "pyd": pickle.dumps({"p": 1}), "other": b"raw"}
    ext = ad.handle_extension("seg.png", lambda d: len(d))
    return {
        "autodecode/Decoder default": plain(ad.Decoder([])(sample)),
        "autodecode/Decoder only=cls": plain(ad.Decoder([], only="cls")(sample)),
        "autodecode/handle_extension": [ext(".a.seg.png", b"xyz"), ext(".a.png", b"xyz")],
        "autodecode/imagespecs": sorted(ad.imagespecs),
        "autodecode/basichandlers": plain([ad.basichandlers(".x.cls", b"3"),
                                           ad.basichandlers(".x.unknown", b"3")]),
    }


def _npy(a):
    out = io.BytesIO()
    np.save(out, a)
    return out.getvalue()


def _gz(b):
    import gzip
    return gzip.compress(b, mtime=0)


def tenbin_writer_cases(wds):
    arrays = [np.arange(5, dtype=np.float64), np.ones((2, 3), dtype=np.uint8)]
    buf = io.BytesIO()
    with wds.TarWriter(buf, encoder=True, mtime=0) as sink:
        sink.write({"__key__": "a", "cls": 3, "json": {"x": 1}, "npy": np.zeros((2, 2)),
                    "ten": arrays, "txt": "t", "jpg": np.zeros((4, 4, 3), dtype=np.uint8)})
    members = []
    with tarfile.open(fileobj=io.BytesIO(buf.getvalue())) as tf:
        for m in tf.getmembers():
            data = tf.extractfile(m).read()
            members.append([m.name, m.size, m.mode, m.uname, m.gname, m.mtime,
                            _digest(data) if not m.name.endswith(".jpg") else "jpg"])
    return {
        "tenbin/encode_buffer": _digest(wds.tenbin.encode_buffer(arrays, infos=["a", "b"])),
        "tenbin/decode_buffer": plain(wds.tenbin.decode_buffer(wds.tenbin.encode_buffer(arrays))),
        "writer/TarWriter members": members,
    }


def other_cases(wds):
    out = {
        "mix/RoundRobin": list(wds.RoundRobin([[1, 2, 3], ["a"], [True, False]])),
        "mix/RoundRobin longest": plain(list(wds.RoundRobin([[1, 2, 3], ["a"], [True, False]],
                                                            longest=True))),
        "cache/url_to_cache_name": [wds.cache.url_to_cache_name(u, ndir=n) for u, n in (
            ("http://h/a/b/c.tar", 0), ("http://h/a/b/c.tar", 1), ("gs://b/x/y.tgz", 5),
            ("pipe:curl x", 0), ("weird://h/p", 0))],
        "utils/repeatedly": [len(list(wds.utils.repeatedly(range(3), nepochs=4))),
                             len(list(wds.utils.repeatedly(range(3), nbatches=7))),
                             len(list(wds.utils.repeatedly([[[1, 1], [2, 2]]] * 3, nsamples=5)))],
        "utils/make_seed of ints": wds.utils.make_seed(1, 2, 3),
        "utils/pytorch_worker_seed": wds.utils.pytorch_worker_seed(),
        "extradatasets/MockDataset": list(wds.MockDataset((1, 2), 3)),
        "pipeline/with_epoch and repeat": [
            len(list(wds.DataPipeline(lambda: iter(range(4))).with_epoch(10))),
            len(list(wds.DataPipeline(lambda: iter(range(4))).repeat(3)))],
        "gopen/pipe": wds.gopen("pipe:printf abc").read().decode(),
    }
    return out


def cases(wds, root):
    """Every case (wds: webdataset or libshard.webdataset), on shards written into root."""
    pattern = order_shards(root)
    out = {}
    out.update(order_cases(wds, pattern))
    out.update(filters_cases(wds.filters))
    out.update(shardlist_cases(wds))
    out.update(tariterator_cases(wds, pattern))
    out.update(autodecode_cases(wds))
    out.update(tenbin_writer_cases(wds))
    out.update(other_cases(wds))
    return out
