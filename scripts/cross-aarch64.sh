#!/bin/bash
# Cross-builds the library, the tools and the unit tests for aarch64 in build-aarch64/ and
# runs the unit tests and the tools under qemu-aarch64. Installs what is missing first
# (Debian 12, as root): the cross toolchain, qemu-user and the :arm64 -dev packages. Criterion's
# arm64 packages cannot be installed beside the amd64 ones (libnanomsg5 is not multiarch),
# so they are unpacked into build-aarch64-deps/ with a pkg-config file of their own.
# Arguments go to `meson test` (default: --suite unit --suite aarch64).
set -euo pipefail
cd "$(dirname "$0")/.."
deps=$PWD/build-aarch64-deps
pkgs=(crossbuild-essential-arm64 qemu-user qemu-user-binfmt pkgconf:arm64
  libarchive-dev:arm64 libzstd-dev:arm64 libjpeg62-turbo-dev:arm64 libpng-dev:arm64 libwebp-dev:arm64
  libjansson-dev:arm64 libssl-dev:arm64 libcurl4-openssl-dev:arm64
  libgit2-1.5:arm64 libffi8:arm64)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "cross-aarch64: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  dpkg --print-foreign-architectures | grep -qx arm64 || dpkg --add-architecture arm64
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# Criterion runs each test in a child it starts by executing the test binary again: that
# takes the kernel's binfmt_misc entry for aarch64 (qemu-user-binfmt's), registered here
# where no init system did it.
binfmt=/proc/sys/fs/binfmt_misc
mountpoint -q $binfmt || mount -t binfmt_misc binfmt_misc $binfmt
[ -e $binfmt/qemu-aarch64 ] || /lib/systemd/systemd-binfmt /usr/lib/binfmt.d/qemu-aarch64.conf
if [ ! -f "$deps/pkgconfig/criterion.pc" ]; then
  rm -rf "$deps" && mkdir -p "$deps/debs" "$deps/pkgconfig"
  (cd "$deps/debs" && apt-get -o APT::Sandbox::User=root download -qq \
    libcriterion3:arm64 libcriterion-dev:arm64 libnanomsg5:arm64)
  for d in "$deps"/debs/*.deb; do dpkg -x "$d" "$deps/root"; done
  lib=$deps/root/usr/lib/aarch64-linux-gnu
  cat > "$deps/pkgconfig/criterion.pc" <<PC
Name: criterion
Description: criterion for aarch64, unpacked from Debian's arm64 packages
Version: $(dpkg-deb -f "$deps"/debs/libcriterion-dev_*.deb Version)
Libs: -L$lib -Wl,--disable-new-dtags,-rpath,$lib -lcriterion
Cflags: -I$deps/root/usr/include
PC
fi
if [ ! -f build-aarch64/build.ninja ]; then
  meson setup build-aarch64 --cross-file cross/aarch64-linux-gnu.ini -Dwerror=true \
    -Dpython=disabled -Dcuda=disabled -Dpkg_config_path="$deps/pkgconfig" >/dev/null
fi
log=$(mktemp)
ninja -C build-aarch64 >"$log" 2>&1 || { grep -v '^\[' "$log" >&2; rm -f "$log"
  echo "cross-aarch64: the build failed" >&2; exit 1; }
rm -f "$log"
if [ $# -eq 0 ]; then set -- --suite unit --suite aarch64; fi
meson test -C build-aarch64 --print-errorlogs --num-processes 2 "$@"
