#!/bin/bash
# Runs data-plane benchmarks (b), worker scaling (bench/dataplane/scaling.sh),
# and (c), against a PyTorch DataLoader (bench/dataplane/dataloader_compare.sh),
# on a machine without our Debian packages (no UCX, libtorch 1.13, Boost, Open
# MPI, GNU time), from the archive bench/device/pack.sh made on the build
# machine (.devpack/, carried along with the source tree). Needs there: x86-64
# Linux, glibc and libstdc++ at least as new as the MANIFEST says (glibc 2.36,
# GLIBCXX_3.4.30 for a build on Debian 12: Debian 12 / GCC 12 or newer, e.g.
# Ubuntu 24.04), and a Python with torch (+ torchvision for the JPEG half of
# (c)) for the DataLoader side and the data generator.
#
# Unpacks to GM_DIR and makes GM_DIR/build look like a build folder for the two
# scripts: build/goldminer-consume, build/goldminer-dw, build/bench/inprocess_bench
# are small wrappers that set LD_LIBRARY_PATH and UCX_MODULE_DIR for the
# carried binaries only (goldminer-consume starts the goldminer-dw beside the
# real binary, which inherits them). Exporting LD_LIBRARY_PATH to the whole run
# would also make the DataLoader side's Python and torch load our Debian libz,
# libgomp, liblzma, ... instead of their own.
#
# usage (repository root): bash bench/device/run.sh
# environment: OUT (results folder; default: a new /tmp/gm-devpack-out.XXXXXX),
#   GM_DIR=/tmp/gm, PYTHON=python3, K_SCALING="1 2 4 8 12" (K of (b)),
#   K_COMPARE="1 2 4 8" (K of (c)), SCALING_ROWS and SCALING_REPEAT (ROWS and
#   REPEAT of (b); default ROWS, REPEAT, else the script's), COMPARE_ROWS and
#   COMPARE_REPEAT (of (c), likewise), COMPARE_DECODES="full" (JPEG_DECODE of
#   each (c) run: the first runs DATASETS, the others the JPEG half again,
#   e.g. "full resized-crop:224"), UCX_NET_DEVICES=lo; the scripts' other
#   variables (ROWS, REPEAT, EPOCHS, BATCH, CRITEO_EPOCHS, JPEG_EPOCHS, ...) pass
#   through. GM_EXEC_PREFIX: a command put before each carried binary
#   (selftest.sh uses it to hide this machine's libraries).
# writes: $OUT/scaling.txt, $OUT/dataloader_compare.txt and one
#   dataloader_compare-DECODE.txt per further decode (also on stdout),
#   $OUT/env.txt (machine, versions, the libraries each binary loads),
#   $OUT/MANIFEST (what was packed)
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
archive=$src/.devpack/gm-devpack.tar.xz
gm=${GM_DIR:-/tmp/gm}
out=${OUT:-}
PYTHON=${PYTHON:-python3}
K_SCALING=${K_SCALING:-"1 2 4 8 12"}
K_COMPARE=${K_COMPARE:-"1 2 4 8"}
# Each benchmark sized on its own (one ROWS for both made the DataLoader
# side of the comparison run for as long as the scaling run needed rows).
SCALING_ROWS=${SCALING_ROWS:-${ROWS:-100000}}
SCALING_REPEAT=${SCALING_REPEAT:-${REPEAT:-5}}
COMPARE_ROWS=${COMPARE_ROWS:-${ROWS:-100000}}
COMPARE_REPEAT=${COMPARE_REPEAT:-${REPEAT:-2}}
COMPARE_DECODES=${COMPARE_DECODES:-full}
die() { echo "run.sh: $*" >&2; exit 1; }

