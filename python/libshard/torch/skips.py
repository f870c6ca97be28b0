"""What skip_errors left out of an iteration: samples by reason, shards and the samples lost
with them, counted, warned about at the first skip and logged at the end of the epoch."""
import logging

from .warn import warn

LOG = logging.getLogger("libshard")

#: the counts, as ShardDataset.skipped and ShardLoader.skipped give them: samples by reason
#: (each one's place in its batch holds a marked repeat of another of the batch, "__pad__"),
#: shards and the samples counted with them, batches dropped because every sample of them
#: was skipped, and the samples' total
KEYS = ("image", "no_image", "label", "no_size", "shards", "shard_samples", "batches", "total")


class ShardSkipWarning(UserWarning):
    """skip_errors=True left data out: issued on the first skip of an iteration."""


def zero():
    """The counts of an iteration that left nothing out."""
    return dict.fromkeys(KEYS, 0)


def of_reader(stats):
    """The counts a Reader's stats() gives (raw samples: only shards are skipped)."""
    return {"image": 0, "no_image": 0, "label": 0, "no_size": stats["skipped_unsized"],
            "shards": stats["skipped_shards"], "shard_samples": stats["skipped_samples"],
            "batches": 0, "total": stats["skipped_samples"] + stats["skipped_unsized"]}


def left_out(d):
    """Whether the counts d left anything out: samples, or shards (whose samples may not
    be counted, when the shard had no count)."""
    return bool(d.get("total") or d.get("shards"))


def text(d):
    """The counts in words."""
    parts = [f"{d['image']} images that did not decode" if d["image"] else "",
             f"{d['no_image']} samples without an image" if d["no_image"] else "",
             f"{d['label']} samples without a valid label" if d["label"] else "",
             f"{d['no_size']} samples without an image size (aspect_buckets: in no bucket)"
             if d.get("no_size") else "",
             f"{d['shards']} shards after errors ({d['shard_samples']} samples counted; what a "
             f"shard without a count still held is not)" if d["shards"] else "",
             f"{d['batches']} batches none of whose samples decoded" if d.get("batches") else ""]
    return ", ".join(p for p in parts if p)


def summed(counts):
    """The sum of several iterations' (workers') counts."""
    out = zero()
    for d in counts:
        for k in KEYS:
            out[k] += d[k]
    return out


class Skips:
    """This process's counts for the current or last iteration."""

    def __init__(self):
        self.counts = {}

    def reset(self):
        """A new iteration: nothing left out yet."""
        self.counts = {}

    def note(self, counts, epoch, end=False):
        """Keeps the iteration's counts so far; warns at the first skip, and at the end of an
        epoch that skipped anything logs a summary."""
        # a shard skipped whose count was unknown loses samples no count names: it is
        # warned of all the same
        first = left_out(counts) and not left_out(self.counts)
        self.counts = dict(counts)
        if first:
            warn(f"libshard: skip_errors left out {text(counts)} (so far; ds.skipped counts "
                 f"them)", ShardSkipWarning)
        if end and left_out(counts):
            LOG.warning("libshard: epoch %d left out %s", epoch, text(counts))

    def get(self):
        """The counts (zeros before anything was left out)."""
        return dict(self.counts) if self.counts else zero()
