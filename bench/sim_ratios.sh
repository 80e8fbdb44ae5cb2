#!/bin/bash
# Replays the Alibaba GPU v2023 dev slice under each policy at 64 GPUs,
# 512 GPUs and full scale, and prints the goldminer/bundled ratios of
# average JCT (bundled / goldminer: > 1 means goldminer is faster) and of
# GPU allocation (goldminer / bundled), and the CPU-seconds held by data
# workers (worker_cpu_s) and by those that added nothing (wasted_cpu_s),
# and (goldminer-measured) the jobs that ended with their knee above their
# useful workers (knees_above), all measured in this run.
#
# Usage: bench/sim_ratios.sh [BUILD_DIR] [LOAD] [SEEDS] [SCALES] [DEMAND] [CURVE] [NOISE]
#   LOAD    offered GPU load (default 0.9: the baseline queues at 64 and 512)
#   SEEDS   space-separated --seed values for the samples (default "1 2 3")
#   SCALES  space-separated GPU counts or "full" (default "64 512 full")
#   DEMAND  "calibrated" (default: --demand-model calibrated), or a number F:
#           --demand-model request --cpu-demand-factor F
#   CURVE   --speed-curve: linear (default) or concave; concave adds the
#           policy goldminer-measured (2-12 s a replay at 64 GPUs; 512
#           is untested since it was too slow: give SCALES 64)
#   NOISE   --measure-noise (default 0)
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$top/build}
load=${2:-0.9}
seeds=${3:-1 2 3}
scales=${4:-64 512 full}
demand=${5:-calibrated}
curve=${6:-linear}
noise=${7:-0}
. "$top/bench/sim_common.sh"

field() { sed -n "s/.*\"$1\": \([0-9.e+-]*\).*/\1/p"; }

if [ "$demand" = calibrated ]; then
    model=(--demand-model calibrated)
else
    model=(--demand-model request --cpu-demand-factor "$demand")
fi
model+=(--speed-curve "$curve" --measure-noise "$noise")
policies="bundled goldminer-joblevel goldminer"
[ "$curve" = linear ] || policies="$policies goldminer-measured"
[ -x "$sim" ] || { echo "bench/sim_ratios.sh: $sim is not built (make goldminer-sim)" >&2; exit 1; }
printf '%-6s %-5s %-19s %7s %10s %10s %8s %8s %8s %9s %7s %13s %13s %11s\n' \
    gpus seed policy jobs avg_jct_s avg_queue avg_cpu_w cpu_frac alloc jct_ratio alloc_r worker_cpu_s wasted_cpu_s \
    knees_above
echo "load $load, ${model[*]}"
for scale in $scales; do
    for seed in $seeds; do
        [ "$scale" = full ] && [ "$seed" != "${seeds%% *}" ] && continue  # full scale: no sample
        args=(--trace "$trace/dev_slice.csv" --nodes "$trace/nodes.csv" --load "$load" --seed "$seed"
              "${model[@]}" --json)
        [ "$scale" = full ] || args+=(--gpus "$scale")
        base=$("$sim" "${args[@]}" --policy bundled)
        base_jct=$(echo "$base" | field avg_jct_s)
        base_alloc=$(echo "$base" | field gpu_alloc_rate)
        for policy in $policies; do
            if [ "$policy" = bundled ]; then out=$base; else out=$("$sim" "${args[@]}" --policy "$policy"); fi
            jct=$(echo "$out" | field avg_jct_s)
            alloc=$(echo "$out" | field gpu_alloc_rate)
            printf '%-6s %-5s %-19s %7s %10s %10s %8s %8s %8s %9.3f %7.3f %13s %13s %11s\n' \
                "$(echo "$out" | field gpus)" "$seed" "$policy" "$(echo "$out" | field jobs)" "$jct" \
                "$(echo "$out" | field avg_queue_s)" "$(echo "$out" | field cpu_short_wait_s)" \
                "$(echo "$out" | field gpu_wait_cpu_short_fraction)" "$alloc" \
                "$(awk -v a="$base_jct" -v b="$jct" 'BEGIN {print a / b}')" \
                "$(awk -v a="$alloc" -v b="$base_alloc" 'BEGIN {print a / b}')" \
                "$(echo "$out" | field worker_cpu_s)" "$(echo "$out" | field wasted_worker_cpu_s)" \
                "$(echo "$out" | field knees_above_useful)"
        done
    done
done
