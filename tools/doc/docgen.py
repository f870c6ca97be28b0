"""The tools' manual pages and shell completions, made from the tools' own --help (and the
public headers, for libshard(3)) at build time, so that they cannot drift from what the
tools do. Run by meson (tools/doc/meson.build); the drift test reads the same parse.

    python3 tools/doc/docgen.py man1 TOOL BINARY VERSION OUT
    python3 tools/doc/docgen.py man3 VERSION OUT HEADER...
    python3 tools/doc/docgen.py bash TOOL BINARY OUT
    python3 tools/doc/docgen.py zsh TOOL BINARY OUT
"""
import re
import subprocess
import sys

SUMMARY = {
    "shardpack": "pack an image folder or a URL list into WebDataset shards, with indexes "
                 "and a manifest",
    "shardcat": "inspect, verify, read, stream and benchmark WebDataset shards",
}
OPTION = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*|-[a-zA-Z](?=[ ,]))")


def helptext(binary, *args):
    cp = subprocess.run([binary, *args, "--help"], capture_output=True, text=True, timeout=60)
    return cp.stdout + cp.stderr


def commands(binary):
    """shardcat's commands, as its help lists them; none for a tool without commands."""
    text = helptext(binary)
    if not text.startswith("usage: shardcat COMMAND"):
        return []
    block = text.split("\n\n", 1)[1].split("\n\n", 1)[0]
    return [m.group(1) for m in re.finditer(r"^  ([a-z]+) ", block, re.M)]


def options(text):
    """Every option a help text names, in order, once."""
    seen = []
    for m in OPTION.finditer(text):
        if m.group(1) not in seen:
            seen.append(m.group(1))
    return seen


def common(helps):
    """The options every command takes: those of the tool's help past its list of
    commands."""
    parts = helps[""].split("\n\n")
    return options("\n\n".join(parts[2:] if len(helps) > 1 else parts))


def all_help(binary):
    """{"": the tool's help, COMMAND: that command's help}."""
    out = {"": helptext(binary)}
    for c in commands(binary):
        out[c] = helptext(binary, c)
    return out


def roff(text):
    """Text as roff shows it verbatim."""
    lines = []
    for line in text.rstrip("\n").split("\n"):
        line = line.replace("\\", "\\e").replace("-", "\\-")
        lines.append("\\&" + line if line[:1] in (".", "'") else line)
    return "\n".join(lines)


def man1(tool, binary, version):
    helps = all_help(binary)
    main = helps[""]
    usage = main.split("\n\n", 1)[0].split("\n")  # the usage lines, up to the first gap
    out = [f'.TH {tool.upper()} 1 "" "libshard {version}" "User Commands"',
           ".SH NAME", f"{tool} \\- {SUMMARY[tool]}",
           ".SH SYNOPSIS", ".nf", roff("\n".join(u.replace("usage: ", "", 1).strip()
                                               for u in usage)), ".fi",
           ".SH DESCRIPTION", f"What \\fB{tool} \\-\\-help\\fR says, word for word:", ".PP",
           ".nf", roff(main), ".fi"]
    if len(helps) > 1:
        out.append(".SH COMMANDS")
        for c, text in helps.items():
            if c:
                out += [f".SS {c}", ".nf", roff(text), ".fi"]
    out += [".SH EXIT STATUS", "0 on success, 1 on a defect or a failure, 2 on bad usage.",
            ".SH SEE ALSO",
            ", ".join(f"\\fB{t}\\fR(1)" for t in sorted(SUMMARY) if t != tool) +
            ", \\fBlibshard\\fR(3); the documentation in docs/ and formats/ of the source."]
    return "\n".join(out) + "\n"


API = re.compile(r"/\*\*((?:[^*]|\*(?!/))*)\*/\s*(SHARD_API[^;{]*;)", re.S)


