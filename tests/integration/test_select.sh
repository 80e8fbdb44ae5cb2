# select/goldminer_cons_tres on the devcluster (2 GPU nodes x 4 GPUs x 8
# CPUs, 2 CPU nodes; goldminer.conf reserve_cpus_per_gpu=1): the CPU reserve
# next to free GPUs, data workers on stranded CPUs first, forged worker
# names, preemption of workers by GPU jobs, goldminer.conf and its errors,
# a fault in our decision code, slurmctld restarted under running jobs, and
# backfill's plan for a large CPU job on nodes whose cores are busy now.

# Writes goldminer.conf (one K=V per argument) and has slurmctld reread it.
select_conf() {
    printf '%s\n' "$@" >"$state/etc/goldminer.conf"
    scontrol reconfigure >/dev/null 2>&1 || { echo "scontrol reconfigure failed"; return 1; }
    sleep 1
}

# job_field J FIELD: FIELD of `scontrol show job J` (JobState, Reason, NodeList).
job_field() {
    scontrol -o show job "$1" 2>/dev/null | tr ' ' '\n' | sed -n "s/^$2=//p" | head -1
}

# wait_state J STATE SECONDS: true once J is in STATE.
wait_state() {
    local i
    for i in $(seq $(($3 * 4))); do
        [ "$(job_field "$1" JobState)" = "$2" ] && return 0
        sleep 0.25
    done
    echo "job $1 not $2 after $3 s: $(job_field "$1" JobState) ($(job_field "$1" Reason))"
    return 1
}

# wait_released J: true once cancelled J holds no CPUs any more (no longer
# running or completing), so the next job's run does not wait on it.
wait_released() {
    local i st
    for i in $(seq 240); do
        st=$(squeue -h -j "$1" -o %t 2>/dev/null)
        case $st in R|CG|PD|S|CF) sleep 0.25 ;; *) return 0 ;; esac
    done
    echo "job $1 still $st 60 s after scancel"
    return 1
}

# ctld_log_has PATTERN: slurmctld's log has a line matching PATTERN (grep -E).
ctld_log_has() {
    grep -qE "$1" "$state/log/slurmctld.log" || {
        echo "no line matching '$1' in slurmctld.log; last decisions:"
        grep 'goldminer_cons_tres' "$state/log/slurmctld.log" | tail -3
        return 1
    }
}

# An 8-CPU job without GPUs on g1, whose 4 GPUs are free: PENDING; half
# of that runs. With the reserve off, or mode=observe, the whole job runs.
test_select_cpu_job_keeps_out_of_the_reserve_next_to_free_gpus() {
    local big small st rc=0
    select_conf reserve_cpus_per_gpu=1 || return 1
    big=$(sbatch --parsable -p gpu -w g1 -N1 -n8 -o /dev/null --wrap 'sleep 60') || return 1
    sleep 4  # the main scheduler and backfill (every second) tried it
    st="$(job_field "$big" JobState) $(job_field "$big" Reason)"
    scancel "$big"
    expect_eq "8 CPUs next to 4 free GPUs" "$st" "PENDING Resources" || return 1
    ctld_log_has "job_test job $big mode run_now .*\[cpu job: [0-9]+ nodes dropped, [0-9]+ cores reserved\] -> refused" ||
        return 1
    small=$(sbatch --parsable -p gpu -w g1 -N1 -n4 -o /dev/null --wrap 'sleep 60') || return 1
    wait_state "$small" RUNNING 20 || rc=1
    scancel "$small"
    wait_released "$small" || rc=1
    [ $rc -eq 0 ] || return 1
    ctld_log_has "job_test job $small mode run_now .*\[cpu job: [0-9]+ nodes dropped, [0-9]+ cores reserved\] -> selected g1" ||
        return 1

    select_conf reserve_cpus_per_gpu=0 || return 1
    big=$(sbatch --parsable -p gpu -w g1 -N1 -n8 -o /dev/null --wrap 'sleep 60') || return 1
    wait_state "$big" RUNNING 20 || rc=1
    scancel "$big"
    wait_released "$big" || rc=1
    [ $rc -eq 0 ] || { select_conf reserve_cpus_per_gpu=1; return 1; }

    select_conf reserve_cpus_per_gpu=1 mode=observe || return 1
    big=$(sbatch --parsable -p gpu -w g1 -N1 -n8 -o /dev/null --wrap 'sleep 60') || return 1
    wait_state "$big" RUNNING 20 || rc=1
    scancel "$big"
    select_conf reserve_cpus_per_gpu=1 || return 1
    [ $rc -eq 0 ] || return 1
    ctld_log_has "job $big: observe, would be cpu job: [0-9]+ nodes dropped"
}

