"""The bytes of samples crossing from DataLoader workers to the main process through shared
memory (libshard/webdataset/crossing.py): the ring itself (values out as put, in order, a
full ring refusing, a value taken out of order holding the ring still), and DataPipeline,
fluid WebDataset and WebLoader samples through forked and spawned workers equal to those
pickled through the pipe, arriving as plain bytes, counted in stats(); the crossing turned
off (LIBSHARD_CROSSING_BYTES=0) as the negative control, a small ring pickling what it has
no room for, ended workers' rings unmapped, a bad setting refused."""
import copy
import io
import os
import pickle
import tarfile
import time
import warnings

import pytest

torch = pytest.importorskip("torch")
from torch.utils.data import DataLoader  # noqa: E402

import libshard.webdataset as wds  # noqa: E402
from libshard import _libshard  # noqa: E402
from libshard.webdataset import crossing  # noqa: E402

from .conftest import within  # noqa: E402

HANG = 60  # within() stretches it under a sanitizer
SHARDS, PER_SHARD = 3, 30


def test_ring_gives_values_back_as_put_and_in_order():
    ring = _libshard.Ring(10_000)
    view = _libshard.RingView(ring.fd, ring.size)
    values = [os.urandom(n) for n in (3000, 4000, 2500, 5000, 1, 0, 9999, 10_000, 700)]
    for v in values:  # one at a time: wraps at the end and starts again at 0
        where = ring.put(v)
        assert where is not None
        start, offset, end = where
        assert offset + len(v) <= ring.size
        assert view.take(start, offset, len(v), end) == v
        assert ring.tail == end, "taken in order: its space is free again"
    assert ring.put(b"x" * 10_001) is None, "larger than the ring"


def test_a_full_ring_refuses_until_its_values_are_taken():
    ring = _libshard.Ring(10_000)
    view = _libshard.RingView(ring.fd, ring.size)
    a, b = os.urandom(6000), os.urandom(3000)
    wa, wb = ring.put(a), ring.put(b)
    assert ring.put(os.urandom(2000)) is None, "1,000 bytes left"
    assert view.take(wa[0], wa[1], len(a), wa[2]) == a
    assert ring.put(os.urandom(2000)) is not None, "a's space given back"
    assert view.take(wb[0], wb[1], len(b), wb[2]) == b


def test_a_value_taken_out_of_order_holds_the_ring_still():
    ring = _libshard.Ring(10_000)
    view = _libshard.RingView(ring.fd, ring.size)
    a, b = os.urandom(4000), os.urandom(4000)
    wa, wb = ring.put(a), ring.put(b)
    assert view.take(wb[0], wb[1], len(b), wb[2]) == b
    assert ring.tail == 0, "b is not the next one: nothing is given back"
    assert view.take(wa[0], wa[1], len(a), wa[2]) == a
    assert ring.tail == wa[2], "a was: its space is free, b's is not"
    while ring.put(os.urandom(1000)) is not None:
        pass
    assert view.take(wb[0], wb[1], len(b), wb[2]) == b, "b never overwritten"
    with pytest.raises(ValueError, match="does not lie in a ring"):
        view.take(0, 9000, 4000, 4000)
    view.close()
    with pytest.raises(ValueError, match="closed"):
        view.take(*wa[:2], len(a), wa[2])


def test_put_all_and_take_all_keep_what_has_no_room():
    ring = _libshard.Ring(10_000)
    view = _libshard.RingView(ring.fd, ring.size)
    values = [os.urandom(n) for n in (4000, 7000, 3000, 2000)]
    places = ring.put_all(values)
    assert places[1] is None and None not in (places[0], places[2], places[3])
    items = [v if p is None else (p[0], p[1], len(v), p[2]) for v, p in zip(values, places)]
    assert view.take_all(items) == values
    assert ring.tail == places[3][2], "all given back, in order"


def test_shared_items_pickled_elsewhere_are_plain():
    item = {"a": [b"x" * 20_000, (1, b"y")]}
    for kind, plain in ((crossing.SharedDict, dict), (crossing.SharedList, list),
                        (crossing.SharedTuple, tuple)):
        value = kind(item) if kind is crossing.SharedDict else kind(item["a"])
        for back in (pickle.loads(pickle.dumps(value)), copy.copy(value), copy.deepcopy(value)):
            assert type(back) is plain and back == value


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    """SHARDS tars of PER_SHARD samples: a random .bin of 20 to 70 KB (above the 16 KiB
    that stays in the pickle) and a small .cls."""
    root = tmp_path_factory.mktemp("crossing")
    for s in range(SHARDS):
        with tarfile.open(root / f"c-{s}.tar", "w") as tf:
            for i in range(PER_SHARD):
                for ext, data in (("bin", os.urandom(20_000 + 1700 * i)), ("cls", b"%d" % i)):
                    info = tarfile.TarInfo(f"s{s}-{i:03d}.{ext}")
                    info.size = len(data)
                    tf.addfile(info, io.BytesIO(data))
    return str(root / f"c-{{0..{SHARDS - 1}}}.tar")


