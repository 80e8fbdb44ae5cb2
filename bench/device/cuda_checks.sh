#!/bin/bash
# The trainer's CUDA path (receive buffers pinned for the GPU, batches copied
# onto it) on a machine with a GPU (the device machine), through the real
# goldminer package: `pip install ./python` there builds
# goldminer._session for that machine's Python (with its compiler) from a
# packed build directory, then this runs the receive-memory tests
# (tests/receive_memory_test: pinned buffers registered with CUDA, a session
# receiving into them, the NUMA node nearest the GPU), the staging tests
# (python/tests/test_staging.py under pytest: the position less the batches
# taken ahead, and the hand-over on the GPU, a real goldminer.Session with
# local worker threads handing batches over as CUDA tensors, copied on a
# side stream ahead of next(), state() leaving out what was taken ahead) and
# the copy-overlap benchmark (bench/device/staging_bench.py, batches from real
# sessions: pageable, pin_memory=True, device="cuda").
#
#   bench/device/cuda_checks.sh pack [BUILDDIR]   here, after building with
#       --with-cuda: writes .devcuda/ (git-ignored; see "Pack" below)
#   bench/device/cuda_checks.sh run                there, in the source tree
#       with .devcuda carried: installs the package, runs the checks, writes
#       $OUT (or /tmp/gm-cuda-out): gpu.txt, pip_install.txt, version.txt,
#       receive_memory_test.txt, staging_tests.txt, staging_bench.txt;
#       exits non-zero when a step failed
#   bench/device/cuda_checks.sh install            there: the package only
#       (as `run` installs it), from GM_CUDA_PACK (default .devcuda); prints
#       PYTHONPATH=... last (bench/device/gpu_node.sh)
#   bench/device/cuda_selftest.sh                  here, after pack: `run`
#       with what the pack replaces hidden (no GPU: checks the install)
#
# Pack (.devcuda/):
#   bin/receive_memory_test    debug info stripped
#   build/                     what python/setup.py reads from a build
#                              directory (bench/device/pack_python.py): the
#                              rewritten python-build-info.txt, the
#                              convenience archives, gm_config.h, _build_info.py
#   include/dlpack/dlpack.h    (Debian's libdlpack-dev)
#   lib/, lib/ucx/             the shared libraries the extension and the test
#                              load (UCX and its transport modules, hwloc,
#                              libjpeg, munge, Open MPI, ...), without the
#                              glibc/GCC runtime (libclosure.py); the
#                              extension finds them by its DT_RPATH
#   wheels/                    setuptools, wheel, pybind11 and pytest (+
#                              their needs), pure Python: pip builds offline
#                              with them; pytest runs the staging tests
#   python-include/pythonX.Y/  this machine's headers of Python X.Y
#                              (TARGET_PYTHON), used there only if that
#                              Python has no Python.h
#   MANIFEST                   commit, date, what was packed
# pack environment: PYTHON (runs the helpers; default python3), PIP (fetches
#   the wheels; default /var/cache/goldminer/venv-torch2/bin/pip, else pip3),
#   TARGET_PYTHON=3.12 (the device machine's Python), TARGET_PYTHON_EXE (a
#   Python of that version here, whose headers are packed; default
#   python$TARGET_PYTHON), WHEELS_FROM (a folder of
#   those wheels to copy instead of downloading)
# run environment: PYTHON=python3 (the Python with torch and CUDA to install
#   into), GM_CUDA_WORK=/tmp/gm-cuda (the package and its build files),
#   BENCH_ARGS (staging_bench.py's arguments)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
# `install` also takes the pack that bench/device/pack.sh carries (DEVCUDA).
pack=${GM_CUDA_PACK:-$src/.devcuda}
die() { echo "cuda_checks.sh: $*" >&2; exit 1; }

