#!/bin/bash
# The tools of a cross build, run through an emulator (qemu-aarch64): pack real images,
# list, cat, verify (with --decode, and a damaged shard that must fail) and stream them.
# Usage: cross_tools_test.sh WRAPPER SHARDPACK SHARDCAT SOURCE_ROOT
set -euo pipefail
wrap=$1 sp=$2 sc=$3 src=$4
work=$(mktemp -d "${TMPDIR:-/tmp}/libshard-cross.XXXXXX")
trap 'rm -rf "$work"' EXIT
passed=0
ok() { passed=$((passed + 1)); echo "ok - $*"; }
fail() { echo "not ok - $*"; exit 1; }

/usr/bin/python3 "$src/examples/make_images.py" "$work/img" --classes 3 --per-class 20 >/dev/null
mkdir "$work/out"
"$wrap" "$sp" "$work/img" -o "$work/out/t-%06d.tar" --maxcount 16 --verify -q
"$wrap" "$sp" "$work/img" -o "$work/out/z-%06d.tar.zst" --maxcount 25 --frame-size 20K --verify -q
ok "shardpack packs .tar and .tar.zst"

n=$("$wrap" "$sc" ls "$work/out/t.json" | wc -l)
[ "$n" = 60 ] || fail "shardcat ls lists $n samples, not 60"
diff <("$wrap" "$sc" ls "$work/out/t.json" | cut -d' ' -f1 | sort) \
     <("$wrap" "$sc" ls "$work/out/z.json" | cut -d' ' -f1 | sort) >/dev/null || fail "tar and tar.zst differ"
ok "shardcat ls: 60 samples, the same in .tar and .tar.zst"

key=$("$wrap" "$sc" ls --json "$work/out/z-000001.tar.zst" | head -1 |
      /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["__key__"])')
"$wrap" "$sc" cat "$work/out/z-000001.tar.zst" "$key.jpg" > "$work/cat.jpg"
cmp -s "$work/cat.jpg" "$work/img/$key.jpg" || fail "shardcat cat $key.jpg differs from its source"
ok "shardcat cat gives the source's bytes"

"$wrap" "$sc" verify --decode "$work/out/t.json" "$work/out/z.json" > "$work/verify.txt" ||
  fail "verify failed: $(cat "$work/verify.txt")"
[ "$(grep -c ': ok: ' "$work/verify.txt")" = 7 ] || fail "verify: $(cat "$work/verify.txt")"
ok "shardcat verify --decode: every shard ok"

cp "$work/out/z-000001.tar.zst" "$work/bad.tar.zst"
printf '\x55' | dd of="$work/bad.tar.zst" bs=1 seek=3000 conv=notrunc 2>/dev/null
if "$wrap" "$sc" verify "$work/bad.tar.zst" > "$work/bad.txt" 2> "$work/bad.err"; then
  fail "verify passed a damaged shard"
fi
grep -q "FAILED" "$work/bad.txt" && grep -q "zstd frame" "$work/bad.err" || fail "verify: $(cat "$work/bad.err")"
ok "shardcat verify names the damaged zstd frame"

diff <("$wrap" "$sc" stream "$work/out/z.json" --seed 3 --shuffle 20 | cut -f1 | sort) \
     <("$wrap" "$sc" ls "$work/out/z.json" | cut -d' ' -f1 | sort) >/dev/null || fail "stream lost or repeated samples"
ok "shardcat stream: every sample once"
echo "$passed passed, 0 failed"
