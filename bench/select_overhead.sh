#!/bin/bash
# The time select/goldminer_cons_tres adds to each job_test call, against
# the cons_tres call it wraps, measured in one run on a devcluster of its
# own (DebugFlags=SelectType: every decision line carries "us ours X
# cons_tres Y"; see select_goldminer_cons_tres(8)).
#
# "ours" is all the plugin did around the cons_tres call whose answer was
# used (its view of allocations, the core's decision, narrowing bitmaps,
# and the cons_tres calls on placement tiers tried first: the log's
# "tiers T", added here to "ours X"); "cons_tres" is that call alone,
# i.e. what plain cons_tres would have spent on the same call. Test-only
# calls (at submission) and GPU jobs pass straight through and are counted
# apart. Goal: ours < 10% of cons_tres.
#
# Usage: bench/select_overhead.sh BUILD_DIR [JOBS]   (root; ~1-2 min)
set -eu
build=$(cd "${1:?usage: $0 BUILD_DIR [JOBS]}" && pwd)
jobs=${2:-120}
dir=$(mktemp -d /var/tmp/goldminer-selbench.XXXXXX)
dc="$build/goldminer-devcluster"
trap 'timeout 60 "$dc" down --dir "$dir" >/dev/null 2>&1 || true; rm -rf "$dir"' EXIT
timeout 120 "$dc" up --dir "$dir" --port-base 21817 --plugin-dir "$build/.libs" \
    --debug-flags SelectType --plugstack-args "dw_command=$build/goldminer-dw" >/dev/null
export SLURM_CONF=$dir/etc/slurm.conf
# A mix that keeps the reserve busy: CPU jobs of 1-4 CPUs anywhere, GPU
# jobs of 1-2 GPUs, each a few seconds long, so that many wait and are
# tried again by the main scheduler and backfill.
for i in $(seq "$jobs"); do
    if [ $((i % 3)) -eq 0 ]; then
        sbatch -Q -p gpu --gpus=$((1 + i % 2)) -n1 -o /dev/null --wrap "sleep $((1 + i % 4))"
    else
        sbatch -Q -p all -n$((1 + i % 4)) -o /dev/null --wrap "sleep $((1 + i % 5))"
    fi
done
for _ in $(seq 600); do
    [ -z "$(squeue -h -o %i 2>/dev/null)" ] && break
    sleep 0.5
done
awk '
  /goldminer_cons_tres: job_test job/ && /us ours/ {
    match($0, /us ours [0-9.]+ cons_tres [0-9.]+( tiers [0-9.]+)?/)
    split(substr($0, RSTART, RLENGTH), f, " ")
    kind = /mode test_only/ ? "test_only" : (/\[(cpu job|data worker)/ ? "narrowed" : "passed through")
    n[kind]++; ours[kind] += f[3] + (f[7] == "" ? 0 : f[7]); ct[kind] += f[5]
  }
  END {
    for (k in n)
      printf "select_overhead: %-14s %5d calls: ours %7.1f us, cons_tres %7.1f us per call, added %.3f of cons_tres\n",
             k, n[k], ours[k] / n[k], ct[k] / n[k], ours[k] / ct[k]
  }' "$dir/log/slurmctld.log"
