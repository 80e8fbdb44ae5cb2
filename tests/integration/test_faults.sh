# Faults on the live cluster while a --goldminer job
# streams; each names what it injects, and every epoch stays exactly once.
# (busy jobs: test_ctld.sh's ctld_setup and submit_busy_job.)

# The session's log lines of workers that joined, in job J's output.
joined_workers() { cat "$work/ctld.$1" 2>/dev/null | grep -c "session: worker .* joined"; }
at_least_joined() { [ "$(joined_workers "$1")" -ge "$2" ]; }

# Injects: scancel of the companion job of an elastic session mid-epoch
# (its worker gets SIGTERM, drains and leaves unasked). Checks: the
# session starts a replacement job at once, and all three epochs are
# exactly once.
test_fault_scancel_of_the_companion_job_mid_epoch() {
    local job dw out n
    ctld_setup || return 1
    job=$(submit_busy_job dw=1,dw-max=1,cpus-per-dw=2 3) || { echo "$job"; return 1; }
    wait_for 60 at_least_joined "$job" 1 || { echo "no worker joined job $job"; scancel "$job"; return 1; }
    sleep 2  # mid-epoch: batches are flowing
    dw=$(squeue -h -n "goldminer-dw.$job" -o %i | head -1)
    [ -n "$dw" ] || { echo "no companion job of $job"; scancel "$job"; return 1; }
    scancel "$dw"
    wait_for 100 job_gone "$job" || { echo "job $job did not end"; tail -5 "$work/ctld.$job"; scancel "$job"; return 1; }
    out=$(cat "$work/ctld.$job")
    n=$(echo "$out" | grep -c '^{"epoch": [0-2], "samples": 20000, "unique_samples": 20000, "duplicates": 0, "missing": 0,')
    expect_eq "clean epochs" "$n" 3 || { echo "$out" | grep -v '^{' | tail -20; return 1; }
    [ "$(joined_workers "$job")" -ge 2 ] || { echo "no replacement worker joined: $out"; return 1; }
    expect_eq "companion job $dw" "$(final_job_state "$dw")" "CANCELLED 0:0" || return 1
}

# Injects: slurmctld stopped (SIGTERM) and started again while a session
# streams from its companion worker. Checks: the worker is kept (none
# lost, none joined again) and all three epochs are exactly once.
test_fault_slurmctld_restart_mid_epoch() {
    local job pid i out n conf=$state/etc/slurm.conf
    ctld_setup || return 1
    job=$(submit_busy_job dw=1,dw-max=1,cpus-per-dw=2 3) || { echo "$job"; return 1; }
    wait_for 60 at_least_joined "$job" 1 || { echo "no worker joined job $job"; scancel "$job"; return 1; }
    sleep 2
    pid=$(cat "$state/run/slurmctld.pid")
    kill -TERM "$pid"
    wait_for 10 pid_gone "$pid" || { echo "slurmctld $pid did not stop"; return 1; }
    sleep 3  # the session streams on without a controller
    slurmctld -f "$conf" </dev/null >>"$state/log/slurmctld.out" 2>&1 9>&- || { echo "slurmctld restart failed"; return 1; }
    for i in $(seq 60); do scontrol ping 2>/dev/null | grep -q UP && break; sleep 0.5; done
    wait_for 100 job_gone "$job" || { echo "job $job did not end"; tail -5 "$work/ctld.$job"; scancel "$job"; return 1; }
    out=$(cat "$work/ctld.$job")
    n=$(echo "$out" | grep -c '^{"epoch": [0-2], "samples": 20000, "unique_samples": 20000, "duplicates": 0, "missing": 0,.*"workers_lost": 0,')
    expect_eq "clean epochs, no worker lost" "$n" 3 || { echo "$out" | grep -v '^{' | tail -20; return 1; }
    expect_eq "workers joined" "$(joined_workers "$job")" 1
}

# The node of the (first) companion job of job J, once it runs.
companion_node() { squeue -h -n "goldminer-dw.$1" -t R -o %N | head -1; }
# The node job J's trainer runs on.
job_node() { squeue -h -j "$1" -o %N; }