def make(kind, url):
    warnings.simplefilter("ignore")
    if kind == "fluid":
        return wds.WebDataset(url, shardshuffle=False).batched(4, collation_fn=None)
    return wds.DataPipeline(wds.SimpleShardList(url), wds.split_by_worker,
                            wds.tarfile_to_samples(), wds.batched(4, collation_fn=None))


def samples(loader):
    out = within(HANG * 2, lambda: [s for batch in loader for s in batch], "an epoch")
    return sorted(out, key=lambda s: s["__key__"])


def plain(got):
    return all(type(s["bin"]) is bytes and type(s["cls"]) is bytes for s in got)


@pytest.mark.parametrize("context", ["fork", "spawn"])
@pytest.mark.parametrize("kind", ["pipeline", "fluid"])
def test_samples_cross_through_shared_memory_as_plain_bytes(shards, kind, context, monkeypatch):
    monkeypatch.delenv(crossing.SIZE_VARIABLE, raising=False)
    if context == "fork" and os.environ.get("LIBSHARD_TEST_FORKSERVER"):
        context = "forkserver"  # under ASan a forked test process can hang (conftest.py)
    if context == "spawn" and kind == "fluid":
        pytest.skip("one spawned case is enough (each starts torch twice)")
    ours = make(kind, shards)
    expected = samples(make(kind, shards))  # no workers: nothing crosses
    got = samples(DataLoader(ours, num_workers=2, batch_size=None,
                             multiprocessing_context=context))
    assert got == expected and len(got) == SHARDS * PER_SHARD and plain(got)
    stats = ours.stats()
    assert stats["values_shared"] == len(got), "every .bin through the ring, no .cls"
    assert stats["bytes_shared"] == sum(len(s["bin"]) for s in got)
    assert stats["values_pickled"] == 0

    monkeypatch.setenv(crossing.SIZE_VARIABLE, "0")  # the negative control: the pipe
    off = make(kind, shards)
    assert samples(DataLoader(off, num_workers=2, batch_size=None)) == expected
    assert off.stats()["values_shared"] == off.stats()["values_pickled"] == 0


def test_webloader_and_collated_batches_cross_too(shards):
    pipe = wds.DataPipeline(wds.SimpleShardList(shards), wds.split_by_worker,
                            wds.tarfile_to_samples())
    loader = wds.WebLoader(pipe, num_workers=2, batch_size=3)  # torch's default_collate
    batches = within(HANG, lambda: list(loader), "an epoch")
    got = sorted((k, b) for batch in batches for k, b in zip(batch["__key__"], batch["bin"]))
    assert len(got) == SHARDS * PER_SHARD and all(type(b) is bytes for _, b in got)
    assert loader.stats()["values_shared"] == len(got)
    expected = sorted((s["__key__"], s["bin"]) for s in pipe)
    assert got == expected


def test_a_small_ring_pickles_what_it_has_no_room_for(shards, monkeypatch):
    monkeypatch.setenv(crossing.SIZE_VARIABLE, str(100_000))  # room for one or two values
    pipe = make("pipeline", shards)
    got = samples(DataLoader(pipe, num_workers=2, batch_size=None))
    assert got == samples(make("pipeline", shards)) and plain(got)
    stats = pipe.stats()
    assert stats["values_pickled"] > 0 and stats["values_shared"] > 0
    assert stats["values_shared"] + stats["values_pickled"] == len(got)


