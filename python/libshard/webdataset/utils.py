"""webdataset.utils as libshard writes it: where a process is in a job (rank, world size,
DataLoader worker) and the seed that follows from it, brace expansion, repeating a source,
the PipelineStage base class, the switch that refuses unsafe reads (enforce_security), and
the decorators WebDataset marks old functions with."""
import fnmatch
import functools
import glob
import importlib
import itertools
import os
import re
import sys
import warnings
from collections.abc import Iterable, Iterator

import numpy as np

#: refuse what could run code or read local files from a dataset's say-so: pickle and
#: torch loads, pipe: URLs, local files and URL rewriting (WebDataset's WDS_SECURE)
enforce_security = bool(int(os.environ.get("WDS_SECURE", "0")))


class UnbalancedBracesError(ValueError):
    """A brace pattern whose braces do not pair."""


def _closing(pattern, start):
    """The index of the '}' closing the '{' at start, or -1."""
    depth, i = 0, start
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            i += 2
            continue
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return -1


def _alternatives(body):
    """A brace group's body split on its top-level commas."""
    parts, depth, start, i = [], 0, 0, 0
    while i < len(body):
        c = body[i]
        if c == "\\":
            i += 2
            continue
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(body[start:i])
            start = i + 1
        i += 1
    parts.append(body[start:])
    return parts


_RANGE = re.compile(r"^(-?\d+)\.\.(-?\d+)(?:\.\.(-?\d+))?$|^([A-Za-z])\.\.([A-Za-z])(?:\.\.(-?\d+))?$")


def _range(body):
    """The items of a {A..B[..STEP]} group (numbers zero-padded to the wider bound, or
    letters), or None when the body is no range."""
    m = _RANGE.match(body)
    if not m:
        return None
    if m.group(1) is not None:
        a, b = m.group(1), m.group(2)
        step = abs(int(m.group(3))) if m.group(3) else 1
        lo, hi = int(a), int(b)
        width = max(len(a), len(b)) if (a.lstrip("-").startswith("0") and len(a.lstrip("-")) > 1
                                       or b.lstrip("-").startswith("0") and len(b.lstrip("-")) > 1) else 0
        seq = range(lo, hi + 1, step or 1) if lo <= hi else range(lo, hi - 1, -(step or 1))
        return [f"{v:0{width}d}" if width else str(v) for v in seq]
    a, b = ord(m.group(4)), ord(m.group(5))
    step = abs(int(m.group(6))) if m.group(6) else 1
    seq = range(a, b + 1, step or 1) if a <= b else range(a, b - 1, -(step or 1))
    return [chr(v) for v in seq if chr(v).isalpha()]


def _expand(pattern, escape):
    """The expansions of pattern, left to right, brace groups nested."""
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and escape:
            i += 2
            continue
        if c == "}":
            raise UnbalancedBracesError(f"{pattern!r}: a '}}' with no '{{' before it")
        if c == "{":
            end = _closing(pattern, i)
            if end < 0:
                raise UnbalancedBracesError(f"{pattern!r}: a '{{' with no '}}' after it")
            head, body, tail = pattern[:i], pattern[i + 1:end], pattern[end + 1:]
            items = _range(body)
            if items is None:
                parts = _alternatives(body)
                if len(parts) == 1:  # "{x}" is the text itself
                    items = ["{" + p + "}" for p in _expand(body, escape)]
                else:
                    items = [p for part in parts for p in _expand(part, escape)]
            for item in items:
                for rest in _expand(tail, escape):
                    yield head + item + rest
            return
        i += 1
    yield pattern


def braceexpand(pattern, escape=True):
    """The names a brace pattern stands for, as the braceexpand package gives them:
    {a,b,c} alternatives, {000..123} numeric ranges (zero-padded from the wider bound),
    {a..e} letter ranges, a step as a third part ({0..10..2}), nested groups; with escape a
    backslash makes the next character literal."""
    for item in _expand(pattern, escape):
        yield re.sub(r"\\(.)", r"\1", item) if escape else item


def glob_with_braces(pattern):
    """The paths glob finds for each name the brace pattern expands to."""
    return [f for pat in braceexpand(pattern) for f in glob.glob(pat)]


def fnmatch_with_braces(filename, pattern):
    """Whether filename matches any name the brace pattern expands to."""
    return any(fnmatch.fnmatch(filename, pat) for pat in braceexpand(pattern))


def make_seed(*args):
    """A 31-bit seed from the arguments' hashes (a str's varies with PYTHONHASHSEED, as in
    WebDataset)."""
    seed = 0
    for arg in args:
        seed = (seed * 31 + hash(arg)) & 0x7FFFFFFF
    return seed


def is_iterable(obj):
    """Whether obj is iterable and not a str or bytes."""
    return not isinstance(obj, (str, bytes)) and isinstance(obj, (list, Iterable, Iterator))


