#!/bin/bash
# The main job on a small generated image set: install what is missing, build, pack the
# set into .tar and .tar.zst shards, inspect them, draw what the loader delivers
# (grid.png), read every image back, then train a small
# model on CPU a few steps from the shards, printing batch shapes and samples/s.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
bash scripts/build.sh
work=${DEMO_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/libshard-demo.XXXXXX")}
mkdir -p "$work/shards"
/usr/bin/python3 examples/make_images.py "$work/images" --classes 4 --per-class 60
./build/tools/shardpack "$work/images" -o "$work/shards/demo-%06d.tar" --maxcount 100 --verify -j 2
./build/tools/shardpack "$work/images" -o "$work/shards/demo-zst-%06d.tar.zst" --maxcount 100 \
  --verify -j 2
echo "--- shards"
ls -l "$work/shards"
echo "--- shardcat info demo-zst-000000.tar.zst"
./build/tools/shardcat info "$work/shards/demo-zst-000000.tar.zst"
echo "--- shardcat ls (first samples)"
./build/tools/shardcat ls "$work/shards/demo-{000000..000002}.tar" | sed -n 1,4p
echo "--- GNU tar and zstd read the same shards"
tar tvf "$work/shards/demo-000000.tar" | sed -n 1,3p
zstd -dc "$work/shards/demo-zst-000000.tar.zst" | tar t | wc -l | sed 's/$/ members in demo-zst-000000.tar.zst/'
echo "--- shardcat verify --decode (structure, index, seek tables, manifest checksums, every JPEG)"
./build/tools/shardcat verify --decode "$work/shards/demo.json" "$work/shards/demo-zst.json"
echo "--- shardcat show: what the loader delivers (crops, flips; key and label under each)"
./build/tools/shardcat show "$work/shards/demo.json" -o "$work/grid.png" --seed 0 --shuffle 100 \
  --flip --image-size 96 --count 12
echo "--- read back with Python's tarfile, image bytes against the sources"
/usr/bin/python3 examples/readback.py "$work/shards/demo.json" "$work/shards/demo-zst.json" --images "$work/images"
echo "--- training: a ResNet-18 on CPU for a few steps, fed by libshard.torch (ShardDataset + ShardLoader)"
PYTHONPATH=build/python /usr/bin/python3 examples/train.py "$work/shards/demo.json" --steps 10 --epochs 2 \
  --image-size 64
echo "demo files are in $work"
