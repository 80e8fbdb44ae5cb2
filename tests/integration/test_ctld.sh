# goldminer-ctld, which the devcluster runs by default: elastic sessions
# report to it and take their worker targets from it; goldminer-top shows
# them. Sourced by run.sh (globals: work, state, devcluster).

ctld_address() { sed -n 's/.* ctld=\([^ ]*\).*/\1/p' "$state/etc/plugstack.conf"; }
ctld_top() { "$tools/goldminer-top" --ctld "$(ctld_address)" --munge-socket "$state/munge/munge.socket" "$@"; }
# The same as user nobody (a second user of the cluster).
ctld_top_as_nobody() {
    setpriv --reuid=nobody --regid=nogroup --clear-groups \
        "$tools/goldminer-top" --ctld "$(ctld_address)" --munge-socket "$state/munge/munge.socket" "$@"
}

# JOB's FIELD in goldminer-top --json ("" while the job is not listed).
ctld_job_field() {
    ctld_top --json 2>/dev/null | jq -r --argjson j "$1" ".jobs[] | select(.job == \$j) | .$2"
}

# JOB's FIELD in goldminer-top --json is at least N.
ctld_job_at_least() {
    local v
    v=$(ctld_job_field "$1" "$2")
    [ -n "$v" ] && [ "$v" -ge "$3" ]
}

job_running() { [ "$(squeue -h -j "$1" -o %T 2>/dev/null)" = RUNNING ]; }
job_gone() { [ -z "$(squeue -h -j "$1" 2>/dev/null)" ]; }
pid_gone() { ! pid_running "$1"; }

# wait_for SECONDS CMD...: until CMD succeeds; fails after SECONDS.
wait_for() {
    local deadline=$((SECONDS + $1))
    shift
    until "$@"; do
        [ $SECONDS -lt $deadline ] || return 1
        sleep 0.5
    done
}

# A worker program that costs CPU (busy_program.py) and text input: the
# data workers bound these jobs. Made once.
ctld_setup() {
    [ -s "$work/busy.pt" ] || /usr/bin/python3 "$(dirname "${BASH_SOURCE[0]}")/busy_program.py" "$work/busy.pt" 200 ||
        return 1
    [ -s "$work/ctld-input.txt" ] || seq 1 20000 | sed 's/^/sample /' >"$work/ctld-input.txt"
}

# Submits (without waiting) an elastic job whose trainer consumes EPOCHS
# epochs from data workers running the busy program; prints its id.
# OPTIONS: its --goldminer value.
submit_busy_job() {
    with_job_ucx env OPENBLAS_NUM_THREADS=1 sbatch --parsable --time=5 -p gpu --gpus=1 --goldminer="$1" \
        -o "$work/ctld.%j" --wrap "GOLDMINER_AUTOSCALE_INTERVAL=1 $tools/goldminer-consume \
        --input text:$work/ctld-input.txt --program $work/busy.pt --batch-size 100 --epochs $2 --workers 0 \
        --json -v" | tail -1
}

# submit_waiting_job GOLDMINER_OPTIONS: a job whose goldminer.DataLoader
# items each wait 4 ms (waiting_job.py): its workers, which cost no core,
# bound it, so each one added pays on this machine too and the session's
# measured scaling keeps them; prints the job id.
submit_waiting_job() {
    with_job_ucx env PYTHONPATH="$python_dir${PYTHONPATH:+:$PYTHONPATH}" sbatch --parsable --time=5 -p gpu --gpus=1 \
        --goldminer="$1" -o "$work/ctld.%j" \
        --wrap "GOLDMINER_AUTOSCALE_INTERVAL=1 /usr/bin/python3 $integration_dir/waiting_job.py 4000 1000" | tail -1
}

