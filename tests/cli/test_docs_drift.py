"""The tools' options as their --help gives them, their man pages (made from --help at build
time, tools/doc/docgen.py) and their pages in docs/ (docs/packing.md for shardpack,
docs/inspecting.md for shardcat) name the same options: an option added to --help alone,
or documented but gone from --help, fails here. The negative control adds an option to
--help alone (a wrapper around the real tool) and sees the check name it."""
import re
import sys
from pathlib import Path

import pytest

from conftest import REPO

sys.path.insert(0, str(REPO / "tools" / "doc"))
import docgen  # noqa: E402

PAGES = {"shardpack": REPO / "docs" / "packing.md", "shardcat": REPO / "docs" / "inspecting.md"}
DOC_OPTION = re.compile(r"`(--?[A-Za-z][\w-]*)")


def documented(page):
    """{section title: options its list items document}: a list item documents the options
    it opens with ("- `-c N`, `--maxcount N`: ...")."""
    out, section = {}, ""
    for line in page.read_text().splitlines():
        if line.startswith("## "):
            section = line[3:].strip()
        m = re.match(r"- ((?:`-[^`]*`(?:, | or |, and )?)+)", line)
        if m:
            out.setdefault(section, set()).update(DOC_OPTION.findall(m.group(1)))
    return out


def man_options(path):
    """The options a roff man page names."""
    text = path.read_text().replace("\\-", "-").replace("\\e", "\\")
    return set(docgen.options(text))


def drift(tool, binary, man, page):
    """What differs between binary's --help, the man page and the docs page: a list of
    sentences, empty when they agree."""
    helps = docgen.all_help(binary)
    in_help = {o for text in helps.values() for o in docgen.options(text)}
    docs = documented(page)
    in_docs = set().union(*docs.values())
    problems = []
    if man is not None:
        in_man = man_options(man)
        problems += [f"{o}: in {tool} --help, not in {man.name}" for o in sorted(in_help - in_man)]
        problems += [f"{o}: in {man.name}, not in {tool} --help" for o in sorted(in_man - in_help)]
    problems += [f"{o}: in {tool} --help, not in {page.name}'s option lists"
                 for o in sorted(in_help - in_docs)]
    problems += [f"{o}: in {page.name}, not in {tool} --help" for o in sorted(in_docs - in_help)]
    # shardcat: a command's section documents only what that command (or every one) takes
    common = set(docgen.common(helps)) if len(helps) > 1 else set()
    for command, text in helps.items():
        listed = docs.get(f"{tool} {command}", set()) if command else set()
        extra = listed - set(docgen.options(text)) - common
        problems += [f"{o}: in {page.name}'s '{tool} {command}', not in its --help"
                     for o in sorted(extra)]
    return problems


def man_page(binary, tool):
    path = Path(binary).resolve().parent / "doc" / "man1" / f"{tool}.1"
    if not path.exists():
        pytest.skip(f"{path} was not built (a cross build makes no man pages)")
    return path


@pytest.mark.parametrize("tool", ["shardpack", "shardcat"])
def test_help_man_page_and_docs_name_the_same_options(tool, request):
    binary = request.getfixturevalue(tool)
    problems = drift(tool, binary, man_page(binary, tool), PAGES[tool])
    assert not problems, "\n".join(problems)


def test_an_option_in_help_alone_is_found(shardcat, tmp_path):
    """The negative control: a shardcat whose show --help has one more option."""
    fake = tmp_path / "shardcat"
    fake.write_text(f"#!/bin/sh\nif [ \"$1\" = show ] && [ \"$2\" = --help ]; then\n"
                    f"  {shardcat} show --help; echo '  --frobnicate N  a new option'\n"
                    f"else exec {shardcat} \"$@\"; fi\n")
    fake.chmod(0o755)
    problems = drift("shardcat", fake, man_page(shardcat, "shardcat"), PAGES["shardcat"])
    assert problems == ["--frobnicate: in shardcat --help, not in shardcat.1",
                        "--frobnicate: in shardcat --help, not in inspecting.md's option lists"]
    # and the man page made from that help has it: docgen reads --help itself
    made = tmp_path / "shardcat.1"
    made.write_text(docgen.man1("shardcat", str(fake), "0"))
    assert "--frobnicate" in man_options(made)


def complete(binary, tool, *words):
    """What bash's completion (the script made beside the tool at build time) offers for
    words, the last one being completed."""
    import subprocess
    script = Path(binary).resolve().parent / "doc" / tool
    if not script.exists():
        pytest.skip(f"{script} was not built")
    cp = subprocess.run(["bash", "-c", 'source "$1"; shift; COMP_WORDS=("$@"); '
                         'COMP_CWORD=$(($# - 1)); _' + tool + '; echo "${COMPREPLY[*]}"',
                         "_", str(script), tool, *words], capture_output=True, text=True,
                        cwd=Path(binary).resolve().parent)
    assert cp.returncode == 0, cp.stderr
    return cp.stdout.split()


def test_bash_completes_commands_and_options(shardcat, shardpack):
    assert complete(shardcat, "shardcat", "ver") == ["verify"]
    assert complete(shardpack, "shardpack", "--max") == ["--maxcount", "--maxsize"]
    assert complete(shardcat, "shardcat", "show", "--cr") == ["--crop"]
    assert "--allow-manifest-local" in complete(shardcat, "shardcat", "ls", "--allow")
    assert complete(shardcat, "shardcat", "zzz") == []      # the control: nothing matches
    assert complete(shardcat, "shardcat", "ls", "--crop") == []   # show's, not ls's


def test_man_finds_the_pages_on_the_readmes_build_tree_route(tmp_path):
    """The README's export lines (PATH, MANPATH) run as written: man finds shardpack(1),
    shardcat(1) and libshard(3) in the build tree; the control: without the MANPATH line
    it does not (the pip route: tests/pip_install_test.sh)."""
    import shutil
    import subprocess
    if not shutil.which("man"):
        pytest.skip("man-db is not installed")
    readme = (REPO / "README.md").read_text()
    lines = [l.strip().split("#")[0] for l in readme.splitlines()
             if l.strip().startswith("export ") and "build/" in l]
    assert any("MANPATH" in l for l in lines), lines
    check = "; ".join(lines) + "; man -w shardpack && man -w shardcat && man -w 3 libshard"
    cp = subprocess.run(["bash", "-c", check], cwd=REPO, capture_output=True, text=True,
                        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert cp.returncode == 0, cp.stderr
    assert all("/build/tools/doc/" in p for p in cp.stdout.split()), cp.stdout
    no_manpath = "; ".join(l for l in lines if "MANPATH" not in l) + "; man -w shardpack"
    cp = subprocess.run(["bash", "-c", no_manpath], cwd=REPO, capture_output=True, text=True,
                        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert cp.returncode != 0 or "/build/tools/doc/" not in cp.stdout
