# The devcluster itself: nodes, GPUs, plugins in use.

test_sinfo_shows_4_nodes_and_8_gpus() {
    local nodes gpus
    nodes=$(sinfo -h -N -o '%N' | sort -u | wc -l)
    expect_eq "node count" "$nodes" 4 || return 1
    gpus=$(sinfo -h -N -o '%N %G' | sort -u | sed -n 's/.*gpu:\([0-9]*\).*/\1/p' | paste -sd+ | bc)
    expect_eq "gpu count" "$gpus" 8 || return 1
    expect_eq "idle nodes" "$(sinfo -h -N -t idle -o '%N' | sort -u | wc -l)" 4
}

test_select_plugin_is_goldminer_and_logs_decisions() {
    local type job
    type=$(scontrol show config | awk '$1 == "SelectType" {print $3}')
    expect_eq "SelectType" "$type" "select/goldminer_cons_tres" || return 1
    job=$(submit_wait -p cpu -N1 -o /dev/null --wrap true) || return 1
    # DebugFlags=SelectType: one line per job_test, naming the job.
    grep -q "select/goldminer_cons_tres: job_test job $job .* -> selected c[0-9]" \
        "$state/log/slurmctld.log" || {
        echo "no job_test decision for job $job in slurmctld.log:"
        grep job_test "$state/log/slurmctld.log" | tail -3
        return 1
    }
}

test_gpu_job_gets_its_gpus() {
    local out
    out=$(timeout 60 srun --immediate=30 -p gpu -N1 --gpus=2 \
          sh -c 'echo "$(hostname) $CUDA_VISIBLE_DEVICES"' 2>&1) || { echo "srun: $out"; return 1; }
    case $out in
        g[0-9]*" 0,1") return 0 ;;
    esac
    echo "expected a GPU node with CUDA_VISIBLE_DEVICES=0,1, got: $out"
    return 1
}
