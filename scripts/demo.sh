#!/bin/bash
# The main job on a small generated image set: install what is missing, build, pack the
# set into .tar and .tar.zst shards, inspect them, read every image back, print a summary.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
bash scripts/build.sh
work=${DEMO_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/libshard-demo.XXXXXX")}
mkdir -p "$work/shards"
/usr/bin/python3 examples/make_images.py "$work/images" --classes 4 --per-class 60
./build/tools/shardpack "$work/images" -o "$work/shards/demo-%06d.tar" --maxcount 100 --verify -j 2
./build/tools/shardpack "$work/images" -o "$work/shards/demo-%06d.tar.zst" --maxcount 100 --verify -j 2 \
  --manifest "$work/shards/demo-zst.json"
echo "--- shards"
ls -l "$work/shards"
echo "--- first members of demo-000000.tar (GNU tar)"
tar tvf "$work/shards/demo-000000.tar" | sed -n 1,6p
echo "--- zstd frames of demo-000000.tar.zst"
zstd -lv "$work/shards/demo-000000.tar.zst" 2>/dev/null | grep -E "Frames|Skippable|Compressed|Decompressed"
echo "--- read back"
/usr/bin/python3 examples/readback.py "$work/shards/demo.json" "$work/shards/demo-zst.json" --images "$work/images"
echo "demo files are in $work"
