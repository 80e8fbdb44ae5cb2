# sbatch --goldminer: spank_goldminer.so starts the batch job's data workers
# as a companion job in the site's dw_partition (dw, all nodes, here), hands the batch
# script GOLDMINER_LISTEN / GOLDMINER_SECRET / GOLDMINER_DW_JOB, and ends
# the companion job with the batch job.

test_companion_job_feeds_the_batch_jobs_session_from_cpu_nodes() {
    local job out dw lines=3000 n
    seq 1 "$lines" | sed 's/^/sample /' >"$work/cj-input.txt"
    # The job script names no address, secret or worker: goldminer-consume
    # listens on GOLDMINER_LISTEN by default.
    job=$(submit_goldminer_job --goldminer=dw=2,cpus-per-dw=1 -p gpu --gpus=1 --wrap \
          "echo dw_job=\$GOLDMINER_DW_JOB listen=\$GOLDMINER_LISTEN; $tools/goldminer-consume \
           --input text:$work/cj-input.txt --epochs 2 --batch-size 50 --workers 0 --min-workers 2 \
           --join-timeout 60 --json -v") || { echo "$job"; return 1; }
    out=$(cat "$work/cj.$job")
    dw=$(echo "$out" | sed -n 's/^dw_job=\([0-9]*\) .*/\1/p')
    [ -n "$dw" ] || { echo "no GOLDMINER_DW_JOB in the job: $out"; return 1; }
    expect_contains "listen address" "$out" "listen=ucx://" || return 1
    # The node's registry gave it a port from its start, 20000 + id mod
    # 20000, on (the next ones when taken), and dropped it when it ended.
    case $(echo "$out" | sed -n 's/.*listen=ucx:.*:\([0-9]*\)$/\1/p') in
        2[0-9][0-9][0-9][0-9] | 3[0-9][0-9][0-9][0-9]) ;;
        *) echo "listen port not in dw_ports 20000-39999: $out"; return 1 ;;
    esac
    expect_eq "registry entries of job $job" "$(grep -c " $job " "$state/run/goldminer/ports")" 0 || return 1
    n=$(echo "$out" | grep -c "^{\"epoch\": [01], \"samples\": $lines, \"unique_samples\": $lines, \"duplicates\": 0, \"missing\": 0,")
    expect_eq "clean epochs" "$n" 2 || { echo "$out"; return 1; }
    # Both workers came from the CPU-only nodes: no GPU node has its GPUs all
    # taken, so the select plugin offers those first (an id is NODE:PID).
    expect_eq "workers from cpu nodes" \
        "$(echo "$out" | sed -n 's/.*session: worker \([a-z0-9]*\):[0-9]* joined.*/\1/p' | grep -c '^c[12]$')" 2 || {
        echo "$out"; return 1; }
    expect_eq "companion job name" "$(scontrol -o show job "$dw" | sed -n 's/.* JobName=\([^ ]*\) .*/\1/p')" \
        "goldminer-dw.$job" || return 1
    expect_eq "companion partition" "$(scontrol -o show job "$dw" | sed -n 's/.* Partition=\([^ ]*\) .*/\1/p')" dw ||
        return 1
    # The session drained them: the companion job ended by itself, cleanly.
    expect_eq "companion job end" "$(final_job_state "$dw")" "COMPLETED 0:0" || {
        cat "$work/goldminer-dw-$dw.out" 2>/dev/null; return 1; }
    expect_eq "workers drained" "$(grep -c '^goldminer-dw: [^ ]*: sent [0-9]* batches' "$work/goldminer-dw-$dw.out")" 2
}

# A --goldminer job that never opens a session: its workers wait for it, and
# when the batch job ends they are told to stop (SIGTERM) and exit 0. The
# companion job's time limit is the batch job's time left (5 minutes here),
# so it would end by itself were the batch node lost.
test_companion_job_ends_with_a_batch_job_that_never_listened() {
    local job out dw limit
    job=$(submit_goldminer_job --goldminer=dw=1 -p gpu --time=5 --wrap 'echo dw_job=$GOLDMINER_DW_JOB; sleep 3') ||
        { echo "$job"; return 1; }
    out=$(cat "$work/cj.$job")
    dw=$(echo "$out" | sed -n 's/^dw_job=\([0-9]*\)$/\1/p')
    [ -n "$dw" ] || { echo "no GOLDMINER_DW_JOB in the job: $out"; return 1; }
    limit=$(scontrol -o show job "$dw" | sed -n 's/.* TimeLimit=\([^ ]*\) .*/\1/p')
    case $limit in
        00:0[1-5]:00) ;;
        *) echo "companion job $dw: TimeLimit=$limit, expected the batch job's time left (at most 00:05:00)"; return 1 ;;
    esac
    expect_eq "companion job end" "$(final_job_state "$dw")" "COMPLETED 0:0" || {
        cat "$work/goldminer-dw-$dw.out" 2>/dev/null; return 1; }
    grep -q "data workers are job $dw (1 x goldminer-dw)" "$state"/log/slurmd-g*.log || {
        echo "no 'data workers are job $dw' line in the GPU nodes' slurmd logs"; return 1; }
}

