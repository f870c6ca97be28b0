#!/usr/bin/python3
"""GPU delivery: libshard's upload against what torch users do today, in one process.

1. Upload bandwidth: batches of uint8 224x224 images put through a libshard Uploader; the
   copy stream's GPU time (CUDA events) gives its bandwidth, as a fraction of the peak of
   the same copies with torch (a pinned host tensor, .to(cuda, non_blocking=True), timed
   with events), measured in the same run. Target >= 0.9.
2. The GPU's wait in a training loop: a convolution stack sized so that a step takes about
   as long as loading a batch (calibrated here), fed (a) by ShardDataset(device="cuda") and
   (b) by a torch DataLoader over ShardDataset(device="cpu") with pin_memory=True and
   .to(cuda, non_blocking=True) copies: the same decoded batches, only the last hop differs.
   The GPU's idle time between steps is measured with events on the training stream (the
   gap between one step's last kernel and the next step's first): its share of step time.
   Target < 2% for libshard.
3. End to end: decoded batches/s into GPU memory (ShardDataset(device="cuda")) against the
   CPU-only rate (device="cpu") on the same shards, over the epochs after a dataset's first
   (its threads, pinned buffers and device ring persist across epochs). Target: the upload
   costs < 5%. The first epoch's extra time, once per run, is printed beside it.

Packs SRC (an image folder: ../shared/bench-data makes one of real photographs) into
shards once; without a CUDA device it says so and measures nothing.

    python3 bench/gpu_bench.py /tmp/imagefolder [--batch 256] [--rounds 3]

(the Python that has torch with CUDA; scripts/gpu-check.sh bench runs it on a GPU machine)
"""
import argparse
import glob
import os
import shutil
import statistics
import sys
import tempfile
import time

import torch

from benchtools import pack, warm


def bandwidth(lib, batch, side, rounds):
    """(libshard's copy GB/s, torch's pinned peak GB/s), medians of rounds."""
    n = batch * side * side * 3
    host = torch.randint(0, 255, (batch, side, side, 3), dtype=torch.uint8).pin_memory()
    dev = torch.empty_like(host, device="cuda")
    ours, peak = [], []
    gpu = lib.Gpu(torch.cuda.current_device())
    for _ in range(rounds):
        # torch: pinned host -> device, back to back, on one stream
        s = torch.cuda.Stream()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        with torch.cuda.stream(s):
            dev.copy_(host, non_blocking=True)  # warm
            a.record()
            for _ in range(20):
                dev.copy_(host, non_blocking=True)
            b.record()
        b.synchronize()
        peak.append(20 * n / (a.elapsed_time(b) * 1e-3) / 1e9)
        # libshard: the ring's copies (put stages into pinned memory; only the copy is timed)
        up = lib.Uploader(gpu, None, buffers=3, batch_size=batch, height=side, width=side,
                          layout="nhwc")
        arr = host.numpy()
        got = 0
        while got < 21:
            if up.put(arr):
                continue
            db = up.next(torch.cuda.current_stream().cuda_stream)
            del db
            got += 1
        torch.cuda.synchronize()  # the copies still running count too (bytes with their time)
        st = up.stats()
        up.close()
        ours.append(st["bytes"] / st["copy_seconds"] / 1e9)
    return statistics.median(ours), statistics.median(peak)


def model_of(depth, width=64):
    layers = [torch.nn.Conv2d(3, width, 3, padding=1), torch.nn.ReLU()]
    for _ in range(depth):
        layers += [torch.nn.Conv2d(width, width, 3, padding=1), torch.nn.ReLU()]
    layers += [torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(width, 1000)]
    return torch.nn.Sequential(*layers).cuda().to(memory_format=torch.channels_last)


def step_seconds(model, opt, x, y, steps=10):
    for _ in range(3):
        train_step(model, opt, x, y)
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(steps):
        train_step(model, opt, x, y)
    torch.cuda.synchronize()
    return (time.perf_counter() - t) / steps


def train_step(model, opt, x, y):
    loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()


def calibrate(batch_seconds, batch, side):
    """A model whose step takes about batch_seconds on this GPU."""
    x = torch.randn(batch, 3, side, side, device="cuda").to(memory_format=torch.channels_last)
    y = torch.randint(0, 1000, (batch,), device="cuda")
    best = None
    for depth in (1, 2, 3, 4, 6, 8, 12, 16, 24, 32):
        m = model_of(depth)
        opt = torch.optim.SGD(m.parameters(), lr=0.01)
        t = step_seconds(m, opt, x, y)
        best = (depth, t)
        if t >= batch_seconds:
            break
    return best


