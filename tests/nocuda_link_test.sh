#!/bin/bash
# One build for every machine: libshard.so (and the Python extension, when built) must not
# depend on the CUDA runtime or driver, which a machine without a GPU lacks. This machine
# has libcudart installed, so loading the library proves nothing: the dynamic section does.
set -euo pipefail
status=0
for so in "$@"; do
  [ -f "$so" ] || continue
  needed=$(readelf -d "$so" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
  if grep -E '^libcuda(rt)?\.so' <<<"$needed"; then
    echo "FAIL: $so depends on the CUDA libraries above (load them at run time instead)"
    status=1
  else
    echo "ok: $so needs $(tr '\n' ' ' <<<"$needed")"
  fi
done
exit $status
