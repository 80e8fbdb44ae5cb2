#!/bin/bash
# Load (many workers, many trainers), measured in one run:
#   (a) one trainer, W data workers (default 64) on this machine
#       (goldminer-consume --workers W: W goldminer-dw processes over UCX);
#   (b) T trainers x K workers (default 8 x 8) as --goldminer batch jobs
#       on a devcluster of its own (dw=K, static: companion jobs of K
#       workers each), all at once.
# For each trainer: whether every epoch was exactly once (no sample lost or
# twice), the most batches its queue held at once in each epoch (max_queued)
# against its bound (--queue-batches, or one per worker when there are more
# workers; workers joining while the room is taken get their first credit
# from room the trainer frees, so the bound holds during joins too),
# and its peak RSS (VmHWM of the trainer process, read every 0.2 s until it
# exits). A trainer that does not finish within the limit is a deadlock.
# Modelling: text lines, batch 256, no worker program (the data plane's own
# cost); on a 2-core machine the workers share the cores, so the figures
# are about bounds and memory, not speed.
#
# Usage: bench/load.sh BUILD_DIR [W] [T] [K] [LINES]   (root for (b))
set -eu
build=$(cd "${1:?usage: $0 BUILD_DIR [W] [T] [K] [LINES]}" && pwd)
workers=${2:-64} trainers=${3:-8} per=${4:-8} lines=${5:-200000}
dir=$(mktemp -d /var/tmp/goldminer-load.XXXXXX)
dc="$build/goldminer-devcluster"
trap 'timeout 60 "$dc" down --dir "$dir/dc" >/dev/null 2>&1 || true; [ -n "${KEEP:-}" ] || rm -rf "$dir"' EXIT
chmod 755 "$dir"
seq 1 "$lines" | sed 's/^/sample /' >"$dir/input.txt"

# peak_rss PID: the process's VmHWM (kB) when it exits; after 600 s it is
# taken for deadlocked and stopped (SIGTERM).
peak_rss() {
    local hwm=0 v deadline=$((SECONDS + 600))
    while v=$(sed -n 's/^VmHWM:[[:space:]]*\([0-9]*\) kB/\1/p' "/proc/$1/status" 2>/dev/null) && [ -n "$v" ]; do
        hwm=$v
        [ $SECONDS -lt $deadline ] || kill -TERM "$1"
        sleep 0.2
    done
    echo "$hwm"
}

# summary NAME OUTPUT BOUND RSS_KB: one line per trainer.
summary() {
    local epochs clean maxq
    epochs=$(grep -c '^{"epoch"' "$2" || true)
    clean=$(grep -c "\"unique_samples\": $lines, \"duplicates\": 0, \"missing\": 0," "$2" || true)
    maxq=$(sed -n 's/.*"max_queued": \([0-9]*\)}$/\1/p' "$2" | paste -sd/)
    printf '%-14s epochs %s, exactly once %s, max queued per epoch %s (bound %s), peak RSS %s MiB\n' \
        "$1" "$epochs" "$clean" "${maxq:-?}" "$3" "$(awk -v k="${4:-0}" 'BEGIN { printf "%.1f", k / 1024 }')"
}

echo "(a) one trainer, $workers local workers, $lines lines x 2 epochs"
export UCX_NET_DEVICES=lo
start=$SECONDS
"$build/goldminer-consume" --input "text:$dir/input.txt" --batch-size 256 --epochs 2 \
    --workers "$workers" --min-workers "$workers" --join-timeout 300 --queue-batches 64 --json \
    >"$dir/a.out" 2>"$dir/a.err" &
pid=$!
rss=$(peak_rss "$pid")
wait "$pid" || echo "(a) goldminer-consume failed or was stopped after 600 s (deadlock?): $(tail -3 "$dir/a.err")"
summary "trainer" "$dir/a.out" "$((workers > 64 ? workers : 64))" "$rss"
echo "(a) took $((SECONDS - start)) s"

echo "(b) $trainers trainers x $per workers on a devcluster"
timeout 120 "$dc" up --dir "$dir/dc" --port-base 23817 --plugin-dir "$build/.libs" \
    --plugstack-args "dw_command=$build/goldminer-dw max_dw_per_job=$per" >/dev/null
export SLURM_CONF=$dir/dc/etc/slurm.conf
cd "$dir"  # the workers' output (goldminer-dw-J.out) lands here
if grep -q '^network=netns' "$dir/dc/run/cluster"; then unset UCX_NET_DEVICES; fi
jobs=()
for t in $(seq "$trainers"); do
    jobs+=("$(sbatch --parsable --time=10 -p gpu --gpus=1 --goldminer=dw=$per,cpus-per-dw=1,mode=static \
        -o "$dir/b.$t.out" --wrap "
        $build/goldminer-consume --input text:$dir/input.txt --batch-size 256 --epochs 2 --workers 0 \
          --min-workers $per --join-timeout 300 --queue-batches 64 --json &
        pid=\$!; hwm=0
        while v=\$(sed -n 's/^VmHWM:[[:space:]]*\([0-9]*\) kB/\1/p' /proc/\$pid/status 2>/dev/null) && [ -n \"\$v\" ]; do
            hwm=\$v; sleep 0.2
        done
        wait \$pid; echo rc=\$? hwm=\$hwm")")
done
for j in "${jobs[@]}"; do
    for _ in $(seq 1200); do [ -z "$(squeue -h -j "$j" 2>/dev/null)" ] && break; sleep 0.5; done
done
t=0
for j in "${jobs[@]}"; do
    t=$((t + 1))
    summary "job $j" "$dir/b.$t.out" 64 "$(sed -n 's/^rc=[0-9]* hwm=\([0-9]*\)$/\1/p' "$dir/b.$t.out")"
    grep -q '^rc=0 ' "$dir/b.$t.out" || echo "job $j: trainer failed: $(grep -v '^{' "$dir/b.$t.out" | tail -3)"
done