# The goldminer package pip-installed from the pack into $work/pkg for
# $PYTHON, checked to load from there; its output also in $out.
install_package() {
  out=${OUT:-/tmp/gm-cuda-out}
  mkdir -p "$out"
  out=$(cd "$out" && pwd)
  PYTHON=${PYTHON:-python3}
  work=${GM_CUDA_WORK:-/tmp/gm-cuda}
  [ -f "$pack/build/python-build-info.txt" ] ||
    die "$pack missing or not a pack: run 'cuda_checks.sh pack' on the build machine and carry .devcuda"
  nvidia-smi -L 2>&1 | tee "$out/gpu.txt"

  # The build directory setup.py reads, with this machine's paths.
  case $work in /*) ;; *) die "GM_CUDA_WORK must be an absolute path: $work" ;; esac
  { rm -rf "$work" && mkdir -p "$work" && cp -r "$pack/build" "$work/build"; } || die "cannot write $work"
  sed -i "s|@BUILD@|$work/build|g; s|@SRC@|$src|g; s|@PACK@|$pack|g" \
    "$work/build/python-build-info.txt" "$work/build/python/goldminer/_build_info.py"

  echo "== pip install ./python into $work/pkg ($("$PYTHON" -V 2>&1), $(command -v "$PYTHON"))"
  ver=$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])') || die "$PYTHON does not run"
  inc=$("$PYTHON" -c 'import sysconfig; print(sysconfig.get_path("include"))')
  if [ ! -f "$inc/Python.h" ]; then
    [ -f "$pack/python-include/python$ver/Python.h" ] ||
      die "Python.h missing: $PYTHON (Python $ver) has no headers in $inc (install python$ver-dev), and the pack has none for $ver (pack with TARGET_PYTHON=$ver)"
    echo "cuda_checks.sh: $inc has no Python.h: compiling with the packed headers of Python $ver"
    export CFLAGS="-I$pack/python-include/python$ver ${CFLAGS:-}"
  fi
  GOLDMINER_BUILD_DIR=$work/build "$PYTHON" -m pip install --no-index --find-links "$pack/wheels" --no-cache-dir \
    --target "$work/pkg" "$src/python" 2>&1 | tee "$out/pip_install.txt" ||
    die "pip install ./python failed (the end of its output above; all of it in pip_install.txt)"
  export PYTHONPATH=$work/pkg UCX_MODULE_DIR=$pack/lib/ucx
  "$PYTHON" -m goldminer --version 2>&1 | tee "$out/version.txt" || die "python -m goldminer --version failed"
  where=$("$PYTHON" -c 'import goldminer._session as s; print(s.__file__)') || die "goldminer._session does not load"
  case $where in "$work/pkg/"*) ;; *) die "goldminer._session came from $where, not the package just installed in $work/pkg" ;; esac
  # What it loads (by its DT_RPATH; LD_LIBRARY_PATH plays no part).
  { echo "goldminer._session: $where"; env -u LD_LIBRARY_PATH ldd "$where"; } | tee -a "$out/version.txt"
  ! env -u LD_LIBRARY_PATH ldd "$where" | grep -q 'not found' || die "$where: a library it needs is not found (above)"
}

case ${1:-} in
pack)
  set -e
  build=$(cd "${2:-$src/build}" && pwd)
  PYTHON=${PYTHON:-python3}
  TARGET_PYTHON=${TARGET_PYTHON:-3.12}
  PIP=${PIP:-/var/cache/goldminer/venv-torch2/bin/pip}
  [ -x "$PIP" ] || PIP=pip3
  test_bin=$build/tests/receive_memory_test
  [ -x "$test_bin" ] || die "$test_bin missing: make -C $build tests/receive_memory_test"
  grep -q cudaHostRegister "$test_bin" || die "$test_bin was built without CUDA (configure --with-cuda)"
  [ -f "$build/python-build-info.txt" ] || die "$build/python-build-info.txt missing: build the Python package there (make)"
  suffix=$(awk -F'\t' '$1 == "ext_suffix" {print $2}' "$build/python-build-info.txt")
  session_elf=$build/.libs/_session$suffix
  [ -f "$session_elf" ] || die "$session_elf missing: make -C $build _session.la"
  session_ar=$(awk -F'\t' '$1 == "session_link" && /libgoldminer_session\.a$/ {print $2}' "$build/python-build-info.txt")
  grep -q cudaHostRegister "$session_ar" || die "$session_ar was built without CUDA (configure --with-cuda)"

  rm -rf "$pack" && mkdir -p "$pack/bin" "$pack/lib/ucx" "$pack/wheels"
  strip --strip-debug -o "$pack/bin/receive_memory_test" "$test_bin"
  echo "cuda_checks.sh: build directory for setup.py (pack_python.py)"
  "$PYTHON" "$here/pack_python.py" "$pack" "$build" "$session_elf"

  libucs=$(ldd "$session_elf" | awk '$1 == "libucs.so.0" {print $3}')
  [ -n "$libucs" ] || die "$session_elf does not load libucs.so.0: built without UCX?"
  ucx_modules=$(dirname "$(readlink -f "$libucs")")/ucx
  ls "$ucx_modules"/libuct_*.so.0 >/dev/null 2>&1 || die "$ucx_modules/libuct_*.so.0 missing (UCX's transport modules)"
  for m in "$ucx_modules"/*.so.0; do cp -L "$m" "$pack/lib/ucx/"; done
  echo "cuda_checks.sh: shared libraries (libclosure.py)"
  "$PYTHON" "$here/libclosure.py" "$pack/lib" "$pack/bin/receive_memory_test" "$session_elf" "$pack"/lib/ucx/*.so.0 \
    > "$pack/libs.txt"
  "$PYTHON" "$here/runpath_origin.py" "$pack"/lib/*.so*
  # shellcheck disable=SC2016  # $ORIGIN is for the loader
  "$PYTHON" "$here/runpath_origin.py" --value '$ORIGIN:$ORIGIN/..' "$pack"/lib/ucx/*.so.0
  # Each carried object loads from the packed libraries alone (plus the glibc
  # family), every symbol bound.
  system_re='^(linux-vdso|libc|libm|libdl|libpthread|librt|libresolv|ld-linux-x86-64|libstdc\+\+|libgcc_s)\.so'
  for f in "$pack/bin/receive_memory_test" "$session_elf" "$pack"/lib/ucx/*.so.0; do
    report=$(LD_LIBRARY_PATH="$pack/lib:$pack/lib/ucx" ldd -r "$f" 2>&1)
    bad=$(echo "$report" | grep -E 'not found|undefined symbol' | grep -vE 'undefined symbol: _?Py' || true)
    [ -z "$bad" ] || die "$(basename "$f") does not load from the packed libraries: $bad"
    stray=$(echo "$report" | awk -v r="$pack/" '$2 == "=>" && index($3, r) != 1 {print $1}' | grep -vE "$system_re" || true)
    [ -z "$stray" ] || die "$(basename "$f") loads these from the system, not the pack: $stray"
  done

  if [ -n "${WHEELS_FROM:-}" ]; then
    cp "$WHEELS_FROM"/*.whl "$pack/wheels/"
  else
    echo "cuda_checks.sh: wheels for Python $TARGET_PYTHON's offline build ($PIP download)"
    requires="$("$PYTHON" -c 'import re, sys; t = open(sys.argv[1]).read(); print(" ".join(re.findall(r"\"([^\"]+)\"", re.search(r"requires = \[(.*?)\]", t).group(1))))' "$src/python/pyproject.toml") pytest"
    # shellcheck disable=SC2086
    "$PIP" download -q --only-binary=:all: --python-version "$TARGET_PYTHON" --implementation cp --platform any \
      --platform manylinux2014_x86_64 -d "$pack/wheels" $requires ||
      die "$PIP download failed (no network? set WHEELS_FROM to a folder of the wheels of: $requires)"
  fi
  ls "$pack"/wheels/*-none-any.whl >/dev/null || die "no pure-Python wheels in $pack/wheels"

  target_py=${TARGET_PYTHON_EXE:-python$TARGET_PYTHON}
  if inc=$("$target_py" -c 'import sysconfig; print(sysconfig.get_path("include"))' 2>/dev/null) &&
     [ -f "$inc/Python.h" ]; then
    mkdir -p "$pack/python-include" && cp -r "$inc" "$pack/python-include/python$TARGET_PYTHON"
    echo "cuda_checks.sh: Python $TARGET_PYTHON headers from $inc (used there only if its Python has none)"
  else
    echo "cuda_checks.sh: no $target_py with headers here (TARGET_PYTHON_EXE): the device machine's Python must have Python.h"
  fi
  {
    echo "# bench/device/cuda_checks.sh pack, $(date -u +%Y-%m-%dT%H:%M:%SZ), from $build"
    echo "commit $(git -C "$src" rev-parse HEAD)"
    git -C "$src" status --porcelain --untracked-files=no | sed 's/^/dirty /'
    echo "target-python $TARGET_PYTHON"
    (cd "$pack/wheels" && ls) | sed 's/^/wheel /'
    sed 's/^/lib /' "$pack/libs.txt"
  } > "$pack/MANIFEST"
  echo "cuda_checks.sh: $(grep -c '^lib keep' "$pack/MANIFEST") libraries carried, $(grep -c '^lib stub' "$pack/MANIFEST") stubbed"
  echo "cuda_checks.sh: wrote $pack ($(du -sb "$pack" | cut -f1) bytes; with the tracked tree $(( $(du -sb "$pack" | cut -f1) + $(cd "$src" && git ls-files -z | xargs -0 du -cb | tail -1 | cut -f1) )) of 67108864 the device machine takes)"
  ;;
run | install)
  rc=0
  [ "$1" = install ] || [ -x "$pack/bin/receive_memory_test" ] ||
    die "$pack/bin/receive_memory_test missing: run 'cuda_checks.sh pack' on the build machine and carry .devcuda"
  install_package
  [ "$1" = run ] || { echo "PYTHONPATH=$PYTHONPATH"; exit 0; }
  "$PYTHON" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else "this torch %s sees no GPU (torch.cuda.is_available() is False): the CUDA checks below will say they skipped or fail" % torch.__version__)' || rc=1

  echo "== receive_memory_test"
  LD_LIBRARY_PATH=$pack/lib "$pack/bin/receive_memory_test" 2>&1 | tee "$out/receive_memory_test.txt" || rc=1
  echo "== python/tests/test_staging.py (pytest): the position less what was taken ahead, the hand-over on the GPU"
  # pytest from the pack where this Python has none, beside the package.
  test_path=$PYTHONPATH
  if ! "$PYTHON" -c 'import pytest' >/dev/null 2>&1; then
    "$PYTHON" -m pip install --no-index --find-links "$pack/wheels" --no-cache-dir --target "$work/pytest" pytest \
      >>"$out/pip_install.txt" 2>&1 || die "pip install pytest from $pack/wheels failed (pip_install.txt)"
    test_path=$PYTHONPATH:$work/pytest
  fi
  staging=$src/python/tests/test_staging.py
  PYTHONUNBUFFERED=1 PYTHONPATH=$test_path GOLDMINER_BUILD_DIR=$work/build "$PYTHON" -m pytest -p no:cacheprovider \
    -v -rfEs "$staging::test_the_position_less_the_batches_taken_ahead_resumes_exactly" \
    "$staging::test_batches_are_handed_over_on_the_gpu_copied_ahead" 2>&1 | tee "$out/staging_tests.txt" || rc=1
  echo "== staging_bench.py ${BENCH_ARGS:-}"
  # shellcheck disable=SC2086
  PYTHONUNBUFFERED=1 "$PYTHON" "$here/staging_bench.py" ${BENCH_ARGS:-} 2>&1 | tee "$out/staging_bench.txt" || rc=1
  exit $rc
  ;;
*)
  echo "usage: cuda_checks.sh pack [BUILDDIR] | run | install" >&2
  exit 2
  ;;
esac