# g2's GPUs all taken: a --goldminer=dw=2 job's workers land on g2's
# stranded CPUs, not next to g1's free GPUs nor on the CPU-only nodes. A
# job merely named like a worker gets no such placement. A CPU job does
# not preempt the workers; a GPU job that needs their CPUs does, and they
# drain on SIGTERM within the dw partition's GraceTime.
test_select_data_workers_on_stranded_cpus_preempted_by_gpu_jobs() {
    local hog job dw forged cpu gpu i rc=0
    select_conf reserve_cpus_per_gpu=1 || return 1
    hog=$(sbatch --parsable -p gpu -w g2 -N1 -n1 --gpus=4 -o /dev/null --wrap 'sleep 120') || return 1
    wait_state "$hog" RUNNING 20 || { scancel "$hog"; return 1; }
    job=$(sbatch --parsable --goldminer=dw=2,cpus-per-dw=1 -p gpu -w g1 -N1 --gpus=1 -o "$work/sel.%j" \
          --wrap 'echo dw=$GOLDMINER_DW_JOB; sleep 120') || { scancel "$hog"; return 1; }
    for i in $(seq 80); do
        dw=$(sed -n 's/^dw=\([0-9]*\)$/\1/p' "$work/sel.$job" 2>/dev/null)
        [ -n "$dw" ] && break
        sleep 0.25
    done
    [ -n "$dw" ] || { echo "no companion job: $(cat "$work/sel.$job" 2>&1)"; scancel "$hog" "$job"; return 1; }
    if wait_state "$dw" RUNNING 30; then
        expect_eq "workers' nodes" "$(job_field "$dw" NodeList)" g2 || rc=1
        ctld_log_has "job_test job $dw mode run_now .*\[data worker: 0 nodes dropped, [0-9]+ cores reserved, tiered\] -> selected g2" || rc=1
    else
        rc=1
    fi
    # Named as a worker of a job that is not a --goldminer job: an ordinary
    # CPU job for the plugin.
    forged=$(sbatch --parsable -J "goldminer-dw.$hog" -p dw -n2 -o /dev/null --wrap 'sleep 30') || rc=1
    wait_state "$forged" RUNNING 20 || rc=1
    scancel "$forged"
    ctld_log_has "job_test job $forged mode run_now .*\[not a data worker: job $hog is not a --goldminer job; cpu job: " ||
        rc=1
    [ $rc -eq 0 ] || { scancel "$hog" "$job" "$dw"; return 1; }

    # g2's GPUs free again; its CPUs: 2 with the workers, 6 free.
    scancel "$hog"
    sleep 2
    select_conf reserve_cpus_per_gpu=0 || rc=1
    cpu=$(sbatch --parsable -p all -w g2 -N1 -n8 -o /dev/null --wrap 'sleep 30') || rc=1
    sleep 4
    expect_eq "CPU job vs workers" "$(job_field "$cpu" JobState) $(job_field "$dw" JobState)" \
        "PENDING RUNNING" || rc=1
    scancel "$cpu"
    select_conf reserve_cpus_per_gpu=1 || rc=1
    gpu=$(sbatch --parsable -p gpu -w g2 -N1 -n8 --gpus=4 -o /dev/null --wrap 'sleep 30') || rc=1
    wait_state "$gpu" RUNNING 40 || rc=1
    # Preempted with GraceTime: SIGTERM, goldminer-dw drains and exits 0
    # (its trainer never listened: nothing to return), so the job ends
    # with exit 0 before the grace runs out instead of being killed.
    expect_eq "preempted workers" "$(job_field "$dw" JobState) $(job_field "$dw" ExitCode)" "$(drained_preempted_state)" || rc=1
    grep -q "STEP $dw.0 ON g2 CANCELLED" "$work/goldminer-dw-$dw.out" 2>/dev/null || {
        echo "the workers' step was not signalled: $(cat "$work/goldminer-dw-$dw.out" 2>&1 | tail -3)"
        rc=1; }
    scancel "$gpu" "$job" "$dw"
    return $rc
}

