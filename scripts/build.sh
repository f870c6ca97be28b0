#!/bin/bash
# Configures (once) and builds libshard in ./build with warnings as errors; quiet unless
# something fails, and then what failed is shown.
set -euo pipefail
cd "$(dirname "$0")/.."
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if [ ! -f build/build.ninja ]; then
  meson setup build -Dwerror=true >"$log" 2>&1 || { cat "$log"; exit 1; }
fi
ninja -C build >"$log" 2>&1 || { cat "$log"; echo "build.sh: the build failed" >&2; exit 1; }
