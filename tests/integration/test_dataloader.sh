# goldminer.DataLoader in a `sbatch --goldminer` job: a Dataset
# class the training script defines runs on the companion job's
# goldminer-dw workers (num_workers=0, nothing else said), every item once
# per epoch.

# Runs tests/integration/dataloader_job.py ARGS... as the training script
# of a `sbatch --goldminer=dw=2` job named NAME (one GPU) and prints what it
# printed (kept in $work/NAME.JOBID); on a failed submission, says why and
# fails. Usage: run_dataloader_job NAME ARGS...
run_dataloader_job() {
    local name=$1
    shift
    run_trainer_job "$name" /usr/bin/python3 "$python_dir" dataloader_job.py "$@"
}

test_dataloader_dataset_runs_on_the_companion_workers() {
    local out
    out=$(run_dataloader_job dltrain 500) || { echo "$out"; return 1; }
    expect_eq "DataLoader epochs" "$(echo "$out" | /usr/bin/python3 -c '
import json, sys
for line in sys.stdin:
    if line.startswith("{\"epoch\""):
        e = json.loads(line)
        places = {w.split("@")[0] for w in e["where"]}
        print("epoch %d: %d items, %d distinct, len %d, loaded by %s" % (
            e["epoch"], e["items"], e["distinct"], e["len"], sorted(p.split(".")[0] for p in places)))
')" "epoch 0: 500 items, 500 distinct, len 32, loaded by ['goldminer-dw']
epoch 1: 500 items, 500 distinct, len 32, loaded by ['goldminer-dw']" || { echo "$out" | tail -20; return 1; }
}

# Injected: the dataset's item 250 of 500 sends SIGKILL to the Python
# process of the companion worker that reads it, once (a marker file), as
# the kernel's OOM killer would mid-split. Checked: the worker
# gives the split back failed and goes on (no worker lost), the trainer
# re-leases it (one split failed), both epochs every item once.
test_dataloader_a_python_process_killed_mid_split_costs_a_re_lease() {
    local out marker="$work/kill-once"
    echo "item 250 kills its process while this file exists" >"$marker"
    out=$(run_dataloader_job dlkill 500 "$marker") || { echo "$out"; return 1; }
    expect_eq "the marker removed by the kill" "$([ -e "$marker" ] && echo present || echo gone)" gone || return 1
    expect_eq "epochs through the kill" "$(echo "$out" | /usr/bin/python3 -c '
import json, sys
for line in sys.stdin:
    if line.startswith("{\"epoch\""):
        e = json.loads(line)
        print("epoch %d: %d items, %d distinct, splits failed %d, workers lost %d" % (
            e["epoch"], e["items"], e["distinct"], e["splits_failed"], e["workers_lost"]))
')" "epoch 0: 500 items, 500 distinct, splits failed 1, workers lost 0
epoch 1: 500 items, 500 distinct, splits failed 1, workers lost 0" || { echo "$out" | tail -20; return 1; }
}