[ -f "$archive" ] || die "$archive missing: run bench/device/pack.sh on the build machine and carry .devpack"
[ "$(uname -m)" = x86_64 ] || die "the carried binaries are x86-64; this machine is $(uname -m)"
if [ -z "$out" ]; then out=$(mktemp -d /tmp/gm-devpack-out.XXXXXX); fi
mkdir -p "$out"
out=$(cd "$out" && pwd)

# Unpack (tar + xz where present, else Python's tarfile).
case $gm in /*) ;; *) die "GM_DIR must be an absolute path: $gm" ;; esac
[ ! -e "$gm" ] || [ -f "$gm/MANIFEST" ] || die "$gm exists and is not an unpacked devpack: remove it or set GM_DIR"
rm -rf "$gm"
mkdir -p "$gm"
t0=$SECONDS
if command -v xz >/dev/null && command -v tar >/dev/null; then
  tar -C "$gm" -xJf "$archive"
else
  "$PYTHON" - "$archive" "$gm" <<'PY' || die "cannot unpack $archive (no tar + xz, and $PYTHON's tarfile failed)"
import sys, tarfile
with tarfile.open(sys.argv[1], "r:xz") as t:
    if hasattr(tarfile, "data_filter"):
        t.extractall(sys.argv[2], filter="data")
    else:
        t.extractall(sys.argv[2])
PY
fi
cp "$gm/MANIFEST" "$out/MANIFEST"
echo "run.sh: unpacked $archive to $gm in $((SECONDS - t0)) s"

# What the carried binaries need from this machine.
manifest() { awk -v k="$1" '$1 == k {print $2}' "$gm/MANIFEST"; }
at_least() { [ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -1)" = "$2" ]; }
glibc=$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}' || true)
[ -n "$glibc" ] || glibc=$("$PYTHON" -c 'import platform; print(platform.libc_ver()[1])' 2>/dev/null || true)
if [ -n "$glibc" ]; then
  at_least "$glibc" "$(manifest needs-glibc)" ||
    die "glibc $glibc here; the carried binaries and libraries need glibc >= $(manifest needs-glibc)"
else
  echo "run.sh: warning: cannot tell this machine's glibc version (need >= $(manifest needs-glibc))" >&2
fi
"$PYTHON" -c 'import torch' 2>/dev/null ||
  die "$PYTHON cannot import torch: the DataLoader side of (c) and the scripts need it (set PYTHON)"
"$PYTHON" -c 'import torchvision' 2>/dev/null ||
  echo "run.sh: warning: $PYTHON cannot import torchvision: (c) will skip its JPEG half" >&2

# Wrappers where the scripts expect a build folder.
write_wrappers() {  # $1: extra library folder ("" or lib-compat)
  local libs="$gm/lib:$gm/lib/ucx${1:+:$gm/$1}" p
  mkdir -p "$gm/build/bench"
  for p in goldminer-consume goldminer-dw bench/inprocess_bench; do
    cat > "$gm/build/$p" <<EOF
#!/bin/sh
# bench/device/run.sh: the carried $(basename "$p") with the carried libraries
LD_LIBRARY_PATH=$libs\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}
UCX_MODULE_DIR=$gm/lib/ucx
export LD_LIBRARY_PATH UCX_MODULE_DIR
exec ${GM_EXEC_PREFIX:-} $gm/bin/$(basename "$p") "\$@"
EOF
    chmod +x "$gm/build/$p"
  done
}
# A load failure names the library or symbol version at fault; a libstdc++
# older than GCC 12's gets the carried one.
probe() { "$gm/build/goldminer-consume" --help > /dev/null 2> "$gm/probe.err"; }
write_wrappers ""
if ! probe; then
  if grep -qE "version .(GLIBCXX|CXXABI|GCC)_" "$gm/probe.err"; then
    echo "run.sh: this machine's libstdc++ is older than the binaries need ($(tr '\n' ' ' < "$gm/probe.err")); using the carried one" >&2
    write_wrappers lib-compat
    probe || die "goldminer-consume does not start with the carried libstdc++ either: $(cat "$gm/probe.err")"
  else
    die "goldminer-consume does not start: $(cat "$gm/probe.err")"
  fi
fi

{
  echo "date $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "uname $(uname -srvm)"
  [ -r /etc/os-release ] && echo "os $(. /etc/os-release && echo "$PRETTY_NAME")"
  echo "cores $(nproc) (of $(getconf _NPROCESSORS_ONLN))"
  grep -m1 'model name' /proc/cpuinfo || true
  # Hyperthreads: two workers on one core's siblings each run slower, and
  # the CPU seconds per sample of (b) rise with k for that alone.
  lscpu 2>/dev/null | grep -E '^(Thread\(s\) per core|Core\(s\) per socket|Socket\(s\)|NUMA node\(s\)):' || true
  grep -E 'MemTotal|MemAvailable' /proc/meminfo || true
  echo "loadavg $(cat /proc/loadavg)"
  echo "glibc ${glibc:-unknown}"
  echo "dev-shm $(df -h /dev/shm 2>/dev/null | awk 'NR == 2 {print $2}')"
  echo "ptrace_scope $(cat /proc/sys/kernel/yama/ptrace_scope 2>/dev/null || echo n/a)"
  "$PYTHON" -c 'import sys, multiprocessing, torch
print("python", sys.version.split()[0], sys.executable)
print("multiprocessing default start method", multiprocessing.get_start_method())
print("torch", torch.__version__)
try:
    import torchvision
    print("torchvision", torchvision.__version__)
except ImportError as e:
    print("torchvision missing:", e)' 2>&1
  echo "gnu-time $gm/bin/time"
  for b in goldminer-consume goldminer-dw inprocess_bench; do
    echo "== libraries of $b (LD_LIBRARY_PATH as in the wrappers)"
    (eval "$(grep -E '^(LD_LIBRARY_PATH|UCX_MODULE_DIR)=' "$gm/build/goldminer-consume")"
     export LD_LIBRARY_PATH
     if command -v ldd > /dev/null; then ldd "$gm/bin/$b"; else LD_TRACE_LOADED_OBJECTS=1 "$gm/bin/$b"; fi) 2>&1 || true
  done
} > "$out/env.txt"
echo "run.sh: $(grep -E '^(cores|python|torch|torchvision) ' "$out/env.txt" | tr '\n' ';')"

export PYTHON UCX_NET_DEVICES=${UCX_NET_DEVICES:-lo}
export PROGRAMS_DIR=$gm/programs SHARED_DATA=$gm/data GNU_TIME=$gm/bin/time
failed=""
t0=$SECONDS
K=$K_SCALING ROWS=$SCALING_ROWS REPEAT=$SCALING_REPEAT bash "$src/bench/dataplane/scaling.sh" "$gm/build" 2>&1 | tee "$out/scaling.txt" || failed="$failed scaling.sh"
echo "run.sh: scaling.sh: $((SECONDS - t0)) s"
t0=$SECONDS
# Criteo and JPEG with the first decode, then JPEG alone with each other.
first=1
for decode in $COMPARE_DECODES; do
  name=dataloader_compare
  [ "$decode" = full ] || name=$name-${decode%%:*}
  [ "$first" = 1 ] && datasets=${DATASETS:-"criteo jpeg"} || datasets=jpeg
  K=$K_COMPARE DATASETS=$datasets JPEG_DECODE=${decode:-full} ROWS=$COMPARE_ROWS REPEAT=$COMPARE_REPEAT \
    bash "$src/bench/dataplane/dataloader_compare.sh" "$gm/build" 2>&1 | tee "$out/$name.txt" ||
    failed="$failed dataloader_compare.sh(${decode:-full})"
  first=0
done
echo "run.sh: dataloader_compare.sh: $((SECONDS - t0)) s"
echo "run.sh: results in $out"
[ -z "$failed" ] || die "failed:$failed (see above and $out)"