def gpu_wait(batches, model, opt, limit):
    """Share of the GPU's time idle between steps, and the steps' mean seconds."""
    stream = torch.cuda.current_stream()
    gaps, ends, starts = [], [], []
    t0 = None
    n = 0
    for x, y in batches:
        start = torch.cuda.Event(enable_timing=True)
        start.record(stream)
        if x.dtype == torch.uint8:  # normalize on the GPU for both feeds alike
            x = x.float().div_(255)
        train_step(model, opt, x, y)
        end = torch.cuda.Event(enable_timing=True)
        end.record(stream)
        starts.append(start)
        ends.append(end)
        n += 1
        if n == 3:  # past the first batches' start-up
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            first = len(starts) - 1
        if n >= limit:
            break
    torch.cuda.synchronize()
    wall = time.perf_counter() - t0
    for i in range(first + 1, len(starts)):
        gaps.append(ends[i - 1].elapsed_time(starts[i]) * 1e-3)
    busy = sum(starts[i].elapsed_time(ends[i]) * 1e-3 for i in range(first + 1, len(starts)))
    return sum(gaps) / (sum(gaps) + busy), wall / (len(starts) - 1 - first)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("src", help="an image folder (class/*.jpg)")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=40, help="training steps per run")
    ap.add_argument("--build", default="build")
    a = ap.parse_args()
    sys.path.insert(0, os.path.join(a.build, "python"))
    from libshard import _libshard as lib
    from libshard.torch import ShardDataset
    if not torch.cuda.is_available():
        print("gpu_bench: no CUDA device here (torch.cuda.is_available() is False): nothing "
              "to measure")
        return 0
    dev = torch.cuda.get_device_name()
    print(f"device: {dev}; libshard finish kernels: {bool(lib.gpu_kernels)}; "
          f"torch {torch.__version__}, CPU cores {os.cpu_count()}")

    bw, peak = bandwidth(lib, a.batch, a.size, a.rounds)
    print(f"1. upload: libshard {bw:.1f} GB/s, torch pinned peak {peak:.1f} GB/s: "
          f"{bw / peak:.3f} of peak (target >= 0.9)")

    tmp = tempfile.mkdtemp(prefix="gpu-bench-")
    try:
        pack(os.path.join(a.build, "tools", "shardpack"), a.src,
             os.path.join(tmp, "s-%04d.tar"), 1000)
        warm(glob.glob(os.path.join(tmp, "*.tar")))
        manifest = os.path.join(tmp, "s.json")
        kw = dict(seed=0, shuffle=1000, batch_size=a.batch, image_size=a.size, flip=True)

        # 3. end to end: batches/s on the GPU against the CPU-only rate, interleaved, over
        # the epochs after a dataset's first (what a training run sees, epoch after epoch);
        # the first epoch's extra time (pinning the batch buffers, the device ring) apart
        rates = {"cpu": [], "cuda": []}
        firsts = {"cpu": [], "cuda": []}
        for _ in range(a.rounds):
            for device in ("cpu", "cuda"):
                ds = ShardDataset(manifest, device=device, **kw)
                for epoch in range(3):
                    ds.set_epoch(epoch)
                    t = time.perf_counter()
                    n = 0
                    for x, _ in ds:
                        n += 1
                    if device == "cuda":
                        torch.cuda.synchronize()
                    (firsts if epoch == 0 else rates)[device].append(
                        n / (time.perf_counter() - t))
                del ds, x
        cpu, cuda = (statistics.median(rates[d]) for d in ("cpu", "cuda"))
        start = {d: n / statistics.median(firsts[d]) - n / statistics.median(rates[d])
                 for d in ("cpu", "cuda")}
        print(f"3. end to end: {cuda:.2f} batches/s into GPU memory, {cpu:.2f} batches/s on "
              f"the CPU alone: the upload costs {100 * (1 - cuda / cpu):.1f}% (target < 5%); "
              f"a dataset's first epoch takes {start['cuda'] * 1e3:.0f} ms more than a later "
              f"one on the GPU, {start['cpu'] * 1e3:.0f} ms on the CPU (once per run)")

        # 2. a training loop whose step is about a batch's loading time
        depth, step = calibrate(1 / cpu, a.batch, a.size)
        print(f"2. model: conv stack of depth {depth}, {step * 1e3:.0f} ms a step on random "
              f"data (loading a batch: {1e3 / cpu:.0f} ms)")
        model = model_of(depth)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)

        def libshard_feed():
            ds = ShardDataset(manifest, device="cuda", layout="channels_last", **kw)
            for x, y in ds:
                yield x, y

        def torch_feed():
            ds = ShardDataset(manifest, device="cpu", layout="channels_last", **kw)
            dl = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=0,
                                             pin_memory=True)
            for x, y in dl:
                yield x.to("cuda", non_blocking=True), y.to("cuda", non_blocking=True)

        waits = {"libshard": [], "torch pin_memory": []}
        for _ in range(a.rounds):
            for name, feed in (("libshard", libshard_feed), ("torch pin_memory", torch_feed)):
                share, per = gpu_wait(feed(), model, opt, a.steps)
                waits[name].append((share, per))
        for name, v in waits.items():
            share = statistics.median(s for s, _ in v)
            per = statistics.median(p for _, p in v)
            print(f"   {name:17s}: the GPU waited {100 * share:.2f}% of step time; "
                  f"{per * 1e3:.0f} ms a step")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
