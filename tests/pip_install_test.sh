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
# man 3 libshard says where the C library comes from: the pip install carries none
MANWIDTH=100 man 3 libshard 2>/dev/null | grep -q "meson install -C build" ||
  { echo "man 3 libshard: says not where the C library comes from"; exit 1; }

# the README's launch line with the venv's interpreter (not Debian's torchrun): every rank
# imports the installed libshard and reads a shard packed by the installed shardpack
/usr/bin/python3 "$src/examples/make_images.py" "$work/imgs" --classes 2 --per-class 8 >/dev/null
shardpack "$work/imgs" -o "$work/shards/t-%06d.tar" -q
cat >"$work/train.py" <<'PY'
import torch.distributed as dist
from libshard.torch import ShardDataset
dist.init_process_group("gloo")
ds = ShardDataset("shards/t.json", batch_size=4, image_size=16, seed=0)
n = sum(len(labels) for _, labels in ds)
print(f"rank {dist.get_rank()}: {n} samples from", ds.__class__.__module__)
PY
port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
flags=$("$work/venv/bin/python" -c 'from torch.distributed.elastic.multiprocessing.api import Std; print("--redirects 0:1 --tee 0:1" if Std.from_str("0") is None else "")')
out=$(cd "$work" && env -u PYTHONPATH "$work/venv/bin/python" -m torch.distributed.run --nnodes 1 \
  --rdzv_backend c10d --rdzv_endpoint "127.0.0.1:$port" --nproc_per_node 2 $flags train.py 2>&1) ||
  { echo "venv/bin/python -m torch.distributed.run: $out"; exit 1; }
grep -q "rank 0: 8 samples" <<<"$out" || { echo "the venv's ranks: $out"; exit 1; }
echo "pip install test: venv/bin/python -m torch.distributed.run ran 2 ranks on the installed libshard"
