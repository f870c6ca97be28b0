"""ShardDataset(device="cuda") on a real GPU: batches arrive on the device through DLPack,
equal to the CPU path's byte for byte; the on-GPU finish (float32, float16, bfloat16;
NCHW, NHWC, channels_last) matches a float64 reference; tensors held across steps are never
overwritten, even with the consumer's kernels still queued when they are dropped; holding
every buffer says so; shutdown with batches in flight is clean; ShardLoader with workers
uploads in the main process; a side stream is honoured. Skipped, saying so, where torch
sees no CUDA device. Where there is no CUDA driver at all, asking for the GPU fails with
libshard's own message, and a plain DataLoader with workers is refused before any CUDA call.
"""
import gc
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
from torch.utils.data import DataLoader  # noqa: E402

import libshard  # noqa: E402
from libshard import ShardError, _libshard  # noqa: E402
from libshard.torch import ShardDataset, ShardLoader  # noqa: E402

from .conftest import NSAMPLES, within  # noqa: E402

needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(),
                               reason="no CUDA device here (torch.cuda.is_available() is False)")
needs_kernels = pytest.mark.skipif(not _libshard.gpu_kernels,
                                   reason="libshard built without nvcc: no finish kernels")

# the CPU decodes, as the exact comparisons here need (the GPU's decoder: test_nvjpeg.py)
KW = dict(seed=3, shuffle=50, batch_size=32, image_size=(40, 56), flip=True, decoder="cpu")
MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def cpu_epoch(manifest, **kw):
    """The CPU path's batches, copied out of the loader's buffers."""
    return [(x.clone(), y.clone()) for x, y in ShardDataset(str(manifest), device="cpu",
                                                            **{**KW, **kw})]


@needs_gpu
@pytest.mark.parametrize("dtype,layout", [("uint8", "nhwc"), ("uint8", "nchw"),
                                          ("float32", "nchw")])
def test_cuda_batches_equal_the_cpu_ones(packed, dtype, layout):
    if (dtype, layout) != ("uint8", "nhwc") and not _libshard.gpu_kernels:
        pytest.skip("libshard built without nvcc: no finish kernels")

    def epoch():
        out = []
        for x, y in DataLoader(ShardDataset(str(packed.manifest), device="cuda", dtype=dtype,
                                            layout=layout, **KW), batch_size=None, num_workers=0):
            assert x.device.type == y.device.type == "cuda"
            assert x.device.index == torch.cuda.current_device()
            out.append((x.cpu(), y.cpu()))
        return out

    gpu = within(120, epoch, "a CUDA epoch")
    cpu = cpu_epoch(packed.manifest, dtype=dtype, layout=layout)
    assert sum(len(y) for _, y in gpu) == NSAMPLES
    assert len(gpu) == len(cpu)
    for (x, y), (cx, cy) in zip(gpu, cpu):
        assert x.dtype == cx.dtype and x.shape == cx.shape
        assert torch.equal(x, cx) and torch.equal(y, cy)


@needs_gpu
@needs_kernels
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("layout", ["nchw", "nhwc", "channels_last"])
def test_normalize_matches_a_float64_reference(packed, dtype, layout):
    mean, std = (0.5, 0.4, 0.3), (0.2, 0.25, 0.3)
    ds = ShardDataset(str(packed.manifest), device="cuda", dtype=dtype, layout=layout,
                      mean=mean, std=std, **KW)
    ref = cpu_epoch(packed.manifest, layout="nhwc")  # the same pixels, uint8
    tol = {"float32": (1e-6, 1e-5), "float16": (2 ** -10, 1e-3), "bfloat16": (2 ** -7, 1e-2)}
    rtol, atol = tol[dtype]
    m = torch.tensor(mean, dtype=torch.float64)
    s = torch.tensor(std, dtype=torch.float64)
    n = 0
    for (x, _), (u8, _) in zip(ds, ref):
        assert x.dtype == getattr(torch, dtype)
        want = (u8.double() / 255 - m) / s  # NHWC
        if layout != "nhwc":
            want = want.permute(0, 3, 1, 2)
            assert x.shape == want.shape
        if layout == "channels_last":
            assert x.is_contiguous(memory_format=torch.channels_last)
        torch.testing.assert_close(x.cpu().double(), want, rtol=rtol, atol=atol)
        n += len(x)
    assert n == NSAMPLES