# dw=0 asks for no workers at start: no companion job, no address. A
# companion job sbatch refuses leaves the job running, with the reason in
# GOLDMINER_DW_ERROR and in its output.
test_companion_job_none_for_dw_0_and_the_reason_when_sbatch_refuses() {
    local job out
    job=$(submit_goldminer_job --goldminer=dw=0 -p gpu \
          --wrap 'echo "dw_job=${GOLDMINER_DW_JOB-unset} listen=${GOLDMINER_LISTEN-unset}"') ||
        { echo "$job"; return 1; }
    expect_eq "dw=0" "$(cat "$work/cj.$job")" "dw_job=unset listen=unset" || return 1
    # The CPU nodes have 8 CPUs; the site allows 16 per worker (max_cpus_per_dw).
    job=$(submit_goldminer_job --goldminer=dw=1,cpus-per-dw=16 -p gpu \
          --wrap 'echo "dw_job=${GOLDMINER_DW_JOB-unset} error=$GOLDMINER_DW_ERROR"') || { echo "$job"; return 1; }
    out=$(cat "$work/cj.$job")
    expect_contains "refused" "$out" \
        "dw_job=unset error=goldminer: job $job: cannot start its data workers: sbatch: exit 1: sbatch: error: Batch job submission failed: Requested node configuration is not available"
}

# The plugin's Slurm commands come from plugstack.conf slurm_bindir, never
# from the job's PATH, and one that never ends (a slurmctld that does not
# answer) is killed after slurm_command_timeout. Injected: a job PATH whose
# first directory holds an sbatch, squeue, scancel and srun that leave a
# mark; a slurm_bindir whose sbatch ignores SIGTERM and never ends (a child
# of its own holds on too), with Slurm's own squeue, scancel and srun;
# slurm_command_timeout=2. Checked: no mark; the batch script runs within
# 2 s + 1 s grace (+ slack) of the job's start, with GOLDMINER_DW_ERROR
# naming sbatch, its path and the limit; the stuck sbatch and its child are
# gone.
test_a_companion_sbatch_that_never_ends_is_killed_and_the_jobs_path_is_not_searched() {
    local fake bin conf job out start began pid c st
    fake=$(mktemp -d "$work/jobpath.XXXXXX")
    bin=$(mktemp -d "$work/slurmbin.XXXXXX")
    chmod 755 "$fake" "$bin"
    for c in sbatch squeue scancel srun; do
        printf '#!/bin/sh\necho "%s from the job PATH" >>%s/marks\nexit 1\n' "$c" "$fake" >"$fake/$c"
        chmod 755 "$fake/$c"
    done
    for c in squeue scancel srun; do ln -s "$(command -v "$c")" "$bin/$c"; done
    printf '#!/bin/sh\ntrap "" TERM\necho $$ >%s/sbatch.pids\nsleep 1000 &\necho $! >>%s/sbatch.pids\nwait\n' \
        "$bin" "$bin" >"$bin/sbatch"
    chmod 755 "$bin/sbatch"
    # slurmstepd reads plugstack.conf at each step's start.
    conf="$state/etc/plugstack.conf"
    cp "$conf" "$work/plugstack.conf.saved" || return 1
    trap 'cp "$work/plugstack.conf.saved" "$conf"' EXIT
    sed -i "s|^\(required .*\)$|\1 slurm_bindir=$bin slurm_command_timeout=2|" "$conf"
    job=$(submit_goldminer_job --goldminer=dw=1 -p gpu --export="ALL,PATH=$fake:$PATH" \
          --wrap 'echo "began=$(date +%s) dw_job=${GOLDMINER_DW_JOB-unset} error=$GOLDMINER_DW_ERROR"') ||
        { echo "$job"; return 1; }
    cp "$work/plugstack.conf.saved" "$conf"
    out=$(cat "$work/cj.$job")
    [ ! -e "$fake/marks" ] || { echo "the job's PATH was searched: $(cat "$fake/marks")"; return 1; }
    expect_contains "timed out sbatch" "$out" \
        "dw_job=unset error=goldminer: job $job: cannot start its data workers: sbatch ($bin/sbatch) did not end within 2 s (plugstack.conf slurm_command_timeout): killed (SIGTERM to its process group, SIGKILL 1 s later)" ||
        return 1
    start=$(date -d "$(scontrol -o show job "$job" | sed -n 's/.* StartTime=\([^ ]*\) .*/\1/p')" +%s)
    began=$(echo "$out" | sed -n 's/^began=\([0-9]*\) .*/\1/p')
    [ -n "$start" ] && [ -n "$began" ] && [ $((began - start)) -le 10 ] ||
        { echo "the batch script began $((began - start)) s after the job started (expected 3-4 s): $out"; return 1; }
    for pid in $(cat "$bin/sbatch.pids"); do
        st=$(sed -n 's/.*) \([A-Z]\) .*/\1/p' "/proc/$pid/stat" 2>/dev/null)
        [ -z "$st" ] || [ "$st" = Z ] || { echo "process $pid of the stuck sbatch still runs ($st)"; return 1; }
    done
    echo "batch script began $((began - start)) s after the job's start"
}

