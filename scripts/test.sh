#!/bin/bash
# Every test: install what is missing, build, run all meson test suites, print a summary.
# Without arguments it then runs, each timed:
#   - the C unit tests built with AddressSanitizer and UndefinedBehaviorSanitizer (build-asan/),
#     and against that build the CLI suite and the Python files that drive the extension's C
#     code (runtime preloaded; tests/meson.build lists them)
#   - the threaded C tests built with ThreadSanitizer (build-tsan/: queue, reader, mix, loader, gpu)
#   - in both, the remote-shard tests that run shardcat, against the sanitized shardcat
#   - the library, tools and unit tests cross-built for aarch64, run under qemu-aarch64
#     (build-aarch64/, scripts/cross-aarch64.sh)
#   - each fuzz target for 15 s (scripts/fuzz.sh: clang, libFuzzer, ASan + UBSan)
#   - what a GPU machine is given, prepared (scripts/gpu-check.sh prepare: a release build with
#     the kernels, the extension for its Python), loaded here
#   - WebDataset's own test suite against libshard.webdataset (tests/wds_suite/run.py), when a
#     copy of WebDataset's repository at e0953f9 is here: $LIBSHARD_WDS_SUITE, default
#     ~/.cache/libshard/webdataset-e0953f9
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
bash scripts/test-servers.sh
bash scripts/test-photos.sh
bash scripts/build.sh
status=0
failed_builds=0
meson test -C build --print-errorlogs --num-processes 2 "$@" || status=$?
logs=(build/meson-logs/testlog.json)

# A sanitizer build (configured once) and its suites (unit, and those marked 'sanitized': the
# tools' pytest suites against the sanitized tools; with python, the extension's suite with
# the runtime preloaded); a failed build fails the run.
sanitized() {
  local dir=$1 sanitize=$2 python=$3 env=$4
  local out start=$SECONDS
  out=$(mktemp)
  if { [ -f "$dir/build.ninja" ] || { rm -rf "$dir" && meson setup "$dir" \
         -Db_sanitize="$sanitize" -Dbuildtype=debugoptimized -Dwerror=true \
         -Dpython="$python" -Dcuda=disabled; }; } >"$out" 2>&1 && ninja -C "$dir" >>"$out" 2>&1; then
    env $env meson test -C "$dir" --no-rebuild --print-errorlogs --num-processes 2 --suite unit \
      --suite sanitized ||
      status=1
    logs+=("$dir/meson-logs/testlog.json")
  else
    cat "$out"
    echo "test.sh: the $sanitize build ($dir/) failed"
    status=1
    failed_builds=$((failed_builds + 1))
  fi
  rm -f "$out"
  echo "test.sh: $sanitize: $((SECONDS - start)) s"
}

if [ $# -eq 0 ]; then
  sanitized build-asan address,undefined enabled UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
  sanitized build-tsan thread disabled TSAN_OPTIONS=halt_on_error=1
  start=$SECONDS
  rm -f build-aarch64/meson-logs/testlog.json
  bash scripts/cross-aarch64.sh || status=1
  if [ -f build-aarch64/meson-logs/testlog.json ]; then
    logs+=(build-aarch64/meson-logs/testlog.json)
  elif [ $status -ne 0 ]; then
    failed_builds=$((failed_builds + 1))  # it failed before its tests ran
  fi
  echo "test.sh: aarch64 under qemu: $((SECONDS - start)) s"
  # each fuzz target briefly (clang, ASan + UBSan): a finding fails the run
  start=$SECONDS
  bash scripts/fuzz.sh 15 || { status=1; failed_builds=$((failed_builds + 1)); }
  echo "test.sh: fuzz smoke: $((SECONDS - start)) s"
  # what a GPU machine is given (scripts/gpu-check.sh prepare): it builds, and its tools and
  # its extension for the GPU machine's Python load with the carried libraries alone
  start=$SECONDS
  if bash scripts/gpu-check.sh prepare && build-gpu/build/tools/shardcat --version >/dev/null &&
     { py312=$(ls "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.12*/bin/python3.12 2>/dev/null | head -1);
       [ -z "$py312" ] || PYTHONPATH=build-gpu/build/python "$py312" -c \
         'import libshard._libshard as L; assert L.gpu_kernels == 1'; }; then
    echo "test.sh: gpu-check prepare: $((SECONDS - start)) s"
  else
    echo "test.sh: gpu-check prepare failed"
    status=1
    failed_builds=$((failed_builds + 1))
  fi
fi
if [ $# -eq 0 ]; then
  start=$SECONDS
  wds=${LIBSHARD_WDS_SUITE:-$HOME/.cache/libshard/webdataset-e0953f9}
  if [ -d "$wds/tests" ]; then
    out=$(mktemp)
    if ! /usr/bin/python3 tests/wds_suite/run.py "$wds" >"$out" 2>&1; then
      tail -60 "$out"
      status=1
      failed_builds=$((failed_builds + 1))
    fi
    grep -E "^wds-suite" "$out" || true
    rm -f "$out"
    echo "test.sh: WebDataset's suite: $((SECONDS - start)) s"
  else
    echo "test.sh: WebDataset's suite: not run: no copy of WebDataset's repository at $wds" \
         "(git clone https://github.com/webdataset/webdataset there and check out e0953f9," \
         "or name one with LIBSHARD_WDS_SUITE)"
  fi
fi
/usr/bin/python3 scripts/test_summary.py --failed-builds "$failed_builds" "${logs[@]}"
exit $status
