#!/bin/bash
# `pip install .` as the README says: a venv of Debian's python that sees Debian's torch,
# meson-python from Debian, no build isolation (no PyPI). Then the installed package
# decodes a JPEG and builds a torch dataset.
set -euo pipefail
src=$1
work=$(mktemp -d "${TMPDIR:-/tmp}/libshard-pip.XXXXXX")
trap 'rm -rf "$work"' EXIT
/usr/bin/python3 -m venv --system-site-packages "$work/venv"
cp -r "$src" "$work/src"
rm -rf "$work/src/build" "$work/src/.git"
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
