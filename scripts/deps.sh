#!/bin/bash
# Installs what libshard needs to build, test and benchmark on Debian 12, as root.
# Idempotent: packages already present are left alone, and apt is only called when
# something is missing.
set -euo pipefail
pkgs=(
  build-essential meson ninja-build pkg-config clang libclang-rt-14-dev
  libarchive-dev libzstd-dev libjpeg62-turbo-dev libpng-dev libwebp-dev libcurl4-openssl-dev libjansson-dev libssl-dev libdlpack-dev
  libcriterion-dev
  tar libarchive-tools zstd libjpeg-turbo-progs valgrind man-db
  python3 python3-dev python3-pytest python3-numpy python3-pil python3-torch python3-torchvision
  python3-distributed python3-lmdb python3-zmq python3-msgpack python3-braceexpand
  python3-mesonpy python3-venv python3-pip patchelf
)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "deps: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
