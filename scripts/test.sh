#!/bin/bash
# Every test: install what is missing, build, run all meson test suites, print a summary.
# Without arguments it also runs the C unit tests again built with AddressSanitizer and
# UndefinedBehaviorSanitizer (in build-asan/).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
bash scripts/build.sh
status=0
meson test -C build --print-errorlogs --num-processes 2 "$@" || status=$?
logs=(build/meson-logs/testlog.json)
if [ $# -eq 0 ]; then
  out=$(mktemp)
  if { [ -f build-asan/build.ninja ] || { rm -rf build-asan && meson setup build-asan \
         -Db_sanitize=address,undefined -Dbuildtype=debugoptimized -Dwerror=true \
         -Dpython=disabled -Dcuda=disabled; }; } >"$out" 2>&1 && ninja -C build-asan >>"$out" 2>&1; then
    UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
      meson test -C build-asan --no-rebuild --print-errorlogs --num-processes 2 --suite unit || status=$?
    logs+=(build-asan/meson-logs/testlog.json)
  else
    cat "$out"
    echo "test.sh: the sanitizer build (build-asan/) failed"
    status=1
  fi
  rm -f "$out"
fi
/usr/bin/python3 scripts/test_summary.py "${logs[@]}"
exit $status
