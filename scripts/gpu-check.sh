#!/bin/bash
# The GPU path checked on a GPU machine, in one command per step:
#
#   bash scripts/gpu-check.sh prepare   here, on the Debian machine: build-gpu/ (git ignores
#                                       it) with a release build with the finish kernels,
#                                       the extension for the GPU machine's Python, the
#                                       shared libraries a machine without apt lacks, and
#                                       real photographs for the benchmarks
#   bash scripts/gpu-check.sh check     there: the C and Python GPU suites, the ordering
#                                       tests, compute-sanitizer memcheck (about 5 minutes)
#   bash scripts/gpu-check.sh bench     there: bench/gpu_bench.py and bench/decode_scaling.py
#                                       (about 6 minutes)
#   bash scripts/gpu-check.sh nvjpeg    there: the GPU's JPEG decoder: its tests, memcheck,
#                                       bench/gpu_decode.py's split sweep (about 6 minutes)
#
# The GPU machine needs the NVIDIA driver, compute-sanitizer and a python3 with torch (CUDA),
# numpy, pytest and PIL; nothing else (no compiler, meson or apt). check and bench end with one
# summary: pass/fail counts (a skipped test counts as a failure there, unless it cannot run on
# any one-GPU machine with a driver, and then it is named) and the benchmark's figures.
# GPU_PYTHON: the GPU machine's Python version for prepare (default 3.12; an interpreter of
# that version with its headers must be on PATH here, python3.12); PYTHON there (default
# python3).
set -uo pipefail
cd "$(dirname "$0")/.."
out=build-gpu
what=${1:-}

# The tests that cannot run on a machine with one GPU and its driver: the no-driver message,
# a second device.
EXPECTED_SKIPS="no_gpu_is_a_clear_error|test_no_gpu_is_a_clear_error|test_another_device_by_index"

