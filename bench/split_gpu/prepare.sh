#!/bin/bash
# Writes what bench/split_gpu/trainer_step.py runs: the DLRM-style model of
# tests/split/models.py at batch 4096, split by goldminer-split in `dataset`
# and `extended` mode (worker + trainer programs each, verified), and the
# example batch. Run where the project is built (libtorch 1.13); the output
# folder can then go to a GPU machine, whose newer torch loads the programs.
#
# usage: bench/split_gpu/prepare.sh OUTDIR [BUILDDIR]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
out=${1:?usage: prepare.sh OUTDIR [BUILDDIR]}
build=$(cd "${2:-$top/build}" && pwd)
python=${PYTHON:-/usr/bin/python3}
[ -x "$build/goldminer-split" ] || { echo "prepare.sh: $build/goldminer-split missing: build it first" >&2; exit 1; }
mkdir -p "$out"
tmp=$(mktemp -d /tmp/gm-split-gpu.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
"$python" - "$top/tests/split" "$tmp" <<'PY'
import sys, torch
sys.path.insert(0, sys.argv[1])
import models
torch.manual_seed(0)
models.save(sys.argv[2], "dlrm", torch.jit.script(models.DLRM()), models.criteo_batch(4096))
PY
cp "$tmp/dlrm_example.pt" "$out/example.pt"
for mode in dataset extended; do
  OMP_NUM_THREADS=1 "$build/goldminer-split" "$tmp/dlrm.pt" --example "$tmp/dlrm_example.pt" --mode "$mode" \
    --worker "$out/${mode}_worker.pt" --trainer "$out/${mode}_trainer.pt" \
    --report-json "$out/${mode}_report.json" --verify > "$out/${mode}_report.txt"
done
echo "prepare.sh: wrote $(ls "$out" | tr '\n' ' ')"
