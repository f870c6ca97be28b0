"""Shuffle quality: with one stream and the shard order fixed by the seed, the sample
shuffle buffer's output displaces samples by as much as a buffer of that size should.

The reader's input order is its own output without a buffer (same seed and epoch, so the
same shard order). The expected mean |position out - position in| comes from simulating
the same algorithm (WebDataset's shuffle: fill to INITIAL, growing by one per step to the
buffer size; yield a random element and put the next sample in its place; drain at the
end) with Python's random: the generators differ, so the comparison is statistical."""
import random
import statistics

import pytest

SEEDS = list(range(1, 11))


def simulate(n, size, initial, rng):
    """Output order (as input positions) of the buffer over the input 0..n-1."""
    initial = initial if 0 < initial < size else size
    src = iter(range(n))
    done = False
    buf, out = [], []

    def pull():
        nonlocal done
        x = next(src, None)
        if x is None:
            done = True
        return x

    while True:
        while not done and len(buf) < initial:
            x = pull()
            if x is not None:
                buf.append(x)
        if not done and len(buf) < size:
            x = pull()
            if x is not None:
                buf.append(x)
        if not buf:
            return out
        k = rng.randrange(len(buf))
        out.append(buf[k])
        nxt = pull() if not done else None
        if nxt is not None:
            buf[k] = nxt
        else:
            buf[k] = buf[-1]
            buf.pop()


def displacement(order_in, order_out):
    pos = {k: i for i, k in enumerate(order_in)}
    assert sorted(pos) == sorted(order_out), "the buffer lost or duplicated samples"
    return statistics.fmean(abs(i - pos[k]) for i, k in enumerate(order_out))


def expected_displacement(n, size, initial=0, trials=300):
    rng = random.Random(12345)
    return statistics.fmean(displacement(range(n), simulate(n, size, initial, rng))
                            for _ in range(trials))


def measured_displacement(stream, ds, shuffle):
    ds_ = []
    for seed in SEEDS:
        base = ["--seed", str(seed), "--streams", "1"]
        order_in = stream(ds.manifest, *base).ok().keys
        order_out = stream(ds.manifest, *base, "--shuffle", shuffle).ok().keys
        ds_.append(displacement(order_in, order_out))
    return statistics.fmean(ds_)


def test_simulation_itself():
    # A buffer of 1 is no shuffle; the displacement grows with the buffer.
    assert expected_displacement(300, 1, trials=3) == 0
    assert 0 < expected_displacement(300, 10) < expected_displacement(300, 100)


def test_input_order_is_fixed_by_seed(stream, ds):
    a = stream(ds.manifest, "--seed", "1", "--streams", "1").ok().keys
    b = stream(ds.manifest, "--seed", "1", "--streams", "1").ok().keys
    assert a == b
    # One stream, no buffer: shards one after another, each in its own order.
    runs = [ds.shard_of[k] for k in a]
    shards = list(dict.fromkeys(runs))
    assert len(shards) == len(ds.shards)
    for s in shards:
        ks = [k for k in a if ds.shard_of[k] == s]
        assert ks == ds.keys_by_shard[s]


@pytest.mark.parametrize("shuffle,size,initial", [("10", 10, 0), ("100", 100, 0), ("100:10", 100, 10)])
def test_mean_displacement_matches_buffer_size(stream, ds, shuffle, size, initial):
    got = measured_displacement(stream, ds, shuffle)
    want = expected_displacement(ds.total, size, initial)
    assert abs(got - want) <= 0.25 * want, (
        f"--shuffle {shuffle}: mean displacement {got:.2f}, a buffer of {size} gives {want:.2f}")


def test_shuffle_is_not_a_no_op_and_grows(stream, ds):
    d0 = measured_displacement(stream, ds, "0")
    d10 = measured_displacement(stream, ds, "10")
    d100 = measured_displacement(stream, ds, "100")
    assert d0 == 0, "--shuffle 0 should keep the input order"
    assert d10 > 3, f"buffer 10 barely moves samples: {d10:.2f}"
    assert d100 > 2 * d10, f"buffer 100 ({d100:.2f}) not much better than 10 ({d10:.2f})"