# Two jobs compete for the worker CPUs (4 CPUs per worker; the spare CPUs
# of partition dw hold 6 such workers). The first, alone, gets them all:
# before it has a knee, goldminer-ctld grants it only its exploring cap,
# which rises as each count it reaches is measured (1, 2, then up to
# doubling), so it climbs to 6 in measured steps. When the second comes,
# goldminer-ctld shares them: the first drains, the second's workers start
# (first come first served would leave it none). Their workers wait rather
# than compute (submit_waiting_job): workers that compete for this
# machine's two cores stop paying near 2, and the session's measured
# scaling would then rightly keep the first job below 6.
test_ctld_shares_worker_cpus_between_competing_jobs() {
    local a b cpus ta tb wa wb
    ctld_setup || return 1
    a=$(submit_waiting_job dw=1,dw-max=6,cpus-per-dw=4) || { echo "$a"; return 1; }
    wait_for 210 ctld_job_at_least "$a" workers 6 ||
        { echo "job $a never had 6 workers: $(ctld_top --json)"; tail -5 "$work/ctld.$a"; scancel "$a"; return 1; }
    cpus=$(ctld_top --json | jq .worker_cpus)
    b=$(submit_waiting_job dw=1,dw-max=6,cpus-per-dw=4) || { echo "$b"; scancel "$a"; return 1; }
    # Both listed, their targets within the CPUs, the second given some.
    wait_for 90 ctld_job_at_least "$b" workers 1 ||
        { echo "job $b never had a worker: $(ctld_top --json)"; scancel "$a" "$b"; return 1; }
    ta=$(ctld_job_field "$a" target) tb=$(ctld_job_field "$b" target)
    wa=$(ctld_job_field "$a" workers) wb=$(ctld_job_field "$b" workers)
    ctld_top --once | sed 's/^/  top: /'
    scancel "$a" "$b"
    [ "$tb" -ge 1 ] && [ "$ta" -lt 6 ] && [ $(( (ta + tb) * 4 )) -le "${cpus%.*}" ] ||
        { echo "targets $a: $ta, $b: $tb of $cpus CPUs"; return 1; }
    [ "$wa" -lt 6 ] || { echo "job $a kept its 6 workers"; return 1; }
    grep -q "(goldminer-ctld's target: [0-9]*): draining [0-9]* data workers" "$work/ctld.$a" ||
        { echo "job $a: no drain to goldminer-ctld's target:"; tail -20 "$work/ctld.$a"; return 1; }
    expect_contains "ctld log" "$(cat "$state/log/goldminer-ctld.log")" "job $b: target $tb workers" || return 1
    # Gone from goldminer-ctld before the next test shares its CPUs.
    wait_for 60 ctld_not_listed "$a" "$b" || { echo "jobs $a, $b still listed"; return 1; }
}

