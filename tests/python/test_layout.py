"""The extension's source stays in files of one concern each: none over 600 lines, no
function over 150, and no two files calling each other (a file uses another through its
header; those uses form no circle). The package's Python modules keep the same bounds, and
none imports another's private names. Only the sinks make files and objects."""
import re

import pytest

from .conftest import REPO

SOURCE = REPO / "python" / "libshard"
C_FILES = sorted(SOURCE.glob("*.c"))


def functions(text):
    """(name, lines) of each function defined at the top level of a C file (its body opens
    with a "{" in the first column)."""
    lines = text.splitlines()
    out, depth, start = [], 0, None
    for i, line in enumerate(lines):
        if depth == 0 and line.startswith("{"):
            first = i
            while first > 0 and lines[first - 1].strip() and not lines[first - 1].rstrip(
                    ).endswith((";", "}", "*/")):
                first -= 1
            head = " ".join(lines[first:i])
            start, name = i, (re.findall(r"(\w+)\s*\(", head) or ["?"])[0]
        depth += line.count("{") - line.count("}")
        if start is not None and depth == 0:
            out.append((name, i - start + 1))
            start = None
    return out


@pytest.mark.parametrize("path", C_FILES, ids=lambda p: p.name)
def test_files_and_functions_are_short(path):
    text = path.read_text()
    assert len(text.splitlines()) <= 600, f"{path.name}: {len(text.splitlines())} lines"
    long = [(n, k) for n, k in functions(text) if k > 150]
    assert not long, f"{path.name}: functions over 150 lines: {long}"


def test_no_two_files_call_each_other():
    uses = {}
    for path in C_FILES:
        mine = path.stem
        included = re.findall(r'#include "(_\w+)\.h"', path.read_text())
        uses[mine] = {h for h in included if h != mine and (SOURCE / f"{h}.c").exists()}
    for path in SOURCE.glob("*.h"):  # a header that includes another uses it too
        included = re.findall(r'#include "(_\w+)\.h"', path.read_text())
        uses.setdefault(path.stem, set()).update(h for h in included if h != path.stem)

    def reach(start, seen):
        for other in uses.get(start, ()):
            if other not in seen:
                seen.add(other)
                reach(other, seen)
        return seen

    circles = sorted(f for f in uses if f in reach(f, set()))
    assert not circles, f"files that call themselves through others: {circles} ({uses})"
    assert uses["_common"] == set(), "_common is the lowest layer: it uses no other file"


PY_FILES = sorted(p for p in SOURCE.rglob("*.py"))


def py_functions(tree):
    """(name, lines) of every function and method."""
    import ast
    return [(n.name, n.end_lineno - n.lineno + 1) for n in ast.walk(tree)
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


@pytest.mark.parametrize("path", PY_FILES, ids=lambda p: str(p.relative_to(SOURCE)))
def test_python_modules_are_short_and_use_no_private_name_of_another(path):
    import ast
    text = path.read_text()
    assert len(text.splitlines()) <= 600, f"{path.name}: {len(text.splitlines())} lines"
    tree = ast.parse(text)
    long = [(n, k) for n, k in py_functions(tree) if k > 150]
    assert not long, f"{path.name}: functions over 150 lines: {long}"
    # the extension (_libshard) is the package's own; any other _name stays in its module
    private = [f"{node.module}.{a.name}" for node in ast.walk(tree)
               if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "")
                                                        .startswith("libshard"))
               for a in node.names
               if a.name.startswith("_") and not a.name.startswith("__") and a.name != "_libshard"]
    assert not private, f"{path.name} imports private names: {private}"


# Writes go through the sinks (libshard/src/sink): nothing else makes a file or an object.
UPLOADS = re.compile(r"\b(shard_object_(put|upload|delete)|shard_upload_(begin|part|finish|abort))\s*\(")
FILE_WRITES = re.compile(r"O_CREAT|\brename(at)?\s*\(|\bfopen\s*\([^;]*\"[wa]")
WRITERS_ALLOWED = {
    "libshard/src/source/cache.c": "the cache's lock file (opened, never written)",
    "libshard/src/catalog/indexcache.c": "a shard's lock file while its index is made (opened, "
                                         "never written)",
    "tools/shardcat_extract.c": "shardcat extract: members made with openat relative to the target "
                                "folder, O_NOFOLLOW, which a sink opened by URL cannot express",
}


# A store removes what it holds (remote/store.h's shard_store_remove); it makes nothing.
REMOVERS = {"libshard/src/remote/bucketstore.c": "a bucket's object removed, none made"}


def test_only_the_sinks_upload_or_make_files():
    found = []
    for path in sorted((REPO / "libshard").rglob("*.[ch]")) + sorted((REPO / "tools").glob("*.[ch]")) + C_FILES:
        rel = str(path.relative_to(REPO))
        if rel.startswith("libshard/src/sink/") or rel.startswith("libshard/src/remote/upload."):
            continue
        text = path.read_text()
        if rel in REMOVERS:
            text = re.sub(r"\bshard_object_delete\s*\(", "", text)
        if UPLOADS.search(text) or (FILE_WRITES.search(text) and rel not in WRITERS_ALLOWED):
            found.append(rel)
    assert not found, f"files that write around the sinks: {found}"
