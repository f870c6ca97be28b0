"""The fluid interface WebDataset's pipelines are built with, and the Python run of
their stages."""
import copy
import itertools
import warnings

from ..torch.split import rank_world, worker
from .autodecode import IMAGESPECS, Decoder, imagehandler
from .filters import STAGES, default_collation_fn
from .handlers import reraise_exception


class Fluid:
    """WebDataset's fluid interface: each method returns a new pipeline with one more stage
    (the one it is called on is unchanged)."""

    stages = ()
    repetitions, nsamples, size = 1, -1, None

    def _then(self, name, *args, **kw):
        new = copy.copy(self)
        new.stages = tuple(self.stages) + ((name, args, kw),)
        return new

    def _unsupported(self, what, instead):
        raise NotImplementedError(f"libshard.webdataset cannot {what}: {instead}")

    def _seed(self):
        return 0

    def shuffle(self, size, **kw):
        """A shuffle buffer of size samples (initial: how many before the first comes out)."""
        return self if size < 1 else self._then("shuffle", size, **kw)

    def decode(self, *args, pre=None, post=None, only=None, partial=False,
               handler=reraise_exception):
        """Decodes each field: str arguments are image specs ("pil", "rgb8", "torchrgb8",
        ...), callables handlers(key, data); then the basic handlers (txt, cls, json, ...)."""
        for a in args:
            if isinstance(a, str) and a not in IMAGESPECS:
                raise ValueError(f"Unknown imagespec: {a}")
        return self._then("decode", *args, pre=pre, post=post, only=only, partial=partial,
                          handler=handler)

    def map(self, f, handler=reraise_exception):
        """f(sample) for each sample; None drops it; a dict keeps the sample's __key__."""
        return self._then("map", f, handler=handler)

    def select(self, predicate, **kw):
        """The samples for which predicate(sample) is true."""
        return self._then("select", predicate, **kw)

    def rename(self, **kw):
        """New name=old ('a;b': the first present) for fields; keep=False drops the rest."""
        return self._then("rename", **kw)

    def map_dict(self, handler=reraise_exception, **kw):
        """field=f: each field through its function."""
        return self._then("map_dict", handler=handler, **kw)

    def to_tuple(self, *args, **kw):
        """The named fields as a tuple ('jpg;png': the first present)."""
        return self._then("to_tuple", *args, **kw)

    def map_tuple(self, *args, handler=reraise_exception):
        """Each element of a tuple through the function at its position (None: kept)."""
        return self._then("map_tuple", *args, handler=handler)

    def batched(self, batchsize, collation_fn=default_collation_fn, partial=True):
        """Batches of batchsize, collated (default_collation_fn); partial: the last one
        even when short."""
        return self._then("batched", batchsize, collation_fn=collation_fn, partial=partial)

    def unbatched(self):
        """Batches back into samples."""
        return self._then("unbatched")

    def slice(self, *args):
        """itertools.islice of the stream."""
        return self._then("slice", *args)

    def with_epoch(self, nsamples=-1, nbatches=-1):
        """An epoch of exactly n items of what the pipeline yields (batches after batched),
        per worker, reading on into the next pass over the data as needed."""
        new = copy.copy(self)
        new.repetitions, new.nsamples = 1 << 62, max(nsamples, nbatches)
        return new

    def repeat(self, nepochs=-1, nbatches=-1):
        """nepochs passes (endless if not positive), at most nbatches items in all."""
        new = copy.copy(self)
        new.repetitions = nepochs if nepochs > 0 else 1 << 62
        new.nsamples = nbatches
        return new

    def with_length(self, n, silent=False):
        """len() is n (it does not change the number of samples in an epoch)."""
        if not silent:
            warnings.warn(".with_length() only sets the value of __len__ for compatibility "
                          "with some training environments. It does not change the number of "
                          "samples in an epoch.")
        new = copy.copy(self)
        new.size = int(n)
        return new

    def __len__(self):
        if self.size is None:
            raise TypeError(f"this {type(self).__name__} has no length: give one with "
                            f".with_length(n)")
        return self.size

    def _unsupported_stage(name):
        def stage(self, *a, **k):
            self._unsupported(f"run .{name}()", "it has no counterpart here yet; write the "
                              "step as a .map()")
        stage.__name__ = name
        stage.__doc__ = f"Not supported: raises NotImplementedError naming .{name}()."
        return stage

    listed = _unsupported_stage("listed")
    unlisted = _unsupported_stage("unlisted")
    log_keys = _unsupported_stage("log_keys")
    rsample = _unsupported_stage("rsample")
    rename_keys = _unsupported_stage("rename_keys")
    extract_keys = _unsupported_stage("extract_keys")
    xdecode = _unsupported_stage("xdecode")
    mcached = _unsupported_stage("mcached")
    lmdb_cached = _unsupported_stage("lmdb_cached")
    del _unsupported_stage

    def _run(self, data, stages, epoch):
        """data through stages, in Python."""
        w = worker()[0]
        for name, args, kw in stages:
            if name == "decode":
                handlers = [imagehandler(a) if isinstance(a, str) else a for a in args]
                dec = Decoder(handlers, pre=kw["pre"], post=kw["post"], only=kw["only"],
                              partial=kw["partial"])
                data = STAGES["map"](data, dec, handler=kw["handler"])
            elif name == "shuffle":
                kw = dict(kw)
                if "seed" not in kw and "rng" not in kw:  # from the pipeline's seed
                    kw["seed"] = hash((self._seed(), epoch, rank_world(None, None)[0], w))
                data = STAGES["shuffle"](data, *args, **kw)
            else:
                data = STAGES[name](data, *args, **kw)
        return data

    def _epoch(self, k):
        raise NotImplementedError

    def _next_pass(self):
        """The number of the pass that begins now, counted in this process."""
        self._passes_here = getattr(self, "_passes_here", -1) + 1
        return self._passes_here

    def _iterator(self):
        for _ in range(self.repetitions):
            # each pass (an iteration, or a repetition within one) is the next epoch, as
            # WebDataset reshuffles on every pass
            count = 0
            for item in self._epoch(self._next_pass()):
                yield item
                count += 1
            if count == 0:  # an empty pass: do not go round forever
                break

    def __iter__(self):
        if self.repetitions != 1 and self.nsamples > 0:
            return itertools.islice(self._iterator(), self.nsamples)
        return self._iterator()
