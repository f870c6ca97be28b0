"""The library's house rules, read from the sources (no build needed):

- every file name under libshard/src is unique, and none is a public header's name;
- no circle among the files of libshard/src, tools/ or python/libshard: a file uses another
  by including its header or calling a function it defines, and those uses form no loop
  (a file and its header are one; a "def" header holding a file's insides is its own);
- the network stays in remote/: only its files include <curl/curl.h> or remotedef.h (so
  ShardRemote is an incomplete type everywhere else);
- only the URL switches of sources and sinks (and the URL grammar itself, and the network)
  test a URL's scheme: every other file asks them;
- a URL's store is decided once, in remote/store.c's switch: no file outside the store and
  the source and sink switches asks where the bytes live (a local path, a file's or a
  command's transport); every other caller calls the store's operations;
- the stable public headers reach none of the advanced ones;
- docs/layout.md names every source file and no other, its limits are the ones held here,
  and the files it and formats/ name exist;
- in the Python package, a class's attributes are assigned by its own module alone;
- resume/ is one room: the rest of the library reaches it through resume/resume.h alone.
Each rule has a negative control: a planted violation it must see."""
import ast
import re

import pytest

from .conftest import REPO

SRC = REPO / "libshard" / "src"
PUBLIC = REPO / "libshard" / "include" / "shard"
C_SUFFIXES = (".c", ".h", ".cu")


def c_files(root):
    return sorted(p for p in root.rglob("*") if p.suffix in C_SUFFIXES and p.is_file())


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def strip_strings(text):
    return re.sub(r'"(\\.|[^"\\\n])*"', '""', text)


# ---- names ----------------------------------------------------------------------------

def repeated_names(files, public):
    seen, repeats = {}, []
    for p in files:
        seen.setdefault(p.name, []).append(p)
    repeats = sorted((n, [str(p.relative_to(REPO)) for p in ps])
                     for n, ps in seen.items() if len(ps) > 1)
    clashes = sorted(str(p.relative_to(REPO)) for p in files if p.name in public)
    return repeats, clashes


def public_names():
    return {p.name.removesuffix(".in") for p in PUBLIC.iterdir()}


def test_every_file_name_is_unique_and_none_is_a_public_headers():
    repeats, clashes = repeated_names(c_files(SRC), public_names())
    assert not repeats, f"file names used twice under libshard/src: {repeats}"
    assert not clashes, f"private files named as public headers: {clashes}"


def test_names_negative_control():
    files = c_files(SRC) + [SRC / "pack" / "transform.c", SRC / "read" / "reader.h"]
    repeats, clashes = repeated_names(files, public_names())
    assert repeats and "transform.c" in dict(repeats)
    assert clashes == ["libshard/src/read/reader.h"]


# ---- circles --------------------------------------------------------------------------

def module_of(path, root):
    """A file and its header are one module: folder/stem."""
    return str(path.relative_to(root).with_suffix(""))


def uses(root, include_dirs):
    """{module: modules it uses}: its includes resolved to files under root, and the
    functions it calls that another module of root defines (not static)."""
    files = c_files(root)
    defined = {}
    for p in files:
        if p.suffix == ".h":
            continue
        lines = strip_strings(strip_comments(p.read_text(errors="replace"))).splitlines()
        for i, line in enumerate(lines):
            if not line.startswith("{"):
                continue
            j = i
            while j > 0 and lines[j - 1].strip() and not lines[j - 1].rstrip().endswith((";", "}")):
                j -= 1
            head = " ".join(lines[j:i])
            names = re.findall(r"(\w+)\s*\(", head)
            if names and not head.lstrip().startswith("static"):
                defined[names[0]] = module_of(p, root)
    graph = {}
    for p in files:
        m = module_of(p, root)
        out = graph.setdefault(m, set())
        text = p.read_text(errors="replace")
        for inc in re.findall(r'^\s*#\s*include\s+"([^"]+)"', text, re.M):
            for d in [p.parent] + include_dirs:
                q = d / inc
                if q.exists():
                    q = q.resolve()
                    if root in q.parents:
                        out.add(module_of(q, root))
                    break
        if p.suffix != ".h":
            body = strip_strings(strip_comments(text))
            out.update(defined[f] for f in re.findall(r"\b(\w+)\s*\(", body) if f in defined)
        out.discard(m)
    return graph