prepare() {
  set -e
  local ver=${GPU_PYTHON:-3.12} py="" c
  # an interpreter of that version with its headers: on PATH, Debian's, or one pyenv keeps
  for c in "$(command -v "python$ver" 2>/dev/null)" /usr/bin/python$ver /usr/local/bin/python$ver \
           "${PYENV_ROOT:-$HOME/.pyenv}"/versions/$ver*/bin/python$ver; do
    if [ -x "$c" ] && "$c" -c 'import sysconfig, os, sys; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' 2>/dev/null; then
      py=$c && break
    fi
  done
  if [ -z "$py" ]; then
    echo "gpu-check: prepare needs Python $ver with its headers here, to build the extension for the GPU machine's Python (python$ver on PATH, /usr/bin or pyenv); GPU_PYTHON names another version" >&2
    exit 1
  fi
  [ -x /usr/local/cuda/bin/nvcc ] || command -v nvcc >/dev/null ||
    { echo "gpu-check: prepare needs the CUDA toolkit (nvcc) here, for the finish kernels" >&2; exit 1; }
  local work=build-gpu-work log
  log=$(mktemp)
  if [ ! -f $work/build.ninja ]; then
    PATH=$PATH:/usr/local/cuda/bin meson setup $work -Dbuildtype=release -Dcuda=enabled \
      -Dpython=enabled -Dwerror=true >"$log" 2>&1 || { cat "$log"; exit 1; }
  fi
  PATH=$PATH:/usr/local/cuda/bin ninja -C $work >"$log" 2>&1 || { cat "$log"; exit 1; }
  # the extension again for that Python, beside Debian's: compiled here by hand, since
  # Debian's meson (1.0) inspects an interpreter through distutils, which 3.12 no longer has
  local suffix inc
  suffix=$("$py" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
  inc=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
  cc -shared -fPIC -O2 -std=c11 -D_GNU_SOURCE -D_FILE_OFFSET_BITS=64 -fvisibility=hidden \
    -pthread -Wall -Wextra -Werror -I$work/python/libshard -Ipython/libshard \
    -I$work/libshard/include -Ilibshard/include -I"$inc" python/libshard/_*.c \
    -L$work/libshard -lshard -Wl,-rpath,'$ORIGIN/../../libshard' \
    -o "$work/python/libshard/_libshard$suffix"
  rm -f "$log"
  rm -rf "$out" && mkdir -p "$out/build"
  # what runs there: the library, the tools, the test programs and the Python package,
  # where the build put them (their run paths are relative to it); no objects
  (cd $work && find . -path ./meson-private -prune -o -path ./meson-logs -prune -o \
     -path ./meson-info -prune -o -name '*.p' -prune -o \( -type f -o -type l \) \
     \( -perm -u+x -o -name '*.so*' -o -name '*.py' -o -name '*.pyi' -o -name '*.typed' \) \
     -print) | while read -r f; do
    mkdir -p "$out/build/$(dirname "$f")" && cp -a "$work/$f" "$out/build/$f"
  done
  strip --strip-unneeded $(find "$out/build" -type f \( -name '*.so*' -o -perm -u+x \) \
    ! -name '*.py' ! -name '*.sh') 2>/dev/null || true
  # the shared libraries they need beyond the C runtime, for a machine without apt: there,
  # only the ones it lacks are used (its own libssl or libstdc++ are never shadowed)
  mkdir -p "$out/lib"
  find "$out/build" -type f \( -name '*.so*' -o -perm -u+x \) ! -name '*.py' ! -name '*.sh' |
    xargs -r ldd 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u |
    grep -Ev '/(libc|libm|libdl|libpthread|librt|ld-linux[^/]*|libgcc_s|libstdc\+\+|libz|libresolv|libutil)\.so' |
    grep -v "$PWD/$work" | while read -r l; do cp -L "$l" "$out/lib/"; done
  tar -C "$out" -czf "$out/lib.tgz" lib && rm -rf "$out/lib"
  # real photographs (the sample photos of Debian's python3-skimage), cropped to about
  # 500x375 as ImageNet's are; the benchmark repeats them there
  bash scripts/test-photos.sh
  /usr/bin/python3 - "$out/photos" <<'EOF'
import glob, os, random, sys
from PIL import Image
src = "tests/.photos/usr/lib/python3/dist-packages/skimage/data"
photos = []
for f in sorted(glob.glob(os.path.join(src, "*.png")) + glob.glob(os.path.join(src, "*.jpg"))):
    try:
        im = Image.open(f)
        if im.mode in ("RGB", "RGBA") and min(im.size) >= 300:
            photos.append(im.convert("RGB"))
    except OSError:  # the package holds a few deliberately broken files
        pass
rng = random.Random(0)
for i in range(160):
    im = photos[i % len(photos)]
    w, h = im.size
    cw, ch = min(w, rng.randint(300, 500)), min(h, rng.randint(225, 375))
    x, y = rng.randint(0, w - cw), rng.randint(0, h - ch)
    crop = im.crop((x, y, x + cw, y + ch)).resize((500, 375))
    d = os.path.join(sys.argv[1], f"class{i % 10:02d}")
    os.makedirs(d, exist_ok=True)
    crop.save(os.path.join(d, f"{i:04d}.jpg"), quality=90, subsampling=0 if i % 5 < 2 else 2)
EOF
  echo "gpu-check: prepared $out ($(du -sh "$out" | cut -f1)): $(ls "$out/photos"/*/*.jpg | wc -l) photographs, $(tar -tzf "$out/lib.tgz" | grep -c '\.so') shared libraries, the extension for Python $ver"
  echo "gpu-check: copy this checkout with $out/ to the GPU machine and run there, from its root:"
  echo "    bash scripts/gpu-check.sh check"
  echo "    bash scripts/gpu-check.sh bench"
}

# There: the libraries the machine lacks on the library path, the build's tools and package
# for the tests, and what this machine is.
environment() {
  [ -d "$out/build" ] || { echo "gpu-check: no $out/build here: run 'bash scripts/gpu-check.sh prepare' on the Debian machine and copy $out/ along" >&2; exit 2; }
  py=${PYTHON:-python3}
  logs=$out/logs && mkdir -p "$logs"
  rm -rf "$out/lib" "$out/use" && tar -C "$out" -xzf "$out/lib.tgz" && mkdir -p "$out/use"
  local have
  have=$(ldconfig -p 2>/dev/null | awk '{print $1}')
  for l in "$out"/lib/*; do
    grep -qx "$(basename "$l")" <<<"$have" || ln -sf "$PWD/$l" "$out/use/"
  done
  export LD_LIBRARY_PATH=$PWD/$out/use${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export LIBSHARD_PYTHONPATH=$PWD/$out/build/python
  export SHARDPACK=$PWD/$out/build/tools/shardpack SHARDCAT=$PWD/$out/build/tools/shardcat
  echo "gpu-check: $(nvidia-smi -L 2>/dev/null | head -1 || echo 'nvidia-smi lists no GPU')"
  echo "gpu-check: $("$py" -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())' 2>&1 | tail -1)"
  echo "gpu-check: $(ldd --version 2>&1 | head -1); $(ls "$out/use" | wc -l) of $(ls "$out/lib" | wc -l) carried libraries used"
  local cuda
  cuda=$(ldconfig -p 2>/dev/null | awk '/libcuda\.so\.1 / {print $NF; exit}')
  echo "gpu-check: libcuda.so.1 ${cuda:-not found}; its FLAGS_1: $(readelf -d "$cuda" 2>/dev/null | awk '/FLAGS_1/ {$1=$2=""; print}' | xargs)"
  unresolved=$(find "$out/build" -type f \( -name '*.so*' -o -perm -u+x \) ! -name '*.py' ! -name '*.sh' |
    xargs -r ldd 2>/dev/null | grep 'not found' | sort -u)
  echo "gpu-check: unresolved libraries: ${unresolved:-none}"
}

passed=0 failed=0
declare -a lines
tally() { # name pass fail skipped-unexpected skipped-expected
  passed=$((passed + $2)); failed=$((failed + $3 + $4))
  lines+=("$(printf '%-34s %4d passed %4d failed %4d skipped (failures) %s' "$1" "$2" "$3" "$4" "${5:+; expected skips: $5}")")
}

# A Criterion program's counts, its skips named.
criterion() {
  local name=$1 log=$logs/$1.log; shift
  timeout "$STEP" "$@" --verbose >"$log" 2>&1
  local rc=$? m
  m=$(grep -o 'Tested: [0-9]* | Passing: [0-9]* | Failing: [0-9]* | Crashing: [0-9]*' "$log" | tail -1)
  if [ -z "$m" ]; then
    tally "$name" 0 1 0 "" && lines+=("    did not finish (exit $rc): $(tail -3 "$log" | tr '\n' ' ')")
    return
  fi
  read -r _ _ _ ok _ bad _ crash <<<"${m//|/ }"
  local skips exp unexp
  skips=$(grep -o '\[SKIP\] [a-z_]*::[a-z0-9_]*' "$log" | sed 's/.*:://' | sort -u)
  exp=$(grep -xE "$EXPECTED_SKIPS" <<<"$skips" | xargs)
  unexp=$(grep -cvxE "$EXPECTED_SKIPS|" <<<"$skips")
  tally "$name" "$ok" $((bad + crash + (rc != 0 && bad + crash == 0))) "$unexp" "$exp"
  grep -E '^\[----\].*(Assertion|Fail)|\[FAIL\]|\[SKIP\]' "$log" | grep -vE "$EXPECTED_SKIPS" |
    head -20 | sed "s/^/    $name: /" >>"$logs/summary-details"
}

# A pytest run's counts from its JUnit file, its skips named.
pytest_run() {
  local name=$1 xml=$logs/$1.xml log=$logs/$1.log; shift
  timeout "$STEP" "$py" -m pytest -q -rs -p no:cacheprovider --junitxml="$xml" "$@" >"$log" 2>&1
  local rc=$?
  if [ ! -s "$xml" ]; then
    tally "$name" 0 1 0 "" && echo "    $name did not finish (exit $rc): $(tail -3 "$log" | tr '\n' ' ')" >>"$logs/summary-details"
    return
  fi
  local counts
  counts=$("$py" - "$xml" "$EXPECTED_SKIPS" 2>>"$logs/summary-details" <<'EOF'
import re, sys, xml.etree.ElementTree as ET
ok = bad = unexp = 0
exp = []
for case in ET.parse(sys.argv[1]).getroot().iter("testcase"):
    name = case.get("name")
    if case.find("skipped") is not None:
        if re.fullmatch(sys.argv[2], name.split("[")[0]):
            exp.append(name)
        else:
            unexp += 1
            print(f"#     SKIP {name}: {case.find('skipped').get('message')}", file=sys.stderr)
    elif case.find("failure") is not None or case.find("error") is not None:
        bad += 1
        print(f"#     FAIL {name}", file=sys.stderr)
    else:
        ok += 1
print(ok, bad, unexp, " ".join(exp))
EOF
  )
  read -r ok bad unexp exp <<<"$counts"
  tally "$name" "$ok" $((bad + (rc != 0 && rc != 1 && bad == 0))) "$unexp" "$exp"
}

finish() {
  echo
  echo "gpu-check $what: summary"
  printf '  %s\n' "${lines[@]}"
  [ -s "$logs/summary-details" ] && sed 's/^#//' "$logs/summary-details"
  echo "gpu-check $what: $passed passed, $failed failed (logs in $logs/)"
  [ "$failed" -eq 0 ]
  exit $?
}

check() {
  environment
  : >"$logs/summary-details"
  STEP=180
  [ -z "$unresolved" ] || tally "libraries resolved" 0 1 0 ""
  if "$py" -c "import sys; sys.path.insert(0, '$LIBSHARD_PYTHONPATH'); import torch; from libshard import _libshard as L; sys.exit(not (L.gpu_kernels and torch.cuda.is_available()))" 2>"$logs/import.log"; then
    tally "kernels built in, torch sees the GPU" 1 0 0 ""
  else
    tally "kernels built in, torch sees the GPU" 0 1 0 "" && cat "$logs/import.log" >>"$logs/summary-details"
  fi
  criterion "C: test_gpu" "$out/build/tests/test_gpu"
  criterion "C: test_ring" "$out/build/tests/test_ring"
  STEP=420
  pytest_run "python: test_cuda, test_cuda_order" tests/python/test_cuda.py tests/python/test_cuda_order.py
  local san
  san=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || true)
  if [ -z "$san" ]; then
    tally "memcheck" 0 1 0 "" && echo "    no compute-sanitizer on this machine" >>"$logs/summary-details"
  else
    STEP=240
    timeout $STEP "$san" --tool memcheck --error-exitcode 86 "$out/build/tests/test_gpu" --jobs 1 \
      >"$logs/memcheck-c.log" 2>&1
    local rc=$?
    if [ $rc -eq 0 ] && grep -q 'ERROR SUMMARY: 0 errors' "$logs/memcheck-c.log"; then
      tally "memcheck: test_gpu" 1 0 0 ""
    else
      tally "memcheck: test_gpu" 0 1 0 "" && grep -E 'ERROR SUMMARY|Invalid|Error' "$logs/memcheck-c.log" | head -10 | sed 's/^/    /' >>"$logs/summary-details"
    fi
    timeout $STEP "$san" --tool memcheck --error-exitcode 86 --target-processes all \
      "$py" -m pytest -q -p no:cacheprovider tests/python/test_cuda_order.py -k "equal or poisoned" \
      >"$logs/memcheck-python.log" 2>&1
    rc=$?
    if [ $rc -eq 0 ]; then
      tally "memcheck: the finish kernels" 1 0 0 ""
    else
      tally "memcheck: the finish kernels" 0 1 0 "" && grep -E 'ERROR SUMMARY|Invalid|failed|Error' "$logs/memcheck-python.log" | head -10 | sed 's/^/    /' >>"$logs/summary-details"
    fi
  fi
  finish
}

bench() {
  environment
  : >"$logs/summary-details"
  local photos=/tmp/gpu-check-photos
  rm -rf $photos && mkdir -p $photos
  # the 160 photographs 20 times over (hard links): 3200 images, an epoch of 12 batches
  for d in "$out"/photos/*/; do
    c=$(basename "$d") && mkdir -p $photos/$c
    for k in $(seq -w 0 19); do
      for f in "$d"*.jpg; do ln "$f" "$photos/$c/$k-$(basename "$f")"; done
    done
  done
  timeout 420 "$py" bench/gpu_bench.py $photos --build "$out/build" --batch 256 --rounds 2 \
    --steps 20 >"$logs/gpu_bench.log" 2>&1
  local rc=$?
  if [ $rc -eq 0 ] && grep -q '^1\. upload' "$logs/gpu_bench.log"; then
    tally "bench/gpu_bench.py" 1 0 0 ""
  else
    tally "bench/gpu_bench.py" 0 1 0 ""  # its output is among the figures below
  fi
  timeout 150 "$py" bench/decode_scaling.py $photos --build "$out/build" --threads 1,2,4,8,16 \
    --rounds 1 >"$logs/decode_scaling.log" 2>&1
  rc=$?
  if [ $rc -eq 0 ] && grep -q '^ *16 ' "$logs/decode_scaling.log"; then
    tally "bench/decode_scaling.py" 1 0 0 ""
  else
    tally "bench/decode_scaling.py" 0 1 0 ""
  fi
  {
    echo "  figures:"
    sed 's/^/    /' "$logs/gpu_bench.log"
    sed 's/^/    /' "$logs/decode_scaling.log"
  } >>"$logs/summary-details"
  finish
}

# One test run alone, its native stacks taken (cuda-gdb, else gdb) if it still runs after
# `at` seconds, killed at `limit`: the stacks say where a hang waits. NAME AT LIMIT TEST-ID
# [VAR=VALUE...]
hang_probe() {
  local name=$1 at=$2 limit=$3 test=$4 log=$logs/$1.log
  shift 4
  env GPU_PHOTOS="$PWD/$out/photos" "$@" timeout "$limit" "$py" -m pytest -q -p no:cacheprovider \
    "$test" >"$log" 2>&1 &
  local pid=$! waited=0
  while kill -0 "$pid" 2>/dev/null && [ $waited -lt "$at" ]; do
    sleep 1
    waited=$((waited + 1))
  done
  if kill -0 "$pid" 2>/dev/null; then
    local dbg target
    dbg=$(command -v cuda-gdb || ls /usr/local/cuda/bin/cuda-gdb 2>/dev/null || command -v gdb || true)
    target=$(pgrep -f "pytest -q -p no:cacheprovider $test" | head -1)
    echo "== still running after ${at} s: native stacks of $target ($dbg)" >>"$log"
    [ -n "$dbg" ] && [ -n "$target" ] &&
      timeout 60 "$dbg" -batch -p "$target" -ex "thread apply all bt" >>"$log" 2>&1
  fi
  wait "$pid"
  local rc=$?
  if [ $rc -eq 0 ]; then
    tally "$name" 1 0 0 ""
  else
    tally "$name" 0 1 0 "" && echo "    $name: exit $rc; $log has its stacks" >>"$logs/summary-details"
  fi
}

# The GPU's JPEG decoder (about 7 minutes): its tests, the auto split's test alone with a
# fixed share and then measured (a hang's stacks taken), memcheck of one, the split sweep.
nvjpeg() {
  environment
  : >"$logs/summary-details"
  STEP=60
  criterion "C: test_split" "$out/build/tests/test_split"
  STEP=120
  GPU_PHOTOS="$PWD/$out/photos" pytest_run "python: test_nvjpeg" tests/python/test_nvjpeg.py \
    -k "not auto"
  local auto=tests/python/test_nvjpeg.py::test_auto_gives_every_sample_once_and_resumes_exactly
  hang_probe "auto, share fixed at 0.5" 40 70 "$auto" SHARD_GPU_SHARE=0.5
  hang_probe "auto, share measured" 40 70 "$auto"
  local san rc
  san=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || true)
  if [ -n "$san" ]; then
    GPU_PHOTOS="$PWD/$out/photos" timeout 150 "$san" --tool memcheck --error-exitcode 86 \
      --target-processes all "$py" -m pytest -q -p no:cacheprovider tests/python/test_nvjpeg.py \
      -k "pixels and False" >"$logs/memcheck-nvjpeg.log" 2>&1
    rc=$?
    if [ $rc -eq 0 ]; then
      tally "memcheck: the JPEG kernels" 1 0 0 ""
    else
      tally "memcheck: the JPEG kernels" 0 1 0 "" && grep -E 'ERROR SUMMARY|Invalid|failed|Error' "$logs/memcheck-nvjpeg.log" | head -10 | sed 's/^/    /' >>"$logs/summary-details"
    fi
  else
    tally "memcheck" 0 1 0 "" && echo "    no compute-sanitizer on this machine" >>"$logs/summary-details"
  fi
  timeout 80 "$py" bench/gpu_decode.py "$PWD/$out/photos" --build "$PWD/$out/build" --seconds 4 \
    --shares "" >"$logs/gpu_decode.log" 2>&1
  timeout 130 "$py" bench/gpu_decode.py "$PWD/$out/photos" --build "$PWD/$out/build" --seconds 4 \
    --side 700x525 --shares 0.4,0.7 >"$logs/gpu_decode_small.log" 2>&1
  rc=$?
  if [ $rc -eq 0 ] && grep -q '^auto / better' "$logs/gpu_decode_small.log"; then
    tally "bench/gpu_decode.py" 1 0 0 ""
  else
    tally "bench/gpu_decode.py" 0 1 0 ""
  fi
  {
    echo "  figures:"
    sed 's/^/    /' "$logs/gpu_decode.log"
    sed 's/^/    /' "$logs/gpu_decode_small.log"
  } >>"$logs/summary-details"
  finish
}

case "$what" in
  prepare) prepare ;;
  check) check ;;
  bench) bench ;;
  nvjpeg) nvjpeg ;;
  *) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
