#!/bin/bash
# The shipped policy against its baselines on the Alibaba GPU v2023 dev
# slice, several seeds: for each seed's sample of about GPUS GPUs at load
# LOAD, with concave speed curves and measurement noise NOISE, replays
# bundled, goldminer (the shipped allocation on the model alone),
# goldminer-measured (the shipped policy), oracle (the allocation on the
# true curves) and cachew (sim/cachew.h); prints one row per seed and
# policy, then per policy the mean, standard deviation and range over the
# seeds of: jct_ratio (bundled's average JCT / the policy's: > 1 is
# faster), alloc_r (the policy's GPU allocation / bundled's), unpaying
# (share of the policy's worker CPU-seconds held by workers that did not
# pay: each under pay_fraction 0.5 of the job's first worker's gain on the
# true curve) and wasted (share held by workers that added nothing).
# Everything is measured in this run; two replays at a time.
#
# Usage: bench/sim_baselines.sh [BUILD_DIR] [SEEDS] [GPUS] [LOAD] [NOISE]
#   SEEDS  space-separated --seed values (default "1 2 3 4 5")
#   GPUS   --gpus (default 64)
#   LOAD   --load (default 0.9)
#   NOISE  --measure-noise (default 0.05)
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$top/build}
seeds=${2:-1 2 3 4 5}
gpus=${3:-64}
load=${4:-0.9}
noise=${5:-0.05}
. "$top/bench/sim_common.sh"
policies="bundled goldminer goldminer-measured oracle cachew"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
running=0
for seed in $seeds; do
    for policy in $policies; do
        "$sim" --trace "$trace/dev_slice.csv" --nodes "$trace/nodes.csv" --gpus "$gpus" --load "$load" \
            --seed "$seed" --demand-model calibrated --speed-curve concave --measure-noise "$noise" \
            --policy "$policy" --json >"$out/$seed.$policy.json" &
        running=$((running + 1))
        if [ "$running" -ge 2 ]; then wait -n; running=$((running - 1)); fi
    done
done
wait
field() { sed -n "s/.*\"$1\": \([0-9.e+-]*\).*/\1/p" "$2"; }
echo "gpus $gpus, load $load, --demand-model calibrated --speed-curve concave --measure-noise $noise"
printf '%-5s %-19s %10s %9s %7s %13s %9s %8s\n' seed policy avg_jct_s jct_ratio alloc_r worker_cpu_s unpaying wasted
for seed in $seeds; do
    base=$out/$seed.bundled.json
    [ -s "$base" ] || { echo "bench/sim_baselines.sh: seed $seed: bundled replay failed" >&2; exit 1; }
    for policy in $policies; do
        f=$out/$seed.$policy.json
        [ -s "$f" ] || { echo "bench/sim_baselines.sh: seed $seed: $policy replay failed" >&2; exit 1; }
        awk -v seed="$seed" -v policy="$policy" -v bj="$(field avg_jct_s "$base")" -v ba="$(field gpu_alloc_rate "$base")" \
            -v j="$(field avg_jct_s "$f")" -v a="$(field gpu_alloc_rate "$f")" -v w="$(field worker_cpu_s "$f")" \
            -v u="$(field unpaying_worker_cpu_s "$f")" -v x="$(field wasted_worker_cpu_s "$f")" 'BEGIN {
            printf "%-5s %-19s %10.0f %9.3f %7.3f %13.0f %9.4f %8.4f\n", seed, policy, j, bj / j, a / ba, w,
                   (w > 0 ? u / w : 0), (w > 0 ? x / w : 0) }'
    done
done >"$out/rows"
cat "$out/rows"
echo
echo "over seeds $seeds: mean, standard deviation [min, max]"
printf '%-19s %-34s %-34s %-34s %s\n' policy jct_ratio alloc_r unpaying wasted
awk '{
    p = $2; n[p]++
    for (c = 4; c <= 8; c++) { if (c == 6) continue; v = $c; s[p, c] += v; q[p, c] += v * v
        if (n[p] == 1 || v < lo[p, c]) lo[p, c] = v; if (n[p] == 1 || v > hi[p, c]) hi[p, c] = v }
    if (!(p in order)) { order[p] = ++k; name[k] = p }
} END {
    for (i = 1; i <= k; i++) { p = name[i]; printf "%-19s", p
        for (c = 4; c <= 8; c++) { if (c == 6) continue; m = s[p, c] / n[p]; var = q[p, c] / n[p] - m * m
            printf " %8.3f +- %6.3f [%6.3f, %6.3f]", m, sqrt(var > 0 ? var * n[p] / (n[p] > 1 ? n[p] - 1 : 1) : 0), lo[p, c], hi[p, c] }
        printf "\n" }
}' "$out/rows"