# mode=elastic (the default): a session whose trainer waits for workers
# grows its companion workers towards dw-max, one sbatch --ntasks=1 job each
# (GOLDMINER_DW_SBATCH), and every one of them ends with the batch job.
# goldminer-consume --min-workers 3 waits for three workers while the job
# starts one: only growth can let it begin.
test_elastic_session_grows_its_companion_workers_to_dw_max() {
    local job out n ids id
    seq 1 2000 | sed 's/^/sample /' >"$work/el-input.txt"
    job=$(submit_goldminer_job --goldminer=dw=1,dw-max=3,cpus-per-dw=1 -p gpu --gpus=1 --wrap \
          "GOLDMINER_AUTOSCALE_INTERVAL=0.5 $tools/goldminer-consume --input text:$work/el-input.txt --epochs 2 \
           --batch-size 50 --workers 0 --min-workers 3 --join-timeout 120 --json -v") || { echo "$job"; return 1; }
    out=$(cat "$work/cj.$job")
    n=$(echo "$out" | grep -c '^{"epoch": [01], "samples": 2000, "unique_samples": 2000, "duplicates": 0, "missing": 0,')
    expect_eq "clean epochs" "$n" 2 || { echo "$out"; return 1; }
    # By goldminer-ctld's target (all three at once) or, without it, by the
    # autosizer.
    echo "$out" | grep -q "started [12] more data workers" || { echo "growth not logged: $out"; return 1; }
    expect_eq "workers joined" "$(echo "$out" | grep -c 'session: worker [a-z0-9]*:[0-9]* joined')" 3 || {
        echo "$out"; return 1; }
    ids=$(scontrol -o show job | sed -n "s/^JobId=\([0-9]*\) JobName=goldminer-dw\.$job .*/\1/p")
    expect_eq "companion jobs" "$(echo "$ids" | wc -w)" 3 || { echo "$ids"; return 1; }
    for id in $ids; do
        expect_eq "companion job $id end" "$(final_job_state "$id")" "COMPLETED 0:0" || {
            cat "$work/goldminer-dw-$id.out" 2>/dev/null; return 1; }
        expect_eq "companion job $id tasks" "$(scontrol -o show job "$id" | sed -n 's/.* NumTasks=\([0-9]*\) .*/\1/p')" 1 ||
            return 1
    done
}

