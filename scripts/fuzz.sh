#!/bin/bash
# Runs the libFuzzer targets of tests/fuzz, each for SECONDS (default 60), two at a time,
# built with clang under ASan + UBSan in build-fuzz/. Each starts from its committed corpus
# (tests/fuzz/corpus/TARGET) and keeps what it finds new in build-fuzz/corpus/TARGET. A
# crash stops the run: the input is saved as tests/fuzz/crashes/TARGET-*, to be fixed and
# then moved into the corpus, where every ordinary build replays it as a test.
#   scripts/fuzz.sh [SECONDS] [TARGET...]
set -u
cd "$(dirname "$0")/.."
secs=${1:-60}
shift || true
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(tar tarlimits indexed index manifest seektable names listing decode scans resize columns)

if [ ! -f build-fuzz/build.ninja ]; then
  rm -rf build-fuzz
  CC=clang meson setup build-fuzz -Dfuzz=true -Db_sanitize=address,undefined -Db_lundef=false \
    -Dbuildtype=debugoptimized -Dpython=disabled -Dcuda=disabled >/dev/null || exit 1
fi
log=$(mktemp)
ninja -C build-fuzz $(printf 'tests/fuzz/fuzz_%s ' "${targets[@]}") >"$log" 2>&1 ||
  { grep -v '^\[' "$log" >&2; rm -f "$log"; echo "fuzz: the build failed" >&2; exit 1; }
rm -f "$log"

mkdir -p tests/fuzz/crashes

run() {
  local t=$1 work=build-fuzz/corpus/$1
  mkdir -p "$work"
  UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 ASAN_OPTIONS=detect_leaks=1 \
    build-fuzz/tests/fuzz/fuzz_"$t" "$work" tests/fuzz/corpus/"$t" -max_total_time="$secs" \
    -rss_limit_mb=2048 -timeout=10 -max_len=262144 -artifact_prefix=tests/fuzz/crashes/"$t"- \
    -print_final_stats=1 >build-fuzz/fuzz-"$t".log 2>&1
  local rc=$?
  local execs
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' build-fuzz/fuzz-"$t".log | grep -o '[0-9]*$')
  if [ $rc -eq 0 ]; then
    echo "fuzz: $t: ${execs:-?} runs in $secs s, no finding"
  else
    echo "fuzz: $t: FINDING (exit $rc), see build-fuzz/fuzz-$t.log and tests/fuzz/crashes/"
    tail -30 build-fuzz/fuzz-"$t".log
  fi
  return $rc
}

status=0
for ((i = 0; i < ${#targets[@]}; i += 2)); do
  run "${targets[i]}" &
  a=$!
  b=
  if [ $((i + 1)) -lt ${#targets[@]} ]; then
    run "${targets[i + 1]}" &
    b=$!
  fi
  wait $a || status=1
  [ -n "$b" ] && { wait $b || status=1; }
done
exit $status
