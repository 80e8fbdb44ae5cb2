# Data-parallel jobs: `sbatch --goldminer -N2 --ntasks-per-node=2
# --gpus-per-task=1` whose script runs `srun TRAINER`: four ranks
# (SLURM_PROCID of SLURM_STEP_NUM_TASKS) on two GPU nodes share the
# companion job's workers through rank 0, which listens on the job's
# GOLDMINER_LISTEN; every epoch each sample goes to one rank, every rank
# takes as many batches, through a worker killed mid-run. (Eight workers:
# two a rank, so the rank whose worker is killed goes on with the other.
# goldminer-consume's ranks do not step together as DDP's do: rank 0 may
# have ended, and with it the replacing of lost workers, before another
# rank's worker is killed.)

ranks_top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

# Checks the JSON epoch lines of RANKS goldminer-consume ranks over LINES
# samples and EPOCHS epochs (on stdin); prints what is wrong, or nothing.
check_rank_epochs() {
    python3 -c '
import json, sys
ranks, lines, epochs = (int(a) for a in sys.argv[1:])
got = [json.loads(l) for l in sys.stdin if l.startswith("{\"epoch\"")]
for e in range(epochs):
    of = sorted((g for g in got if g["epoch"] == e), key=lambda g: g["rank"])
    if [g["rank"] for g in of] != list(range(ranks)):
        print("epoch %d: ranks %s" % (e, [g["rank"] for g in of])); sys.exit(0)
    if any(g["world_size"] != ranks or g["duplicates"] or g["missing"] for g in of):
        print("epoch %d: %s" % (e, of)); sys.exit(0)
    if len({g["batches"] for g in of}) != 1:
        print("epoch %d: batches %s" % (e, [g["batches"] for g in of])); sys.exit(0)
    if sum(g["samples"] for g in of) != lines or sum(g["id_sum"] for g in of) != lines * (lines - 1) // 2:
        print("epoch %d: samples %s, id sums do not add up" % (e, [g["samples"] for g in of])); sys.exit(0)
' "$@"
}

test_ranks_of_an_srun_step_share_the_companion_workers_through_a_kill() {
    # 30 epochs: goldminer-consume's ranks do not wait for each other, and
    # with 8 a rank had ended (its workers drained) before the kill.
    local job out dw lines=100000 epochs=30 bin i pid victim=
    bin=$(dirname "$devcluster")
    seq 1 "$lines" | sed 's/^/sample /' >"$work/rk-input.txt"
    job=$(with_job_ucx sbatch --parsable --time=3 -o "$work/rk.%j" --goldminer=dw=8,cpus-per-dw=1 -p gpu -N2 \
          --ntasks-per-node=2 --gpus-per-task=1 --wrap \
          "echo dw_job=\$GOLDMINER_DW_JOB batch_step_tasks=\${SLURM_STEP_NUM_TASKS-unset}; \
           srun $bin/goldminer-consume --input text:$work/rk-input.txt --epochs $epochs --batch-size 50 \
           --records-per-split 2000 --workers 0 --json -v") || { echo "sbatch: $job"; return 1; }
    # Once the ranks stream, kill -9 one of the companion job's workers.
    for i in $(seq 400); do
        grep -q '^{"epoch": 0' "$work/rk.$job" 2>/dev/null && break
        sleep 0.25
    done
    dw=$(sed -n 's/^dw_job=\([0-9]*\) .*/\1/p' "$work/rk.$job")
    [ -n "$dw" ] || { echo "no companion job: $(cat "$work/rk.$job")"; return 1; }
    for pid in $(pgrep -x goldminer-dw); do
        if tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx "SLURM_JOB_ID=$dw"; then
            victim=$pid
            break
        fi
    done
    [ -n "$victim" ] || { echo "no worker of companion job $dw running"; return 1; }
    kill -9 "$victim" || { echo "worker $victim of companion job $dw was gone before the kill"; return 1; }
    expect_eq "job end" "$(final_job_state "$job")" "COMPLETED 0:0" || { tail -30 "$work/rk.$job"; return 1; }
    out=$(cat "$work/rk.$job")
    # The batch script is one process: no step task count of its own.
    expect_contains "batch step" "$out" "batch_step_tasks=unset" || return 1
    expect_eq "epoch lines" "$(echo "$out" | grep -c '^{"epoch"')" $((4 * epochs)) || { echo "$out" | tail -30; return 1; }
    expect_eq "exact cover" "$(echo "$out" | check_rank_epochs 4 "$lines" "$epochs")" "" || return 1
    # Ranks 1-3 joined rank 0, which sent them workers; they ran on both GPU nodes.
    expect_eq "ranks joined" "$(echo "$out" | grep -c 'session: rank [123] joined, listening on ucx://')" 3 || {
        echo "$out" | grep session; return 1; }
    expect_contains "workers sent" "$out" "sent to rank " || return 1
    # The killed worker had joined a rank, which saw it go mid-run (its
    # connection lost, or its leases expired).
    echo "$out" | grep -qE "worker [a-z0-9]+:$victim (left|dropped)" || {
        echo "worker killed: no rank saw worker $victim go"; echo "$out" | grep session; return 1; }
}

# examples/train_dlrm_ddp.py under `srun` in a --goldminer job of 2 GPU
# nodes x 2 ranks: DDP (gloo) trains on the shared companion workers'
# batches; every epoch each sample reaches one rank, the ranks take as many
# batches and end each epoch with the same parameters.
test_ddp_example_trains_on_two_nodes_with_the_jobs_workers() {
    local job out lines=8000 bin
    bin=$(dirname "$devcluster")
    /usr/bin/python3 "$ranks_top/bench/dataplane/gen_criteo.py" "$work/ddp.tsv" "$lines" 1 >/dev/null
    job=$(
        export PYTHONPATH=$bin/python${PYTHONPATH:+:$PYTHONPATH}
        if nodes_have_namespaces; then unset UCX_NET_DEVICES; export GLOO_SOCKET_IFNAME=eth0; fi
        timeout 200 sbatch --parsable --wait --time=3 -o "$work/ddp.%j" --goldminer=dw=4,cpus-per-dw=1 -p gpu -N2 \
            --ntasks-per-node=2 --gpus-per-task=1 --wrap \
            "srun /usr/bin/python3 $ranks_top/examples/train_dlrm_ddp.py --input criteo-tsv:$work/ddp.tsv \
             --epochs 2 --batch-size 256"
    ) || { echo "sbatch: $job"; tail -20 "$work"/ddp.* 2>/dev/null; return 1; }
    out=$(cat "$work/ddp.${job%%;*}")
    expect_eq "DDP epochs" "$(echo "$out" | /usr/bin/python3 -c '
import json, sys
lines = int(sys.argv[1])
got = [json.loads(l) for l in sys.stdin if l.startswith("{\"epoch\"")]
for e in range(2):
    of = [g for g in got if g["epoch"] == e]
    ok = (sorted(g["rank"] for g in of) == [0, 1, 2, 3] and len({g["batches"] for g in of}) == 1
          and sum(g["samples"] for g in of) == lines and sum(g["id_sum"] for g in of) == lines * (lines - 1) // 2
          and len({g["params_digest"] for g in of}) == 1)
    print("epoch %d %s" % (e, "in step" if ok else of))
' "$lines")" "epoch 0 in step
epoch 1 in step" || return 1
    expect_contains "workers shared" "$out" "sent to rank " || return 1
}
