#!/bin/bash
# A GPU node's figures in one call on the device machine (16 cores, one GPU,
# its own Python and torch, none of our Debian packages), within BUDGET_S
# (480 s), each step bounded by its share and its figures left in $OUT:
#   1. worker scaling, k = 1 2 4 8 12 14 against the same reader and program
#      in one process (bench/dataplane/scaling.sh through run.sh):
#      2,000,000 generated Criteo rows, batch 4096, 4 epochs;
#   2. goldminer against torch's DataLoader, k = 1 4 8 12
#      (bench/dataplane/dataloader_compare.sh through run.sh): Criteo and
#      JPEG, then JPEG again with the reader's resized-crop:224 decode;
#   3. end-to-end training on the GPU (bench/device/e2e_train.py): a
#      DLRM-style model on Criteo rows and a ResNet-50-style one on JPEGs,
#      fed (a) by torch's DataLoader on the 2 cores of a fragmented GPU slot,
#      (b) by the same on 12 cores, (c) by goldminer, its trainer on those 2
#      cores and its workers on the other cores; samples/s, GPU busy share
#      and the ratios (c)/(a) and (c)/(b).
# All from one archive, .devpack (64 MiB with the tree: two packs would not
# fit): here `bench/device/cuda_checks.sh pack` (after a build --with-cuda),
# then `DEVCUDA=.devcuda bench/device/pack.sh`. Steps 1-2 run the carried
# binaries; step 3 installs the goldminer package for this machine's Python
# from the archive's devcuda/ (cuda_checks.sh install) and runs its
# workers from the carried goldminer-dw.
#
# usage (repository root, .devpack carried): bash bench/device/gpu_node.sh
# environment: OUT (results; default a new /tmp/gm-gpu-node.XXXXXX),
#   PYTHON=python3 (with torch), BUDGET_S=480 (1500 with SELFCHECK=1), E2E_ARGS (more arguments of
#   e2e_train.py), SELFCHECK=1: the same steps at small sizes on a machine
#   without a GPU (2 cores: k = 1 2, the GPU step on the CPU), e.g. here
#   after both packs: SELFCHECK=1 PYTHON=/var/cache/goldminer/venv-torch2/bin/python
#   bash bench/device/gpu_node.sh. The data-plane scripts'
#   variables (SCALING_ROWS, K_SCALING, ...; see run.sh) override the sizes.
# writes: $OUT/scaling.txt, dataloader_compare*.txt, env.txt, MANIFEST (run.sh),
#   install.txt, pip_install.txt, version.txt (the package), e2e_train.txt, e2e_train.jsonl,
#   steps.txt (each step's exit status and seconds)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
die() { echo "gpu_node.sh: $*" >&2; exit 1; }
PYTHON=${PYTHON:-python3}
# The device machine's 8 minutes; a self-check on 2 cores takes longer.
if [ "${SELFCHECK:-0}" = 1 ]; then BUDGET_S=${BUDGET_S:-1500}; else BUDGET_S=${BUDGET_S:-480}; fi
out=${OUT:-}
if [ -z "$out" ]; then out=$(mktemp -d /tmp/gm-gpu-node.XXXXXX); fi
{ mkdir -p "$out" && out=$(cd "$out" && pwd); } || die "cannot write $out"
[ -f "$src/.devpack/gm-devpack.tar.xz" ] || die ".devpack missing: run bench/device/pack.sh on the build machine and carry .devpack"
export GM_DIR=${GM_DIR:-/tmp/gm-node} PYTHON OUT=$out
t_start=$SECONDS

if [ "${SELFCHECK:-0}" = 1 ]; then
  : "${K_SCALING:=1 2}" "${SCALING_ROWS:=20000}" "${SCALING_REPEAT:=1}" "${EPOCHS:=2}"
  : "${K_COMPARE:=1 2}" "${COMPARE_ROWS:=5000}" "${COMPARE_REPEAT:=1}" "${JPEG_EPOCHS:=2}"
  e2e_sizes=(--device cpu --slot-cores 1 --wide-cores 2 --workers 1 --steps 6 --warmup 2 --batch-dlrm 512
             --batch-resnet 8 --resnet-width 8 --resnet-depth "1,1,1,1" --case-timeout 60)
  share_data=600 share_install=300 share_e2e=300
