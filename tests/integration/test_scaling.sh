# shellcheck shell=bash
# Measured scaling (sched/scaling_policy.h) on the devcluster: all its
# nodes share this machine's cores, so data workers bound by CPU (the busy
# program, tests/integration/busy_program.py) cannot raise a job's
# throughput past what the cores give; the session must undo a growth that
# did not pay, keep to its knee, and lose no sample while it drains. Where
# other work loads the machine (a test suite beside this one, the jobs run
# niced), more workers also take a bigger share of the cores from it, and a
# growth can pay: the checks then hold the job to its best measured size
# instead (check_scaling_log says which). Sourced by run.sh (globals: work,
# state, tools).

# Observation windows of the scaling jobs (GOLDMINER_AUTOSCALE_INTERVAL, s),
# their worker program's rounds per batch (busy_program.py) and samples
# per epoch.
scaling_interval=2
scaling_rounds=20
scaling_samples=5000

# The busy program and input of the scaling jobs, made once.
scaling_setup() {
    [ -s "$work/scaling-busy.pt" ] ||
        /usr/bin/python3 "$(dirname "${BASH_SOURCE[0]}")/busy_program.py" "$work/scaling-busy.pt" "$scaling_rounds" ||
        return 1
    [ -s "$work/scaling-input.txt" ] || seq 1 "$scaling_samples" | sed 's/^/sample /' >"$work/scaling-input.txt"
}

# The job script of the scaling jobs (written by scaling_job; arguments:
# CTLD TOOLS INPUT PROGRAM SECONDS INTERVAL). Its trainer, goldminer-consume,
# takes epochs of INPUT from workers that run PROGRAM, and is stopped
# (SIGTERM) at the end of the first epoch that ends SECONDS or more after
# it started: so the job runs about as long on an idle machine as on a
# loaded one, where an epoch takes ten times longer. Every line it prints
# is prefixed with the time it came ($EPOCHREALTIME).
scaling_job_script() {
    cat <<'SCRIPT'
#!/bin/bash
ctld=$1 tools=$2 input=$3 program=$4 seconds=$5 interval=$6
[ "$ctld" = yes ] || unset GOLDMINER_CTLD
export GOLDMINER_AUTOSCALE_INTERVAL=$interval OPENBLAS_NUM_THREADS=1
pid_file=$PWD/trainer.$SLURM_JOB_ID
start=${EPOCHREALTIME%.*}
bash -c 'echo $$ >"$0"; exec stdbuf -oL -eL "$@"' "$pid_file" "$tools/goldminer-consume" --input "text:$input" \
    --program "$program" --batch-size 100 --epochs 100000 --workers 0 --min-workers 2 --join-timeout 60 \
    --json -v 2>&1 |
    while IFS= read -r line; do
        now=$EPOCHREALTIME
        printf '%s %s\n' "$now" "$line"
        case $line in
            '{"epoch": '*)
                if [ $(( ${now%.*} - start )) -ge "$seconds" ] && [ ! -e "$pid_file.stopped" ]; then
                    touch "$pid_file.stopped"
                    kill -TERM "$(cat "$pid_file")"
                    printf '%s stopped after %s s\n' "$now" "$seconds"
                fi ;;
        esac
    done
status=${PIPESTATUS[0]}
if [ -e "$pid_file.stopped" ]; then status=0; fi
rm -f "$pid_file" "$pid_file.stopped"
exit "$status"
SCRIPT
}

# scaling_job NAME CTLD: runs (and waits for) an elastic job,
# dw=2,dw-max=8,cpus-per-dw=1, whose trainer takes epochs of scaling_setup's
# lines from workers that run its busy program for about 40 s
# (scaling_job_script); CTLD no: the session sizes itself (GOLDMINER_CTLD
# unset). The output goes to $work/NAME.JOB. Prints the job id.
scaling_job() {
    local name=$1 ctld=$2
    scaling_setup || return 1
    scaling_job_script >"$work/$name.sh"
    with_job_ucx submit_wait --time=3 -p gpu --gpus=1 --goldminer=dw=2,dw-max=8,cpus-per-dw=1 \
        -J "$name" -o "$work/$name.%j" "$work/$name.sh" "$ctld" "$tools" "$work/scaling-input.txt" \
        "$work/scaling-busy.pt" 40 "$scaling_interval"
}

