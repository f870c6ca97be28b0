"""Every public class, function and method of the Python package has a docstring (the
extension's types and functions included), so help() answers for each."""
import inspect

import pytest

import libshard
import libshard.distributed
import libshard.indexed
import libshard.webdataset
import libshard.wids

pytest.importorskip("torch")
import libshard.torch  # noqa: E402

MODULES = [libshard, libshard.torch, libshard.webdataset, libshard.wids, libshard.indexed,
           libshard.distributed]


def public(module):
    names = getattr(module, "__all__", None) or [n for n in vars(module) if not n.startswith("_")]
    for name in names:
        obj = getattr(module, name)
        if getattr(obj, "__module__", module.__name__).split(".")[0] != "libshard":
            continue  # imported from elsewhere (torch, numpy, ...)
        if inspect.isclass(obj) or callable(obj):
            yield f"{module.__name__}.{name}", obj
            if inspect.isclass(obj):
                for m, member in vars(obj).items():
                    if not m.startswith("_") and (callable(member) or isinstance(member, property)):
                        yield f"{module.__name__}.{name}.{m}", member


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.__name__)
def test_every_public_name_has_a_docstring(module):
    missing = [name for name, obj in public(module) if not (inspect.getdoc(obj) or "").strip()]
    assert not missing, f"no docstring: {missing}"
