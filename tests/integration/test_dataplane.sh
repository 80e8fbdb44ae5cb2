# The data plane across Slurm nodes: examples/dataplane-job.sh, a hetjob
# whose trainer (goldminer-consume) runs on a GPU node and whose two
# goldminer-dw workers run on the CPU nodes and reach it over UCX.

# Submits job script SCRIPT (examples/dataplane-job.sh or one like it) on
# INPUT (FORMAT:PATH) and waits for it; prints the job id. In netns mode
# every node is its own network namespace (ours) and the trainer listens on
# its node's address; otherwise all nodes share lo.
submit_dataplane_job() {
    (
        export GM_BIN GM_INPUT=$2 GM_EPOCHS=2 GM_BATCH=50
        GM_BIN=$(dirname "$devcluster")
        if grep -q '^network=netns' "$state/run/cluster"; then
            unset UCX_NET_DEVICES
        else
            export GM_TRAINER_HOST=127.0.0.1
        fi
        submit_wait -o "$work/dp.%j" "$1"
    )
}

test_dataplane_workers_on_cpu_nodes_feed_a_trainer_on_a_gpu_node() {
    local job out lines=5000 n
    seq 1 "$lines" | sed 's/^/sample /' >"$work/dp-input.txt"
    job=$(submit_dataplane_job "$(cd "$(dirname "${BASH_SOURCE[0]}")/../../examples" && pwd)/dataplane-job.sh" \
          "text:$work/dp-input.txt") || { cat "$work"/dp.* 2>/dev/null | tail -20; return 1; }
    out=$(cat "$work/dp.$job")
    expect_contains "job end" "$out" "trainer exit 0, workers exit 0" || return 1
    # Every epoch: every sample exactly once.
    n=$(echo "$out" | grep -c "^{\"epoch\": [01], \"samples\": $lines, \"unique_samples\": $lines, \"duplicates\": 0, \"missing\": 0,")
    expect_eq "clean epochs" "$n" 2 || { echo "$out" | grep '^{'; return 1; }
    # Both workers joined from the CPU nodes and were drained.
    expect_eq "workers joined" "$(echo "$out" | sed -n 's/.*session: worker \(c[0-9]*\):[0-9]* joined.*/\1/p' | sort | tr '\n' ' ')" \
        "c1 c2 " || return 1
    expect_eq "workers drained" "$(echo "$out" | grep -c '^goldminer-dw: c[12]:[0-9]*: sent [0-9]* batches')" 2 || return 1
    # Node namespaces share this kernel: UCX's posix/sysv shared memory cannot
    # wake a peer across them, so the workers send on their connection
    # endpoint (mpi_transport/ucx_transport.cc).
    if grep -q '^network=netns' "$state/run/cluster"; then
        expect_eq "namespace path" "$(echo "$out" | grep -c 'shares this kernel but not its network namespace')" 2
    fi
}

# Slurm's preemption signal to the workers' step (scancel --signal=TERM, as
# a preempted or shrunk job step gets): the workers finish the batch in
# hand, return their leases and exit 0; a new worker step takes over and
# every epoch still has every sample exactly once.
test_dataplane_sigterm_to_the_worker_step_drains_and_new_workers_finish() {
    local job out lines=1000000 n returned
    seq 1 "$lines" | sed 's/^/sample /' >"$work/dp-big.txt"
    cat >"$work/dp-term.sh" <<'SCRIPT'
#!/bin/bash
#SBATCH -p gpu --gpus=1 -N1 -n1
#SBATCH hetjob
#SBATCH -p cpu -N2 -n2
set -u
cd "$SLURM_SUBMIT_DIR"
GOLDMINER_SECRET=$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n'); export GOLDMINER_SECRET
host=${GM_TRAINER_HOST:-$(srun --het-group=0 hostname -I | awk '{ print $1 }')}
out=trainer.$SLURM_JOB_ID
srun --het-group=0 "$GM_BIN/goldminer-consume" --input "$GM_INPUT" --batch-size 50 --epochs 3 --workers 0 \
    --min-workers 2 --listen "ucx://$host:0" --json -v >"$out" 2>"$out.err" &
trainer=$!
for _ in $(seq 600); do
    addr=$(sed -n 's/^goldminer-consume: listening on //p' "$out.err"); [ -n "$addr" ] && break; sleep 0.1
done
srun --het-group=1 --job-name=gm-first-workers "$GM_BIN/goldminer-dw" --trainer "$addr" -v &
first=$!
# Mid-epoch 1 (an epoch takes seconds): SIGTERM to that step's tasks.
until grep -q '"epoch": 0' "$out" || ! kill -0 "$trainer"; do sleep 0.1; done
step=$(scontrol -o show step | sed -n 's/^StepId=\([0-9]*\.[0-9]*\) .*Name=gm-first-workers.*/\1/p')
scancel --signal=TERM "$step"
wait "$first"; echo "first workers exit $?"
srun --het-group=1 "$GM_BIN/goldminer-dw" --trainer "$addr" -v &
second=$!
wait "$trainer"; echo "trainer exit $?"
wait "$second"; echo "second workers exit $?"
cat "$out" "$out.err"
SCRIPT
    job=$(submit_dataplane_job "$work/dp-term.sh" "text:$work/dp-big.txt") || { tail -20 "$work"/dp.*; return 1; }
    out=$(cat "$work/dp.$job")
    for what in "first workers exit 0" "trainer exit 0" "second workers exit 0"; do
        expect_contains "job" "$out" "$what" || return 1
    done
    n=$(echo "$out" | grep -c "^{\"epoch\": [012], \"samples\": $lines, \"unique_samples\": $lines, \"duplicates\": 0, \"missing\": 0, .*\"workers_lost\": 0,")
    expect_eq "clean epochs, no worker lost" "$n" 3 || { echo "$out" | grep '^{'; return 1; }
    # The signal came mid-epoch: the first workers gave back leases in hand.
    returned=$(echo "$out" | sed -n 's/^goldminer-dw: c[12]:[0-9]*: sent [0-9]* batches, finished [0-9]* splits, returned \([0-9]*\);.*/\1/p' |
               head -2 | awk '{ n += $1 } END { print n + 0 }')
    [ "${returned:-0}" -ge 1 ] || { echo "no lease returned by the drained workers: $out"; return 1; }
    expect_eq "drained workers" "$(echo "$out" | grep -c '^goldminer-dw: draining')" 4
}