def circles(graph):
    """The strongly connected groups of more than one module (Tarjan)."""
    index, low, stack, on, found, counter = {}, {}, [], set(), [], [0]

    def visit(n):
        index[n] = low[n] = counter[0]
        counter[0] += 1
        stack.append(n)
        on.add(n)
        for w in graph.get(n, ()):
            if w not in index:
                visit(w)
                low[n] = min(low[n], low[w])
            elif w in on:
                low[n] = min(low[n], index[w])
        if low[n] == index[n]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == n:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for n in list(graph):
        if n not in index:
            visit(n)
    return found


INCLUDES = [SRC, REPO / "libshard" / "include", REPO / "python" / "libshard"]


@pytest.mark.parametrize("root", ["libshard/src", "tools", "python/libshard"])
def test_no_circles(root):
    found = circles(uses(REPO / root, INCLUDES))
    assert not found, f"files that use themselves through others in {root}: {found}"


def test_circles_negative_control():
    graph = uses(SRC, INCLUDES)
    assert "read/epoch" in graph["read/streamreader"] or "read/epoch" in graph["read/steps"]
    graph["tar/tar"].add("read/streamreader")  # plant a use running back up
    assert any("tar/tar" in g for g in circles(graph))


# ---- the network sealed ---------------------------------------------------------------

NETWORK_ONLY = re.compile(r'#\s*include\s+(<curl/curl\.h>|"remote/remotedef\.h")')


def network_leaks(files):
    return sorted(str(p) for p in files
                  if NETWORK_ONLY.search(p.read_text(errors="replace"))
                  and not p.is_relative_to(SRC / "remote"))


def all_c_files():
    return (c_files(SRC) + c_files(REPO / "tools") + c_files(REPO / "python" / "libshard")
            + c_files(PUBLIC))


def test_curl_and_the_remote_handles_insides_stay_in_remote():
    leaks = network_leaks(all_c_files())
    assert not leaks, f"files outside remote/ that include libcurl or ShardRemote's insides: {leaks}"


def test_network_negative_control(tmp_path):
    planted = tmp_path / "planted.c"
    planted.write_text('#include <curl/curl.h>\n')
    assert network_leaks(all_c_files() + [planted]) == [str(planted)]


# ---- who tests a scheme ---------------------------------------------------------------

# The files allowed to tell a URL's kind by its scheme, and why.
SCHEME_TESTS_ALLOWED = {
    "libshard/src/base/url.c": "the URL grammar itself (the predicates)",
    "libshard/src/source/open.c": "the reading side's switch: opens, places, listings",
    "libshard/src/sink/sink.c": "the writing side's switch",
}
SCHEME_TEST = re.compile(
    r"\bshard_url_(is_remote|is_command|file_path|has_scheme|has_siblings|costly|is_prefix)\s*\("
    r'|\b(strn?cmp|strstr|memcmp|strncasecmp|strcasecmp)\s*\([^;]*"[^"]*(://|pipe:)')


def scheme_testers(files):
    out = []
    for p in files:
        rel = str(p.relative_to(REPO))
        if rel in SCHEME_TESTS_ALLOWED or p.is_relative_to(SRC / "remote") or p.suffix == ".h":
            continue
        if SCHEME_TEST.search(strip_comments(p.read_text(errors="replace"))):
            out.append(rel)
    return out


def test_only_the_url_switches_test_a_scheme():
    found = scheme_testers(c_files(SRC) + c_files(REPO / "tools") + c_files(REPO / "python" / "libshard"))
    assert not found, (f"files that decide local-or-remote themselves (ask "
                       f"shard_source_place or shard_sink_in_bucket): {found}")


