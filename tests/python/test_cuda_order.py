"""The GPU path's ordering, shown on a device where it could fail, each with a negative
control that shows the check can see the failure it guards against:

- the upload overlaps a long kernel on torch's current stream, and the host never waits for
  it (control: torch's own copy on that stream waits for the kernel);
- the consumer's stream waits for a 100 MB copy before reading it (control: a stream that
  was not made to wait, DLPack's stream=-1, reads stale data);
- a released buffer is not rewritten while reads queued before the release still run, with
  a 30 ms kernel ahead of them and no host sync (control: reads on another stream than the
  one the batch was taken on, with or without record_stream, are not protected);
- float32 / float16 / bfloat16 in NCHW / NHWC / channels_last equal the CPU path's
  arithmetic on an odd-sized, partial batch written into pre-poisoned device memory
  (control: a reference one rounding off is told apart).

Also the Python API's bounds (put's shape, dl_device) and a process without torch freeing
its last Gpu. Skipped, saying so, where torch sees no CUDA device.
"""
import subprocess
import sys
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")

import libshard  # noqa: E402
from libshard import _libshard  # noqa: E402
from libshard.torch.upload import Device, Upload  # noqa: E402

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(),
                                reason="no CUDA device here (torch.cuda.is_available() is "
                                       "False): the ordering can only be shown on one")
needs_kernels = pytest.mark.skipif(not _libshard.gpu_kernels,
                                   reason="libshard built without nvcc: no finish kernels")


def cycles_per_ms():
    """torch.cuda._sleep's cycles in a millisecond on this GPU."""
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda._sleep(1000)
    a.record()
    torch.cuda._sleep(20_000_000)
    b.record()
    b.synchronize()
    return 20_000_000 / a.elapsed_time(b)


def ring(b, h, w, buffers=2, **kw):
    """An Uploader fed by put, its every buffer used once (first-use costs out of the way)."""
    up = _libshard.Uploader(_libshard.Gpu(torch.cuda.current_device()), None, buffers=buffers,
                            batch_size=b, height=h, width=w, **{"layout": "nhwc", **kw})
    host = np.zeros((b, h, w, 3), np.uint8)
    for _ in range(buffers):
        assert up.put(host)
        db = up.next(stream=torch.cuda.current_stream().cuda_stream)
        del db
    torch.cuda.synchronize()
    return up


def test_the_upload_overlaps_a_long_kernel_on_the_current_stream():
    up = ring(64, 512, 512)  # 50 MB batches
    host = np.full((64, 512, 512, 3), 7, np.uint8)
    side = torch.cuda.Stream()
    cpm = cycles_per_ms()
    torch.cuda._sleep(int(500 * cpm))  # torch's current stream is busy for 0.5 s
    t0 = time.perf_counter()
    assert up.put(host)
    db = up.next(stream=side.cuda_stream)  # side waits for the upload only
    host_s = time.perf_counter() - t0
    done = torch.cuda.Event()
    done.record(side)
    while not done.query():
        time.sleep(0.0002)
    ready_s = time.perf_counter() - t0
    torch.cuda.synchronize()
    kernel_s = time.perf_counter() - t0
    del db
    assert host_s < 0.2 * kernel_s, \
        f"put and next took {host_s:.3f} s of the kernel's {kernel_s:.3f} s"
    assert ready_s < 0.5 * kernel_s, \
        f"the upload was ready after {ready_s:.3f} s, the kernel ended at {kernel_s:.3f} s"
    # control: torch's own copy, queued on the busy stream, is only done after the kernel
    dev = torch.empty((64, 512, 512, 3), dtype=torch.uint8, device="cuda")
    pinned = torch.from_numpy(host).pin_memory()
    torch.cuda._sleep(int(500 * cpm))
    t0 = time.perf_counter()
    dev.copy_(pinned, non_blocking=True)
    copied = torch.cuda.Event()
    copied.record()
    while not copied.query():
        time.sleep(0.0002)
    assert time.perf_counter() - t0 > 0.4, "control: a copy behind the kernel ended early"


