#!/bin/bash
# Real photographs for the pixel tests (tests/python/test_pixels.py compares libshard's
# crops with torchvision's on them): the sample images of Debian's python3-skimage, the
# package downloaded and unpacked into tests/.photos (nothing is installed). Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
dst=tests/.photos
data=$dst/usr/lib/python3/dist-packages/skimage/data
[ -f "$data/chelsea.png" ] && exit 0
mkdir -p "$dst"
cd "$dst"
if ! ls python3-skimage_*.deb >/dev/null 2>&1; then
  apt-get download python3-skimage >/dev/null 2>&1 ||
    { apt-get update -qq && apt-get download python3-skimage >/dev/null; }
fi
dpkg -x python3-skimage_*.deb .
echo "test-photos: $(ls usr/lib/python3/dist-packages/skimage/data | wc -l) files in $dst" >&2