def man3(version, headers):
    out = [f'.TH LIBSHARD 3 "" "libshard {version}" "Library Functions"',
           ".SH NAME", "libshard \\- WebDataset-style shards: read, stream, decode, batch, write",
           ".SH SYNOPSIS", ".nf", "#include <shard/shard.h>", "cc ... $(pkg-config --cflags "
           "--libs libshard)", "",
           "# the C library (headers, libshard.so and .a, libshard.pc) is installed from",
           "# the source tree (docs/getting-started.md); a pip install carries none:",
           "meson install -C build", ".fi",
           ".SH DESCRIPTION",
           "The C API's entry points, header by header, each with what its header says of it. "
           "Errors are negative codes (shard/common.h) with a message saying what and where; "
           "every handle is opaque, made by a function that takes a settings struct filled by "
           "its defaults function first."]
    for path in headers:
        text = open(path, encoding="utf-8").read()
        found = API.findall(text)
        if not found:
            continue
        out.append(f".SH {path.rsplit('/', 1)[-1].upper()}")
        for doc, decl in found:
            decl = " ".join(decl.replace("SHARD_API ", "").split())
            doc = " ".join(l.strip().lstrip("*").strip() for l in doc.strip().split("\n"))
            out += [".TP", f"\\fB{roff(decl)}\\fR", roff(doc)]
    out += [".SH SEE ALSO", "\\fBshardpack\\fR(1), \\fBshardcat\\fR(1)"]
    return "\n".join(out) + "\n"


def bash(tool, binary):
    helps = all_help(binary)
    cmds = [c for c in helps if c]
    fn = f"_{tool}"
    lines = [f"# bash completion for {tool}, made from its --help (tools/doc/docgen.py)",
             f"{fn}()", "{", "    local cur=${COMP_WORDS[COMP_CWORD]} cmd=", "    local i",
             "    for ((i = 1; i < COMP_CWORD; i++)); do",
             "        case ${COMP_WORDS[i]} in -*) ;; *) cmd=${COMP_WORDS[i]}; break ;; esac",
             "    done", "    local words"]
    if cmds:
        lines += ["    if [[ -z $cmd && $cur != -* ]]; then",
                  f"        COMPREPLY=($(compgen -W \"{' '.join(cmds)}\" -- \"$cur\"))",
                  "        return", "    fi", "    case $cmd in"]
        for c in cmds:
            words = options(helps[c]) + [o for o in common(helps) if o not in options(helps[c])]
            lines.append(f"        {c}) words=\"{' '.join(words)}\" ;;")
        lines += [f"        *) words=\"{' '.join(options(helps['']))}\" ;;", "    esac"]
    else:
        lines.append(f"    words=\"{' '.join(options(helps['']))}\"")
    lines += ["    if [[ $cur == -* ]]; then",
              "        COMPREPLY=($(compgen -W \"$words\" -- \"$cur\"))", "    else",
              "        COMPREPLY=($(compgen -f -- \"$cur\"))", "    fi", "}",
              f"complete -o filenames -F {fn} {tool}"]
    return "\n".join(lines) + "\n"


def zsh(tool, binary):
    helps = all_help(binary)
    cmds = [c for c in helps if c]
    lines = [f"#compdef {tool}", f"# zsh completion for {tool}, made from its --help "
             "(tools/doc/docgen.py)", "local -a opts"]
    if cmds:
        lines += ["if (( CURRENT == 2 )); then",
                  f"  compadd -- {' '.join(cmds)}", "  return", "fi", "case $words[2] in"]
        for c in cmds:
            words = options(helps[c]) + [o for o in common(helps) if o not in options(helps[c])]
            lines.append(f"  {c}) opts=({' '.join(words)}) ;;")
        lines += [f"  *) opts=({' '.join(options(helps['']))}) ;;", "esac"]
    else:
        lines.append(f"opts=({' '.join(options(helps['']))})")
    lines += ["if [[ $PREFIX == -* ]]; then", "  compadd -- $opts", "else", "  _files", "fi"]
    return "\n".join(lines) + "\n"


def main():
    kind = sys.argv[1]
    if kind == "man1":
        tool, binary, version, out = sys.argv[2:6]
        text = man1(tool, binary, version)
    elif kind == "man3":
        version, out, *headers = sys.argv[2:]
        text = man3(version, headers)
    else:
        tool, binary, out = sys.argv[2:5]
        text = bash(tool, binary) if kind == "bash" else zsh(tool, binary)
    with open(out, "w", encoding="utf-8") as f:
        f.write(text)


if __name__ == "__main__":
    main()