# Backfill must not starve a large CPU job. Injected: g1's 4 cores outside
# the reserve of its 4 free GPUs held by a job (time limit 1 min), then a
# CPU job needing 4 cores on g1 and 4 on c1, then 1-core jobs on c1 whose
# time limit (3 min) ends after the large job's planned start. Checked:
# the large job's will-run keeps g1 (0 nodes dropped, the reserve still
# hidden) and gets a plan, so backfill holds c1 for it and the small jobs
# wait; once g1's holder ends, the large job runs. (Before,
# will-run dropped g1 by its free cores: no plan, no hold, and the small
# jobs took c1 at once, again and again while g1 stayed full.)
test_select_backfill_plans_a_large_cpu_job_on_nodes_busy_now() {
    local hold big s smalls='' st rc=0
    select_conf reserve_cpus_per_gpu=1 || return 1
    hold=$(sbatch --parsable -p gpu -w g1 -N1 -n4 -t 1 -o /dev/null --wrap 'sleep 300') || return 1
    wait_state "$hold" RUNNING 20 || { scancel "$hold"; return 1; }
    big=$(sbatch --parsable -p all -w g1,c1 -N2 --ntasks-per-node=4 -t 1 -o /dev/null --wrap 'sleep 30') ||
        { scancel "$hold"; return 1; }
    sleep 3  # backfill (every second) planned it
    for _ in 1 2 3; do
        s=$(sbatch --parsable -p all -w c1 -N1 -n1 -t 3 -o /dev/null --wrap 'sleep 300') || rc=1
        smalls="$smalls $s"
    done
    sleep 5
    st=$(for s in $big $smalls; do job_field "$s" JobState; done | tr '\n' ' ')
    # shellcheck disable=SC2086
    expect_eq "large job and the 1-core jobs after it while g1 is full" "$st" \
        "PENDING PENDING PENDING PENDING " || { scancel "$hold" "$big" $smalls; return 1; }
    ctld_log_has "job_test job $big mode will_run .*\[cpu job: 0 nodes dropped, [0-9]+ cores reserved\] -> selected" ||
        rc=1
    scancel "$hold"
    wait_state "$big" RUNNING 20 || rc=1
    # shellcheck disable=SC2086
    scancel "$big" $smalls
    return $rc
}

# Preemption under a consuming trainer: a --goldminer job's workers feed
# it from g2's stranded CPUs; mid-run g2's GPUs free up and a GPU job wants
# all of g2: Slurm preempts the workers (dw partition, GraceTime), they
# drain on SIGTERM (the batch in hand, leases returned), the elastic
# session replaces them with a worker job placed off g2, and every epoch
# still has every sample exactly once.
test_select_preempted_workers_drain_and_the_epoch_stays_exactly_once() {
    local hog job dw gpu lines=1000000 i out n jobs rc=0
    select_conf reserve_cpus_per_gpu=1 || return 1
    seq 1 "$lines" | sed 's/^/sample /' >"$work/pre-big.txt"
    hog=$(sbatch --parsable -p gpu -w g2 -N1 -n1 --gpus=4 -o /dev/null --wrap 'sleep 300') || return 1
    wait_state "$hog" RUNNING 20 || { scancel "$hog"; return 1; }
    job=$(with_job_ucx sbatch --parsable --goldminer=dw=2,dw-max=4,cpus-per-dw=1 -p gpu -w g1 -N1 --gpus=1 \
          --time=5 -o "$work/pre.%j" --wrap "echo dw=\$GOLDMINER_DW_JOB; export GOLDMINER_AUTOSCALE_INTERVAL=0.5; \
          $tools/goldminer-consume --input text:$work/pre-big.txt --epochs 4 --batch-size 50 \
          --workers 0 --min-workers 2 --json -v") || { scancel "$hog"; return 1; }
    for i in $(seq 120); do
        dw=$(sed -n 's/^dw=\([0-9]*\)$/\1/p' "$work/pre.$job" 2>/dev/null)
        [ -n "$dw" ] && grep -q '^{"epoch": 0' "$work/pre.$job" && break
        sleep 0.25
    done
    [ -n "$dw" ] && [ "$(job_field "$dw" NodeList)" = g2 ] || {
        echo "workers not running on g2 by epoch 0: job $dw on $(job_field "$dw" NodeList)"
        scancel "$hog" "$job"; return 1; }
    # Mid-run (epoch 1 of 4): g2's GPUs free, and a GPU job wants all of g2.
    scancel "$hog"
    gpu=$(sbatch --parsable -p gpu -w g2 -N1 -n8 --gpus=4 -o /dev/null --wrap 'sleep 20') || rc=1
    wait_state "$gpu" RUNNING 40 || rc=1
    for i in $(seq 240); do
        [ "$(job_field "$job" JobState)" = COMPLETED ] && break
        sleep 0.5
    done
    out=$(cat "$work/pre.$job")
    scancel "$gpu" "$job"
    [ $rc -eq 0 ] || return 1
    expect_eq "trainer job" "$(job_field "$job" JobState) $(job_field "$job" ExitCode)" "COMPLETED 0:0" || {
        echo "$out" | tail -5; return 1; }
    n=$(echo "$out" | grep -c "^{\"epoch\": [0123], \"samples\": $lines, \"unique_samples\": $lines, \"duplicates\": 0, \"missing\": 0,")
    expect_eq "exactly-once epochs" "$n" 4 || { echo "$out" | grep '^{'; return 1; }
    # The preempted workers drained (SIGTERM within GraceTime, exit 0).
    expect_eq "preempted workers" "$(job_field "$dw" JobState) $(job_field "$dw" ExitCode)" "$(drained_preempted_state)" || return 1
    grep -q "STEP $dw.0 ON g2 CANCELLED" "$work/goldminer-dw-$dw.out" || {
        echo "the workers' step was not preempted: $(tail -3 "$work/goldminer-dw-$dw.out")"; return 1; }
    expect_eq "drained workers" "$(grep -c '^goldminer-dw: g2:[0-9]*: sent [0-9]* batches' "$work/goldminer-dw-$dw.out")" 2 ||
        return 1
    # Every worker on g2 left drained: the first worker job's two, and any
    # the elastic session added there before the preemption (dw-max=4;
    # how many got there first depends on the scheduler's timing).
    n=$(echo "$out" | grep -Ec 'session: worker g2:[0-9]* joined')
    [ "$n" -ge 2 ] || { echo "fewer than 2 workers joined from g2: $(echo "$out" | grep joined)"; return 1; }
    expect_eq "drained workers' leaving" "$(echo "$out" | grep -Ec 'session: worker g2:[0-9]* left (after draining|with nothing in hand)')" "$n" ||
        { echo "$out" | grep -E 'joined|left'; return 1; }
    # Mid-epoch: they gave back the leases they held.
    n=$(sed -n 's/^goldminer-dw: g2:[0-9]*: sent .* returned \([0-9]*\)[,;].*/\1/p' "$work/goldminer-dw-$dw.out" |
        awk '{ n += $1 } END { print n + 0 }')
    [ "$n" -ge 1 ] || { echo "no lease returned by the preempted workers: $(cat "$work/goldminer-dw-$dw.out")"; return 1; }
    # Their replacements: worker jobs off g2 (now all the GPU job's), on
    # the CPU-only nodes, which joined.
    jobs=$(squeue --noheader --states=all --name="goldminer-dw.$job" --format='%i %N')
    echo "$jobs" | grep -Eq ' c[12]$' || { echo "no worker job on a CPU-only node: '$jobs'"; return 1; }
    echo "$out" | grep -Eq 'session: worker c[12]:[0-9]* joined' || {
        echo "no replacement worker joined: $(echo "$out" | grep joined)"; return 1; }
}