# A worker killed (SIGKILL, as a node loss would) under an elastic session
# that sizes itself is replaced at once: with a 30 s interval no
# observation comes before the job ends, so only the loss can start the
# replacement. Every epoch stays exactly once. (6 epochs: 3.4-5.6 s each
# on the idle 2-core devcluster, 5-10.5 s under other builds' load, where
# 12 ran past submit_wait's 100 s and the job's 2 minutes.)
test_elastic_session_replaces_a_killed_worker_at_once() {
    local job out n
    ctld_setup || return 1
    job=$(submit_goldminer_job --goldminer=dw=2,dw-max=2,cpus-per-dw=2 -p gpu --gpus=1 --wrap "unset GOLDMINER_CTLD
        export GOLDMINER_AUTOSCALE_INTERVAL=30 OPENBLAS_NUM_THREADS=1
        $tools/goldminer-consume --input text:$work/ctld-input.txt --program $work/busy.pt --batch-size 100 \
          --epochs 6 --workers 0 --min-workers 2 --join-timeout 60 --json -v 2>&1 | while IFS= read -r line; do
            printf '%s\n' \"\$line\"
            case \$line in
              *' delivered its first batch '*) id=\${line#*worker }; id=\${id%% *} ;;
              '{\"epoch\": 0,'*) kill -KILL \${id##*:} && echo \"KILLED \$id\" ;;
            esac
          done") || { echo "$job"; return 1; }
    out=$(cat "$work/cj.$job")
    expect_contains "kill" "$out" "KILLED " || return 1
    expect_contains "replacement" "$out" \
        "1 data workers left unasked, 1 connected: started 1 more data workers to replace them" || return 1
    expect_eq "workers joined" "$(echo "$out" | grep -c 'session: worker [a-z0-9]*:[0-9]* joined')" 3 || {
        echo "$out" | grep -v '^{'; return 1; }
    n=$(echo "$out" | grep -c '^{"epoch": [0-9]*, "samples": 20000, "unique_samples": 20000, "duplicates": 0, "missing": 0,')
    expect_eq "clean epochs" "$n" 6 || { echo "$out" | grep '^{'; return 1; }
}

# Trainer ports on one node (launch/port_registry.h). Jobs A and B = A + 1
# start held; a plain job on g1 listens on A's first port (20000 + (A +
# this boot's offset) mod 20000), then A is released: it skips that port and takes the next, which
# is B's first port; then B is released: the registry says A holds it, so B
# takes the one after. Both stream their epochs at once, and their entries
# are gone after.
test_two_trainers_on_one_node_whose_ports_collided_get_their_own() {
    local a b l first salt pa pb out lines=2000 n script
    seq 1 "$lines" | sed 's/^/sample /' >"$work/ports-input.txt"
    # Each waits (at most 60 s) until both hold their ports, then streams.
    script="echo listen=\$GOLDMINER_LISTEN; touch $work/ports-up.\$SLURM_JOB_ID
            for i in \$(seq 240); do [ \$(ls $work/ports-up.* | wc -l) -ge 2 ] && break; sleep 0.25; done
            $tools/goldminer-consume --input text:$work/ports-input.txt --epochs 2 --batch-size 50 --workers 0 \
              --min-workers 1 --join-timeout 60 --json"
    a=$(with_job_ucx sbatch --parsable --hold --time=2 --goldminer=dw=1,cpus-per-dw=1 -p gpu -w g1 --gpus=1 \
        -o "$work/ports.%j" --wrap "$script") || { echo "$a"; return 1; }
    b=$(with_job_ucx sbatch --parsable --hold --time=2 --goldminer=dw=1,cpus-per-dw=1 -p gpu -w g1 --gpus=1 \
        -o "$work/ports.%j" --wrap "$script") || { echo "$b"; scancel "$a"; return 1; }
    [ "$b" -eq $((a + 1)) ] || { echo "job ids $a and $b are not consecutive"; scancel "$a" "$b"; return 1; }
    # This boot's offset of every job's first port, in the registry's lock
    # file (root's; written by the first reservation, a job that ran before).
    salt=$(cat "$state/run/goldminer/ports.lock" 2>/dev/null) && [ ${#salt} -eq 8 ] ||
        { echo "no port offset in $state/run/goldminer/ports.lock: '$salt'"; scancel "$a" "$b"; return 1; }
    salt=$((16#$salt))
    first=$((20000 + (a + salt) % 20000))
    l=$(sbatch --parsable --time=2 -p gpu -w g1 -n1 -o "$work/ports-listener.%j" --wrap \
        "exec /usr/bin/python3 -c 'import socket, time
s = socket.socket()
s.bind((\"0.0.0.0\", $first))
s.listen()
open(\"$work/ports-listening\", \"w\").close()
time.sleep(110)'") || { echo "$l"; scancel "$a" "$b"; return 1; }
    wait_for 60 test -e "$work/ports-listening" ||
        { echo "the listener job $l never listened: $(cat "$work/ports-listener.$l")"; scancel "$a" "$b" "$l"; return 1; }
    scontrol release "$a"
    wait_for 60 grep -q '^listen=' "$work/ports.$a" 2>/dev/null ||
        { echo "job $a never started"; scancel "$a" "$b" "$l"; return 1; }
    scontrol release "$b"
    expect_eq "job $a" "$(final_job_state "$a")" "COMPLETED 0:0" || { cat "$work/ports.$a"; scancel "$b" "$l"; return 1; }
    expect_eq "job $b" "$(final_job_state "$b")" "COMPLETED 0:0" || { cat "$work/ports.$b"; scancel "$l"; return 1; }
    scancel "$l"
    pa=$(sed -n 's/^listen=ucx:.*:\([0-9]*\)$/\1/p' "$work/ports.$a")
    pb=$(sed -n 's/^listen=ucx:.*:\([0-9]*\)$/\1/p' "$work/ports.$b")
    expect_eq "job $a's port (its first, $first, has a listener)" "$pa" "$((20000 + (a + salt + 1) % 20000))" || return 1
    expect_eq "job $b's port (its first is job $a's)" "$pb" "$((20000 + (a + salt + 2) % 20000))" || return 1
    for job in "$a" "$b"; do
        out=$(cat "$work/ports.$job")
        n=$(echo "$out" | grep -c "^{\"epoch\": [01], \"samples\": $lines, \"unique_samples\": $lines, \"duplicates\": 0, \"missing\": 0,")
        expect_eq "clean epochs of job $job" "$n" 2 || { echo "$out"; return 1; }
    done
    expect_eq "registry entries left" "$(grep -c -e " $a " -e " $b " "$state/run/goldminer/ports")" 0
}

# The registry reserves a port, it does not hold it: another user (nobody)
# listens on job J's port after the reservation, before J's trainer
# starts (J's script waits for that). The trainer listens on another port
# and writes its address into J's Comment with the real scontrol; the
# companion worker, finding that nothing at the reserved port proves the
# job, reads the Comment (the real squeue) and joins; the epochs are clean.
test_a_trainer_whose_port_another_user_took_still_gets_its_workers() {
    local j l port out n script lines=2000
    seq 1 "$lines" | sed 's/^/sample /' >"$work/taken-input.txt"
    script="echo listen=\$GOLDMINER_LISTEN
            for i in \$(seq 240); do [ -e $work/taken-held ] && break; sleep 0.25; done
            $tools/goldminer-consume -v --input text:$work/taken-input.txt --epochs 2 --batch-size 50 --workers 0 \
              --min-workers 1 --join-timeout 60 --json"
    j=$(with_job_ucx sbatch --parsable --time=2 --comment="sweep 7" --goldminer=dw=1,cpus-per-dw=1 -p gpu -w g1 \
        --gpus=1 -o "$work/taken.%j" --wrap "$script") || { echo "$j"; return 1; }
    wait_for 60 grep -q '^listen=' "$work/taken.$j" 2>/dev/null || { echo "job $j never started"; scancel "$j"; return 1; }
    port=$(sed -n 's/^listen=ucx:.*:\([0-9]*\)$/\1/p' "$work/taken.$j")
    l=$(sbatch --parsable --time=2 -p gpu -w g1 -n1 -o "$work/taken-listener.%j" --wrap \
        "exec setpriv --reuid=65534 --regid=65534 --clear-groups /usr/bin/python3 -c 'import socket, sys, time
s = socket.socket()
s.bind((\"0.0.0.0\", $port))
s.listen()
print(\"listening\", flush=True)
time.sleep(110)'") || { echo "$l"; scancel "$j"; return 1; }
    wait_for 60 grep -q '^listening' "$work/taken-listener.$l" 2>/dev/null ||
        { echo "the listener job $l never listened: $(cat "$work/taken-listener.$l")"; scancel "$j" "$l"; return 1; }
    touch "$work/taken-held"
    expect_eq "job $j" "$(final_job_state "$j")" "COMPLETED 0:0" || { cat "$work/taken.$j"; scancel "$l"; return 1; }
    scancel "$l"
    out=$(cat "$work/taken.$j")
    expect_contains "trainer log" "$out" "port $port of " || return 1
    expect_contains "trainer log" "$out" " is taken (listened on by uid 65534): listening at ucx://" || return 1
    expect_contains "the job's Comment" "$(scontrol -o show job "$j")" "Comment=sweep 7 goldminer-trainer=ucx://" ||
        return 1
    n=$(echo "$out" | grep -c "^{\"epoch\": [01], \"samples\": $lines, \"unique_samples\": $lines, \"duplicates\": 0, \"missing\": 0,")
    expect_eq "clean epochs" "$n" 2 || { echo "$out"; return 1; }
}