def test_the_consumer_stream_waits_for_a_large_copy():
    b, h, w = 32, 1024, 1024  # 100 MB: a copy of several milliseconds
    up = ring(b, h, w)
    s, other = torch.cuda.Stream(), torch.cuda.Stream()
    host = np.zeros((b, h, w, 3), np.uint8)
    seen, stale = [], []
    for r in range(16):
        host.fill(r + 1)
        assert up.put(host)
        db = up.next(stream=s.cuda_stream)
        with torch.cuda.stream(s):  # made to wait for the copy: reads the new values
            x = torch.from_dlpack(db.images)
            seen.append((r + 1, x.amin(), x.amax()))
        with torch.cuda.stream(other):  # control: -1, no wait; another stream reads at once
            y = torch.utils.dlpack.from_dlpack(db.images.__dlpack__(stream=-1))
            stale.append((r + 1, y.amin()))
        del x, y, db
    torch.cuda.synchronize()
    wrong = [(want, int(lo), int(hi)) for want, lo, hi in seen if not int(lo) == int(hi) == want]
    assert not wrong, f"read before the copy ended (round, min, max): {wrong}"
    early = sum(int(v) != want for want, v in stale)
    assert early > 0, "control: a stream that did not wait never saw a copy unfinished"


def reads_overwritten(mode):
    """Rounds of 24 in which a batch's read, queued behind 30 ms of work before the batch was
    dropped, saw another batch's values. mode: "same" (the stream the batch was taken on),
    "other" (another stream), "record_stream" (another, with torch's record_stream)."""
    b, h, w = 16, 512, 512  # 12.6 MB
    up = ring(b, h, w)
    s, s2 = torch.cuda.Stream(), torch.cuda.Stream()
    cpm = cycles_per_ms()
    host = np.zeros((b, h, w, 3), np.uint8)
    got = []
    for r in range(24):
        host.fill(r + 1)
        assert up.put(host), "no free buffer"
        db = up.next(stream=s.cuda_stream)
        with torch.cuda.stream(s):
            x = torch.from_dlpack(db.images)  # taken on s: the release is recorded on s
        use = s
        if mode != "same":
            use = s2
            s2.wait_stream(s)
            if mode == "record_stream":
                x.record_stream(s2)  # a no-op for memory torch did not allocate
        with torch.cuda.stream(use):
            torch.cuda._sleep(int(30 * cpm))  # slow work, queued before the read ...
            got.append((r + 1, x.amax()))     # ... which runs after the drop below
        del x, db
    torch.cuda.synchronize()
    return sum(int(v) != want for want, v in got)


def test_a_released_buffer_waits_for_the_reads_queued_before_the_release():
    assert reads_overwritten("same") == 0
    # controls: the same reads on another stream are unprotected, record_stream or not
    # (README, GPU delivery): the check above could have failed
    assert reads_overwritten("other") > 0
    assert reads_overwritten("record_stream") > 0


@needs_kernels
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("layout", ["nchw", "nhwc", "channels_last"])
def test_finished_batches_equal_the_cpu_arithmetic(dtype, layout):
    """A partial batch (7 of 9) of odd-sized images (223 x 221), uploaded into a buffer that
    held a batch of 255s, equals the CPU path's arithmetic (value * scale + bias in float32,
    as decode/transform.c stores, then torch's rounding to the half types)."""
    b, h, w, n = 9, 223, 221, 7
    mean, std = (0.5, 0.4, 0.3), (0.2, 0.25, 0.3)
    options = dict(batch_size=b, image_size=(h, w), dtype=dtype, layout=layout, mean=mean,
                   std=std)
    up = Upload(Device(torch.device("cuda")), options, 1)  # one buffer: poison, then data
    stream = torch.cuda.current_stream().cuda_stream
    assert up.up.put(np.full((b, h, w, 3), 255, np.uint8))
    db = up.up.next(stream=stream)
    del db
    rng = np.random.default_rng(0)
    u8 = rng.integers(0, 256, (n, h, w, 3), dtype=np.uint8)
    labels = rng.integers(-5, 1000, n).astype(np.int64)
    assert up.up.put(u8, labels)
    x, y = up.tensors(up.up.next(stream=stream))
    m32, s32 = np.array(mean, np.float32), np.array(std, np.float32)
    ref = u8.astype(np.float32) * (np.float32(1) / (np.float32(255) * s32)) + (-m32 / s32)
    want = torch.from_numpy(ref).to(getattr(torch, dtype))
    if layout != "nhwc":
        want = want.permute(0, 3, 1, 2)
    assert x.dtype == want.dtype and x.shape == want.shape
    if layout == "channels_last":
        assert x.is_contiguous(memory_format=torch.channels_last)
    got = x.cpu()
    assert torch.equal(got, want)
    assert torch.equal(y.cpu(), torch.from_numpy(labels))
    # control: a reference one rounding off (the scale without its float32 rounding) is told
    # apart, so the comparison above is exact, not merely close
    off = (u8.astype(np.float64) / (255 * np.array(std)) - np.array(mean) / np.array(std))
    off = torch.from_numpy(off.astype(np.float32)).to(getattr(torch, dtype))
    if layout != "nhwc":
        off = off.permute(0, 3, 1, 2)
    if dtype == "float32":
        assert not torch.equal(got, off)
    up.close()


