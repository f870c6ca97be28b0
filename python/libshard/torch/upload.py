"""The GPU end of a ShardDataset with device="cuda": one path for both ways batches arrive.

With num_workers=0 libshard's upload thread takes the Loader's batches (decoded into pinned
memory) and copies them into a ring of device buffers on a copy stream; with DataLoader
workers (ShardLoader) this process puts the workers' host batches into the same ring. Either
way a batch arrives through DLPack on torch's current stream at the time it is asked for:
the stream waits for the copy on the GPU, and the buffer is reused only after the work
queued on it when the tensor was freed. dtype, layout, mean and std are made on the GPU from
uint8 NHWC.

A batch is protected on the stream current when it was taken (torch.from_dlpack's, in
tensors()): read it there, or make another stream wait for that one and keep the tensor alive
until the other stream's work is queued and done. tensor.record_stream does not protect it
(the memory is libshard's, not torch's caching allocator's).

One ring serves every epoch of its dataset or ShardLoader (begin() starts the next on it): its
device memory, copy stream and kernels are made once, not per epoch.
"""

import collections
import time
import warnings

import torch

from .. import _libshard
from ..settings import DEFAULTS


class Device:
    """A CUDA device named once for libshard and torch: device ("cuda" or "cuda:N") resolved
    to its ordinal (torch's current device for "cuda"; 0 where torch has no CUDA, so that
    libshard's own error says why there is no GPU), the libshard Gpu opened on it, and
    torch's device for its current stream."""

    def __init__(self, device):
        if device.index is not None:
            index = device.index
        else:
            index = torch.cuda.current_device() if torch.cuda.is_available() else 0
        self.gpu = _libshard.Gpu(index)
        self.torch = torch.device("cuda", index)


# the Uploader's counters that add up over its life (the others are levels)
_SUMS = ("batches", "bytes", "copy_seconds", "finish_seconds", "wait_seconds", "put_seconds",
         "gpu_decoded", "cpu_decoded", "cpu_split", "gpu_retried", "gpu_seconds")


def stats(up, last=None, base=None):
    """An Uploader's counters since base (counters taken before) with upload_gbps (bytes and
    copy_seconds both count finished copies), or last (taken as it closed) once closed."""
    if up is None:
        return dict(last or {})
    try:
        st = up.stats()
    except ValueError:
        return dict(last or {})
    for k in _SUMS if base else ():
        st[k] -= base[k]
    st["upload_gbps"] = st["bytes"] / st["copy_seconds"] / 1e9 if st["copy_seconds"] else 0.0
    return st


def _hw(size):
    return (size, size) if isinstance(size, int) else tuple(size)


