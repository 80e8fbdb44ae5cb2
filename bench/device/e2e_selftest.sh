#!/bin/bash
# Self-check of bench/device/e2e_train.py on a machine without a GPU (this
# 2-core build machine): its CPU stand-in (--device cpu --slot-cores 1
# --wide-cores 2 --workers 1, small sizes) with each Python given, then
# checks that every case of every model not skipped gave a positive
# samples/s (its JSON lines) and that both ratios were printed per model.
# Figures from here are a self-check of the pipelines, not GPU results.
#
#   Debian's python3 (torch 1.13) with the package staged in BUILDDIR/python;
#   the torch 2.x venv (TORCH2_PYTHON) with the package pip-installed
#   (as scripts/run-tests' torch2 stage does) into a temporary folder.
#
# usage: bench/device/e2e_selftest.sh [BUILDDIR]   (default: ./build)
# environment: PYTHONS="system torch2" (which of the two),
#   TORCH2_PYTHON=/var/cache/goldminer/venv-torch2/bin/python,
#   E2E_ARGS (more arguments of e2e_train.py, after the small sizes)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
build=$(cd "${1:-$src/build}" 2>/dev/null && pwd) || { echo "e2e_selftest.sh: build directory ${1:-$src/build} missing" >&2; exit 1; }
PYTHONS=${PYTHONS:-"system torch2"}
TORCH2_PYTHON=${TORCH2_PYTHON:-/var/cache/goldminer/venv-torch2/bin/python}
die() { echo "e2e_selftest.sh: $*" >&2; exit 1; }
[ -x "$build/goldminer-dw" ] || die "$build/goldminer-dw missing: make -C $build goldminer-dw"
[ -d "$build/python/goldminer" ] || die "$build/python/goldminer missing: build the Python package (make -C $build)"

tmp=$(mktemp -d /tmp/gm-e2e-selftest.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
sizes=(--device cpu --slot-cores 1 --wide-cores 2 --workers 1 --steps 6 --warmup 2 --batch-dlrm 512
  --batch-resnet 8 --resnet-width 8 "--resnet-depth" "1,1,1,1" --case-timeout 60)
status=0

# check NAME: the run's output ($tmp/NAME.txt) and JSON lines ($tmp/NAME.jsonl).
check() {
  "$python" - "$tmp/$1.txt" "$tmp/$1.jsonl" <<'PY'
import json, os, sys
text = open(sys.argv[1]).read()
results = [json.loads(l) for l in open(sys.argv[2])] if os.path.exists(sys.argv[2]) else []
bad, ran = [], 0
for model in ("dlrm", "resnet"):
    if f"e2e_train.py: {model} SKIPPED:" in text:
        print(f"  {model}: skipped (the reason is in the output above)")
        continue
    ran += 1
    for pipeline in ("dataloader-slot", "dataloader-wide", "goldminer"):
        r = [x for x in results if x["model"] == model and x["pipeline"] == pipeline]
        if len(r) != 1 or not r[0]["samples_per_s"] > 0:
            bad.append(f"{model} {pipeline}: no positive samples/s")
    for base in ("dataloader-slot", "dataloader-wide"):
        if f"{model}: goldminer / {base} = " not in text:
            bad.append(f"{model}: the ratio goldminer / {base} was not printed")
if not ran:
    bad.append("every model was skipped")
for b in bad:
    print("  FAILED: " + b)
sys.exit(1 if bad else 0)
PY
}

for which in $PYTHONS; do
  case $which in
  system)
    python=/usr/bin/python3 pkg=$build/python ;;
  torch2)
    python=$TORCH2_PYTHON pkg=$tmp/pkg
    [ -x "$python" ] || { echo "e2e_selftest.sh: torch2 skipped: $python missing"; continue; }
    echo "== pip install $src/python into $pkg ($("$python" -V 2>&1))"
    GOLDMINER_BUILD_DIR=$build nice -n 19 "$(dirname "$python")/pip" install -q --no-deps --no-build-isolation \
      --target "$pkg" "$src/python" >"$tmp/pip.txt" 2>&1 ||
      { cat "$tmp/pip.txt" >&2; echo "e2e_selftest.sh: torch2: pip install failed (above)" >&2; status=1; continue; } ;;
  *) die "PYTHONS: unknown $which (system, torch2)" ;;
  esac
  echo "== $which: $python, e2e_train.py ${sizes[*]} ${E2E_ARGS:-}"
  # shellcheck disable=SC2086 # E2E_ARGS: words on purpose
  PYTHONPATH=$pkg GOLDMINER_DW_PROGRAM=$build/goldminer-dw PYTHONUNBUFFERED=1 nice -n 19 \
    "$python" "$here/e2e_train.py" "${sizes[@]}" --json "$tmp/$which.jsonl" ${E2E_ARGS:-} 2>&1 | tee "$tmp/$which.txt"
  rc=${PIPESTATUS[0]}
  [ "$rc" = 0 ] || { echo "e2e_selftest.sh: $which: e2e_train.py exited $rc"; status=1; }
  if check "$which"; then echo "e2e_selftest.sh: $which: ok"; else status=1; fi
done
[ "$status" = 0 ] && echo "e2e_selftest.sh: PASSED" || echo "e2e_selftest.sh: FAILED"
exit "$status"