# A bad goldminer.conf: slurmctld logs the file, line and reason and runs
# as plain cons_tres; an internal failure of our decision code gives
# cons_tres's own decision and one line; slurmctld keeps running.
test_select_bad_settings_and_faults_fall_back_to_cons_tres() {
    local job big rc=0
    select_conf mode=sometimes || return 1
    ctld_log_has "select/goldminer_cons_tres: $state/etc/goldminer.conf:1: mode: invalid value 'sometimes': .*; running as plain cons_tres" ||
        rc=1
    # Plain cons_tres: the 8-CPU job runs next to free GPUs.
    big=$(sbatch --parsable -p gpu -w g1 -N1 -n8 -o /dev/null --wrap 'sleep 30') || rc=1
    wait_state "$big" RUNNING 20 || rc=1
    scancel "$big"
    select_conf inject_fault=decision || return 1
    job=$(submit_wait -p cpu -N1 -o /dev/null --wrap true) || rc=1
    expect_eq "job under a fault" "$(job_field "$job" JobState)" COMPLETED || rc=1
    ctld_log_has "select/goldminer_cons_tres: job $job: internal error: fault injected \(inject_fault=decision\); cons_tres decides alone" ||
        rc=1
    select_conf reserve_cpus_per_gpu=1 || return 1
    scontrol ping | grep -q UP || { echo "slurmctld down: $(scontrol ping 2>&1)"; return 1; }
    return $rc
}