# Injects: SIGKILL to the slurmd of the node the companion worker runs on,
# mid-epoch, and that slurmd started again 3 s later (goldminer-devcluster
# restart-slurmd, as an admin would). Checks: slurmd is not on the data
# path, so the worker is kept (none lost, none joined again), all three
# epochs are exactly once, and the node is back in service.
test_fault_slurmd_of_the_workers_node_killed_and_restarted_mid_epoch() {
    local job node pid out n
    ctld_setup || return 1
    job=$(submit_busy_job dw=1,dw-max=1,cpus-per-dw=2 3) || { echo "$job"; return 1; }
    wait_for 60 at_least_joined "$job" 1 || { echo "no worker joined job $job"; scancel "$job"; return 1; }
    sleep 2
    node=$(companion_node "$job")
    [ -n "$node" ] || { echo "no running companion job of $job"; scancel "$job"; return 1; }
    pid=$(cat "$state/run/slurmd-$node.pid")
    kill -KILL "$pid"
    wait_for 10 pid_gone "$pid" || { echo "slurmd $node ($pid) did not die"; return 1; }
    sleep 3
    "$devcluster" restart-slurmd "$node" --dir "$state" || { echo "restart-slurmd $node failed"; return 1; }
    wait_for 100 job_gone "$job" || { echo "job $job did not end"; tail -5 "$work/ctld.$job"; scancel "$job"; return 1; }
    out=$(cat "$work/ctld.$job")
    n=$(echo "$out" | grep -c '^{"epoch": [0-2], "samples": 20000, "unique_samples": 20000, "duplicates": 0, "missing": 0,.*"workers_lost": 0,')
    expect_eq "clean epochs, no worker lost" "$n" 3 || { echo "$out" | grep -v '^{' | tail -20; return 1; }
    expect_eq "workers joined" "$(joined_workers "$job")" 1 || return 1
    wait_for 30 node_in_service "$node" || { echo "node $node: $(sinfo -h -n "$node" -o %t)"; return 1; }
}

# Injects: the loss of the companion worker's node mid-epoch: SIGKILL to
# every process in the node's network namespace (its slurmd, the
# slurmstepd and goldminer-dw of the companion job), then the node marked
# DOWN as slurmctld marks it once SlurmdTimeout (300 s) passes without an
# answer. Checks: the session replaces the worker at once, on another node;
# all ten epochs are exactly once; the lost node's companion job ends;
# restart-slurmd returns the node to service (first, whatever the checks
# find, so that the tests after this one have the node back). Ten epochs
# (about 1 s each here) so that the run is still going when the node is
# lost 2 s after the worker joined: with three, a run on a quiet machine
# had ended before the loss.
test_fault_node_of_the_worker_lost_mid_epoch() {
    local job node ns dw pids out n restarted=0
    nodes_have_namespaces || { echo "skipped: needs node namespaces (netns mode) to kill one node's processes"; return 77; }
    ctld_setup || return 1
    job=$(submit_busy_job dw=1,dw-max=1,cpus-per-dw=2 10) || { echo "$job"; return 1; }
    wait_for 60 at_least_joined "$job" 1 || { echo "no worker joined job $job"; scancel "$job"; return 1; }
    sleep 2
    node=$(companion_node "$job")
    dw=$(squeue -h -n "goldminer-dw.$job" -t R -o %i | head -1)
    [ -n "$node" ] || { echo "no running companion job of $job"; scancel "$job"; return 1; }
    [ "$node" != "$(job_node "$job")" ] || { echo "worker on the trainer's node $node"; scancel "$job"; return 1; }
    ns=$(node_namespace "$node")
    pids=$(ip netns pids "$ns")
    [ -n "$pids" ] || { echo "no process in namespace $ns"; scancel "$job"; return 1; }
    # shellcheck disable=SC2086
    kill -KILL $pids
    scontrol update NodeName="$node" State=DOWN Reason="node lost (fault test)"
    wait_for 100 job_gone "$job" || { echo "job $job did not end"; tail -5 "$work/ctld.$job"; scancel "$job"; }
    "$devcluster" restart-slurmd "$node" --dir "$state" && wait_for 30 node_in_service "$node" && restarted=1
    job_gone "$job" || return 1
    out=$(cat "$work/ctld.$job")
    n=$(echo "$out" | grep -c '^{"epoch": [0-9], "samples": 20000, "unique_samples": 20000, "duplicates": 0, "missing": 0,')
    expect_eq "clean epochs" "$n" 10 || { echo "$out" | grep -v '^{' | tail -20; return 1; }
    [ "$(joined_workers "$job")" -ge 2 ] || { echo "no replacement worker joined: $out"; return 1; }
    [ "$(echo "$out" | sed -n 's/.*session: worker \([a-z0-9]*\):[0-9]* joined.*/\1/p' | tail -1)" != "$node" ] ||
        { echo "the replacement joined from the lost node $node"; return 1; }
    # Ended: cancelled by the session, which lost its worker first, or by
    # slurmctld when the node went down.
    case $(final_job_state "$dw") in
        CANCELLED* | NODE_FAIL*) ;;
        *) echo "lost node's companion job $dw: $(final_job_state "$dw"), expected CANCELLED or NODE_FAIL"; return 1 ;;
    esac
    [ "$restarted" = 1 ] || { echo "node $node not back after restart-slurmd: $(sinfo -h -n "$node" -o %t)"; return 1; }
}

