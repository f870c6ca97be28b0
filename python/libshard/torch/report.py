"""The periodic report of a ShardDataset iterated with report_every: every report_every
seconds, what the last interval did (samples/s, MB/s read), the bottleneck so far with its
evidence, the queues' fill and the GPU's wait, to the logging module, stderr or the
dataset's callable."""
import logging
import sys
import time

LOG = logging.getLogger("libshard")


class Reporter:
    """Reports on loader (a Loader) as the dataset ds's settings say; tick() on each batch."""

    def __init__(self, ds, loader):
        self.ds, self.loader = ds, loader
        self.every = float(ds.report_every)
        self.last = time.monotonic()
        self.prev = loader.stats()

    def tick(self):
        """Reports when report_every seconds have passed since the last report."""
        now = time.monotonic()
        if now - self.last < self.every:
            return
        st = self.loader.stats()
        dt = now - self.last
        prev = self.prev["stages"]
        cur = st["stages"]
        rep = {"interval_seconds": dt,
               "samples_per_second": (cur["deliver"]["items"] - prev["deliver"]["items"]) / dt,
               "mb_per_second": (cur["fetch"]["bytes"] - prev["fetch"]["bytes"]) / dt / 1e6,
               "bottleneck": st["bottleneck"], "verdict": st["verdict"],
               "queues": {k: (v["queue_fill"], v["queue_capacity"]) for k, v in cur.items()
                          if v["queue_capacity"]},
               "stats": st}
        up = self.ds.gpu_stats() if self.ds.device.type == "cuda" else {}
        if up:
            rep["gpu_wait_seconds"] = up["wait_seconds"]
        self.last, self.prev = now, st
        if callable(self.ds.report):
            self.ds.report(rep)
            return
        queues = " ".join(f"{k} {f}/{c}" for k, (f, c) in rep["queues"].items())
        line = (f"libshard: {rep['samples_per_second']:.0f} samples/s, "
                f"{rep['mb_per_second']:.1f} MB/s read; bottleneck {rep['verdict']}; "
                f"queues {queues}"
                + (f"; GPU waited {up['wait_seconds']:.1f} s" if up else ""))
        if self.ds.report == "stderr":
            print(line, file=sys.stderr, flush=True)
        else:
            LOG.info("%s", line)
