# The devcluster itself: nodes, GPUs, plugins in use.

test_sinfo_shows_4_nodes_and_8_gpus() {
    local nodes gpus
    nodes=$(sinfo -h -N -o '%N' | sort -u | wc -l)
    expect_eq "node count" "$nodes" 4 || return 1
    gpus=$(sinfo -h -N -o '%N %G' | sort -u | sed -n 's/.*gpu:\([0-9]*\).*/\1/p' | awk '{s += $1} END {print s}')
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

# The same cluster on 127.0.0.1 (several slurmd on one address), as on a
# machine without network namespaces; then down leaves nothing.
test_localhost_fallback_mode_works() {
    local dir=$work/localhost out pids pid
    out=$(timeout 90 "$devcluster" up --dir "$dir" --port-base $((port_base + 4000)) --network localhost \
          --plugin-dir "$plugins" 2>&1) || { echo "up: $out"; return 1; }
    expect_contains "up" "$out" "network: localhost" || { "$devcluster" down --dir "$dir"; return 1; }
    out=$(SLURM_CONF=$dir/etc/slurm.conf timeout 60 srun --immediate=30 --goldminer=dw=4 -p cpu -N2 \
          sh -c 'echo "$SLURMD_NODENAME $GOLDMINER_DW"' 2>&1 | sort | tr '\n' ' ')
    pids=$(cat "$dir"/run/*.pid)
    timeout 60 "$devcluster" down --dir "$dir" >/dev/null || { echo "down failed"; return 1; }
    expect_eq "srun on the localhost cluster" "$out" "c1 4 c2 4 " || return 1
    for pid in $pids; do
        pid_running "$pid" && { echo "pid $pid still running after down"; return 1; }
    done
    return 0
}

# `up` twice is safe: the second one only reports the running cluster.
test_up_twice_is_safe() {
    local out before after
    before=$(cat "$state"/run/*.pid | sort | tr '\n' ' ')
    out=$(timeout 30 "$devcluster" up --dir "$state" 2>&1) || { echo "second up failed: $out"; return 1; }
    expect_contains "second up" "$out" "already up" || return 1
    after=$(cat "$state"/run/*.pid | sort | tr '\n' ' ')
    expect_eq "daemon PIDs" "$after" "$before"
}

# A bad plugstack.conf argument stops slurmd with the reason in its log
# (the plugin is `required`), and up fails cleanly.
test_unknown_plugstack_key_stops_slurmd_with_reason() {
    local dir=$work/badkey out
    out=$(timeout 90 "$devcluster" up --dir "$dir" --port-base $((port_base + 5000)) --network localhost \
          --plugin-dir "$plugins" --plugstack-args "max_dw_per_job=4 bogus=1" --timeout 10 2>&1) && {
        "$devcluster" down --dir "$dir"
        echo "up succeeded with a bad plugstack.conf argument"
        return 1
    }
    grep -q "error: goldminer: plugstack.conf: bogus: unknown key (known: dw_partition, dw_qos, max_dw_per_job, max_cpus_per_dw, dw_command, dw_network, dw_ports, port_registry, firewall, firewall_admit, nft, ctld, ctld_user, munge_socket, slurm_bindir, slurm_command_timeout)" \
        "$dir"/log/slurmd-g1.log || { echo "no reason in slurmd-g1.log: $(tail -3 "$dir"/log/slurmd-g1.log)"; return 1; }
    "$devcluster" status --dir "$dir" >/dev/null 2>&1 && { echo "status says up"; return 1; }
    return 0
}

# A configless cluster (SlurmctldParameters=enable_configless; each slurmd
# started with --conf-server and no slurm.conf, SLURM_CONF unset): the
# nodes load the SPANK plugin from the plugstack.conf slurmctld sends, and
# a --goldminer batch job, whose companion sbatch runs on its node from the
# fetched configuration too, gets its worker and every sample once. On
# 24.11 and later plugstack.conf includes the plugin's line from a file
# named without a slash (which slurmctld sends along); on 22.05, which
# sends plugstack.conf alone, the line is in plugstack.conf. On such a node
# the SPANK plugin package's removal guard refuses, naming slurmd's copy.
test_configless_cluster_runs_a_goldminer_job_with_plugstack_from_slurmctld() {
    local dir=$work/configless out job pid conf cache lines=600 n include guard refusal
    out=$(timeout 90 "$devcluster" up --dir "$dir" --port-base $((port_base + 6000)) --network localhost \
          --gpu-nodes 1 --cpu-nodes 1 --configless --ctld none --plugin-dir "$plugins" \
          --plugstack-args "max_dw_per_job=4${build:+ dw_command=$tools/goldminer-dw}" 2>&1) ||
        { echo "up: $out"; return 1; }
    conf=$dir/etc/slurm.conf
    seq 1 "$lines" | sed 's/^/sample /' >"$work/cl-input.txt"
    job=$(cd "$work" && SLURM_CONF=$conf UCX_NET_DEVICES=lo timeout 120 sbatch --parsable --wait \
          -o "$work/cl.%j" --goldminer=dw=1,cpus-per-dw=1 -p gpu --gpus=1 --wrap \
          "echo conf=\$SLURM_CONF; $tools/goldminer-consume --input text:$work/cl-input.txt --epochs 1 \
           --batch-size 50 --workers 0 --min-workers 1 --join-timeout 60 --json" 2>&1)
    out=$(cat "$work/cl.$job" 2>&1)
    for pid in $(cat "$dir"/run/slurmd-*.pid); do
        tr '\0' '\n' <"/proc/$pid/environ" | grep -q '^SLURM_CONF=' &&
            { echo "slurmd $pid has SLURM_CONF in its environment"; "$devcluster" down --dir "$dir" >/dev/null; return 1; }
    done
    # The guard as the package's prerm runs it on g1 (no slurm.conf of its
    # own; /run/slurm/conf is g1's, bound in its namespace, here by path).
    if [ -n "$build" ]; then
        guard="sh $(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/packaging/scripts/plugins-removal-guard.sh"
    else
        guard=/usr/libexec/goldminer/spank-removal-guard
    fi
    refusal=$(SLURM_CONF=$work/no-slurm.conf GOLDMINER_SLURMD_CONF_CACHE=$dir/run/slurm-g1/conf \
              $guard --spank /usr/share/goldminer/plugstack.conf.d/goldminer.conf 2>&1) &&
        { echo "the removal guard let the package go on a node that loads the plugin: $refusal"
          "$devcluster" down --dir "$dir" >/dev/null; return 1; }
    timeout 60 "$devcluster" down --dir "$dir" >/dev/null || { echo "down failed"; return 1; }
    grep -q '^SlurmctldParameters=enable_configless$' "$conf" || { echo "no enable_configless in $conf"; return 1; }
    # The batch step read the configuration slurmd fetched.
    cache=$dir/spool/g1/conf-cache
    expect_contains "the job's SLURM_CONF" "$out" "conf=$cache/slurm.conf" || return 1
    include=$(sed -n 's/^include \([^ ]*\)$/\1/p' "$dir/etc/plugstack.conf")
    if [ -n "$include" ]; then
        case $include in */* | *'*'*) echo "include names a path or glob: $include"; return 1 ;; esac
        grep -q "^required .*/spank_goldminer\.so " "$cache/$include" ||
            { echo "slurmctld did not send $include to g1: $(ls "$cache")"; return 1; }
        echo "plugstack.conf includes $include (sent along)"
    else
        grep -q "^required .*/spank_goldminer\.so " "$cache/plugstack.conf" ||
            { echo "g1's fetched plugstack.conf does not load the plugin: $(cat "$cache/plugstack.conf")"; return 1; }
        echo "the plugin's line in plugstack.conf (this Slurm sends no includes)"
    fi
    expect_contains "the guard's refusal" "$refusal" "slurmd's copy of what slurmctld sends" || return 1
    n=$(echo "$out" | grep -c "^{\"epoch\": 0, \"samples\": $lines, \"unique_samples\": $lines, \"duplicates\": 0, \"missing\": 0,")
    expect_eq "clean epoch" "$n" 1 || { echo "$out"; cat "$work"/goldminer-dw-*.out 2>/dev/null | tail -5; return 1; }
}