# Node N registered and usable: idle, mixed or allocated, not down or not
# responding.
node_in_service() {
    case $(sinfo -h -n "$1" -o %t | head -1) in
        idle | mix | alloc) return 0 ;;
        *) return 1 ;;
    esac
}

# Injects: scontrol requeue of a --goldminer batch job mid-epoch, after its
# trainer saved its position (goldminer-consume --stop-after-batches
# --state-out, as a training script saves state() with its checkpoint).
# Checks: the requeued run gets new workers and a new port reservation,
# resumes from the saved state, and the epoch (both runs together) is
# exactly once; no registry entry is left.
test_fault_requeued_trainer_resumes_from_its_saved_state() {
    local job out lines=3000 st
    seq 1 "$lines" | sed 's/^/sample /' >"$work/rq-input.txt"
    st=$work/rq.state
    job=$(with_job_ucx sbatch --parsable --time=3 --requeue --open-mode=append --goldminer=dw=1,cpus-per-dw=1 \
          -p gpu --gpus=1 -o "$work/rq.%j" --wrap "
          args='--input text:$work/rq-input.txt --epochs 1 --batch-size 50 --workers 0 --min-workers 1 --join-timeout 60 --json'
          echo run=\${SLURM_RESTART_COUNT:-0} node=\$SLURMD_NODENAME listen=\$GOLDMINER_LISTEN dw_job=\$GOLDMINER_DW_JOB
          if [ \${SLURM_RESTART_COUNT:-0} -eq 0 ]; then
              $tools/goldminer-consume \$args --stop-after-batches 20 --state-out $st
              echo first run exit \$?
              scontrol requeue \$SLURM_JOB_ID
              sleep 60
          else
              $tools/goldminer-consume \$args --resume $st
          fi") || { echo "$job"; return 1; }
    # Slurm holds a requeued batch job back (Reason=BeginTime) until its
    # old credential, revoked on the first run's node, expires (cred_expire,
    # 120 s): let it go at once, elsewhere, as after that node's loss.
    wait_for 60 job_requeued "$job" || { echo "job $job was not requeued"; cat "$work/rq.$job"; scancel "$job"; return 1; }
    scontrol update JobId="$job" ExcNodeList="$(sed -n 's/^run=0 node=\([^ ]*\) .*/\1/p' "$work/rq.$job")" StartTime=now
    wait_for 60 job_ended_after_restart "$job" ||
        { echo "job $job did not end after its requeue: $(job_field "$job" JobState)"; cat "$work/rq.$job"; scancel "$job"
          return 1; }
    out=$(cat "$work/rq.$job")
    expect_contains "first run" "$out" "first run exit 3" || { echo "$out"; return 1; }
    expect_contains "second run" "$out" "run=1 " || { echo "$out"; return 1; }
    # The first run took 20 batches of 50; the second exactly the other
    # 2000 samples (a sample of the first run again would be a duplicate).
    expect_eq "resumed epoch clean" \
        "$(echo "$out" | grep -c "^{\"epoch\": 0, \"samples\": 2000, \"unique_samples\": 2000, \"duplicates\": 0, \"missing\": 0,")" 1 ||
        { echo "$out"; return 1; }
    expect_eq "companion jobs" "$(echo "$out" | sed -n 's/.* dw_job=\([0-9]*\)$/\1/p' | sort -u | wc -l)" 2 || return 1
    expect_eq "registry entries left" "$(grep -c " $job " "$state/run/goldminer/ports")" 0
}

# Pending again after a restart.
job_requeued() {
    [ "$(job_field "$1" Restarts)" -ge 1 ] 2>/dev/null && [ "$(job_field "$1" JobState)" = PENDING ]
}

# Ended (COMPLETED) with a restart behind it.
job_ended_after_restart() {
    [ "$(job_field "$1" Restarts)" -ge 1 ] 2>/dev/null && [ "$(job_field "$1" JobState)" = COMPLETED ]
}
