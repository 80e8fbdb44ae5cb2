# A `sbatch --goldminer` job whose trainer runs with torch 2.x from PyPI
# (the venv of scripts/python-venv, not Debian's torch 1.13) and the
# goldminer package pip installed for it (scripts/run-tests installs it
# into BUILD/python-torch2): the companion job's goldminer-dw workers run
# the trainer's Python code and TorchScript program with that python.
# GOLDMINER_TORCH2_PYTHON names the venv's python (default: the one
# scripts/python-venv makes); without it or the package the tests skip
# saying which is missing; so do they when run.sh tests an installation,
# which has no such package.


# The venv's python and the package dir; or a line saying what is missing
# and exit status 77 (skipped), or that its torch is not 2.x and status 1.
torch2_environment() {
    local python=$torch2_python  # run.sh's, from GOLDMINER_TORCH2_PYTHON
    local package version
    requires_build_tree "the goldminer package pip installed for the torch 2.x venv (BUILD/python-torch2)" || return
    package=$build/python-torch2
    if [ ! -x "$python" ]; then
        echo "no torch 2.x python at $python (scripts/python-venv makes it; GOLDMINER_TORCH2_PYTHON names another)"
        return 77
    fi
    if [ ! -f "$package/goldminer/__init__.py" ]; then
        echo "no goldminer package for it in $package (scripts/run-tests pip installs it there)"
        return 77
    fi
    version=$("$python" -c 'import torch; print(torch.__version__)' 2>&1 | tail -1)
    case $version in
        2.*) ;;
        *) echo "$python: expected torch 2.x, got: $version"; return 1 ;;
    esac
    echo "$python $package"
}

# Runs tests/integration/SCRIPT ARGS... with the venv's python as the
# training script of a `sbatch --goldminer=dw=2` job named NAME (one GPU)
# and prints its output (kept in $work/NAME.JOBID); on a failed
# submission, says why and fails. Usage: run_torch2_job NAME SCRIPT ARGS...
run_torch2_job() {
    local name=$1 script=$2 env rc
    shift 2
    env=$(torch2_environment) || { rc=$?; echo "$env"; return $rc; }
    run_trainer_job "$name" "${env%% *}" "${env#* }" "$script" "$@"
}

# goldminer.DataLoader over a map-style Dataset (dataloader_job.py, the
# test_dataloader.sh trainer): item 250 of 500 SIGKILLs the worker's Python
# process once; both epochs still give every item once, loaded on the
# companion workers with the trainer's torch 2.x.
test_torch2_dataloader_through_a_killed_worker_every_item_once() {
    local out rc marker="$work/torch2-kill-once"
    echo "item 250 kills its process while this file exists" >"$marker"
    out=$(run_torch2_job t2dl dataloader_job.py 500 "$marker") || { rc=$?; echo "$out"; return $rc; }
    expect_eq "the marker removed by the kill" "$([ -e "$marker" ] && echo present || echo gone)" gone ||
        { echo "$out" | tail -20; return 1; }
    expect_eq "epochs through the kill" "$(echo "$out" | /usr/bin/python3 -c '
import json, sys
for line in sys.stdin:
    if line.startswith("{\"epoch\""):
        e = json.loads(line)
        places = {w.split("@")[0].split(".")[0] for w in e["where"]}
        print("epoch %d: %d items, %d distinct, splits failed %d, workers lost %d, loaded by %s" % (
            e["epoch"], e["items"], e["distinct"], e["splits_failed"], e["workers_lost"], sorted(places)))
')" "epoch 0: 500 items, 500 distinct, splits failed 1, workers lost 0, loaded by ['goldminer-dw']
epoch 1: 500 items, 500 distinct, splits failed 1, workers lost 0, loaded by ['goldminer-dw']" ||
        { echo "$out" | tail -20; return 1; }
}

# goldminer.Session over a CSV file with a TorchScript program scripted by
# torch 2.x: the workers run it with that torch (not goldminer-dw's
# libtorch), every row once per epoch, outputs as computed in the trainer.
test_torch2_session_csv_with_a_torchscript_program() {
    local out rc rows=3000
    {
        echo "id,x,tag"
        seq 0 $((rows - 1)) | awk '{ printf "%d,%.1f,t%d\n", $1, $1 / 2, $1 % 7 }'
    } >"$work/torch2.csv"
    out=$(run_torch2_job t2csv torch2_session_job.py "$work/torch2.csv" 2) || { rc=$?; echo "$out"; return $rc; }
    expect_contains "the trainer's torch" "$(echo "$out" | grep '^torch ')" "torch 2." || { echo "$out" | tail -20; return 1; }
    expect_eq "epochs" "$(echo "$out" | grep '^{"epoch"')" \
        "{\"epoch\": 0, \"rows\": $rows, \"distinct\": $rows, \"outputs_match\": true}
{\"epoch\": 1, \"rows\": $rows, \"distinct\": $rows, \"outputs_match\": true}" || { echo "$out" | tail -20; return 1; }
}
