"""Helpers shared by the pytest suites (cli, stream, python)."""
import atexit
import os
import shutil
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# The indexes libshard makes for plain tars go to $XDG_CACHE_HOME/libshard/index: a run's
# own folder, not the user's cache (subprocesses, workers and ranks inherit it).
_CACHE = tempfile.mkdtemp(prefix="libshard-test-cache-")
os.environ["XDG_CACHE_HOME"] = _CACHE
atexit.register(shutil.rmtree, _CACHE, True)


def tool_path(var, name):
    """The tool `name`: $var when set (meson test sets it), else the build folder's."""
    p = os.environ.get(var)
    path = Path(p).resolve() if p else REPO / "build" / "tools" / name
    if not (path.is_file() and os.access(path, os.X_OK)):
        pytest.fail(f"{name} not found at {path} (set {var} or build the project)")
    return path


@pytest.fixture(scope="session")
def shardcat():
    """The shardcat under test (a fixture a conftest imports)."""
    return tool_path("SHARDCAT", "shardcat")


@pytest.fixture(scope="session")
def shardpack():
    """The shardpack under test (a fixture a conftest imports)."""
    return tool_path("SHARDPACK", "shardpack")
