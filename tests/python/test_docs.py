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


REPO = __import__("pathlib").Path(__file__).resolve().parents[2]


def pointers(text):
    """The pages a text sends its reader to: docs/*.md, formats/*.md, examples/*, README
    sections ("README, \\"...\\"")."""
    import re
    return (re.findall(r"\b((?:docs|formats)/[\w.-]+\.md|examples/[\w.-]+\.(?:py|c))", text),
            re.findall(r'README, "([^"]+)"', text))


def test_every_page_a_docstring_names_exists():
    """Docstrings, the package's sources and the stubs point at pages that are there (a
    README section that moved to docs/ was the slip); the control: a made-up one is
    caught."""
    import re
    sources = [p for p in (REPO / "python" / "libshard").rglob("*")
               if p.suffix in (".py", ".c", ".in", ".pyi")]
    readme = (REPO / "README.md").read_text()
    headings = set(re.findall(r"^#+ (.+)$", readme, re.M))
    missing = []
    for src in sources:
        pages, sections = pointers(src.read_text())
        missing += [f"{src.name}: {p}" for p in pages if not (REPO / p).exists()]
        missing += [f"{src.name}: README \"{s}\"" for s in sections if s not in headings]
    assert not missing, missing
    fake_pages, fake_sections = pointers('see docs/nowhere.md and README, "Gone"')
    assert fake_pages == ["docs/nowhere.md"] and not (REPO / fake_pages[0]).exists()
    assert fake_sections == ["Gone"] and "Gone" not in headings


SIZE = r"(\d[\d,]*(?:\.\d+)?)\s*(KiB|MiB|GiB|TiB|bytes)?"
UNITS = {None: 1, "bytes": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}


def stated_defaults(text, names):
    """[(name, value, words)] of the defaults text states: "`name` (N unit)", "`name` is N",
    "`name` ... default N", a table row "| `name` ... | N unit |"."""
    import re
    out = []
    for name in names:
        n = re.escape(name)
        for pattern in (r"`%s`[^.;\n`(]{0,20}\(%s\)" % (n, SIZE),
                        r"`%s`[^.;\n`]{0,30}?\b(?:defaults? (?:to )?|is )%s\b" % (n, SIZE),
                        r"\|\s*`%s`[^|]*\|\s*%s\s*\|" % (n, SIZE)):
            for m in re.finditer(pattern, text):
                value = float(m.group(1).replace(",", "")) * UNITS[m.group(2)]
                out.append((name, value, m.group(0)))
    return out


def test_the_defaults_the_docs_state_are_the_codes():
    """Every default README.md and docs/ state beside a setting's name is the settings
    table's (libshard.settings.DEFAULTS, made from the C defaults); the control: a page
    stating another is caught."""
    from libshard.settings import DEFAULTS
    pages = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    numeric = {k: v for k, v in DEFAULTS.items()
               if isinstance(v, (int, float)) and not isinstance(v, bool)}
    wrong, seen = [], 0
    for page in pages:
        for name, value, words in stated_defaults(page.read_text(), numeric):
            seen += 1
            if value != numeric[name]:
                wrong.append(f"{page.name}: {words!r}: the code's is {numeric[name]}")
    assert not wrong, wrong
    assert seen >= 5, "the docs state fewer defaults than they did: the pattern missed them"
    planted = stated_defaults("`decode_memory` (1 GiB) together", numeric)
    assert planted and planted[0][1] != numeric["decode_memory"]