class Upload:
    """A ring of `buffers` device buffers on device (a Device) for batches made with the
    dataset settings `options`, fed by loader's thread (a Loader) or, without one, by put
    (from_host). Closed, it keeps its last counters."""

    def __init__(self, device, options, buffers, loader=None, decoder="cpu"):
        args, layout = self._args(options, buffers)
        if loader is not None:  # the GPU decodes the loader's JPEGs; put batches come decoded
            args["decoder"] = decoder
        self.up = _libshard.Uploader(device.gpu, loader, **args)
        decoding = self.up.stats()["decoder"] if loader is not None else "cpu"
        if decoder == "auto" and decoding.startswith("cpu: "):
            warnings.warn(f"decoder='auto': the CPU threads decode every image, the GPU's JPEG "
                          f"decoder did not start: {decoding[5:]}", RuntimeWarning,
                          stacklevel=4)
        self.loader = loader
        self.key = self._key(device, options, buffers)
        self.device = device.torch
        self.channels_last = layout == "channels_last"
        self.host_wait = 0.0  # from_host: the consumer waiting on the host batches
        self._last, self._stages_last = None, {}
        self._base, self._used = None, False

    @staticmethod
    def _args(options, buffers):
        """(the Uploader's arguments for these dataset settings, the dataset's layout)."""
        def option(name):
            return options.get(name, DEFAULTS[name])

        h, w = _hw(option("image_size"))
        layout = option("layout")
        args = dict(buffers=buffers, batch_size=option("batch_size"), height=h, width=w,
                    dtype=option("dtype"), layout="nchw" if layout == "nchw" else "nhwc")
        for k in ("mean", "std"):
            if options.get(k) is not None:
                args[k] = options[k]
        return args, layout

    @classmethod
    def _key(cls, device, options, buffers):
        args, layout = cls._args(options, buffers)  # args hold buffers; layout: channels_last
        return device.torch, repr(sorted(args.items())), layout

    def fits(self, device, options, buffers, loader=None):
        """Whether this ring serves an epoch of these settings and this loader as it is."""
        if loader is not self.loader or self._last is not None:
            return False
        return self.key == self._key(device, options, buffers)

    def stop(self):
        """Stops the upload thread (the loader is free for set_epoch or restore), drops the
        batches uploaded ahead; batches handed out stay valid."""
        if self._last is None:
            try:
                self.up.rewind()
            except (_libshard.ShardError, ValueError, MemoryError):
                self.close()  # an error ended the upload (raised at next()): spent

    def begin(self):
        """The next epoch on this ring: the counters start again from here."""
        if self._used:
            self.stop()
        self._used = True
        self.host_wait = 0.0
        self._base = self.up.stats()

    def _next(self, host=False):
        return self.up.next(torch.cuda.current_stream(self.device).cuda_stream, host=host)

    def tensors(self, db):
        """A DeviceBatch's (images, labels) as torch tensors, in the dataset's layout."""
        images = torch.from_dlpack(db.images)
        labels = torch.from_dlpack(db.labels)
        if self.channels_last:
            images = images.permute(0, 3, 1, 2)
        return images, labels

    def from_loader(self, host):
        """(images, labels, device batch) as the loader's thread uploads them, ahead of the
        consumer; host: with the keys and raw fields copied from the host batch."""
        self.begin()
        try:
            while True:
                db = self._next(host)
                if db is None:
                    return
                yield self.tensors(db) + (db,)
                del db
        finally:
            self.stop()  # host batches back now, the ring kept for the next epoch

    def from_host(self, items):
        """items ((images, labels, *rest), tag), host batches (uint8 NHWC), uploaded: each is
        copied into a device buffer's pinned staging memory and uploaded on the copy stream
        while the batches before it are trained on; the ring is kept as full as it goes.
        Yields ((images, labels, *rest), tag) on the GPU, in order."""
        self.begin()
        pending = collections.deque()  # (the rest of the item, its tag), in put order
        src = iter(items)

        def fetch():
            t0 = time.perf_counter()
            item = next(src, None)
            if not pending:  # the training loop waits on the workers, nothing uploaded
                self.host_wait += time.perf_counter() - t0
            return item

        nxt = fetch()
        try:
            while True:
                while nxt is not None:
                    (images, labels, *rest), tag = nxt
                    if not self.up.put(images.numpy(), labels.numpy()):
                        break  # every buffer is uploaded ahead or held
                    pending.append((rest, tag))
                    nxt = fetch()
                    if nxt is None:
                        self.up.put_end()
                if not pending:
                    return
                db = self._next()
                rest, tag = pending.popleft()
                images, labels = self.tensors(db)
                del db
                yield (images, labels, *rest), tag
        finally:
            self.stop()  # what was put and not taken is dropped

    def close(self):
        """Stops the ring for good (batches handed out stay valid), keeping its counters."""
        if self._last is not None:
            return
        self._last = stats(self.up, base=self._base)
        self._stages_last = self.up.loader_stats()
        self.up.close()

    def stats(self):
        """The upload's counters for the current or last epoch (Dataset.gpu_stats)."""
        return stats(self.up, self._last, self._base)

    def stages(self):
        """The loader's stages with the upload among them ({} when fed by put)."""
        try:
            return self.up.loader_stats()
        except ValueError:  # closed: as it was then
            return dict(self._stages_last)
