#!/bin/bash
# `pip install .` as the README says: a venv of Debian's python that sees Debian's torch,
# meson-python from Debian, no build isolation (no PyPI). Then the installed package
# decodes a JPEG and builds a torch dataset.
set -euo pipefail
src=$1
work=$(mktemp -d "${TMPDIR:-/tmp}/libshard-pip.XXXXXX")
trap 'rm -rf "$work"' EXIT
/usr/bin/python3 -m venv --system-site-packages "$work/venv"
mkdir "$work/src"  # the tree without its build folders (another build may be writing them)
(cd "$src" && tar --exclude='./build*' --exclude=./.git -cf - .) | tar -xf - -C "$work/src"
(cd "$work/src" && "$work/venv/bin/pip" install -q --no-build-isolation --no-index . )
cd "$work"
"$work/venv/bin/python" - <<'PY'
import io
import libshard, libshard.torch
from PIL import Image
buf = io.BytesIO()
Image.new("RGB", (64, 48), (10, 200, 30)).save(buf, "JPEG", quality=95)
data, w, h = libshard.decode_rgb(buf.getvalue())
assert (w, h) == (64, 48) and len(data) == 64 * 48 * 3, (w, h)
assert "site-packages" in libshard.__file__, libshard.__file__
print("pip install test: libshard", libshard.version, "from", libshard.__file__)
PY
# the tools, their manual pages (man finds them beside bin/ on PATH: the wheel's data go
# under the environment's root) and completions
export PATH="$work/venv/bin:$PATH"
shardpack --version >/dev/null && shardcat --version >/dev/null
for page in shardpack shardcat "3 libshard"; do
  man -w $page | grep -q "^$work/venv/" || { echo "man $page: not found"; exit 1; }
done
MANWIDTH=80 man shardcat 2>/dev/null | grep -q "stream" || { echo "man shardcat: empty"; exit 1; }
out=$(bash -c 'source "$1"; COMP_WORDS=(shardcat ver); COMP_CWORD=1; _shardcat; echo "${COMPREPLY[*]}"' \
  _ "$(find "$work/venv" -path '*bash-completion/completions/shardcat')")
[ "$out" = verify ] || { echo "completion of 'shardcat ver': '$out'"; exit 1; }
out=$(bash -c 'source "$1"; COMP_WORDS=(shardpack --max); COMP_CWORD=1; _shardpack; echo "${COMPREPLY[*]}"' \
  _ "$(find "$work/venv" -path '*bash-completion/completions/shardpack')")
[ "$out" = "--maxcount --maxsize" ] || { echo "completion of 'shardpack --max': '$out'"; exit 1; }
echo "pip install test: shardpack, shardcat, their man pages and completions in $work/venv"
