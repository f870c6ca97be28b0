#!/bin/bash
# Every test: install what is missing, build, run all meson test suites, print a summary.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
bash scripts/build.sh
status=0
meson test -C build --print-errorlogs --num-processes 2 "$@" || status=$?
/usr/bin/python3 scripts/test_summary.py build/meson-logs/testlog.json
exit $status
