# Helpers for the integration tests (sourced by run.sh).
# A test is a function test_NAME that returns 0, or prints why it failed on
# stdout and returns non-zero. Each runs with a watchdog: a hang is a failure.

TEST_TIMEOUT=${TEST_TIMEOUT:-120}
# Tests whose own bounded waits add up to more than that (seconds).
# ctld_shares waits up to 210 s for the first job to grow (a measured step
# at a time, a trimmed step re-probed after a 60-s back-off) and 90 s for
# the second's first worker.
# The container tests' jobs unpack a 5-GB image (tens of seconds) and
# import torch in the trainer and in each worker's Python process.
declare -A TEST_TIMEOUTS=([test_ctld_shares_worker_cpus_between_competing_jobs]=420
    [test_containers_pyxis_either_plugin_order_our_variables_reach_the_trainer]=420
    [test_containers_pyxis_dataloader_image_only_dataset_through_a_killed_worker]=300
    [test_containers_pyxis_session_torchscript_program_of_the_images_torch]=300
    [test_containers_pyxis_split_program_of_the_images_torch]=1000
    [test_containers_pyxis_trainer_and_workers_on_one_node]=300
    [test_containers_charliecloud_dataloader_image_only_dataset]=300)

run_test() {
    local name=$1 out rc limit
    limit=${TEST_TIMEOUTS[$name]:-$TEST_TIMEOUT}
    out=$(cd "$work" && timeout -k 5 "$limit" bash -c ". '$here/lib.sh'; \
          for f in '$here'/test_*.sh; do . \"\$f\"; done; \
          work='$work' state='$state' devcluster='$devcluster' plugins='$plugins' tools='$tools' \
          ctld_program='$ctld_program' python_dir='$python_dir' build='$build' \
          port_base='$port_base' slurm_version='$slurm_version' torch2_python='$torch2_python' \
          container_prefix='$container_prefix' container_image='$container_image' \
          container_note='$container_note'; $name" 2>&1)
    rc=$?
    if [ $rc -eq 0 ]; then
        pass "${name#test_}"
    elif [ $rc -eq 77 ]; then
        skip "${name#test_}" "$(echo "$out" | tail -1)"
    elif [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
        fail "${name#test_}" "watchdog: no result after ${limit}s; output: $(echo "$out" | tail -5 | tr '\n' '|')"
    else
        fail "${name#test_}" "$(echo "$out" | tail -8 | tr '\n' '|')"
    fi
}

# requires_build_tree WHAT: when an installation is tested, says that this
# test needs WHAT (a file only a build tree has) and returns 77 (skipped).
requires_build_tree() {
    [ -z "$build" ] || return 0
    echo "needs $1, which only a build tree has (run.sh --build-dir)"
    return 77
}

# use_goldminer_python: makes the tested goldminer package importable in
# this (sub)shell and what it starts (jobs inherit it: sbatch --export=ALL):
# $python_dir first on PYTHONPATH (a build tree's staged package, or an
# installation's outside python3's own path); an installed package in
# python3's own path (the .debs') needs nothing.
use_goldminer_python() {
    if [ -n "$python_dir" ]; then export PYTHONPATH=$python_dir${PYTHONPATH:+:$PYTHONPATH}; fi
}

# run_trainer_job NAME PYTHON PACKAGE SCRIPT ARGS...: PYTHON runs
# tests/integration/SCRIPT ARGS... (PACKAGE first on PYTHONPATH, unless
# empty) as the training script of a `sbatch --goldminer=dw=2` job named
# NAME (one GPU); prints its output (kept in $work/NAME.JOBID), or on a
# failed submission says why and fails.
run_trainer_job() {
    local name=$1 python=$2 package=$3 script=$4 job
    shift 4
    job=$(
        if [ -n "$package" ]; then export PYTHONPATH=$package${PYTHONPATH:+:$PYTHONPATH}; fi
        if nodes_have_namespaces; then unset UCX_NET_DEVICES; fi
        timeout 200 sbatch --parsable --wait --time=3 -J "$name" -o "$work/$name.%j" --goldminer=dw=2,cpus-per-dw=1 \
            -p gpu --gpus=1 --wrap "$python $integration_dir/$script $*"
    ) || { echo "sbatch: $job"; tail -20 "$work/$name".* 2>/dev/null; return 1; }
    cat "$work/$name.${job%%;*}"
}
integration_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# The state and exit code of a data-worker job preempted (PreemptMode=CANCEL,
# GraceTime) that drained and exited 0 on SIGTERM within the grace time:
# 22.05 records the job's own end, 24.11 and later record the preemption.
drained_preempted_state() {
    case $slurm_version in
        22.05.*) echo "COMPLETED 0:0" ;;
        *) echo "PREEMPTED 0:0" ;;
    esac
}

# True while PID runs; a zombie (exited, not yet reaped by PID 1) has stopped.
pid_running() {
    [ -r "/proc/$1/stat" ] && [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" != Z ]
}

# expect_eq WHAT ACTUAL EXPECTED
expect_eq() {
    if [ "$2" != "$3" ]; then
        echo "$1: got '$2', expected '$3'"
        return 1
    fi
}

# expect_contains WHAT HAYSTACK NEEDLE
expect_contains() {
    case $2 in
        *"$3"*) return 0 ;;
    esac
    echo "$1: '$3' not found in: $2"
    return 1
}

# Submits a batch job and waits for it; prints the job id. Extra sbatch
# arguments follow; a job that does not end within 90 s is a failure.
submit_wait() {
    local out
    out=$(timeout 100 sbatch --parsable --wait --time=2 "$@" 2>&1) || {
        echo "sbatch $*: failed: $out"
        return 1
    }
    echo "${out%%;*}" | tail -1
}

# True when every devcluster node is a network namespace of its own (ours),
# with its own address and host name; else all nodes share this host's.
nodes_have_namespaces() {
    grep -q '^network=netns' "$state/run/cluster"
}

# The network namespace of node N (netns mode), from the cluster's record
# of what it created.
node_namespace() {
    awk -v n="-$1" '$1 == "netns" && substr($2, length($2) - length(n) + 1) == n { print $2 }' "$state/run/network"
}

# Runs ARGS with the UCX settings a job of this cluster needs: on a cluster
# of node namespaces UCX must use the nodes' own interfaces, not lo; on a
# localhost one the devcluster set dw_network=lo.
with_job_ucx() {
    (
        if nodes_have_namespaces; then unset UCX_NET_DEVICES; fi
        "$@"
    )
}

# Submits a --goldminer batch job (ARGS: sbatch arguments) and waits for it;
# prints its id. The script's output goes to $work/cj.JOB.
submit_goldminer_job() {
    with_job_ucx submit_wait -o "$work/cj.%j" "$@"
}

# The state job J ends in (waits while it is pending, running or
# completing, up to 60 s: on a loaded machine a job's end can take a
# while; Slurm keeps ended jobs for MinJobAge).
final_job_state() {
    local i st=
    for i in $(seq 240); do
        st=$(scontrol -o show job "$1" 2>/dev/null | sed -n 's/.* JobState=\([A-Z_]*\) .*/\1/p')
        case $st in
            PENDING | RUNNING | CONFIGURING | COMPLETING | SUSPENDED) sleep 0.25 ;;
            *) break ;;
        esac
    done
    echo "$st $(scontrol -o show job "$1" 2>/dev/null | sed -n 's/.* ExitCode=\([0-9:]*\) .*/\1/p')"
}