# check_scaling_log INTERVAL < OUTPUT: reads a scaling job's timestamped
# output; prints the decisions, what it found and each violation; fails on
# one. The connected count follows the session's "worker ... joined" and
# "worker ... left/dropped" lines; a decision interval is what judging a
# count takes: 1 settle + 3 measure windows of INTERVAL s. A decision that
# undoes a growth ("did not pay: back to K, the knee", "not shown to pay:
# back to K", or "worth about W of its N workers: back to K") or keeps a
# shrink ("workers removed did not pay: keeping K") holds the job at K.
# Checked, for each growth undone: a "draining" line within a window; the
# job holds more than K + 1 workers for at most two decision intervals
# from when its count reached the one judged, and at most two windows
# after the decision. After any hold at K: no more than K + 1 workers
# (or the N of a "probing N workers, above the knee K") until a growth
# above K paid, and a probe above or below K no sooner than the
# decision's back-off. At least one growth was undone, or else the job
# never held more than one worker above its best measured size (the count
# of the most samples/s in the decision lines), which it then says.
check_scaling_log() {
    awk -v iv="$1" '
        BEGIN { knee = -1 }
        function rate(s,   m) {
            m = 1
            if (s ~ /k$/) m = 1e3
            else if (s ~ /M$/) m = 1e6
            sub(/[kM]$/, "", s)
            return s * m
        }
        function bad(what) { printf "  at %.1f s: %s\n", t - t0, what; failed = 1 }
        function after(text,   s) { s = line; sub(".*" text, "", s); return s }
        # Every "N workers: R samples/s" and ", N: R" of a decision line.
        function measured(s,   g) {
            sub(/.*scaling: /, "", s); sub(/ \(needs .*/, "", s); sub(/: (the rate at|conditions changed|[0-9]+ workers deliver).*/, "", s)
            while (match(s, /[0-9]+( workers)?: [0-9.]+[kM]?/)) {
                split(substr(s, RSTART, RLENGTH), g, /( workers)?: /)
                if (rate(g[2]) > best_rate) { best_rate = rate(g[2]); best = g[1] + 0 }
                s = substr(s, RSTART + RLENGTH)
            }
        }
        # The job is held at k from now; a growth to "judged" workers undone.
        function hold(k, backoff, undo) {
            if (pending) bad("a decision while the workers above " knee + 1 " were still connected")
            knee = k; td = t; reprobe_at = t + backoff; probe_max = 0
            if (!undo) return
            undone++
            judged = after("scaling: ") + 0
            held_from = (judged in reached) ? reached[judged] : t
            want_drain = 1; drain_by = t + iv + 0.5
            pending = n > knee + 1
            if (!pending) printf "  (%d workers connected when the decision came)\n", n
        }
        # The period above the knee ended: the drain is done.
        function back_within_bounds() {
            if (t - td > 2 * iv + 0.5)
                bad(sprintf("more than %d workers %.1f s after the decision (at most %d s: 2 windows)",
                            knee + 1, t - td, 2 * iv))
            if (t - held_from > 8 * iv + 0.5)
                bad(sprintf("more than %d workers for %.1f s (at most %d s: 2 decision intervals)",
                            knee + 1, t - held_from, 8 * iv))
            printf "  back to %d workers at %.1f s: %d were held %.1f s, %.1f s after the decision\n",
                   n, t - t0, judged, t - held_from, t - td
            pending = 0
        }
        {
            t = $1 + 0
            if (t0 == 0) t0 = t
            line = substr($0, index($0, " ") + 1)
        }
        want_drain && t > drain_by { bad("no draining line within a window of the decision"); want_drain = 0 }
        line ~ /^goldminer: session: worker [^ ]* joined$/ {
            n++
            reached[n] = t
            if (n > most) most = n
            if (knee >= 0 && !pending && n > knee + 1 && n > probe_max)
                bad(sprintf("%d workers while held at %d (since %.1f s; no growth above it paid)", n, knee, td - t0))
        }
        line ~ /^goldminer: session: worker [^ ]* (left|dropped)/ {
            n--
            if (pending && n <= knee + 1) back_within_bounds()
        }
        line ~ /^goldminer: session: .*: (draining|cancelled) [0-9]+ data workers/ { want_drain = 0 }
        line ~ /^goldminer: session: scaling: / { decisions++; print "  " line; measured(line) }
        line ~ /: (did not pay|not shown to pay|worth about [0-9]+ of its [0-9]+ workers): back to [0-9]+/ {
            if (after("next probe above it in ") !~ /^[0-9]+ s/) bad("no back-off in: " line)
            hold(after("back to ") + 0, after("next probe above it in ") + 0, 1)
        }
        line ~ /workers removed did not pay: keeping [0-9]+/ { hold(after("keeping ") + 0, 0, 0) }
        line ~ /: paid: keeping [0-9]+/ {
            if (knee >= 0 && after("paid: keeping ") + 0 > knee) knee = -1  # a growth above it paid
        }
        line ~ /scaling: probing [0-9]+ workers, (above|below) the knee/ {
            if (knee >= 0 && t < reprobe_at - iv)
                bad(sprintf("a probe %.1f s before its back-off ended", reprobe_at - t))
            if (line ~ /above the knee/) probe_max = after("probing ") + 0
        }
        END {
            if (pending && t - td > 2 * iv + 0.5)
                bad(sprintf("still %d workers (above %d) when the trainer ended, %.1f s after the decision",
                            n, knee + 1, t - td))
            if (want_drain) bad("no draining line after the last decision")
            if (decisions == 0) { print "  no scaling decision logged"; exit 1 }
            if (undone == 0) {
                if (most > best + 1)
                    bad(sprintf("no growth was undone, yet the job held %d workers; its best measured size is %d",
                                most, best))
                else
                    printf "  no growth was undone: the job never held more than %d workers, its best measured size %d + 1\n",
                           most, best
            }
            printf "  %d decisions, %d growths undone, at most %d workers; the most samples/s measured: %.0f, at %d workers\n",
                   decisions, undone, most, best_rate, best
            exit failed
        }'
}

# check_scaling_epochs < OUTPUT: the trainer was stopped after its time
# (scaling_job_script) with at least 2 epochs done, and every epoch it
# finished had each of scaling_setup's samples exactly once and no worker
# lost with splits in hand; prints each epoch's samples/s.
check_scaling_epochs() {
    local in out all n
    in=$(cut -d' ' -f2-)
    out=$(echo "$in" | grep '^{"epoch"')
    echo "  samples/s by epoch: $(echo "$out" | sed -n 's/.*"samples_per_s": \([0-9]*\).*/\1/p' | tr '\n' ' ')"
    echo "$in" | grep -q '^stopped after ' || { echo "the trainer was not stopped after its time: it ended by itself"; return 1; }
    all=$(echo "$out" | grep -c .)
    [ "$all" -ge 2 ] || { echo "only $all epochs"; return 1; }
    n=$(echo "$out" | grep -cE "^\\{\"epoch\": [0-9]+, \"samples\": $scaling_samples, \"unique_samples\": $scaling_samples, \"duplicates\": 0, \"missing\": 0,.*\"workers_lost\": 0,")
    expect_eq "epochs with every sample once and no worker lost" "$n" "$all" || { echo "$out"; return 1; }
}

# A scaling job's checks: its decisions (check_scaling_log) and its epochs
# (check_scaling_epochs); on a failure, the session's lines, then what the
# checks found (last: run.sh shows a failure's last lines).
check_scaling_job() {
    local found
    found=$(echo "$1" | check_scaling_log "$scaling_interval" && echo "$1" | check_scaling_epochs) && {
        echo "$found"; return 0; }
    echo "$1" | cut -d' ' -f2- | grep -v -e '^{' -e 'delivered its first batch' | tail -30
    echo "$found"
    return 1
}

# The default devcluster: goldminer-ctld gives the job its target (all 8
# at once, while its trainer waits); 8 workers may run, all on this
# machine's cores. Checked: a growth that did not pay is undone and the job
# keeps to its knee, under goldminer-ctld's target (check_scaling_log);
# every epoch exactly once through the drains.
test_scaling_under_ctld_a_growth_that_does_not_pay_is_undone_and_epochs_stay_exactly_once() {
    local job
    job=$(scaling_job scaling yes) || { echo "$job"; cut -d' ' -f2- "$work"/scaling.[0-9]* | tail -30; return 1; }
    check_scaling_job "$(cat "$work/scaling.$job")"
}

# The same, the session sizing itself (no goldminer-ctld): its autosizer
# grows it once the first count is measured.
test_scaling_by_itself_a_growth_that_does_not_pay_is_undone_and_epochs_stay_exactly_once() {
    local job
    job=$(scaling_job scaling-self no) || {
        echo "$job"; cut -d' ' -f2- "$work"/scaling-self.[0-9]* | tail -30; return 1; }
    check_scaling_job "$(cat "$work/scaling-self.$job")"
}
