"""The GPU end of bucketed batches (aspect_buckets with device="cuda"): each batch its own
image size, so not libshard's ring of fixed-size device buffers (upload.py) but torch's own
pinned copy, the baseline that ring is measured against.

Each host batch (uint8 NHWC) is copied into one of `buffers` pinned staging buffers, grown
to the largest batch seen, and uploaded on a copy stream while the batches before it are
trained on; a staging buffer is written again only after its last copy finished. The batch
is finished on the consumer's current stream, which waits for the copy on the GPU: dtype,
normalization and layout as the ring's kernel makes them (gpu/finish.cu), value x scale +
bias in float32 with scale = 1 / (255 std) and bias = -mean / std, each step rounded, so
float32 batches equal the CPU path's.
"""
import collections

import torch

from ..settings import DEFAULTS

DTYPES = {"uint8": torch.uint8, "float32": torch.float32, "float16": torch.float16,
          "bfloat16": torch.bfloat16}


def cuda_device(device):
    """torch's CUDA device for a ShardDataset's device ("cuda": the current one)."""
    index = device.index if device.index is not None else torch.cuda.current_device()
    return torch.device("cuda", index)


def constants(mean, std):
    """(scale, bias) per channel in float32, as the CPU path and the ring compute them."""
    std = torch.tensor(std, dtype=torch.float32)
    mean = torch.tensor(mean, dtype=torch.float32)
    return 1.0 / (255.0 * std), -mean / std


def finish(images, dtype, layout, scale, bias):
    """uint8 NHWC images (on any device) made into the dataset's dtype and layout."""
    out = images
    if dtype != torch.uint8:
        out = images.to(torch.float32).mul_(scale.to(images.device)).add_(
            bias.to(images.device))
        if dtype != torch.float32:
            out = out.to(dtype)
    if layout == "nchw":
        return out.permute(0, 3, 1, 2).contiguous()
    if layout == "channels_last":
        return out.permute(0, 3, 1, 2)
    return out


class ShapedUpload:
    """Host batches of any image size onto device (a torch.device), through `buffers`
    pinned staging buffers, finished with the dataset settings `options`."""

    def __init__(self, device, options, buffers):
        def option(name):
            v = options.get(name)
            return DEFAULTS[name] if v is None else v

        self.device = device
        self.buffers = buffers
        self.key = self._key(device, options, buffers)
        self.dtype = DTYPES[option("dtype")]
        self.layout = option("layout")
        self.scale, self.bias = constants(option("mean"), option("std"))
        self.copy = torch.cuda.Stream(device)
        self.staging = [None] * buffers  # (images, labels) pinned, grown as needed
        self.copied = [None] * buffers   # the event after each one's last copy
        self.turn = 0
        self.counts = {"batches": 0, "bytes": 0}

    @staticmethod
    def _key(device, options, buffers):
        keep = ("dtype", "layout", "mean", "std")
        return device, repr(sorted((k, options.get(k)) for k in keep)), buffers

    def fits(self, device, options, buffers, loader=None):
        """Whether this upload serves an epoch of these settings as it is."""
        return self.key == self._key(device, options, buffers)

    def _send(self, images, labels):
        """Queues a host batch's copy; (device images, device labels, the copy's event)."""
        i = self.turn % self.buffers
        self.turn += 1
        if self.copied[i] is not None:
            self.copied[i].synchronize()  # its last copy out of this staging is done
        images = torch.as_tensor(images)
        labels = torch.as_tensor(labels)
        n_img, n_lab = images.numel(), labels.numel()
        have = self.staging[i]
        if have is None or have[0].numel() < n_img or have[1].numel() < n_lab:
            grow = max(n_img, have[0].numel() if have else 0)
            grow_l = max(n_lab, have[1].numel() if have else 0)
            have = (torch.empty(grow, dtype=torch.uint8, pin_memory=True),
                    torch.empty(grow_l, dtype=torch.int64, pin_memory=True))
            self.staging[i] = have
        img = have[0][:n_img].view(images.shape)
        lab = have[1][:n_lab].view(labels.shape)
        img.copy_(images)
        lab.copy_(labels)
        consumer = torch.cuda.current_stream(self.device)
        with torch.cuda.stream(self.copy):
            d_img = img.to(self.device, non_blocking=True)
            d_lab = lab.to(self.device, non_blocking=True)
            ev = torch.cuda.Event()
            ev.record(self.copy)
        d_img.record_stream(consumer)  # freed, kept from the copy stream until read
        d_lab.record_stream(consumer)
        self.copied[i] = ev
        self.counts["batches"] += 1
        self.counts["bytes"] += n_img + 8 * n_lab
        return d_img, d_lab, ev

    def _take(self, sent):
        d_img, d_lab, ev = sent
        torch.cuda.current_stream(self.device).wait_event(ev)
        return finish(d_img, self.dtype, self.layout, self.scale, self.bias), d_lab

    def _run(self, items, parts, whole):
        pending = collections.deque()
        for item in items:
            images, labels, rest = parts(item)
            pending.append((self._send(images, labels), rest))
            if len(pending) >= self.buffers:
                sent, rest = pending.popleft()
                yield whole(self._take(sent), rest)
        while pending:
            sent, rest = pending.popleft()
            yield whole(self._take(sent), rest)

    def from_loader(self, items):
        """(images, labels, *rest) host batches in, the same on the GPU out, in order."""
        return self._run(items, lambda it: (it[0], it[1], it[2:]),
                         lambda dev, rest: (*dev, *rest))

    def from_host(self, items):
        """((images, labels, *rest), tag) host batches in (ShardLoader's workers'), the same
        on the GPU out, in order."""
        return self._run(items, lambda it: (it[0][0], it[0][1], (it[0][2:], it[1])),
                         lambda dev, rest: ((*dev, *rest[0]), rest[1]))

    def begin(self):
        pass

    def stop(self):
        pass

    def close(self):
        """Lets the staging buffers go."""
        self.staging = [None] * self.buffers
        self.copied = [None] * self.buffers

    def stats(self):
        """The copies' counts: batches and bytes uploaded (no ring, no copy timings)."""
        return dict(self.counts, path="torch pinned copy (aspect_buckets)")

    def stages(self):
        return {}