def test_scheme_negative_control():
    assert SCHEME_TEST.search('if (shard_url_is_remote(path))')
    assert SCHEME_TEST.search('b->s3 = !strncmp(url, "s3://", 5);')
    assert not SCHEME_TEST.search('snprintf(msg, n, "%s: not gs:// or s3://", url);')


# ---- where the bytes live: asked of the store alone ----------------------------------------

# The files that may ask how a store's bytes travel (a kernel path, a command's pipe): the
# stores themselves (remote/), and the switches that open a source or a sink on them.
PLACE_ASKERS = {
    "libshard/src/source/open.c": "opens a source by how its store's bytes travel",
    "libshard/src/sink/sink.c": "opens a sink by how its store's bytes travel",
}
PLACE_ASK = re.compile(
    r"\b(shard_source_place|shard_sink_in_bucket|shard_source_local_path|shard_store_bytes"
    r"|shard_url_file_path)\s*\(|\bSHARD_(PLACE_\w+|STORE_FILES|STORE_COMMAND)\b"
    r"|\(\s*ShardPackPlan\s*\*\s*\)")


def place_askers(files):
    out = []
    for p in files:
        rel = str(p.relative_to(REPO)) if p.is_relative_to(REPO) else str(p)
        if rel in PLACE_ASKERS or p.is_relative_to(SRC / "remote") or p.is_relative_to(SRC / "base"):
            continue
        if PLACE_ASK.search(strip_comments(p.read_text(errors="replace"))):
            out.append(rel)
    return out


def test_only_the_store_asks_where_the_bytes_live():
    found = place_askers(all_c_files())
    assert not found, (f"files that ask where a URL's bytes live (or cast a plan's const away "
                       f"to fetch a handle) instead of calling its store's operations "
                       f"(remote/store.h): {found}")


def test_place_negative_control(tmp_path):
    planted = tmp_path / "planted.c"
    planted.write_text("int f(const char *u) { const char *p; return shard_store_bytes(u, &p) != 0; }\n")
    other = tmp_path / "other.c"
    other.write_text("int g(const char *u) { return shard_store_can(u) & SHARD_STORE_FILES; }\n")
    cast = tmp_path / "cast.c"
    cast.write_text("void h(const ShardPackPlan *p) { k((ShardPackPlan *)p); }\n")
    fine = tmp_path / "fine.c"
    fine.write_text("int k(const char *u) { return shard_store_can(u) & SHARD_STORE_COSTLY; }\n")
    found = place_askers(all_c_files() + [planted, other, cast, fine])
    assert found == [str(planted), str(other), str(cast)]
    # and the switch itself, were it not allowed, is seen
    opener = SRC / "source" / "open.c"
    assert PLACE_ASK.search(strip_comments(opener.read_text()))


# ---- public headers -------------------------------------------------------------------

def test_every_public_header_is_compiled_alone():
    text = (REPO / "tests" / "meson.build").read_text()
    listed = re.search(r"foreach h : \[([^\]]*)\]\s*\n\s*header_sources", text)
    assert listed, "tests/meson.build: the header-alone list not found"
    alone = set(re.findall(r"'([\w.]+\.h)'", listed.group(1)))
    public = {p.name for p in PUBLIC.glob("*.h")}
    assert public - alone == set(), f"public headers not compiled alone: {public - alone}"


# ---- stages built one way -------------------------------------------------------------

def test_every_library_thread_starts_through_shard_thread_start():
    """shard_thread_start blocks every signal in the thread (signals are the application's);
    a bare pthread_create would let one land on a library thread."""
    bare = [str(p.relative_to(REPO)) for p in c_files(SRC)
            if p != SRC / "base" / "thread.c"
            and re.search(r"\bpthread_create\s*\(", strip_comments(p.read_text()))]
    assert not bare, f"library threads started without shard_thread_start: {bare}"


# ---- rooms of one concern -------------------------------------------------------------