class PipelineStage:
    """A stage of a DataPipeline that is an object: the pipeline calls run(source) (or
    run() for the first stage). A subclass defines run, or invoke (run calls it)."""

    def invoke(self, *args, **kw):
        """The stage's work on its source; a subclass defines it (or run)."""
        raise NotImplementedError(f"{type(self).__name__}: define run() or invoke()")

    def run(self, *args, **kw):
        """The stage's output over its source (invoke's, unless a subclass defines run)."""
        return self.invoke(*args, **kw)


def identity(x):
    """x itself."""
    return x


def safe_eval(s, expr="{}"):
    """expr with s in it, evaluated, s holding only letters, digits and underscores."""
    if re.sub("[^A-Za-z0-9_]", "", s) != s:
        raise ValueError(f"safe_eval: illegal characters in: '{s}'")
    return eval(expr.format(s))


def lookup_sym(sym, modules):
    """The first attribute sym of the modules named (relative ones to libshard.webdataset),
    or None."""
    for name in modules:
        found = getattr(importlib.import_module(name, package=__package__), sym, None)
        if found is not None:
            return found
    return None


def repeatedly0(loader, nepochs=sys.maxsize, nbatches=sys.maxsize):
    """nepochs passes over loader, each of at most nbatches items."""
    for _ in range(nepochs):
        yield from itertools.islice(loader, nbatches)


def guess_batchsize(batch):
    """The size of a batch: the length of its first column."""
    return len(batch[0])


def repeatedly(source, nepochs=None, nbatches=None, nsamples=None, batchsize=guess_batchsize):
    """source again and again, until nepochs passes, nbatches items or nsamples samples
    (counting each item's batchsize); endless when none is given."""
    epoch = batches = total = 0
    while True:
        for item in source:
            yield item
            batches += 1
            if nbatches is not None and batches >= nbatches:
                return
            if nsamples is not None:
                total += batchsize(item)
                if total >= nsamples:
                    return
        epoch += 1
        if nepochs is not None and epoch >= nepochs:
            return


def pytorch_worker_info(group=None):
    """(rank, world_size, worker, num_workers) of this process: $RANK and $WORLD_SIZE, else
    torch.distributed's when initialized; $WORKER and $NUM_WORKERS, else the DataLoader
    worker's (0, 1 outside one)."""
    rank, world_size, worker, num_workers = 0, 1, 0, 1
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        rank, world_size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    else:
        try:
            import torch.distributed
            if torch.distributed.is_available() and torch.distributed.is_initialized():
                group = group or torch.distributed.group.WORLD
                rank = torch.distributed.get_rank(group=group)
                world_size = torch.distributed.get_world_size(group=group)
        except ModuleNotFoundError:
            pass
    if "WORKER" in os.environ and "NUM_WORKERS" in os.environ:
        worker, num_workers = int(os.environ["WORKER"]), int(os.environ["NUM_WORKERS"])
    else:
        try:
            import torch.utils.data
            info = torch.utils.data.get_worker_info()
            if info is not None:
                worker, num_workers = info.id, info.num_workers
        except ModuleNotFoundError:
            pass
    return rank, world_size, worker, num_workers


def pytorch_worker_seed(group=None):
    """A seed distinct for each rank and worker, the same on every run: rank * 1000 +
    worker."""
    rank, _, worker, _ = pytorch_worker_info(group=group)
    return rank * 1000 + worker


def deprecated(arg=None):
    """Marks a function deprecated (a DeprecationWarning when called), with or without a
    reason: @deprecated or @deprecated("why")."""
    reason = None if callable(arg) else arg

    def decorate(func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            msg = f"Call to deprecated function {func.__name__}."
            if reason is not None:
                msg += " Reason: " + reason
            warnings.warn(msg, category=DeprecationWarning, stacklevel=2)
            return func(*args, **kwargs)
        return wrapper

    return decorate(arg) if callable(arg) else decorate


class ObsoleteException(Exception):
    """A call to a function WebDataset marks obsolete, without ALLOW_OBSOLETE=1."""


def obsolete(func=None, *, reason=None):
    """Marks a function obsolete: calling it raises ObsoleteException unless
    $ALLOW_OBSOLETE is 1."""
    if func is None:
        return functools.partial(obsolete, reason=reason)

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        if not int(os.environ.get("ALLOW_OBSOLETE", "0")):
            msg = f"Call to obsolete function {func.__name__}. Set env ALLOW_OBSOLETE=1 to permit."
            if reason is not None:
                msg += " Reason: " + reason
            raise ObsoleteException(msg)
        return func(*args, **kwargs)
    return wrapper


def compute_sample_weights(n_w_pairs):
    """For (samples, weight) pairs: each source's sampling probability, samples x weight
    over the largest."""
    ns = np.array([p[0] for p in n_w_pairs])
    ws = np.array([p[1] for p in n_w_pairs])
    weighted = ns * ws
    return weighted / np.amax(weighted)
