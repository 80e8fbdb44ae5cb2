#!/bin/sh
# Scripts the benchmark models (DLRM at batch 4096, torchvision ResNet-50)
# and runs bench/split_bench on them with one intra-op thread, so that CPU
# time per batch is one core's work. Usage: bench/split_bench.sh [BUILD_DIR] [REPEAT]
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$top/build}
repeat=${2:-20}
python=${PYTHON:-/usr/bin/python3}
dir=$(mktemp -d /tmp/goldminer-split-bench.XXXXXX)
trap 'rm -rf "$dir"' EXIT
"$python" "$top/tests/split/models.py" "$dir" --bench
OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 "$build/bench/split_bench" \
    "$dir/dlrm_bench.pt" "$dir/dlrm_bench_example.pt" "$dir/resnet50.pt" "$dir/resnet50_example.pt" "$repeat"
