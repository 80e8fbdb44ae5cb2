#!/bin/bash
# Checks the pack of `bench/device/cuda_checks.sh pack` on the build machine
# as if it were the device machine: runs `cuda_checks.sh run` in a mount
# namespace where what the pack replaces is hidden (Debian's copies of the
# packed libraries but libz, which Python itself loads; UCX's and Open MPI's
# folders; dlpack, UCX and hwloc headers; CUDA's lib64; Debian's pybind11), so
# that the offline `pip install ./python` and the extension's libraries can
# only come from the pack. Without a GPU the CUDA checks say so and the run
# exits 1; this then checks that the package was installed, that every
# library of its goldminer._session came from the pack, and that
# test_staging.py's position test passed through it under the packed
# pytest (a real Session, local workers).
# Needs root (unshare -m, mount --bind).
#
# usage: bench/device/cuda_selftest.sh   (after cuda_checks.sh pack)
# environment: PYTHON (a Python with torch 2.x; default
#   /var/cache/goldminer/venv-torch2/bin/python), OUT (default: a new
#   /tmp/gm-cuda-selftest.XXXXXX)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
pack=$(cd "$here/../.." && pwd)/.devcuda
die() { echo "cuda_selftest.sh: $*" >&2; exit 1; }
[ -f "$pack/MANIFEST" ] || die "$pack/MANIFEST missing: run bench/device/cuda_checks.sh pack first"
if [ "$(id -u)" != 0 ] || ! unshare -m true 2>/dev/null; then
  die "needs root and unshare -m (to hide this machine's copies of the packed files)"
fi
export PYTHON=${PYTHON:-/var/cache/goldminer/venv-torch2/bin/python}
out=${OUT:-$(mktemp -d /tmp/gm-cuda-selftest.XXXXXX)}
work=$(mktemp -d /tmp/gm-cuda-selftest-work.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/empty"

hidden=$(awk '$1 == "lib" && $2 == "keep" {print $4}' "$pack/MANIFEST" | grep -v '/libz\.so')
cat > "$work/bare" <<EOF
#!/bin/bash
set -e
for f in $(echo "$hidden" | tr '\n' ' '); do mount --bind /dev/null "\$f"; done
for d in /usr/lib/x86_64-linux-gnu/ucx /usr/lib/x86_64-linux-gnu/openmpi /usr/include/dlpack /usr/include/ucp \\
         /usr/include/hwloc /usr/local/cuda/lib64 /usr/lib/python3/dist-packages/pybind11; do
  if [ -d "\$d" ]; then mount --bind "$work/empty" "\$d"; fi
done
exec "\$@"
EOF
chmod +x "$work/bare"
OUT=$out GM_CUDA_WORK=$work/gm unshare -m "$work/bare" env -u LD_LIBRARY_PATH bash "$here/cuda_checks.sh" run \
  > "$out/selftest.log" 2>&1
rc=$?
echo "cuda_selftest.sh: cuda_checks.sh run exited $rc (1 without a GPU); its output in $out/selftest.log"
grep -q '^Successfully installed goldminer-' "$out/pip_install.txt" || die "pip install ./python failed: $out/pip_install.txt"
stray=$(grep '=> ' "$out/version.txt" | grep -v "=> $pack/lib/" |
        grep -vE '^\s*(libc|libm|libstdc\+\+|libgcc_s|libdl|libpthread|librt)\.so' || true)
[ -z "$stray" ] || die "goldminer._session loads these from outside the pack: $stray"
grep -q 'test_the_position_less_the_batches_taken_ahead_resumes_exactly PASSED' "$out/staging_tests.txt" ||
  die "test_staging.py's position test did not pass: $out/staging_tests.txt"
echo "cuda_selftest.sh: installed offline from the pack, $(grep -c "=> $pack/lib/" "$out/version.txt") libraries from $pack/lib, test_staging.py's position test passed"
grep -E 'skipped|needs a|sees no GPU' "$out/selftest.log" | sed 's/^/cuda_selftest.sh: /'