# slurmctld restarted (state kept) while a --goldminer job and its workers
# run: both keep running, and the reserve still holds afterwards.
test_select_slurmctld_restart_keeps_running_jobs() {
    local job dw pid i big st rc=0 conf=$state/etc/slurm.conf
    job=$(sbatch --parsable --goldminer=dw=1,cpus-per-dw=1 -p gpu -w g2 -N1 --gpus=1 -o "$work/sel.%j" \
          --wrap 'echo dw=$GOLDMINER_DW_JOB; sleep 90') || return 1
    for i in $(seq 80); do
        dw=$(sed -n 's/^dw=\([0-9]*\)$/\1/p' "$work/sel.$job" 2>/dev/null)
        [ -n "$dw" ] && break
        sleep 0.25
    done
    [ -n "$dw" ] && wait_state "$dw" RUNNING 30 || { echo "no running companion job"; scancel "$job"; return 1; }
    pid=$(cat "$state/run/slurmctld.pid")
    kill -TERM "$pid"
    for i in $(seq 100); do pid_running "$pid" || break; sleep 0.1; done
    pid_running "$pid" && { echo "slurmctld $pid did not stop"; return 1; }
    slurmctld -f "$conf" </dev/null >>"$state/log/slurmctld.out" 2>&1 9>&- || { echo "slurmctld restart failed"; return 1; }
    for i in $(seq 60); do scontrol ping 2>/dev/null | grep -q UP && break; sleep 0.5; done
    expect_eq "jobs after restart" "$(job_field "$job" JobState) $(job_field "$dw" JobState)" "RUNNING RUNNING" || rc=1
    big=$(sbatch --parsable -p gpu -w g1 -N1 -n8 -o /dev/null --wrap 'sleep 30') || rc=1
    sleep 4
    st="$(job_field "$big" JobState)"
    scancel "$big" "$job" "$dw"
    expect_eq "reserve after restart" "$st" PENDING || rc=1
    return $rc
}

# A host whose Slurm commands read this cluster's slurm.conf (SelectType=
# select/goldminer_cons_tres) but which has no select_goldminer_cons_tres.so
# (a login node without goldminer-select): its plugin directory here is a
# copy of the cluster's without that file, and a job runs. Up to 24.11
# sinfo and scontrol show node load the select plugin named in slurm.conf
# to read the node information slurmctld tags with its plugin id, and
# fail; on 22.05 squeue does too (a running job's record carries select
# data); from 25.11 only slurmctld loads it.
test_select_commands_on_a_host_without_the_select_plugin() {
    local dir=$work/no-select-host d f out rc job cmd
    rm -rf "$dir" && mkdir -p "$dir/plugins" || return 1
    for d in $(sed -n 's/^PluginDir=//p' "$state/etc/slurm.conf" | tr ':' ' '); do
        for f in "$d"/*.so; do
            [ "${f##*/}" = select_goldminer_cons_tres.so ] || ln -sf "$f" "$dir/plugins/"
        done
    done
    [ -e "$dir/plugins/select_cons_tres.so" ] || { echo "no select_cons_tres.so in the cluster's PluginDir"; return 1; }
    sed -e "s|^PluginDir=.*|PluginDir=$dir/plugins|" -e "s|^PlugStackConfig=.*|PlugStackConfig=$dir/plugstack.conf|" \
        "$state/etc/slurm.conf" >"$dir/slurm.conf"
    : >"$dir/plugstack.conf"
    job=$(sbatch --parsable -p cpu -N1 -n1 -t 2 -o /dev/null --wrap 'sleep 120') || { echo "sbatch: $job"; return 1; }
    wait_for 30 job_running "$job" || { scancel "$job"; echo "job $job did not start"; return 1; }
    # Each command, and the first release on which it runs without the plugin.
    for cmd in "sinfo -h -N -o %N|25.11" "scontrol show node g1|25.11" "squeue -h -o %i|24.11"; do
        # shellcheck disable=SC2086  # the command's words
        out=$(SLURM_CONF=$dir/slurm.conf timeout 30 ${cmd%|*} 2>&1); rc=$?
        if [ "$(printf '%s\n%s\n' "${slurm_version%.*}" "${cmd#*|}" | sort -V | head -1)" != "${cmd#*|}" ]; then
            [ $rc -ne 0 ] || { scancel "$job"; echo "${cmd%|*} ran without the select plugin on Slurm $slurm_version: $out"; return 1; }
            expect_contains "${cmd%|*}" "$out" "Can't find plugin for select/goldminer_cons_tres" || { scancel "$job"; return 1; }
        else
            [ $rc -eq 0 ] || { scancel "$job"; echo "${cmd%|*} failed without the select plugin on Slurm $slurm_version: $out"; return 1; }
        fi
        echo "Slurm $slurm_version: ${cmd%% *} $([ $rc -eq 0 ] && echo runs || echo fails) without the select plugin"
    done
    scancel "$job"
    # squeue, when it ran, listed the job.
    case $out in *"$job"*) ;; *) [ $rc -ne 0 ] || { echo "squeue did not list job $job: $out"; return 1; } ;; esac
}
