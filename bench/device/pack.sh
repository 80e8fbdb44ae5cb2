#!/bin/bash
# Packs what the worker scaling and DataLoader comparison benchmarks
# (bench/dataplane/scaling.sh, dataloader_compare.sh) need on a machine that
# has none of our Debian packages into ONE archive, .devpack/gm-devpack.tar.xz
# (ignored by git; never commit it: it holds the shared JPEG data set).
# bench/device/run.sh unpacks and runs it there.
#
# Contents (paths inside the archive):
#   bin/          goldminer-consume, goldminer-dw, inprocess_bench (debug info
#                 stripped, code unchanged), time (Debian's GNU time)
#   lib/          the shared libraries they load, without the glibc/GCC runtime
#                 family (libc, libm, libdl, libpthread, librt, ld-linux,
#                 libstdc++, libgcc_s: the target's own are used), chosen by
#                 libclosure.py: Debian's libtorch 1.13 is linked against OpenCV,
#                 FFmpeg, ZeroMQ, LevelDB, ... (about 530 MB with their own
#                 dependencies) but imports nothing from them; those, and BLAS and
#                 LAPACK (imported, never called by the benchmark programs), are
#                 carried as stubs (same SONAME, no code; a call aborts naming
#                 the function). oneDNN is carried: libtorch calls it at start-up.
#   lib/ucx/      UCX's transport modules (UCX_MODULE_DIR)
#   lib-compat/   this machine's libstdc++ and libgcc_s, used by run.sh only if
#                 the target's libstdc++ lacks a version the binaries need
#   programs/     criteo.pt, jpeg.pt scripted here by $PYTHON's torch 1.13 (a
#                 file saved by a newer torch may not load in libtorch 1.13)
#   data/datasets/images_jpeg/   copy of $SHARED_DATA/datasets/images_jpeg
#   MANIFEST      what was packed, from which commit, and what the target
#                 needs (glibc, GLIBCXX and CXXABI versions)
#
# Run on the build machine (Debian 12) after building the three programs; reads
# BUILDDIR, never writes there.
#
# usage: bench/device/pack.sh [BUILDDIR]   (default: ./build)
# environment: SHARED_DATA=../shared/data (relative to the source tree),
#   PYTHON=/usr/bin/python3 (with torch 1.13, the binaries' libtorch),
#   XZ_THREADS=1, MAX_MIB=56 (fail above this archive size: the copy to the
#   device machine is limited to 64 MiB with the source tree), DEVCUDA (a
#   pack of `bench/device/cuda_checks.sh pack`, e.g. .devcuda: carried in the
#   archive as devcuda/, without its test binary, for gpu_node.sh)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
build=$(cd "${1:-$src/build}" && pwd)
SHARED_DATA=${SHARED_DATA:-$src/../shared/data}
PYTHON=${PYTHON:-/usr/bin/python3}
XZ_THREADS=${XZ_THREADS:-1}
MAX_MIB=${MAX_MIB:-56}
die() { echo "pack.sh: $*" >&2; exit 1; }

for t in readelf objdump ldd strip cc xz tar sha256sum git; do
  command -v "$t" >/dev/null || die "$t missing (Debian: apt install binutils gcc xz-utils tar coreutils git libc-bin)"
done
programs="goldminer-consume goldminer-dw bench/inprocess_bench"
for p in $programs; do
  [ -x "$build/$p" ] || die "$build/$p missing: build it first (make -C $build -j2 $p)"
done
if ! /usr/bin/time --version 2>&1 | grep -q GNU; then die "/usr/bin/time (GNU time) missing: apt install time"; fi
"$PYTHON" -c 'import torch' 2>/dev/null || die "$PYTHON cannot import torch (needed to script the worker programs: apt install python3-torch)"
torch_py=$("$PYTHON" -c 'import torch; print(torch.__version__.split("+")[0])')
jpeg_dir=$SHARED_DATA/datasets/images_jpeg
[ -d "$jpeg_dir" ] || die "$jpeg_dir missing (the shared JPEG data set; set SHARED_DATA)"
libucs=$(ldd "$build/goldminer-consume" | awk '$1 == "libucs.so.0" {print $3}')
[ -n "$libucs" ] || die "$build/goldminer-consume does not load libucs.so.0: built without UCX?"
ucx_modules=$(dirname "$(readlink -f "$libucs")")/ucx
ls "$ucx_modules"/libuct_*.so.0 >/dev/null 2>&1 || die "$ucx_modules/libuct_*.so.0 missing (UCX's transport modules: apt install libucx0)"

stage=$(mktemp -d /tmp/gm-devpack.XXXXXX)
trap 'rm -rf "$stage"' EXIT
root=$stage/gm
mkdir -p "$root/bin" "$root/lib/ucx" "$root/lib-compat" "$root/programs" "$root/data/datasets"

echo "pack.sh: binaries from $build"
for p in $programs; do strip --strip-debug -o "$root/bin/$(basename "$p")" "$build/$p"; done
cp /usr/bin/time "$root/bin/time"
for m in "$ucx_modules"/libuct_*.so.0; do cp -L "$m" "$root/lib/ucx/"; done

