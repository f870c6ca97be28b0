#!/bin/bash
# Installs the servers the remote tests start on 127.0.0.1: nginx-light from Debian, and
# the Node packages of tests/remote/node (the Cloud Storage emulator of firebase-tools,
# s3rver) exactly as its package-lock.json pins them, into a cache shared by every clone on the
# machine. Idempotent; run as root.
set -euo pipefail
cd "$(dirname "$0")/.."
missing=()
for p in nginx-light nodejs openssl; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
command -v npm >/dev/null || missing+=(npm)
if ((${#missing[@]})); then
  echo "test-servers: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
if ! node -e 'process.exit(+process.versions.node.split(".")[0] < 20 ? 1 : 0)'; then
  echo "test-servers: firebase-tools needs Node.js 20 or later; this is $(node --version)" >&2
  exit 1
fi
# node_modules lives outside the clone, once per machine, keyed by what decides its bytes:
# the lock file, the Node version and its module ABI, the architecture. A clone links to it,
# so a second clone installs nothing (re2, a native module of firebase-tools, compiles for
# minutes). LIBSHARD_NODE_CACHE names another cache folder (.ci/run times an empty one).
dir=tests/remote/node
lock=$(sha256sum "$dir/package-lock.json" | cut -c1-16)
key=$lock-$(node -p 'process.version + "-abi" + process.versions.modules + "-" + process.arch')
cache=${LIBSHARD_NODE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/libshard/test-servers}
home=$cache/$key
if [ ! -f "$home/.installed" ]; then
  start=$SECONDS
  mkdir -p "$cache"
  tmp=$(mktemp -d "$cache/.installing.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  cp "$dir/package.json" "$dir/package-lock.json" "$tmp/"
  npm ci --prefix "$tmp" --no-audit --no-fund --loglevel=error
  touch "$tmp/.installed"
  [ -f "$home/.installed" ] || rm -rf "$home"  # one left half-made
  # the rename makes it appear whole; where another install got there first, keep that one
  mv -T "$tmp" "$home" 2>/dev/null || true
  echo "test-servers: npm ci into $home: $((SECONDS - start)) s" >&2
fi
# a real folder there is an install from before the cache: replaced by the link
if [ -d "$dir/node_modules" ] && [ ! -L "$dir/node_modules" ]; then
  rm -rf "$dir/node_modules"
fi
if [ "$(readlink "$dir/node_modules" 2>/dev/null)" != "$home/node_modules" ]; then
  ln -sfn "$home/node_modules" "$dir/node_modules"
  echo "test-servers: $dir/node_modules -> $home/node_modules" >&2
fi
