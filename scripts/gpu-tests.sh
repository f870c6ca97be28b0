#!/bin/bash
# The GPU suites, for a machine with a CUDA device (elsewhere they skip, saying so): the C
# tests of the GPU path (test_gpu) and the Python ones (tests/python/test_cuda.py), then both
# again under compute-sanitizer's memcheck and racecheck where the toolkit has it (it says
# so where it has not). Usage: bash scripts/gpu-tests.sh [BUILD_DIR]
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
py=${PYTHON:-/usr/bin/python3}
export LIBSHARD_PYTHONPATH=$PWD/$build/python
status=0
run() {
  echo "gpu-tests: $*"
  "$@" || status=1
}
nvidia-smi -L 2>/dev/null || echo "gpu-tests: nvidia-smi lists no GPU; the GPU tests will skip"
run "$build/tests/test_gpu" --verbose
run "$py" -m pytest -q -rs -p no:cacheprovider tests/python/test_cuda.py
sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
if [ -z "$sanitizer" ]; then
  echo "gpu-tests: no compute-sanitizer in this CUDA toolkit: memcheck and racecheck not run"
else
  for tool in memcheck racecheck; do
    run "$sanitizer" --tool "$tool" --error-exitcode 86 "$build/tests/test_gpu" --jobs 1
    run "$sanitizer" --tool "$tool" --error-exitcode 86 --target-processes all \
      "$py" -m pytest -q -p no:cacheprovider tests/python/test_cuda.py \
      -k "equal_the_cpu or normalize or held or shutdown"
  done
fi
echo "gpu-tests: $([ $status -eq 0 ] && echo passed || echo FAILED)"
exit $status
