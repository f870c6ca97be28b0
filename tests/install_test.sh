#!/bin/bash
# `meson install` into a staging folder, then build examples/pack_minimal.c outside the tree
# against the installed headers and library with `pkg-config --cflags --libs libshard`,
# and run it, linked with the shared library and with the static archive.
set -euo pipefail
build=$1
src=$2
stage=$(mktemp -d "${TMPDIR:-/tmp}/libshard-install.XXXXXX")
trap 'rm -rf "$stage"' EXIT
meson install -C "$build" --no-rebuild --destdir "$stage" >/dev/null
pc=$(dirname "$(find "$stage" -name libshard.pc | head -1)")
test -n "$pc" || { echo "libshard.pc was not installed"; exit 1; }
for h in shard.h common.h decode.h loader.h writer.h manifest.h names.h image.h file.h verify.h reader.h \
         list.h pack.h sample.h remote.h version.h; do
  test -f "$(find "$stage" -path "*/include/shard/$h" | head -1)" || { echo "header $h not installed"; exit 1; }
done
export PKG_CONFIG_PATH=$pc PKG_CONFIG_SYSROOT_DIR=$stage
mkdir "$stage/app" "$stage/out"
cp "$src/examples/pack_minimal.c" "$stage/app/"
cd "$stage/app"
cc -std=c11 -Wall -Wextra -Werror pack_minimal.c $(pkg-config --cflags --libs libshard) -o app_shared
libdir=$(pkg-config --variable=libdir libshard)
LD_LIBRARY_PATH=$libdir ./app_shared "$stage/out" | tee "$stage/log"
grep -q "wrote 1 shard(s), 3 samples" "$stage/log"
tar tf "$stage/out/mini-000000.tar" | grep -qx "sample002.txt"
# The static archive, with its dependencies linked as the system provides them.
cc -std=c11 pack_minimal.c $(pkg-config --cflags libshard) -o app_static "$libdir/libshard.a" \
  $(pkg-config --libs libarchive libzstd libjpeg libpng libwebp jansson libcrypto libcurl) -pthread -lm
rm -rf "$stage/out"/*
./app_static "$stage/out" >/dev/null
test -f "$stage/out/mini.json"
echo "install test: headers, libshard.pc, shared and static linking work"
# The manual pages and completions, where man and bash-completion look for them
for page in man1/shardpack.1 man1/shardcat.1 man3/libshard.3; do
  f=$(find "$stage" -path "*/share/man/$page" | head -1)
  test -n "$f" || { echo "$page was not installed"; exit 1; }
  MANWIDTH=80 man -l "$f" 2>/dev/null | grep -q "SEE ALSO" || { echo "$page does not render"; exit 1; }
done
for c in bash-completion/completions/shardcat bash-completion/completions/shardpack \
         zsh/site-functions/_shardcat zsh/site-functions/_shardpack; do
  test -n "$(find "$stage" -path "*/share/$c")" || { echo "$c was not installed"; exit 1; }
done
c=$(find "$stage" -path "*/share/bash-completion/completions/shardcat")
out=$(bash -c 'source "$1"; COMP_WORDS=(shardcat ver); COMP_CWORD=1; _shardcat; echo "${COMPREPLY[*]}"' _ "$c")
[ "$out" = verify ] || { echo "completion of 'shardcat ver': '$out'"; exit 1; }
echo "install test: man pages shardpack(1), shardcat(1), libshard(3) and completions installed"
