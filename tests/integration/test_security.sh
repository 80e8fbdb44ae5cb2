# No secret exists for a --goldminer job. Its
# session and workers prove uid and job to each other with munge
# (gmcore/peer_auth.h), so nothing secret is in the batch script's
# environment, the companion job's, or slurmctld's saved state; a worker
# claiming another job of the same user, and one run by a second Unix user
# (created here, removed after), are refused, and the epoch is exactly once.

security_user=gmtest2

# Creates the second user; its uid on stdout.
security_user_add() {
    id -u "$security_user" >/dev/null 2>&1 ||
        useradd --system --no-create-home --shell /usr/sbin/nologin "$security_user" >/dev/null 2>&1 || return 1
    id -u "$security_user"
}

test_no_secret_in_job_or_state_and_other_jobs_and_users_are_refused() {
    local job out uid lines=4000 n tests_dir
    tests_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
    uid=$(security_user_add) || { echo "cannot create user $security_user"; return 1; }
    seq 1 "$lines" | sed 's/^/sample /' >"$work/sec-input.txt"
    # The script, run as root on the batch node: what its environment and
    # slurmctld's saved state of this job and its companion job hold
    # (script and environment; the variable's name is split so that the
    # saved script does not hold it), then two intruders that retry until the
    # session listens (another job's worker of the same user; the second
    # user's claiming this job, over TCP: UCX's shared memory between two
    # users fails before any message), then the trainer (sec_trainer.py),
    # whose session waits until both intruders have ended before its epochs
    # from the companion worker.
    job=$(submit_goldminer_job --goldminer=dw=1,cpus-per-dw=1 -p gpu --gpus=1 --wrap "
          env | grep -c '^GOLDMINER_SEC''RET=' | sed 's/^/secrets_in_env=/'
          echo auth=\$GOLDMINER_AUTH auth_job=\$GOLDMINER_AUTH_JOB
          files=\$(ls $state/state/hash.*/job.\$SLURM_JOB_ID/* $state/state/hash.*/job.\$GOLDMINER_DW_JOB/*)
          echo state_files_with_env=\$(grep -l \"GOLDMINER_AUTH_JOB=\$SLURM_JOB_ID\" \$files | wc -l)
          echo state_files_with_secret=\$(grep -l 'GOLDMINER_SEC''RET=' \$files | wc -l)
          GOLDMINER_AUTH_JOB=\$((SLURM_JOB_ID + 1000)) GOLDMINER_TRAINER=\$GOLDMINER_LISTEN \
            $tools/goldminer-dw --connect-timeout 30 2>$work/sec-otherjob.\$SLURM_JOB_ID &
          other_job=\$!
          GOLDMINER_TRAINER=\$GOLDMINER_LISTEN UCX_TLS=tcp setpriv --reuid=$security_user --regid=$security_user --clear-groups \
            $tools/goldminer-dw --connect-timeout 30 2>$work/sec-otheruser.\$SLURM_JOB_ID &
          other_user=\$!
          ${python_dir:+PYTHONPATH=$python_dir }/usr/bin/python3 $tests_dir/sec_trainer.py text:$work/sec-input.txt 2 \$other_job \$other_user
          wait") || { echo "$job"; userdel "$security_user" 2>/dev/null; return 1; }
    userdel "$security_user" 2>/dev/null
    out=$(cat "$work/cj.$job")
    expect_contains "job environment" "$out" "secrets_in_env=0" || { echo "$out"; return 1; }
    expect_contains "how workers prove the job" "$out" "auth=munge auth_job=$job" || return 1
    expect_contains "slurmctld state holds job environments" "$out" "state_files_with_env=" || return 1
    case $out in *state_files_with_env=0*) echo "no saved environment of job $job's companion job under $state/state: the check saw nothing"
                                            return 1 ;; esac
    expect_contains "slurmctld state" "$out" "state_files_with_secret=0" || { echo "$out"; return 1; }
    n=$(echo "$out" | grep -c "^epoch [01] samples $lines unique $lines$")
    expect_eq "clean epochs" "$n" 2 || { echo "$out"; return 1; }
    expect_contains "worker of another job" "$(cat "$work/sec-otherjob.$job")" \
        "the trainer works for another job: it says 'goldminer trainer job=$job worker-nonce=" || { echo "$out"; return 1; }
    expect_contains "worker of another user" "$(cat "$work/sec-otheruser.$job")" \
        "the trainer's munge: credential refused" || { echo "$out"; return 1; }
    # The session logged both refusals and went on.
    expect_eq "refusals in the trainer's log" "$(echo "$out" | grep -c "dropped: the worker refuses this trainer: ")" 2 ||
        { echo "$out" | grep -i refus; return 1; }
}

# Part 5, credential material: a second Unix user (created here, removed
# after) can read no key and decode no credential of the first user's: the
# munge key is root's alone (the cluster's only secret), and a credential
# the trainer makes is restricted to its own uid (as gmcore/peer_auth.cc
# makes them), so the second user's unmunge refuses it; the first user's
# own unmunge accepts it.
test_second_user_reads_no_key_and_decodes_no_credential_of_the_first() {
    local socket=$state/munge/munge.socket key=$state/munge/munge.key cred as_second out rc
    security_user_add >/dev/null || { echo "cannot create user $security_user"; return 1; }
    as_second=(setpriv --reuid="$security_user" --regid="$security_user" --clear-groups)
    out=$("${as_second[@]}" cat "$key" 2>&1) && { userdel "$security_user"; echo "the second user read $key"; return 1; }
    expect_contains "munge key" "$out" "Permission denied" || { userdel "$security_user"; return 1; }
    cred=$(munge --socket="$socket" --restrict-uid=0 --string "goldminer trainer job=1 worker-nonce=00") ||
        { userdel "$security_user"; echo "munge failed"; return 1; }
    rc=0
    out=$(echo "$cred" | "${as_second[@]}" unmunge --socket="$socket" 2>&1) || rc=$?
    userdel "$security_user" 2>/dev/null
    [ "$rc" -ne 0 ] || { echo "the second user decoded the first user's credential: $out"; return 1; }
    expect_contains "second user's unmunge" "$out" "Unauthorized credential" || return 1
    expect_contains "first user's unmunge" "$(echo "$cred" | unmunge --socket="$socket" 2>&1)" \
        "goldminer trainer job=1 worker-nonce=00"
}

# The node's port registry is root's alone. Injected: a second Unix user
# (created here, removed after) runs the lock-holding attack,
# `flock -x REGISTRY sleep inf`, and tries to lock and read the registry and
# its lock file; then root, standing in for a stuck step (nobody else can
# open the lock file), holds its flock. Checked: directory 0700, registry
# and lock 0600, root's; each of the second user's attempts fails with
# "Permission denied" (the attack does not even start); a --goldminer job
# submitted meanwhile gets its port and companion job, its batch script
# running within 30 s of submission; with the lock held by root, the next
# job's script still runs within 30 s, without workers and with
# GOLDMINER_DW_ERROR naming the lock file and the 5 s bound.
test_a_second_user_cannot_open_or_lock_the_port_registry_and_a_held_lock_costs_a_step_at_most_5_s() {
    local reg=$state/run/goldminer/ports dir job out t0 began attack= holder= f as_second
    dir=$(dirname "$reg")
    security_user_add >/dev/null || { echo "cannot create user $security_user"; return 1; }
    as_second=(setpriv --reuid="$security_user" --regid="$security_user" --clear-groups)
    registry_cleanup() {
        [ -z "$attack" ] || { kill "$attack" 2>/dev/null; wait "$attack" 2>/dev/null; }
        [ -z "$holder" ] || { kill "$holder" 2>/dev/null; wait "$holder" 2>/dev/null; }
        userdel "$security_user" 2>/dev/null
    }
    # A first job makes the registry (a cluster that ran none has none).
    job=$(submit_goldminer_job --goldminer=dw=1 -p gpu --wrap 'echo listen=$GOLDMINER_LISTEN') ||
        { echo "$job"; registry_cleanup; return 1; }
    expect_contains "first job" "$(cat "$work/cj.$job")" "listen=ucx://" || { registry_cleanup; return 1; }
    expect_eq "owners and modes of $dir, its registry and lock" \
        "$(stat -c '%U %a' "$dir" "$reg" "$reg.lock" | tr '\n' ' ')" "root 700 root 600 root 600 " ||
        { registry_cleanup; return 1; }
    "${as_second[@]}" test -x "$(dirname "$dir")" ||
        { echo "the second user cannot reach $(dirname "$dir") at all: the check would prove nothing"; registry_cleanup; return 1; }
    # The lock-holding attack, left running if it could run.
    "${as_second[@]}" flock -x "$reg" sleep inf >"$work/registry-attack" 2>&1 &
    attack=$!
    for f in "$reg" "$reg.lock"; do
        out=$("${as_second[@]}" flock -x -w 1 "$f" true 2>&1) && { echo "the second user locked $f"; registry_cleanup; return 1; }
        expect_contains "second user's flock of $f" "$out" "Permission denied" || { registry_cleanup; return 1; }
    done
    out=$("${as_second[@]}" cat "$reg" 2>&1) && { echo "the second user read $reg: $out"; registry_cleanup; return 1; }
    expect_contains "second user's read of $reg" "$out" "Permission denied" || { registry_cleanup; return 1; }
    t0=$(date +%s)
    job=$(submit_goldminer_job --goldminer=dw=1 -p gpu --wrap \
          'echo "began=$(date +%s) dw_job=${GOLDMINER_DW_JOB-unset} listen=${GOLDMINER_LISTEN-unset} error=${GOLDMINER_DW_ERROR-}"') ||
        { echo "$job"; registry_cleanup; return 1; }
    out=$(cat "$work/cj.$job")
    began=$(echo "$out" | sed -n 's/^began=\([0-9]*\) .*/\1/p')
    [ -n "$began" ] && [ $((began - t0)) -le 30 ] ||
        { echo "job $job's script began $((began - t0)) s after its submission (at most 30): $out"; registry_cleanup; return 1; }
    case $out in
        *" dw_job="[0-9]*" listen=ucx://"*" error=") ;;
        *) echo "job $job got no port or workers beside the attack: $out"; registry_cleanup; return 1 ;;
    esac
    if kill -0 "$attack" 2>/dev/null; then
        echo "the second user's 'flock -x $reg sleep inf' runs: $(cat "$work/registry-attack")"; registry_cleanup; return 1
    fi
    wait "$attack"
    attack=
    expect_contains "the attack" "$(cat "$work/registry-attack")" "Permission denied" || { registry_cleanup; return 1; }
    echo "beside the second user's attack: script began $((began - t0)) s after submission"
    # Root holds the lock (one process: the subshell becomes sleep with the
    # locked descriptor).
    ( exec 8<"$reg.lock" && flock -x 8 && exec sleep 120 ) &
    holder=$!
    for f in $(seq 40); do flock -n "$reg.lock" true || break; sleep 0.25; done
    ! flock -n "$reg.lock" true || { echo "root's holder never locked $reg.lock"; registry_cleanup; return 1; }
    t0=$(date +%s)
    job=$(submit_goldminer_job --goldminer=dw=1 -p gpu --wrap \
          'echo "began=$(date +%s) dw_job=${GOLDMINER_DW_JOB-unset} error=${GOLDMINER_DW_ERROR-}"') ||
        { echo "$job"; registry_cleanup; return 1; }
    registry_cleanup
    out=$(cat "$work/cj.$job")
    began=$(echo "$out" | sed -n 's/^began=\([0-9]*\) .*/\1/p')
    [ -n "$began" ] && [ $((began - t0)) -le 30 ] ||
        { echo "job $job's script began $((began - t0)) s after its submission (at most 30): $out"; return 1; }
    expect_contains "a held lock" "$out" \
        "dw_job=unset error=goldminer: job $job: cannot start its data workers: port registry: $reg.lock: locked by another process for more than 5 s: no port reserved" ||
        return 1
    echo "registry lock held by root: script began $((began - t0)) s after submission, without workers, the reason named"
}