def long_functions(path, most):
    """(name, lines) of the functions of a C file longer than most lines (a body opens
    with a "{" in the first column)."""
    lines = path.read_text().splitlines()
    out, depth, start, name = [], 0, None, "?"
    for i, line in enumerate(lines):
        if depth == 0 and line.startswith("{"):
            j = i
            while j > 0 and lines[j - 1].strip() and not lines[j - 1].rstrip().endswith((";", "}", "*/")):
                j -= 1
            start, name = i, (re.findall(r"(\w+)\s*\(", " ".join(lines[j:i])) or ["?"])[0]
        depth += line.count("{") - line.count("}")
        if start is not None and depth == 0:
            if i - start + 1 > most:
                out.append((name, i - start + 1))
            start = None
    return out


FILE_LINES, FUNCTION_LINES = 600, 100


def test_library_and_tools_files_and_functions_are_short():
    files = [p for p in c_files(SRC) + c_files(REPO / "tools") if p.suffix != ".cu"]
    big = [(str(p.relative_to(REPO)), n) for p in files
           if (n := len(p.read_text().splitlines())) > FILE_LINES]
    assert not big, f"files over {FILE_LINES} lines: {big}"
    long = [(str(p.relative_to(REPO)), f) for p in files
            for f in long_functions(p, FUNCTION_LINES)]
    assert not long, f"functions over {FUNCTION_LINES} lines: {long}"


def test_long_function_negative_control(tmp_path):
    planted = tmp_path / "long.c"
    planted.write_text("int f(void)\n{\n" + "    x++;\n" * 120 + "}\n")
    assert long_functions(planted, 100) == [("f", 122)]


# ---- the tiers of the public headers --------------------------------------------------

STABLE = {"common.h", "remote.h", "sample.h", "file.h", "stream.h", "list.h", "reader.h",
          "decode.h", "loader.h"}
ADVANCED = {"names.h", "image.h", "writer.h", "manifest.h", "pack.h", "verify.h", "plan.h",
            "gpu.h"}


def public_headers():
    return {p.name: p.read_text() for p in PUBLIC.glob("*.h")}


def reached(name, headers):
    """The public headers name includes, directly or through others."""
    seen, todo = set(), [name]
    while todo:
        for inc in re.findall(r'^\s*#\s*include\s+"(?:shard/)?([\w.]+)"', headers[todo.pop()], re.M):
            if inc in headers and inc not in seen:
                seen.add(inc)
                todo.append(inc)
    return seen


def tier_leaks(headers):
    return {h: sorted(reached(h, headers) & ADVANCED) for h in sorted(STABLE)
            if reached(h, headers) & ADVANCED}


def test_every_public_header_has_a_tier_and_layout_md_says_which():
    assert set(public_headers()) == STABLE | ADVANCED | {"shard.h"}
    text = " ".join(LAYOUT.read_text().split())
    stable = re.search(r"\*\*Stable\*\*(.*?)- \*\*Advanced\*\*", text).group(1)
    advanced = re.search(r"\*\*Advanced\*\*(.*?)## ", text).group(1)
    assert set(re.findall(r"`(\w+\.h)`", stable)) == STABLE
    assert set(re.findall(r"`(\w+\.h)`", advanced)) == ADVANCED


def test_no_stable_header_reaches_an_advanced_one():
    leaks = tier_leaks(public_headers())
    assert not leaks, f"stable headers that bring in advanced ones: {leaks}"


def test_tiers_negative_control():
    headers = public_headers()
    headers["list.h"] += '\n#include "manifest.h"\n'
    leaks = tier_leaks(headers)
    assert leaks["list.h"] == ["manifest.h", "writer.h"]
    assert "manifest.h" in leaks["reader.h"]  # reader.h includes list.h


# ---- the map and the tree -------------------------------------------------------------

LAYOUT = REPO / "docs" / "layout.md"


