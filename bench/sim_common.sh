# Sourced by the simulator's benchmarks (sim_ratios.sh, sim_baselines.sh)
# once they set `top` (the checkout) and `build` (the build tree): sets
# `trace` (the Alibaba GPU v2023 slice in ../shared/data) and `sim` (the
# build's goldminer-sim). Exits 0, saying SKIP, where the trace is absent;
# exits 1, saying so, where goldminer-sim is not built.
trace=$top/../shared/data/traces/alibaba-gpu-v2023
if [ ! -f "$trace/dev_slice.csv" ]; then
    echo "SKIP: $trace is absent (../shared/data): nothing to replay"
    exit 0
fi
sim=$build/goldminer-sim
[ -x "$sim" ] || { echo "bench/$(basename "$0"): $sim is not built (make goldminer-sim)" >&2; exit 1; }
