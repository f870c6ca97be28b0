"""The GPU's JPEG decoder (decoder="auto" / "gpu" with device="cuda") on a real GPU, over the
bench photographs (4:2:0 and 4:4:4; GPU_PHOTOS, made by scripts/gpu-check.sh prepare): the
pixels against the CPU path, the JPEGs the GPU does not take falling back, every sample once,
resume. Without a GPU: the settings that cannot be honoured are refused."""
import faulthandler
import io
import math
import os
import sys
import tarfile
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
from PIL import Image  # noqa: E402

from libshard import _libshard  # noqa: E402
from libshard.torch import ShardDataset  # noqa: E402

needs_gpu = pytest.mark.skipif(not (torch.cuda.is_available() and _libshard.gpu_kernels),
                               reason="no CUDA device here, or libshard built without nvcc")


@pytest.fixture(autouse=True)
def say_where_a_hang_is():
    """A test that stops moving prints every thread's Python stack after 60 s (the device
    step gives the file 150 s): where it waits is the first thing to know."""
    faulthandler.dump_traceback_later(60, exit=False, file=sys.__stderr__)
    yield
    faulthandler.cancel_dump_traceback_later()


def photos():
    d = os.environ.get("GPU_PHOTOS")
    if not d or not Path(d).is_dir():
        pytest.skip("GPU_PHOTOS: the bench photographs (scripts/gpu-check.sh prepare)")
    return sorted(Path(d).glob("*/*.jpg"))


def pack(tmp_path, samples, per_shard=64):
    """Tars of (key, image bytes, label): their brace spec."""
    n = 0
    for s in range(0, len(samples), per_shard):
        with tarfile.open(tmp_path / f"s-{n:04d}.tar", "w") as t:
            for key, data, label, ext in samples[s:s + per_shard]:
                for name, b in ((f"{key}.{ext}", data), (f"{key}.cls", str(label).encode())):
                    info = tarfile.TarInfo(name)
                    info.size = len(b)
                    t.addfile(info, io.BytesIO(b))
        n += 1
    return str(tmp_path / ("s-{0000..%04d}.tar" % (n - 1)))


def photo_shards(tmp_path, limit=160):
    return pack(tmp_path, [(f"p{i:05d}", f.read_bytes(), i % 10, "jpg")
                           for i, f in enumerate(photos()[:limit])])


KW = dict(seed=5, shuffle=0, batch_size=32, image_size=224, flip=True, layout="nhwc",
          mode="exact")


def epoch(spec, **kw):
    out = []
    ds = ShardDataset(spec, **{**KW, **kw})
    for x, y in ds:
        out.append((x.cpu(), y.cpu()))
    return out, ds


def psnr(a, b):
    mse = torch.mean((a.double() - b.double()) ** 2).item()
    return math.inf if mse == 0 else 10 * math.log10(255 ** 2 / mse)


@needs_gpu
@pytest.mark.parametrize("fast,mean_max,psnr_min", [(False, 1.0, 40.0), (True, 3.0, 35.0)])
def test_pixels_against_the_cpu_path(tmp_path, fast, mean_max, psnr_min):
    spec = photo_shards(tmp_path)
    gpu, ds = epoch(spec, device="cuda", decoder="gpu", fast=fast)
    cpu, _ = epoch(spec, device="cpu", fast=fast)
    st = ds.gpu_stats()
    assert "hardware" in st["decoder"] or "CUDA" in st["decoder"], st["decoder"]
    assert st["gpu_decoded"] == 160 and st["gpu_retried"] == 0, st
    worst_mean, worst_psnr = 0.0, math.inf
    for (x, y), (cx, cy) in zip(gpu, cpu):
        assert torch.equal(y, cy)
        for a, b in zip(x, cx):
            worst_mean = max(worst_mean, (a.double() - b.double()).abs().mean().item())
            worst_psnr = min(worst_psnr, psnr(a, b))
    print(f"fast={fast}: worst mean {worst_mean:.3f}, worst PSNR {worst_psnr:.2f} dB "
          f"({st['decoder']})")
    assert worst_mean <= mean_max and worst_psnr >= psnr_min


def odd_images(src):
    """The kinds the GPU does not take, and PNG, from one photograph."""
    im = Image.open(src).convert("RGB")
    out = {}
    for name, kw, mode in (("progressive", dict(progressive=True), "RGB"),
                           ("cmyk", {}, "CMYK"), ("grey", {}, "L")):
        b = io.BytesIO()
        im.convert(mode).save(b, "JPEG", quality=90, **kw)
        out[name] = (b.getvalue(), "jpg")
    b = io.BytesIO()
    im.save(b, "PNG")
    out["png"] = (b.getvalue(), "png")
    return out


@needs_gpu
def test_what_the_gpu_does_not_take_goes_to_the_cpu(tmp_path):
    ph = photos()
    samples = []
    for i, f in enumerate(ph[:64]):
        if i % 8 == 0:
            for name, (data, ext) in odd_images(f).items():
                samples.append((f"o{i:03d}{name}", data, i % 10, ext))
        samples.append((f"p{i:05d}", f.read_bytes(), i % 10, "jpg"))
    spec = pack(tmp_path, samples)
    gpu, ds = epoch(spec, device="cuda", decoder="gpu", fast=False)
    cpu, _ = epoch(spec, device="cpu", fast=False)
    st = ds.gpu_stats()
    why = st["cpu_because"]
    # counted once per sample uploaded (the producer's read-ahead and remade batches not)
    assert why["progressive"] == 8 and why["colour"] == 8 and why["not_jpeg"] == 8, st
    assert st["gpu_decoded"] == 64 + 8, st  # the grey ones too
    assert sum(len(y) for _, y in gpu) == len(samples)
    for (x, _), (cx, _) in zip(gpu, cpu):
        for a, b in zip(x, cx):
            assert psnr(a, b) >= 40


@needs_gpu
def test_auto_gives_every_sample_once_and_resumes_exactly(tmp_path):
    spec = photo_shards(tmp_path)
    kw = dict(device="cuda", decoder="auto", raw_fields="__key__", shuffle=64, seed=11)
    full = []
    ds = ShardDataset(spec, **{**KW, **kw})
    for x, y, f in ds:
        full += f["__key__"]
    assert sorted(full) == sorted(f"p{i:05d}" for i in range(160))
    st = ds.gpu_stats()
    assert st["gpu_decoded"] + st["cpu_decoded"] == 160, st
    # three batches, a state, the rest on a new dataset
    ds = ShardDataset(spec, **{**KW, **kw})
    it = iter(ds)
    seen = []
    for _ in range(3):
        seen += next(it)[2]["__key__"]
    state = ds.state_dict()
    del it
    rest = []
    ds2 = ShardDataset(spec, **{**KW, **kw})
    ds2.load_state_dict(state)
    for x, y, f in ds2:
        rest += f["__key__"]
    assert seen + rest == full


def test_gpu_decoder_needs_the_gpu():
    with pytest.raises(ValueError, match="decoder='gpu'.*device='cuda'"):
        ShardDataset("x-{0..1}.tar", decoder="gpu")
    with pytest.raises(ValueError, match="decoder: 'auto', 'cpu' or 'gpu'"):
        ShardDataset("x-{0..1}.tar", decoder="nvjpeg")
