# The data plane across Slurm nodes: hetjobs (examples/dataplane-job.sh and
# one like it) whose trainer (goldminer-consume, or examples/train_dlrm.py)
# runs on a GPU node and whose two goldminer-dw workers run on the CPU nodes
# and reach it over UCX.

# Submits job script SCRIPT with ARGS (examples/dataplane-job.sh or one
# like it) and waits for it; prints the job id. With node namespaces the
# trainer listens on its node's address; otherwise all nodes share lo.
submit_dataplane_job() {
    (
        export GM_BIN=$tools GM_EPOCHS=2 GM_BATCH=50
        use_goldminer_python
        if nodes_have_namespaces; then
            unset UCX_NET_DEVICES
        else
            export GM_TRAINER_HOST=127.0.0.1
        fi
        submit_wait -o "$work/dp.%j" "$@"
    )
}

dataplane_example() {
    echo "$(cd "$(dirname "${BASH_SOURCE[0]}")/../../examples" && pwd)/$1"
}

test_dataplane_workers_on_cpu_nodes_feed_a_trainer_on_a_gpu_node() {
    local job out lines=5000 n
    seq 1 "$lines" | sed 's/^/sample /' >"$work/dp-input.txt"
    job=$(GM_INPUT=text:$work/dp-input.txt submit_dataplane_job "$(dataplane_example dataplane-job.sh)") ||
        { echo "$job"; tail -20 "$work"/dp.* 2>/dev/null; return 1; }
    out=$(cat "$work/dp.$job")
    expect_contains "job end" "$out" "trainer exit 0, workers exit 0" || return 1
    # Every epoch: every sample exactly once.
    n=$(echo "$out" | grep -c "^{\"epoch\": [01], \"samples\": $lines, \"unique_samples\": $lines, \"duplicates\": 0, \"missing\": 0,")
    expect_eq "clean epochs" "$n" 2 || { echo "$out" | grep '^{'; return 1; }
    # Both workers joined from the CPU nodes (a worker's id is NODE:PID) and
    # were drained.
    expect_eq "workers joined" "$(echo "$out" | sed -n 's/.*session: worker \(c[0-9]*\):[0-9]* joined.*/\1/p' |
                                  sort | tr '\n' ' ')" "c1 c2 " || return 1
    expect_eq "workers drained" "$(echo "$out" | grep -c '^goldminer-dw: [^ ]*: sent [0-9]* batches')" 2 || return 1
    # Node namespaces share this kernel: UCX's posix/sysv shared memory cannot
    # wake a peer across them, so the workers send on their connection
    # endpoint (mpi_transport/ucx_worker.cc).
    if nodes_have_namespaces; then
        expect_eq "namespace path" "$(echo "$out" | grep -c 'shares this kernel but not its network namespace')" 2
    fi
}

# Writes $work/dp-replace.sh: a hetjob whose trainer (goldminer-consume, 3
# epochs of $GM_INPUT) is fed by a first worker step until the middle of
# epoch 1, when that step gets signal $GM_SIGNAL from scancel; a second
# worker step then finishes the run. Prints each step's exit status, then
# the trainer's output.
write_replace_workers_job() {
    cat >"$work/dp-replace.sh" <<'SCRIPT'
#!/bin/bash
#SBATCH -p gpu --gpus=1 -N1 -n1
#SBATCH hetjob
#SBATCH -p cpu -N2 -n2
set -u
cd "$SLURM_SUBMIT_DIR"
GOLDMINER_SECRET=$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n'); export GOLDMINER_SECRET
host=${GM_TRAINER_HOST:-$(srun --het-group=0 hostname -I | awk '{ print $1 }')}
GOLDMINER_TRAINER=ucx://$host:$((20000 + SLURM_JOB_ID % 20000)); export GOLDMINER_TRAINER
out=trainer.$SLURM_JOB_ID
srun --het-group=0 "$GM_BIN/goldminer-consume" --input "$GM_INPUT" --batch-size 50 --epochs 3 --workers 0 \
    --min-workers 2 --listen "$GOLDMINER_TRAINER" --json -v >"$out" 2>"$out.err" &
trainer=$!
srun --het-group=1 --job-name=gm-first-workers "$GM_BIN/goldminer-dw" --connect-timeout 60 -v &
first=$!
# Mid-epoch 1 (an epoch takes seconds): the signal to that step's tasks.
until grep -q '"epoch": 0' "$out" || ! kill -0 "$trainer"; do sleep 0.1; done
step=$(scontrol -o show step | sed -n 's/^StepId=\([0-9]*\.[0-9]*\) .*Name=gm-first-workers.*/\1/p')
scancel --signal="$GM_SIGNAL" "$step"
wait "$first"; echo "first workers exit $?"
srun --het-group=1 "$GM_BIN/goldminer-dw" -v &
second=$!
wait "$trainer"; echo "trainer exit $?"
wait "$second"; echo "second workers exit $?"
cat "$out" "$out.err"
SCRIPT
    echo "$work/dp-replace.sh"
}