@needs_gpu
def test_held_tensors_are_never_overwritten(packed):
    """A window of the last two batches is held while the ring (3 buffers) keeps uploading;
    each batch is dropped with a slow kernel and then a copy of it still queued on the
    current stream, and nothing synchronizes until the end: a reuse that waited on the
    host's word alone would change what those copies see. (test_cuda_order.py does the same
    with 100 MB batches and negative controls.)"""
    want = cpu_epoch(packed.manifest, layout="nhwc")
    ds = ShardDataset(str(packed.manifest), device="cuda", layout="nhwc", device_buffers=3, **KW)
    window, copies = [], []
    for x, _ in ds:
        window.append(x)
        torch.cuda._sleep(20_000_000)  # the consumer's work, queued before the drop ...
        copies.append(x.clone())       # ... and its read of the batch, after that work
        if len(window) > 2:
            del window[0]              # dropped with both still queued: no host sync
        del x
    torch.cuda.synchronize()
    assert len(copies) == len(want)
    for i, (c, (w, _)) in enumerate(zip(copies, want)):
        assert torch.equal(c.cpu(), w), f"batch {i} was rewritten before its reads ran"


@needs_gpu
def test_holding_every_buffer_says_so(packed):
    ds = ShardDataset(str(packed.manifest), device="cuda", layout="nhwc", device_buffers=2, **KW)
    it = iter(ds)
    kept = [next(it), next(it)]
    with pytest.raises(ShardError, match="all 2 device buffers are held"):
        next(it)
    del kept


@needs_gpu
def test_shutdown_with_batches_in_flight_is_clean(packed):
    want = cpu_epoch(packed.manifest, layout="nhwc")
    ds = ShardDataset(str(packed.manifest), device="cuda", layout="nhwc", **KW)
    it = iter(ds)
    x, _ = next(it)
    del it  # the upload thread is uploading ahead; the held batch stays valid
    gc.collect()
    assert torch.equal(x.cpu(), want[0][0])
    del x
    # a process that exits with uploads in flight and a batch held exits cleanly
    pkg = str(Path(libshard.__file__).resolve().parents[1])
    code = (f"import sys; sys.path.insert(0, {pkg!r})\n"
            f"import torch; from libshard.torch import ShardDataset\n"
            f"it = iter(ShardDataset({str(packed.manifest)!r}, device='cuda', **{KW!r}))\n"
            f"x, _ = next(it); next(it); print('ok', x.shape)\n")
    cp = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert cp.returncode == 0 and "ok" in cp.stdout, cp.stderr


@needs_gpu
@pytest.mark.parametrize("workers", [0, 2])
def test_shardloader_uploads_in_the_main_process(packed, workers):
    dtype = "float32" if _libshard.gpu_kernels else "uint8"
    layout = "nchw" if _libshard.gpu_kernels else "nhwc"
    ds = ShardDataset(str(packed.manifest), device="cuda", dtype=dtype, layout=layout,
                      raw_fields="__key__", **KW)
    loader = ShardLoader(ds, num_workers=workers)
    got = within(120, lambda: [(x.device.type, x.cpu(), y.cpu(), f["__key__"])
                               for x, y, f in loader], "a ShardLoader epoch")
    ref = ShardLoader(ShardDataset(str(packed.manifest), dtype=dtype, layout=layout,
                                   raw_fields="__key__", **KW), num_workers=workers)
    want = [(x.clone(), y, f["__key__"]) for x, y, f in ref]
    assert len(got) == len(want)
    for (dev, x, y, k), (cx, cy, ck) in zip(got, want):
        assert dev == "cuda" and k == ck
        assert torch.equal(x, cx) and torch.equal(y, cy)
    gc.collect()
    torch.cuda.synchronize()  # bytes and copy time count finished copies
    st = loader.gpu_stats()  # every batch dropped: none held, none ahead
    assert st["batches"] == len(want) and st["bytes"] > 0 and st["in_flight"] == 0
    assert st["copy_seconds"] > 0 and st["upload_gbps"] > 0


@needs_gpu
def test_the_last_batch_held_is_in_flight(packed):
    """in_flight counts the buffers held: the last batch, still referenced, is one."""
    ds = ShardDataset(str(packed.manifest), device="cuda", layout="nhwc", **KW)
    for x, y in ds:
        pass
    assert ds.gpu_stats()["in_flight"] == 1  # x and y still hold the last batch
    del x, y
    gc.collect()
    assert ds.gpu_stats()["in_flight"] == 0


@needs_gpu
def test_batches_arrive_on_a_side_stream(packed):
    want = cpu_epoch(packed.manifest, layout="nhwc")
    side = torch.cuda.Stream()
    got = []
    with torch.cuda.stream(side):
        for x, y in ShardDataset(str(packed.manifest), device="cuda", layout="nhwc", **KW):
            got.append(x.to(torch.int64).sum(dim=(1, 2, 3)))  # queued on the side stream
    torch.cuda.synchronize()
    assert [g.cpu().tolist() for g in got] == [x.to(torch.int64).sum(dim=(1, 2, 3)).tolist()
                                               for x, _ in want]


