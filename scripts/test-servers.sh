#!/bin/bash
# Installs the servers the remote tests start on 127.0.0.1: nginx-light from Debian, and
# the Node packages of tests/remote/node (the Cloud Storage emulator of firebase-tools,
# s3rver) exactly as its package-lock.json pins them. Idempotent; run as root.
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
dir=tests/remote/node
want=$(sha256sum "$dir/package-lock.json" | cut -d' ' -f1)
if [ "$(cat "$dir/node_modules/.installed-lock" 2>/dev/null)" != "$want" ]; then
  start=$SECONDS
  npm ci --prefix "$dir" --no-audit --no-fund --loglevel=error
  echo "$want" >"$dir/node_modules/.installed-lock"
  echo "test-servers: npm ci in $dir: $((SECONDS - start)) s" >&2
fi