else
  [ "$(nproc)" -ge 16 ] || echo "gpu_node.sh: warning: $(nproc) cores here; the sizes are for 16 (SELFCHECK=1 for a small machine)" >&2
  : "${K_SCALING:=1 2 4 8 12 14}" "${SCALING_ROWS:=400000}" "${SCALING_REPEAT:=5}" "${EPOCHS:=4}"
  : "${K_COMPARE:=1 4 8 12}" "${COMPARE_ROWS:=100000}" "${COMPARE_REPEAT:=2}" "${JPEG_EPOCHS:=3}"
  e2e_sizes=(--device cuda --slot-cores 2 --wide-cores 12 --budget 180)  # within its share, a table
  share_data=190 share_install=80 share_e2e=190  # seconds; unpacking takes ~10 s of the 480
fi
export K_SCALING SCALING_ROWS SCALING_REPEAT EPOCHS BATCH=${BATCH:-4096}
export K_COMPARE COMPARE_ROWS COMPARE_REPEAT JPEG_EPOCHS COMPARE_DECODES=${COMPARE_DECODES:-"full resized-crop:224"}
: > "$out/steps.txt"
failed=""
step() {  # step NAME SECONDS LOG COMMAND...: bounded by SECONDS and what is left of the budget; LOG: - or a file
  local name=$1 limit=$2 log=$3 t0=$SECONDS rc why=""
  local left=$((BUDGET_S - (SECONDS - t_start)))
  [ "$limit" -le "$left" ] || limit=$left
  if [ "$limit" -le 10 ]; then
    echo "$name skipped: the budget of $BUDGET_S s is spent" | tee -a "$out/steps.txt"
    failed="$failed $name"
    return 1
  fi
  echo "gpu_node.sh: $name (at most $limit s)"
  timeout --kill-after=10 "$limit" "${@:4}" 2>&1 | tee "${log/#-//dev/null}"
  rc=${PIPESTATUS[0]}
  [ "$rc" != 124 ] || why=" (its time ran out)"
  echo "$name exit $rc after $((SECONDS - t0)) s$why" | tee -a "$out/steps.txt"
  [ "$rc" = 0 ] || failed="$failed $name"
  return "$rc"
}

# 1 and 2: the data plane with the carried binaries.
step data-plane "$share_data" - bash "$here/run.sh"

# 3: the package for this Python, then the training runs.
[ -f "$GM_DIR/devcuda/MANIFEST" ] ||
  echo "gpu_node.sh: the archive carries no devcuda/ (pack it with DEVCUDA=.devcuda bench/device/pack.sh)" >&2
if step install "$share_install" "$out/install.txt" env GM_CUDA_PACK="$GM_DIR/devcuda" bash "$here/cuda_checks.sh" install &&
   pkg=$(sed -n 's/^PYTHONPATH=//p' "$out/install.txt" | tail -1) && [ -n "$pkg" ]; then
  export PYTHONPATH=$pkg UCX_MODULE_DIR=$GM_DIR/devcuda/lib/ucx UCX_NET_DEVICES=${UCX_NET_DEVICES:-lo}
  # shellcheck disable=SC2086  # E2E_ARGS: words
  step e2e "$share_e2e" "$out/e2e_train.txt" env PYTHONUNBUFFERED=1 "$PYTHON" "$here/e2e_train.py" \
    "${e2e_sizes[@]}" --dw "$GM_DIR/build/goldminer-dw" --programs-dir "$GM_DIR/programs" \
    --shared-data "$GM_DIR/data" --json "$out/e2e_train.jsonl" ${E2E_ARGS:-}
else
  echo "gpu_node.sh: the package did not install (cuda_checks.sh install; $out/install.txt): no end-to-end runs" >&2
fi
echo "gpu_node.sh: $((SECONDS - t_start)) s of $BUDGET_S; results in $out"
[ -z "$failed" ] || die "failed:$failed (see $out/steps.txt)"