echo "pack.sh: shared libraries (libclosure.py)"
"$PYTHON" "$here/libclosure.py" "$root/lib" --stub libblas.so --stub liblapack.so \
  "$root"/bin/goldminer-consume "$root"/bin/goldminer-dw "$root"/bin/inprocess_bench "$root"/lib/ucx/*.so.0 \
  > "$stage/libs.txt"
for l in libstdc++.so.6 libgcc_s.so.1; do
  cp -L "$(ldd "$build/goldminer-consume" | awk -v l="$l" '$1 == l {print $3}')" "$root/lib-compat/$l"
done

# Every carried object must load from the carried libraries alone (plus the
# glibc family) with every symbol bound: ldd -r reports what is missing.
system_re='^(linux-vdso|libc|libm|libdl|libpthread|librt|libresolv|ld-linux-x86-64|libstdc\+\+|libgcc_s)\.so'
for f in "$root"/bin/goldminer-consume "$root"/bin/goldminer-dw "$root"/bin/inprocess_bench "$root"/lib/ucx/*.so.0; do
  report=$(LD_LIBRARY_PATH="$root/lib:$root/lib/ucx" ldd -r "$f" 2>&1)
  bad=$(echo "$report" | grep -E 'not found|undefined symbol' || true)
  [ -z "$bad" ] || die "$(basename "$f") does not load from the packed libraries: $bad"
  stray=$(echo "$report" | awk -v r="$root/" '$2 == "=>" && index($3, r) != 1 {print $1}' | grep -vE "$system_re" || true)
  [ -z "$stray" ] || die "$(basename "$f") loads these from the system, not the pack: $stray"
done

echo "pack.sh: worker programs (torch $torch_py)"
"$PYTHON" "$src/bench/dataplane/make_programs.py" "$root/programs" >/dev/null
echo "pack.sh: $jpeg_dir"
cp -r "$jpeg_dir" "$root/data/datasets/images_jpeg"

# The goldminer package's build inputs (bench/device/gpu_node.sh installs it
# there with cuda_checks.sh install), without the CUDA test binary.
if [ -n "${DEVCUDA:-}" ]; then
  [ -f "$DEVCUDA/build/python-build-info.txt" ] ||
    die "DEVCUDA=$DEVCUDA: not a pack of bench/device/cuda_checks.sh pack (no build/python-build-info.txt)"
  echo "pack.sh: the goldminer package's build inputs from $DEVCUDA"
  mkdir -p "$root/devcuda" && cp -a "$DEVCUDA"/. "$root/devcuda/" && rm -rf "$root/devcuda/bin"
fi

# The newest symbol versions the carried objects need from the target's glibc
# and libstdc++ (run.sh checks them before running anything).
mapfile -t carried < <(find "$root/bin" "$root/lib" -type f ! -name time)
newest() { objdump -T "${carried[@]}" 2>/dev/null | grep -oE "\\($1_[0-9.]+\\)" | tr -d '()' | sort -uV | tail -1 | sed "s/^$1_//"; }
{
  echo "# bench/device/pack.sh, $(date -u +%Y-%m-%dT%H:%M:%SZ), on $(. /etc/os-release && echo "$PRETTY_NAME")"
  echo "commit $(git -C "$src" rev-parse HEAD)"
  git -C "$src" status --porcelain --untracked-files=no | sed 's/^/dirty /'
  for p in $programs; do echo "binary $p $(date -u -r "$build/$p" +%Y-%m-%dT%H:%M:%SZ) $(sha256sum < "$build/$p" | cut -d' ' -f1)"; done
  echo "needs-glibc $(newest GLIBC)"
  echo "needs-glibcxx $(newest GLIBCXX)"
  echo "needs-cxxabi $(newest CXXABI)"
  echo "libtorch $(dpkg-query -W -f '${Version}' libtorch1.13 2>/dev/null || echo unknown)"
  echo "ucx $(dpkg-query -W -f '${Version}' libucx0 2>/dev/null || echo unknown)"
  echo "programs-torch $torch_py"
  echo "images $(find "$root/data/datasets/images_jpeg" -type f | wc -l)"
  [ -z "${DEVCUDA:-}" ] || echo "devcuda $(sed -n 's/^commit //p' "$DEVCUDA/MANIFEST")"
  sed 's/^/lib /' "$stage/libs.txt"
} > "$root/MANIFEST"

mkdir -p "$src/.devpack"
archive=$src/.devpack/gm-devpack.tar.xz
rm -f "$archive" "$archive.part"
echo "pack.sh: compressing $(du -sm "$root" | cut -f1) MB (xz, x86 filter, preset 9, $XZ_THREADS thread(s); a few minutes)"
tar -C "$root" --owner=0 --group=0 -cf - . | xz --x86 --lzma2=preset=9 -T"$XZ_THREADS" > "$archive.part"
mv "$archive.part" "$archive"
mib=$(( $(stat -c %s "$archive") / 1048576 ))
[ "$mib" -le "$MAX_MIB" ] || die "$archive is $mib MiB, over MAX_MIB=$MAX_MIB"
grep -E "^(commit|dirty|needs-[a-z]+|libtorch|ucx|programs-torch|images|devcuda) " "$root/MANIFEST" | sed 's/^/pack.sh:   /'
echo "pack.sh: $(grep -c '^lib keep' "$root/MANIFEST") libraries carried, $(grep -c '^lib stub' "$root/MANIFEST") stubbed"
echo "pack.sh: wrote $archive ($(stat -c %s "$archive") bytes, $mib MiB)"
