#!/bin/bash
# Writes what bench/split_gpu/trainer_step.py runs, one folder per case:
#   dlrm/          the DLRM-style model of tests/split/models.py at batch
#                  4096, split in `dataset` and `extended` mode
#   dcn-b64/, dcn-b4096/
#                  the DCN of tests/split/models.py at batch 64 and 4096,
#                  split in `dataset` mode, priced for a GPU trainer
#                  (`cuda`) and for a CPU trainer (`cpu`) at that batch
# Each folder holds MODE_worker.pt, MODE_trainer.pt (verified), the
# reports, and example.pt. Run where the project is built (libtorch 1.13);
# the output folder can then go to a GPU machine, whose newer torch loads
# the programs. Pricing uses this machine's link unless TRANSFER_GBPS is set
# (default 1.25: a GPU's share of 10 Gb/s, so the cuts do not depend on
# where this runs).
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
for batch in (64, 4096):
    torch.manual_seed(0)
    models.save(sys.argv[2], "dcn%d" % batch, torch.jit.script(models.DCN()), models.criteo_batch(batch))
PY
gbps=${TRANSFER_GBPS:-1.25}
# split CASE MODEL MODE_NAME ARGS...: one split of MODEL into OUTDIR/CASE.
split() {
  local case=$1 model=$2 name=$3
  shift 3
  mkdir -p "$out/$case"
  cp "$tmp/${model}_example.pt" "$out/$case/example.pt"
  OMP_NUM_THREADS=1 "$build/goldminer-split" "$tmp/$model.pt" --example "$tmp/${model}_example.pt" \
    --worker "$out/$case/${name}_worker.pt" --trainer "$out/$case/${name}_trainer.pt" \
    --report-json "$out/$case/${name}_report.json" --verify --transfer-gbps "$gbps" "$@" > "$out/$case/${name}_report.txt"
}
for mode in dataset extended; do
  split dlrm dlrm "$mode" --mode "$mode" --trainer-device cpu
done
for batch in 64 4096; do
  split "dcn-b$batch" "dcn$batch" dataset --mode dataset
  split "dcn-b$batch" "dcn$batch" cuda --trainer-device cuda --batch-size "$batch"
  split "dcn-b$batch" "dcn$batch" cpu --trainer-device cpu --batch-size "$batch"
done
echo "prepare.sh: wrote $(cd "$out" && ls -d */ | tr '\n' ' ')"