def source_files():
    """What layout.md must name: the library's C and CUDA files and its headers that stand
    alone (no .c of their stem), the tools' C files and their doc generator, the binding's
    C and Python files."""
    out = set()
    for p in SRC.rglob("*"):
        alone = p.suffix == ".h" and not any(p.with_suffix(x).exists() for x in (".c", ".cu"))
        if p.suffix in (".c", ".cu") or alone:
            out.add(p)
    out |= set((REPO / "tools").glob("*.c")) | set((REPO / "tools" / "doc").glob("*.py"))
    out |= set((REPO / "python").glob("*.py"))
    out |= {p for p in (REPO / "python" / "libshard").rglob("*") if p.suffix in (".c", ".py")}
    return {str(p.relative_to(REPO)) for p in out}


def layout_files(text):
    """The files of layout.md's "Every file" section, as paths."""
    out, folder = set(), None
    for line in text.split("\n## Every file\n", 1)[1].splitlines():
        if line.startswith("## "):
            break
        if m := re.match(r"### (\S+)/$", line):
            folder = m.group(1)
        elif m := re.match(r"- `([^`]+)`:", line):
            out.add(f"{folder}/{m.group(1)}")
    return out


def test_layout_md_names_every_source_file_and_no_other():
    listed, tree = layout_files(LAYOUT.read_text()), source_files()
    assert not tree - listed, f"files docs/layout.md does not name: {sorted(tree - listed)}"
    assert not listed - tree, f"files docs/layout.md names that are not there: {sorted(listed - tree)}"


def test_layout_md_every_file_negative_control():
    text = LAYOUT.read_text().replace("- `cut.c`:", "- `cutting.c`:")
    listed = layout_files(text)
    assert "libshard/src/resume/cutting.c" in listed - source_files()
    assert len(layout_files(LAYOUT.read_text())) > 200


def test_layout_md_states_the_limits_held_here():
    text = " ".join(LAYOUT.read_text().split())
    assert (f"no library or tools file over {FILE_LINES} lines, no function over "
            f"{FUNCTION_LINES}") in text


# Files of other projects the format pages cite, and headers of the system.
ELSEWHERE = {"wds2idx.py", "wids_specs.py", "wids_index.py", "wids_mmtar.py", "zstd_seekable.h",
             "zstdseek_compress.c", "zstdseek_decompress.c", "archive_write_set_format_ustar.c",
             "archive_write_set_format_pax.c", "archive_read_support_format_tar.c",
             "curl/curl.h", "tools/wds2idx.py", "webdataset/wids/wids_specs.py",
             "libarchive/archive_write_set_format_ustar.c",
             "libarchive/archive_read_support_format_tar.c"}
NAMED = re.compile(r"(?<![\w./*-])((?:[\w-]+/)*[\w-]+\.(?:c|h|cu|py))\b")


def repo_names():
    names = set()
    for top in ("libshard", "tools", "python", "tests", "scripts", "bench", "examples", "formats"):
        for p in (REPO / top).rglob("*"):
            if "node_modules" not in p.parts and p.is_file():
                names.add(p.name)
    return names


def missing_names(text, names):
    """Names of files in text that are not there: a path must resolve from the repository,
    libshard/src, libshard/include or the package; a bare name must be some file's."""
    out = []
    for n in NAMED.findall(text):
        if n in ELSEWHERE:
            continue
        if "/" in n:
            roots = (REPO, SRC, PUBLIC.parent, REPO / "python" / "libshard")
            if not any((d / n).exists() for d in roots):
                out.append(n)
        elif n not in names:
            out.append(n)
    return sorted(set(out))


def test_layout_md_and_formats_name_only_files_that_exist():
    names = repo_names()
    pages = [LAYOUT] + sorted((REPO / "formats").glob("*.md"))
    found = {str(p.relative_to(REPO)): m for p in pages
             if (m := missing_names(p.read_text(), names))}
    assert not found, f"files named that are not there: {found}"


def test_named_files_negative_control():
    names = repo_names()
    assert missing_names("`resume/cut.c`, `tar/seek.c`, `reader.h`", names) == []
    assert missing_names("the cut (`read/cutting.c`), `zstdseek.c`", names) == [
        "read/cutting.c", "zstdseek.c"]


# ---- Python objects own their fields --------------------------------------------------