@needs_gpu
def test_statistics_count_each_epoch_on_one_ring(packed):
    """Every epoch runs on the ring the first made (no device allocation per epoch), and the
    statistics count the epoch's own batches."""
    ds = ShardDataset(str(packed.manifest), device="cuda", layout="nhwc", **KW)
    rings = []
    for epoch in range(3):
        ds.set_epoch(epoch)
        n = sum(1 for _ in ds)
        rings.append(ds.epochs.upload.up)
        torch.cuda.synchronize()  # bytes and copy time count finished copies
        st = ds.gpu_stats()
        assert st["batches"] == n and st["buffers"] == 3 and 1 <= st["max_in_flight"] <= 3
        assert st["bytes"] == NSAMPLES * (40 * 56 * 3 + 8)
        assert st["wait_seconds"] >= 0 and st["upload_gbps"] > 0
    assert rings[0] is rings[1] is rings[2]
    ds2 = ShardDataset(str(packed.manifest), device="cuda", layout="nhwc", device_buffers=2, **KW)
    next(iter(ds2))
    assert ds2.epochs.upload.up is not rings[0]  # control: another dataset has its own


@needs_gpu
def test_another_device_by_index():
    if torch.cuda.device_count() < 2:
        pytest.skip("one CUDA device here: cuda:1 needs two")
    g = _libshard.Gpu(1)
    assert g.name


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_no_gpu_is_a_clear_error(packed):
    with pytest.raises(ShardError, match="CUDA"):
        _libshard.Gpu(0)
    ds = ShardDataset(str(packed.manifest), device="cuda", **KW)
    with pytest.raises(ShardError, match="no CUDA driver|no usable GPU|CUDA device 0"):
        next(iter(ds))


def test_cuda_with_plain_dataloader_workers_says_how(packed):
    """Refused in the worker before any CUDA call: runs without a GPU too."""
    ds = ShardDataset(str(packed.manifest), device="cuda", seed=0, batch_size=32, image_size=32)
    dl = DataLoader(ds, batch_size=None, num_workers=1)
    with pytest.raises(RuntimeError, match="ShardLoader"):
        within(120, lambda: next(iter(dl)), "a worker start")


BUCKETS = dict(aspect_buckets="32x48,48x32,40x40", image_size=40, crop="center")


@needs_gpu
@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("dtype,layout", [("uint8", "nhwc"), ("float32", "nchw"),
                                          ("bfloat16", "channels_last")])
def test_bucketed_batches_on_the_gpu_equal_the_cpu_ones(packed, workers, dtype, layout):
    """aspect_buckets with device="cuda": each batch its own size, by torch's pinned copy
    (torch/shapedupload.py), equal to the CPU path's batch for batch, through num_workers=0
    and ShardLoader's workers; a state saved mid-epoch on the GPU resumes the rest."""
    kw = dict(KW, **BUCKETS, dtype=dtype, layout=layout, mean=MEAN, std=STD,
              raw_fields="__key__")
    cpu_kw = dict(kw, dtype="float32" if dtype == "bfloat16" else dtype)
    cpu = [(x.clone(), y.clone(), list(f["__key__"]))
           for x, y, f in ShardDataset(str(packed.manifest), device="cpu", **cpu_kw)]

    def epoch(limit=None):
        ld = ShardLoader(ShardDataset(str(packed.manifest), device="cuda", **kw),
                         num_workers=workers)
        out, state = [], None
        for x, y, f in ld:
            assert x.device.type == y.device.type == "cuda"
            out.append((x.cpu(), y.cpu(), list(f["__key__"])))
            if len(out) == limit:
                state = ld.state_dict()
                break
        return out, state

    gpu, _ = within(120, epoch, "a bucketed CUDA epoch")
    assert len(gpu) == len(cpu) and len({x.shape for x, _, _ in gpu}) == 3
    for (x, y, k), (cx, cy, ck) in zip(gpu, cpu):
        want = cx.to(torch.bfloat16) if dtype == "bfloat16" else cx
        assert k == ck and x.shape == want.shape and torch.equal(x, want)
        assert torch.equal(y, cy)
    head, state = within(120, lambda: epoch(3), "three bucketed CUDA batches")
    ld = ShardLoader(ShardDataset(str(packed.manifest), device="cuda", **kw),
                     num_workers=workers)
    ld.load_state_dict(state)
    rest = [list(f["__key__"]) for _, _, f in ld]
    assert [k for _, _, k in head] + rest == [k for _, _, k in cpu]