@needs_kernels
def test_uint8_nchw_equals_the_input_on_a_poisoned_partial_batch():
    b, h, w, n = 9, 223, 221, 7
    options = dict(batch_size=b, image_size=(h, w), dtype="uint8", layout="nchw")
    up = Upload(Device(torch.device("cuda")), options, 1)
    stream = torch.cuda.current_stream().cuda_stream
    assert up.up.put(np.full((b, h, w, 3), 255, np.uint8))
    db = up.up.next(stream=stream)
    del db
    u8 = np.random.default_rng(1).integers(0, 255, (n, h, w, 3), dtype=np.uint8)
    assert up.up.put(u8)
    x, _ = up.tensors(up.up.next(stream=stream))
    assert torch.equal(x.cpu(), torch.from_numpy(u8).permute(0, 3, 1, 2).contiguous())
    up.close()


def test_put_refuses_arrays_that_do_not_fit_the_ring():
    up = ring(4, 8, 8)
    for bad in (np.zeros((4, 8, 9, 3), np.uint8), np.zeros((5, 8, 8, 3), np.uint8),
                np.zeros((4, 8, 8, 3), np.float32), np.zeros((4, 8, 8), np.uint8),
                np.zeros((0, 8, 8, 3), np.uint8)):
        with pytest.raises(ValueError, match=r"uint8 \(n, 8, 8, 3\) with n from 1 to 4"):
            up.put(bad)
    with pytest.raises(ValueError, match="labels must be 2 int64"):
        up.put(np.zeros((2, 8, 8, 3), np.uint8), np.zeros(3, np.int64))
    assert up.put(np.zeros((2, 8, 8, 3), np.uint8))  # control: one that fits


def test_dlpack_takes_no_sync_and_refuses_another_device():
    up = ring(4, 8, 8)
    assert up.put(np.arange(4 * 8 * 8 * 3, dtype=np.uint8).reshape(4, 8, 8, 3) % 251)
    db = up.next(stream=torch.cuda.current_stream().cuda_stream)
    arr = db.images
    cap = arr.__dlpack__(stream=-1)  # "no synchronization", as the array API says
    del cap
    with pytest.raises(BufferError, match="dl_device"):
        arr.__dlpack__(dl_device=(1, 0))  # kDLCPU
    x = torch.from_dlpack(arr)  # control: on its own device it is taken
    assert x.device.type == "cuda" and x.shape == (4, 8, 8, 3) and x.stride() == (192, 24, 3, 1)
    try:  # torch passes dl_device on: refused, or copied by torch itself, never ignored
        xc = torch.from_dlpack(arr, device="cpu")
    except BufferError:
        pass
    else:
        assert xc.device.type == "cpu"


def test_a_process_without_torch_frees_its_last_gpu_and_lives_on():
    pkg = str(Path(libshard.__file__).resolve().parents[1])
    code = (f"import sys; sys.path.insert(0, {pkg!r})\n"
            "import time, numpy as np\n"
            "from libshard import _libshard as L\n"
            "g = L.Gpu(0)\n"
            "up = L.Uploader(g, None, buffers=2, batch_size=4, height=8, width=8, layout='nhwc')\n"
            "for _ in range(6):\n"
            "    assert up.put(np.zeros((4, 8, 8, 3), np.uint8)); b = up.next(); del b\n"
            "up.close(); del up, g\n"
            "assert 'torch' not in sys.modules\n"
            "g = L.Gpu(0); del g\n"
            "time.sleep(2); print('alive')\n")
    cp = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert cp.returncode == 0 and "alive" in cp.stdout, cp.stderr[-2000:]