PACKAGE = REPO / "python" / "libshard"


def assigned(tree):
    """(line, target) of every attribute assigned in a module (a subscript's too: d.x[k] = v
    changes d.x)."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        else:
            continue
        for t in targets:
            for e in (t.elts if isinstance(t, (ast.Tuple, ast.List)) else [t]):
                while isinstance(e, ast.Subscript):
                    e = e.value
                if isinstance(e, ast.Attribute):
                    out.append((e.lineno, e))
    return out


def own(e, classes):
    """Whether an assignment to e stays inside its module's objects: self.x, cls.x, or an
    attribute of a class the module defines (C.__init__.__signature__)."""
    if isinstance(e.value, ast.Name):
        return e.value.id in ("self", "cls") or e.value.id in classes
    root = e.value
    while isinstance(root, ast.Attribute):
        root = root.value
    return isinstance(root, ast.Name) and root.id in classes


def owners(modules):
    """{attribute: modules whose classes assign it to self}."""
    out = {}
    for name, tree in modules.items():
        for _, e in assigned(tree):
            if isinstance(e.value, ast.Name) and e.value.id == "self":
                out.setdefault(e.attr, set()).add(name)
    return out


def foreign_assignments(modules):
    """Assignments to another module's objects: in libshard's own modules (the package's
    top level and libshard.torch) any attribute not of self, cls or the module's classes;
    in libshard.webdataset (WebDataset's API, which sets attributes of tar entries, streams
    and exceptions as WebDataset does) the attributes libshard's own classes own."""
    mine = {n: t for n, t in modules.items() if not n.startswith("webdataset/")}
    owned = owners(mine)
    out = []
    for name, tree in sorted(modules.items()):
        classes = {c.name for c in ast.walk(tree) if isinstance(c, ast.ClassDef)}
        for line, e in assigned(tree):
            if own(e, classes):
                continue
            if name in mine or owned.get(e.attr, {name}) - {name}:
                out.append(f"{name}:{line}: {ast.unparse(e)}")
    return out


def package_modules():
    return {str(p.relative_to(PACKAGE)): ast.parse(p.read_text()) for p in PACKAGE.rglob("*.py")}


def test_python_objects_own_their_fields():
    found = foreign_assignments(package_modules())
    assert not found, f"modules that assign another class's attributes: {found}"


def test_own_fields_negative_control():
    modules = package_modules()
    modules["torch/loader.py"] = ast.parse("def f(ds, epoch):\n    ds.started = (epoch, None)\n"
                                           "    ds.shared.set_epoch(epoch)\n")
    modules["webdataset/fast.py"] = ast.parse("def g(ds, e):\n    ds.by_worker = False\n"
                                              "    e.args = ()\n")
    assert foreign_assignments(modules) == ["torch/loader.py:2: ds.started",
                                            "webdataset/fast.py:2: ds.by_worker"]


# ---- resume, one room -----------------------------------------------------------------

def resume_side_doors(files):
    """Files outside resume/ that include one of its headers other than resume/resume.h."""
    out = []
    for p in files:
        if p.is_relative_to(SRC / "resume"):
            continue
        for inc in re.findall(r'^\s*#\s*include\s+"(resume/[\w.]+)"', p.read_text(), re.M):
            if inc != "resume/resume.h":
                out.append(f"{p.relative_to(REPO) if p.is_relative_to(REPO) else p.name}: {inc}")
    return out


def test_resume_is_reached_through_its_one_header():
    assert (SRC / "resume" / "resume.h").exists()
    assert "DESIGN" in (SRC / "resume" / "resume.h").read_text()
    found = resume_side_doors(all_c_files())
    assert not found, f"files that reach into resume/ past resume/resume.h: {found}"


def test_resume_one_header_negative_control(tmp_path):
    planted = tmp_path / "planted.c"
    planted.write_text('#include "resume/resume.h"\n#include "resume/cut.h"\n')
    assert resume_side_doors(all_c_files() + [planted]) == ["planted.c: resume/cut.h"]