def wait_for(condition, seconds=10):
    """True once condition() is (checked a few times a second), False after seconds."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def rings_mapped():
    """(rings, resident KiB) of the rings mapped in this process."""
    rings, kib, ours = 0, 0, False
    with open("/proc/self/smaps") as f:
        for line in f:
            if line[0] in "0123456789abcdef" and "-" in line.split()[0]:
                ours = "libshard-crossing" in line
                rings += ours
            elif ours and line.startswith("Rss:"):
                kib += int(line.split()[1])
    return rings, kib


def test_rings_of_ended_workers_are_given_back(shards, monkeypatch):
    monkeypatch.delenv(crossing.SIZE_VARIABLE, raising=False)
    pipe = make("pipeline", shards)
    loader = DataLoader(pipe, num_workers=2, batch_size=None)
    for _ in range(3):  # each epoch: two new workers, two new rings
        it = iter(loader)
        first = next(it)
        assert rings_mapped()[1] > 0, "while the workers run, their rings hold pages"
        rest = within(HANG, lambda: list(it), "an epoch")
        assert len(first) + sum(map(len, rest)) == SHARDS * PER_SHARD
        del it  # the workers end (torch joins them)
        assert wait_for(lambda: rings_mapped()[1] == 0), "the ended workers' pages are given back"
        assert crossing.mapped() <= 2 + 2 and rings_mapped()[0] <= 2 + 2, \
            "mapped: at most the last epoch's rings and the ended ones not yet swept"
    assert pipe.stats()["values_shared"] == 3 * SHARDS * PER_SHARD


class Made(torch.utils.data.IterableDataset):
    """Items of made-up bytes: sizes[i] bytes in item i, each nested depth lists deep."""

    def __init__(self, sizes, depth=0):
        super().__init__()
        self.sizes, self.depth = sizes, depth

    def __iter__(self):
        for i, n in enumerate(self.sizes):
            item = [bytes([i]) * n]
            for _ in range(self.depth):
                item = [item]
            yield item


@pytest.mark.parametrize("depth, shared", [(crossing.DEEPEST - 5, 3), (crossing.DEEPEST + 5, 0)])
def test_items_nested_too_deep_are_pickled_as_they_are(monkeypatch, depth, shared):
    monkeypatch.delenv(crossing.SIZE_VARIABLE, raising=False)
    made = Made([20_000] * 3, depth)
    pipe = wds.DataPipeline(made)
    got = within(HANG, lambda: list(DataLoader(pipe, num_workers=1, batch_size=None)), "deep")
    assert got == list(made)
    assert pipe.stats()["values_shared"] == shared, "nested, they cross; too deep, not"


def test_values_larger_than_the_ring_from_the_first_item_on(monkeypatch):
    """A worker whose first items' values are all too large for its ring pickles them, and
    names its ring with the first value that fits."""
    monkeypatch.setenv(crossing.SIZE_VARIABLE, str(1 << 16))
    made = Made([70_000, 100_000, 20_000, 80_000, 30_000])
    pipe = wds.DataPipeline(made)
    got = within(HANG, lambda: list(DataLoader(pipe, num_workers=1, batch_size=None)), "big")
    assert got == list(made) and all(type(x[0]) is bytes for x in got)
    stats = pipe.stats()
    assert stats["values_pickled"] == 3 and stats["values_shared"] == 2
    assert stats["bytes_shared"] == 50_000


def test_persistent_workers_cross_every_epoch(shards, monkeypatch):
    monkeypatch.delenv(crossing.SIZE_VARIABLE, raising=False)
    pipe = make("pipeline", shards)
    expected = samples(make("pipeline", shards))
    loader = DataLoader(pipe, num_workers=2, batch_size=None, persistent_workers=True)
    for epoch in range(1, 4):
        assert samples(loader) == expected
        assert pipe.stats()["values_shared"] == epoch * len(expected)


def _found_by_token(counts, out):
    from libshard.webdataset.counters import by_token
    out.put(by_token(counts.token) is counts)


@pytest.mark.parametrize("kind", ["Counts", "LocalCounts"])
def test_counts_sent_to_a_spawned_process_are_found_there_by_token(kind):
    """What a DataLoader's main process started by spawn (torch.multiprocessing.spawn's ranks)
    needs to count what its workers send; pickled any other way, they count apart."""
    import multiprocessing
    from libshard.webdataset import counters
    ctx = multiprocessing.get_context("spawn")
    out, counts = ctx.Queue(), getattr(counters, kind)()  # kept: a Counts's semaphore lives
    child = ctx.Process(target=_found_by_token, args=(counts, out))  # as long as it does
    child.start()
    try:
        assert out.get(timeout=HANG) is True
    finally:
        child.join(HANG)
    counts.add(values_shared=2)
    apart = pickle.loads(pickle.dumps(counts))
    assert apart.token != counts.token and apart.as_dict() == counts.as_dict()


def test_a_setting_it_cannot_honour_is_refused(shards, monkeypatch):
    monkeypatch.setenv(crossing.SIZE_VARIABLE, "lots")
    with pytest.raises(ValueError, match="LIBSHARD_CROSSING_BYTES='lots'"):
        within(HANG, lambda: list(DataLoader(make("pipeline", shards), num_workers=1,
                                             batch_size=None)), "an epoch")
    monkeypatch.setenv(crossing.SIZE_VARIABLE, "100")
    with pytest.raises(ValueError, match="65536 to 1073741824"):
        crossing.ring_size()
    monkeypatch.setenv(crossing.SIZE_VARIABLE, str(1 << 40))  # held every byte it carried
    with pytest.raises(ValueError, match="65536 to 1073741824"):
        crossing.ring_size()
    monkeypatch.setenv(crossing.SIZE_VARIABLE, str(1 << 30))  # the control: the largest
    assert crossing.ring_size() == 1 << 30