# A report made with another user's munge credential (nobody's) for a
# running job of root's is refused with the reason; root's own for a plain
# job (no goldminer-dw.J of root's) is refused too; with one, root's report
# is taken, and a replay of it refused.
test_ctld_refuses_a_report_from_another_user_and_a_replay() {
    local job companion report cred out
    job=$(sbatch --parsable --time=2 -p cpu -o /dev/null --wrap 'sleep 60') || { echo "$job"; return 1; }
    wait_for 30 job_running "$job" || { echo "job $job not running"; scancel "$job"; return 1; }
    report=$(printf 'job=%s\nnonce=7\nworkers=0\ncoming=0\ndw_max=8\ncpus_per_dw=4\nwait=1\nfill=0\nconsumption=0\nper_worker=0\nsamples_per_s=0\nhosts=\ncurve=\nknee=-1\nprobing=0\nceiling=0\n' "$job")
    cred=$(setpriv --reuid=nobody --regid=nogroup --clear-groups munge -S "$state/munge/munge.socket" -s "$report") ||
        { echo "munge as nobody failed: $cred"; scancel "$job"; return 1; }
    out=$(curl -s -w ' %{http_code}' --data-binary "$cred" "http://$(ctld_address)/report")
    # The answer tells neither the owner nor the state (the log does).
    expect_eq "forged report" "$out" "report refused: job $job is not a running job of uid $(id -u nobody)
 403" || { scancel "$job"; return 1; }
    # root's own report for a plain job (no companion job): not registered.
    cred=$(munge -S "$state/munge/munge.socket" -s "$report")
    out=$(curl -s -w ' %{http_code}' --data-binary "$cred" "http://$(ctld_address)/report")
    expect_eq "plain job" "$out" "report refused: job $job is not a --goldminer job (Slurm shows no job goldminer-dw.$job of its owner)
 403" || { scancel "$job"; return 1; }
    # With a job of root's named goldminer-dw.J (what the plugin submits),
    # root's report is taken once (within a pool refresh, 2 s); the same
    # credential again is not.
    companion=$(sbatch --parsable --time=2 -p cpu -o /dev/null --job-name="goldminer-dw.$job" --wrap 'sleep 60') ||
        { echo "$companion"; scancel "$job"; return 1; }
    ctld_takes_report() {
        cred=$(munge -S "$state/munge/munge.socket" -s "$report")
        [ "$(curl -s -o /dev/null -w '%{http_code}' --data-binary "$cred" "http://$(ctld_address)/report")" = 200 ]
    }
    wait_for 10 ctld_takes_report || { echo "owner's report for a goldminer job not taken"; scancel "$job" "$companion"; return 1; }
    out=$(curl -s -w ' %{http_code}' --data-binary "$cred" "http://$(ctld_address)/report")
    scancel "$job" "$companion"
    expect_contains "replay" "$out" "report refused: munge: credential refused: Replayed credential" || return 1
    expect_contains "ctld log" "$(cat "$state/log/goldminer-ctld.log")" \
        "goldminer-ctld: job $job: report from uid $(id -u nobody) refused: the job is uid 0's" || return 1
}

# goldminer-ctld stopped and started again mid-epoch: the session keeps its
# workers and sizes itself meanwhile, then reports again and is listed;
# every epoch stays exactly once.
test_ctld_restart_mid_epoch_loses_no_sample_and_keeps_the_workers() {
    local job pid args out n
    ctld_setup || return 1
    # 12 epochs, so that the job still runs when goldminer-ctld is back:
    # with 6, 1 run in 3 was not listed again within 20 s once the workers
    # ran the program with an intra-op thread a core (faster epochs).
    job=$(submit_busy_job dw=2,dw-max=2,cpus-per-dw=2 12) || { echo "$job"; return 1; }
    wait_for 60 ctld_job_at_least "$job" workers 2 || { echo "job $job never listed with 2 workers"; scancel "$job"; return 1; }
    pid=$(cat "$state/run/goldminer-ctld.pid")
    args=$(tr '\0' '\n' <"/proc/$pid/cmdline" | tail -n +2 | tr '\n' ' ')
    kill -TERM "$pid"
    wait_for 10 pid_gone "$pid" || { echo "goldminer-ctld $pid did not stop"; return 1; }
    sleep 3
    # shellcheck disable=SC2086  # its arguments, one word each
    setsid env SLURM_CONF="$state/etc/slurm.conf" "$ctld_program" $args \
        </dev/null >>"$state/log/goldminer-ctld.log" 2>&1 &
    wait_for 20 ctld_job_at_least "$job" workers 2 || { echo "job $job not listed again: $(ctld_top --json)"; return 1; }
    wait_for 100 job_gone "$job" || { echo "job $job did not end"; scancel "$job"; return 1; }
    out=$(cat "$work/ctld.$job")
    n=$(echo "$out" | grep -cE '^\{"epoch": ([0-9]|1[01]), "samples": 20000, "unique_samples": 20000, "duplicates": 0, "missing": 0,.*"workers_lost": 0,')
    expect_eq "clean epochs" "$n" 12 || { echo "$out" | grep '^{'; return 1; }
    expect_contains "sized itself meanwhile" "$out" "sizing the workers by itself until it answers" || return 1
    expect_eq "ctld answers, twice" "$(echo "$out" | grep -c 'goldminer-ctld at .* gives the worker target')" 2 || return 1
    if echo "$out" | grep -q "draining"; then echo "workers drained: $out"; return 1; fi
}

# goldminer-ctld stopped and started again with its own arguments
# (without those CTLD_DROP_ARGS names: words, an option and its value
# each) plus CTLD_EXTRA_ARGS, and ENV (NAME=VALUE ...) in its environment.
ctld_restart() {
    local pid args word drop
    pid=$(cat "$state/run/goldminer-ctld.pid")
    args=
    for word in $(tr '\0' '\n' <"/proc/$pid/cmdline" | tail -n +2); do
        drop=
        for d in ${CTLD_DROP_ARGS:-}; do [ "$word" = "$d" ] && drop=1; done
        [ -n "$drop" ] || args="$args $word"
    done
    args="$args ${CTLD_EXTRA_ARGS:-}"
    kill -TERM "$pid"
    wait_for 10 pid_gone "$pid" || { echo "goldminer-ctld $pid did not stop"; return 1; }
    # shellcheck disable=SC2086  # its arguments, one word each
    setsid env SLURM_CONF="$state/etc/slurm.conf" "$@" "$ctld_program" $args \
        </dev/null >>"$state/log/goldminer-ctld.log" 2>&1 &
    wait_for 10 curl -sf -o /dev/null "http://$(ctld_address)/metrics" || { echo "goldminer-ctld did not come back"; return 1; }
}

# A running job of root's registered with worker host "secret-host-7";
# then goldminer-top run by user nobody (munge-authenticated), and a GET
# without a credential. Checked: nobody's view has no uid, user name or
# host of root's job (the devcluster's PrivateData has no "jobs": the
# job's figures are shown, with uid and hosts null); without a credential
# only the totals; root sees the job in full.
test_ctld_a_non_owner_sees_no_other_users_uid_name_or_host() {
    local job companion report out row
    read -r job companion <<<"$(hand_made_goldminer_job 60)" || { echo "$job"; return 1; }
    root_reports() {
        report=$(printf 'job=%s\nnonce=%s\nworkers=1\ncoming=0\ndw_max=8\ncpus_per_dw=4\nwait=1\nfill=0\nconsumption=0\nper_worker=0\nsamples_per_s=0\nhosts=secret-host-7\ncurve=\nknee=-1\nprobing=0\nceiling=0\n' "$job" "$RANDOM")
        out=$(curl -s -o /dev/null -w '%{http_code}' --data-binary "$(munge -S "$state/munge/munge.socket" -s "$report")" \
            "http://$(ctld_address)/report")
        [ "$out" = 200 ]
    }
    wait_for 10 root_reports || { echo "root's report: $out"; scancel "$job" "$companion" "$companion"; return 1; }
    row=$(ctld_top --json | jq -c --argjson j "$job" '.jobs[] | select(.job == $j) | [.uid, .hosts]')
    expect_eq "root's view" "$row" '[0,["secret-host-7"]]' || { scancel "$job" "$companion"; return 1; }
    out=$(ctld_top_as_nobody --json 2>&1) || { echo "goldminer-top as nobody: $out"; scancel "$job" "$companion"; return 1; }
    row=$(echo "$out" | jq -c --argjson j "$job" '.jobs[] | select(.job == $j) | [.uid, .hosts]')
    expect_eq "nobody's view of root's job" "$row" '[null,null]' || { echo "$out"; scancel "$job" "$companion"; return 1; }
    if echo "$out" | grep -q -e secret-host -e '"uid": 0'; then echo "nobody sees: $out"; scancel "$job" "$companion"; return 1; fi
    out=$(ctld_top_as_nobody --once 2>&1)
    if echo "$out" | grep -q -e secret-host -e root; then echo "nobody's table: $out"; scancel "$job" "$companion"; return 1; fi
    out=$(curl -s "http://$(ctld_address)/jobs")
    scancel "$job" "$companion"
    expect_eq "jobs without a credential" "$(echo "$out" | jq -c .jobs)" '[]' || { echo "$out"; return 1; }
}

# goldminer-ctld restarted with a stand-in squeue first on its PATH that
# counts its runs (and runs Slurm's); then 1,000 reports by user nobody,
# each for a job Slurm does not know. Checked: squeue ran at most the
# burst (10) plus what 0.5 lookups/s earn in the time taken; the rest were
# answered 429; no answer names an owner or a state; root's report for
# its running job is still taken.
test_ctld_a_thousand_reports_for_unknown_jobs_run_squeue_a_bounded_number_of_times() {
    local standin calls creds start took n bound job companion codes out
    standin=$work/ctld-standin
    calls=$work/ctld-squeue-calls
    mkdir -p "$standin"
    : >"$calls"
    printf '#!/bin/sh\n# stand-in squeue: counts goldminer-ctld'"'"'s runs, then runs Slurm'"'"'s.\necho "$*" >>%s\nexec %s "$@"\n' \
        "$calls" "$(command -v squeue)" >"$standin/squeue"
    chmod 755 "$standin/squeue"
    ctld_restart PATH="$standin:$PATH" || return 1
    creds=$work/ctld-creds
    # shellcheck disable=SC2016  # expanded by the inner shell
    setpriv --reuid=nobody --regid=nogroup --clear-groups sh -c '
        for i in $(seq 1 1000); do
            printf "job=%s\nnonce=%s\nworkers=0\ncoming=0\ndw_max=8\ncpus_per_dw=4\nwait=1\nfill=0\nconsumption=0\nper_worker=0\nsamples_per_s=0\nhosts=\ncurve=\nknee=-1\nprobing=0\nceiling=0\n" \
                $((3000000 + i)) "$i" | munge -S "$1" || exit 1
        done' sh "$state/munge/munge.socket" >"$creds" || { echo "munge as nobody failed"; ctld_restart; return 1; }
    start=$SECONDS
    codes=$(/usr/bin/python3 - "$(ctld_address)" "$creds" <<'PY'
import collections, http.client, re, sys
host, port = sys.argv[1].rsplit(":", 1)
codes, bodies = collections.Counter(), set()
for cred in open(sys.argv[2]).read().split():
    c = http.client.HTTPConnection(host, int(port), timeout=10)
    c.request("POST", "/report", body=cred)
    r = c.getresponse()
    codes[r.status] += 1
    bodies.add(re.sub(r"[0-9]+", "N", r.read().decode().strip()))
    c.close()
print(" ".join("%d:%d" % kv for kv in sorted(codes.items())))
for b in sorted(bodies)[:5]: print("  body: " + b[:160])
PY
)
    took=$((SECONDS - start + 1))
    # The owner lookups (squeue --jobs=J); the pool's refresh (every 2 s,
    # squeue --states=RUNNING) is the daemon's own, whatever the reports.
    n=$(grep -c -- '--jobs=' "$calls")
    bound=$((10 + took / 2 + 1))
    echo "  1000 reports in ${took}s: answers $(echo "$codes" | head -1), squeue ran $n times (bound $bound)"
    echo "$codes" | tail -n +2
    if echo "$codes" | grep -q -e RUNNING -e PENDING -e "uid 0"; then echo "$codes"; ctld_restart; return 1; fi
    [ "$n" -ge 1 ] && [ "$n" -le "$bound" ] || { echo "squeue ran $n times: $(head -3 "$calls")"; ctld_restart; return 1; }
    expect_contains "answers" "$(echo "$codes" | head -1)" "429:" || { ctld_restart; return 1; }
    # Root's own report is taken: nobody's storm spent only nobody's lookups.
    read -r job companion <<<"$(hand_made_goldminer_job 60)" || { echo "$job"; ctld_restart; return 1; }
    wait_for 10 ctld_report_taken "$job" 11 4 1 0 '' -1
    out=$(ctld_post_report "$job" 12 4 1 0 '' -1)
    scancel "$job" "$companion"
    ctld_restart || return 1
    expect_eq "root's report" "$out" 200 || return 1
}

# A running job of root's that goldminer-ctld takes for a --goldminer job:
# a plain `sleep SECONDS` and, as the plugin submits for a real one, a job
# of root's named goldminer-dw.J beside it. Prints "J COMPANION".
hand_made_goldminer_job() {
    local job companion
    job=$(sbatch --parsable --time=2 -p cpu -o /dev/null --wrap "sleep $1") || { echo "$job"; return 1; }
    companion=$(sbatch --parsable --time=2 -p cpu -o /dev/null --job-name="goldminer-dw.$job" --wrap "sleep $1") ||
        { echo "$companion"; scancel "$job"; return 1; }
    wait_for 30 job_running "$job" || { echo "job $job not running"; scancel "$job" "$companion"; return 1; }
    echo "$job $companion"
}

# None of the JOBS is listed by goldminer-ctld.
ctld_not_listed() {
    local j
    for j in "$@"; do [ -z "$(ctld_job_field "$j" job)" ] || return 1; done
}

# ctld_post_report JOB NONCE CPUS_PER_DW WAIT SAMPLES_PER_S CURVE KNEE: a
# report of root's for JOB (no worker connected; dw-max 8; the trainer
# took 100 batches/s, one worker makes 25) with the measured CURVE
# (W:S,W:S) and KNEE (-1: none), munge-signed and POSTed as a session's
# client does; prints the HTTP status.
ctld_post_report() {
    local report
    report=$(printf 'job=%s\nnonce=%s\nworkers=0\ncoming=0\ndw_max=8\ncpus_per_dw=%s\nwait=%s\nfill=0\nconsumption=100\nper_worker=25\nsamples_per_s=%s\nhosts=\ncurve=%s\nknee=%s\nprobing=0\nceiling=0\n' \
        "$@")
    curl -s -o /dev/null -w '%{http_code}' --data-binary "$(munge -S "$state/munge/munge.socket" -s "$report")" \
        "http://$(ctld_address)/report"
}

# ctld_report_taken ARGS...: whether ctld_post_report ARGS... is answered
# 200 (a new job is taken once goldminer-ctld's next pool refresh, at most
# 2 s away, has seen its companion job).
ctld_report_taken() { [ "$(ctld_post_report "$@")" = 200 ]; }

# Two running jobs of root's report measured scaling curves (real sessions
# on this machine cannot make controlled ones): one flat above 2 workers
# (20k samples/s at 2 and at 6, its knee 2), one still rising (5k at 2, 15k
# at 6, its trainer waiting half the time). Worker CPUs are made scarce:
# each worker holds a quarter of them. Checked: the rising job's target is
# above the flat one's, the flat one's at most its knee, the two within
# the CPUs; /metrics shows the knee and the curve, goldminer-top the
# KNEE column and the curve line.
test_ctld_gives_the_cpus_to_the_job_whose_curve_rises() {
    local flat flat_dw rising rising_dw cpus per out tf tr json top line
    read -r flat flat_dw <<<"$(hand_made_goldminer_job 120)" || { echo "$flat"; return 1; }
    read -r rising rising_dw <<<"$(hand_made_goldminer_job 120)" || { echo "$rising"; scancel "$flat" "$flat_dw"; return 1; }
    cpus=$(ctld_top --json | jq .worker_cpus)
    per=$(awk -v c="$cpus" 'BEGIN { printf "%.3f", c / 4 }')
    # goldminer-ctld takes whole CPUs per worker (Slurm gives no less).
    awk -v p="$per" 'BEGIN { exit !(p >= 1) }' || { echo "fewer than 4 worker CPUs: $cpus"; scancel "$flat" "$rising" "$flat_dw" "$rising_dw"; return 1; }
    wait_for 10 ctld_report_taken "$flat" 20 "$per" 0 20000 1:10000,2:20000,6:20000 2
    out=$(ctld_post_report "$flat" 21 "$per" 0 20000 1:10000,2:20000,6:20000 2)
    expect_eq "flat job's report" "$out" 200 || { scancel "$flat" "$rising" "$flat_dw" "$rising_dw"; return 1; }
    wait_for 10 ctld_report_taken "$rising" 23 "$per" 0.5 15000 2:5000,6:15000 -1
    out=$(ctld_post_report "$rising" 22 "$per" 0.5 15000 2:5000,6:15000 -1)
    expect_eq "rising job's report" "$out" 200 || { scancel "$flat" "$rising" "$flat_dw" "$rising_dw"; return 1; }
    tf=$(ctld_job_field "$flat" target) tr=$(ctld_job_field "$rising" target)
    echo "  worker CPUs $cpus, $per a worker: targets flat $flat: $tf, rising $rising: $tr"
    json=$(ctld_top --json) top=$(ctld_top --once)
    while IFS= read -r line; do echo "  top: $line"; done <<<"$top"
    out=$(curl -s "http://$(ctld_address)/metrics" -H "Authorization: Munge $(munge -S "$state/munge/munge.socket" -s 'goldminer-ctld GET /metrics')")
    scancel "$flat" "$rising" "$flat_dw" "$rising_dw"
    # Their targets would hold worker CPUs from the next tests' jobs until
    # goldminer-ctld drops them (--stale-after, 30 s).
    wait_for 60 ctld_not_listed "$flat" "$rising" || { echo "jobs $flat, $rising still listed"; return 1; }
    if [ -z "$tf" ] || [ -z "$tr" ]; then echo "not listed: $(ctld_top --json)"; return 1; fi
    if [ "$tr" -le "$tf" ] || [ "$tf" -gt 2 ]; then echo "targets flat $tf, rising $tr"; return 1; fi
    # The pool once both are registered: their companion jobs' CPUs count.
    cpus=$(echo "$json" | jq .worker_cpus)
    awk -v a="$tf" -v b="$tr" -v p="$per" -v c="$cpus" 'BEGIN { exit !((a + b) * p <= c + 1e-6) }' ||
        { echo "targets $tf + $tr of $per CPUs each exceed $cpus"; return 1; }
    expect_eq "flat job's curve and knee" "$(echo "$json" | jq -c --argjson j "$flat" '.jobs[] | select(.job == $j) | [.curve, .knee, .probing]')" \
        '[[[1,10000],[2,20000],[6,20000]],2,0]' || return 1
    # Each job's series are labelled job_id, partition and (root sees it) user.
    expect_contains "metrics" "$out" "goldminer_job_knee{job_id=\"$flat\",partition=\"cpu\",user=\"root\"} 2" || return 1
    expect_contains "metrics" "$out" \
        "goldminer_job_curve_samples_per_second{job_id=\"$rising\",partition=\"cpu\",user=\"root\",workers=\"6\"} 15000" ||
        return 1
    if echo "$out" | grep -q "goldminer_job_knee{job_id=\"$rising\","; then echo "a knee for job $rising: $out"; return 1; fi
    expect_contains "top" "$top" "curve (workers:samples/s): 2:5.0k 6:15.0k" || return 1
}

# Prometheus's scrape: goldminer-ctld restarted with --metrics-token-file
# (a mode-600 file); a root job registered. Checked with curl as
# Prometheus sends it: the bearer token gives the job's series labelled
# job_id, partition and user; without it, or with another token, none;
# the token does not read /jobs; /healthz answers ok.
test_ctld_prometheus_scrapes_per_job_series_with_its_token() {
    local job companion token="$work/ctld-scrape-token" report out rc=0
    head -c 24 /dev/urandom | base64 | tr -d '/+=' >"$token"
    chmod 600 "$token"
    CTLD_EXTRA_ARGS="--metrics-token-file $token" ctld_restart || return 1
    read -r job companion <<<"$(hand_made_goldminer_job 60)" || { echo "$job"; return 1; }
    root_reports() {
        report=$(printf 'job=%s\nnonce=%s\nworkers=1\ncoming=0\ndw_max=8\ncpus_per_dw=1\nwait=1\nfill=0\nconsumption=0\nper_worker=0\nsamples_per_s=0\nhosts=c1\ncurve=\nknee=-1\nprobing=0\nceiling=0\n' "$job" "$RANDOM")
        [ "$(curl -s -o /dev/null -w '%{http_code}' --data-binary "$(munge -S "$state/munge/munge.socket" -s "$report")" \
            "http://$(ctld_address)/report")" = 200 ]
    }
    if wait_for 10 root_reports; then
        out=$(curl -s -H "Authorization: Bearer $(cat "$token")" "http://$(ctld_address)/metrics")
        expect_contains "scraped with the token" "$out" "goldminer_job_workers{job_id=\"$job\",partition=\"cpu\",user=\"root\"} 1" || rc=1
        out=$(curl -s "http://$(ctld_address)/metrics")
        if echo "$out" | grep -q "job_id=\"$job\""; then echo "scraped without a token: $out"; rc=1; fi
        expect_eq "another token" "$(curl -s -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer not-the-site-token-at-all' \
            "http://$(ctld_address)/metrics")" 403 || rc=1
        expect_eq "the token on /jobs" "$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $(cat "$token")" \
            "http://$(ctld_address)/jobs")" 403 || rc=1
        expect_eq "/healthz" "$(curl -s "http://$(ctld_address)/healthz")" ok || rc=1
    else
        echo "root's report was not taken"; rc=1
    fi
    scancel "$job" "$companion"
    CTLD_DROP_ARGS="--metrics-token-file $token" ctld_restart || return 1
    # Dropped before the next test shares the worker CPUs (--stale-after).
    wait_for 60 ctld_not_listed "$job" || { echo "job $job still listed"; return 1; }
    return $rc
}
