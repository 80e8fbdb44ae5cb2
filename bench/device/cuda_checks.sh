#!/bin/bash
# The CUDA path of issue 21 on a machine with a GPU (the device machine):
# the receive-memory tests (tests/receive_memory_test: pinned buffers
# registered with CUDA, a session receiving into them, the NUMA node nearest
# the GPU), the staging checks (tests/session_py/staging_check.py cuda:
# batches handed over as CUDA tensors, copied on a side stream ahead of
# next(), state() leaving out what was taken ahead) and the copy-overlap
# benchmark (bench/device/staging_bench.py).
#
#   bench/device/cuda_checks.sh pack [BUILDDIR]   here, after building: copies
#       tests/receive_memory_test and the shared libraries it loads (without
#       the glibc/GCC runtime; libclosure.py) to .devcuda/ (git-ignored)
#   bench/device/cuda_checks.sh run                there, from the source tree
#       with .devcuda carried: runs the three, writes $OUT (or
#       /tmp/gm-cuda-out) receive_memory_test.txt, staging_check.txt,
#       staging_bench.txt
# The Python parts need only the device machine's torch with CUDA (they use
# goldminer._staging and goldminer._tree from python/, not the extensions,
# which are built against this machine's libtorch 1.13 and Python 3.11).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
pack=$src/.devcuda
case ${1:-} in
pack)
  build=$(cd "${2:-$src/build}" && pwd)
  test_bin=$build/tests/receive_memory_test
  [ -x "$test_bin" ] || { echo "cuda_checks.sh: $test_bin missing: make -C $build tests/receive_memory_test" >&2; exit 1; }
  grep -q cudaHostRegister "$test_bin" || { echo "cuda_checks.sh: $test_bin was built without CUDA (configure --with-cuda)" >&2; exit 1; }
  rm -rf "$pack" && mkdir -p "$pack/bin" "$pack/lib"
  strip --strip-debug -o "$pack/bin/receive_memory_test" "$test_bin"
  python3 "$here/libclosure.py" "$pack/lib" "$test_bin" || exit 1
  du -sh "$pack"
  ;;
run)
  out=${OUT:-/tmp/gm-cuda-out}
  mkdir -p "$out"
  [ -x "$pack/bin/receive_memory_test" ] || { echo "cuda_checks.sh: $pack missing: run 'cuda_checks.sh pack' on the build machine and carry .devcuda" >&2; exit 1; }
  nvidia-smi -L 2>&1 | tee "$out/gpu.txt"
  rc=0
  echo "== receive_memory_test"
  LD_LIBRARY_PATH=$pack/lib "$pack/bin/receive_memory_test" 2>&1 | tee "$out/receive_memory_test.txt" || rc=1
  echo "== staging_check.py cuda"
  PYTHONPATH=$src/python python3 "$src/tests/session_py/staging_check.py" cuda 2>&1 | tee "$out/staging_check.txt" || rc=1
  echo "== staging_bench.py"
  PYTHONPATH=$src/python python3 "$here/staging_bench.py" 2>&1 | tee "$out/staging_bench.txt" || rc=1
  exit $rc
  ;;
*)
  echo "usage: cuda_checks.sh pack [BUILDDIR] | run" >&2
  exit 2
  ;;
esac
