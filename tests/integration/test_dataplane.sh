# The data plane across Slurm nodes: examples/dataplane-job.sh, a hetjob
# whose trainer (goldminer-consume) runs on a GPU node and whose two
# goldminer-dw workers run on the CPU nodes and reach it over UCX.

# Runs examples/dataplane-job.sh on INPUT (FORMAT:PATH) with sbatch; prints
# the job id. In netns mode every node is its own network namespace (ours)
# and the trainer listens on its node's address; otherwise all share lo.
submit_dataplane_job() {
    local job_script
    job_script=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../examples" && pwd)/dataplane-job.sh
    (
        export GM_BIN GM_INPUT=$1 GM_EPOCHS=2 GM_BATCH=50
        GM_BIN=$(dirname "$devcluster")
        if grep -q '^network=netns' "$state/run/cluster"; then
            unset UCX_NET_DEVICES
        else
            export GM_TRAINER_HOST=127.0.0.1
        fi
        submit_wait -o "$work/dp.%j" "$job_script"
    )
}

test_dataplane_workers_on_cpu_nodes_feed_a_trainer_on_a_gpu_node() {
    local job out lines=5000 n
    seq 1 "$lines" | sed 's/^/sample /' >"$work/dp-input.txt"
    job=$(submit_dataplane_job "text:$work/dp-input.txt") || { cat "$work"/dp.* 2>/dev/null | tail -20; return 1; }
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