# Slurm's preemption signal to the workers' step (scancel --signal=TERM, as
# a preempted or shrunk job step gets): the workers finish the batch in
# hand, return their leases and exit 0; a new worker step takes over and
# every epoch still has every sample exactly once.
test_dataplane_sigterm_to_the_worker_step_drains_and_new_workers_finish() {
    local job out lines=1000000 n returned
    seq 1 "$lines" | sed 's/^/sample /' >"$work/dp-big.txt"
    job=$(GM_SIGNAL=TERM GM_INPUT=text:$work/dp-big.txt submit_dataplane_job "$(write_replace_workers_job)") ||
        { echo "$job"; tail -20 "$work"/dp.* 2>/dev/null; return 1; }
    out=$(cat "$work/dp.$job")
    for what in "first workers exit 0" "trainer exit 0" "second workers exit 0"; do
        expect_contains "job" "$out" "$what" || return 1
    done
    n=$(echo "$out" | grep -c "^{\"epoch\": [012], \"samples\": $lines, \"unique_samples\": $lines, \"duplicates\": 0, \"missing\": 0, .*\"workers_lost\": 0,")
    expect_eq "clean epochs, no worker lost" "$n" 3 || { echo "$out" | grep '^{'; return 1; }
    # The signal came mid-epoch: the first workers gave back leases in hand.
    returned=$(echo "$out" | sed -n 's/^goldminer-dw: [^ ]*: sent [0-9]* batches, finished [0-9]* splits, returned \([0-9]*\)[,;].*/\1/p' |
               head -2 | awk '{ n += $1 } END { print n + 0 }')
    [ "${returned:-0}" -ge 1 ] || { echo "no lease returned by the drained workers: $out"; return 1; }
    expect_eq "drained workers" "$(echo "$out" | grep -c '^goldminer-dw: draining')" 4
}

# SIGKILL to the workers' step mid-epoch (a node lost, a job step killed):
# the trainer re-leases what they held and drops their partial batches; a
# new worker step finishes, and every epoch still has every sample once.
test_dataplane_sigkill_to_the_worker_step_loses_and_duplicates_nothing() {
    local job out lines=1000000 n lost
    [ -f "$work/dp-big.txt" ] || seq 1 "$lines" | sed 's/^/sample /' >"$work/dp-big.txt"
    job=$(GM_SIGNAL=KILL GM_INPUT=text:$work/dp-big.txt submit_dataplane_job "$(write_replace_workers_job)") ||
        { echo "$job"; tail -20 "$work"/dp.* 2>/dev/null; return 1; }
    out=$(cat "$work/dp.$job")
    for what in "trainer exit 0" "second workers exit 0"; do
        expect_contains "job" "$out" "$what" || return 1
    done
    expect_contains "job" "$out" "first workers exit" || return 1
    if echo "$out" | grep -q "first workers exit 0"; then echo "killed workers exited 0: $out"; return 1; fi
    n=$(echo "$out" | grep -c "^{\"epoch\": [012], \"samples\": $lines, \"unique_samples\": $lines, \"duplicates\": 0, \"missing\": 0,")
    expect_eq "clean epochs" "$n" 3 || { echo "$out" | grep '^{'; return 1; }
    # The kill came mid-epoch 1: its workers were lost with splits in hand.
    lost=$(echo "$out" | sed -n 's/^{"epoch": 1, .*"workers_lost": \([0-9]*\),.*/\1/p')
    [ "${lost:-0}" -ge 1 ] || { echo "no worker lost with splits in epoch 1: $(echo "$out" | grep '^{')"; return 1; }
}

# A real training script as the trainer: examples/train_dlrm.py splits its
# model with goldminer.split, ships the worker program through
# goldminer.Session, and trains on what the workers on the CPU nodes send.
test_dataplane_python_training_script_trains_on_batches_from_cpu_nodes() {
    local job out rows=20000 n first last
    /usr/bin/python3 "$(dataplane_example ../bench/dataplane/gen_criteo.py)" "$work/dp-criteo.tsv" "$rows" 3 || return 1
    job=$(submit_dataplane_job "$(dataplane_example dataplane-job.sh)" /usr/bin/python3 \
          "$(dataplane_example train_dlrm.py)" --input "criteo-tsv:$work/dp-criteo.tsv" --epochs 2 \
          --batch-size 1000 --min-workers 2) || { echo "$job"; tail -20 "$work"/dp.* 2>/dev/null; return 1; }
    out=$(cat "$work/dp.$job")
    expect_contains "job end" "$out" "trainer exit 0, workers exit 0" || return 1
    expect_contains "split" "$out" "train_dlrm: split: " || return 1
    n=$(echo "$out" | grep -c "^{\"epoch\": [01], \"samples\": $rows, \"unique_samples\": $rows, \"loss\": [0-9.]*, .*\"workers\": 2}")
    expect_eq "epochs with every sample once" "$n" 2 || { echo "$out" | tail -12; return 1; }
    # It trains: the mean loss of the second epoch is below the first's.
    first=$(echo "$out" | sed -n 's/^{"epoch": 0, .*"loss": \([0-9.]*\),.*/\1/p')
    last=$(echo "$out" | sed -n 's/^{"epoch": 1, .*"loss": \([0-9.]*\),.*/\1/p')
    awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a) }' || { echo "loss did not fall: $first -> $last"; return 1; }
}
