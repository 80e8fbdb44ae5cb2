# Data-parallel jobs: `sbatch --goldminer -N2 --ntasks-per-node=2
# --gpus-per-task=1` whose script runs `srun TRAINER`: four ranks
# (SLURM_PROCID of SLURM_STEP_NUM_TASKS) on two GPU nodes share the
# companion job's workers through rank 0, which listens on the job's
# GOLDMINER_LISTEN; every epoch each sample goes to one rank and every rank
# takes as many batches, through a worker killed mid-run.

ranks_top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

# examples/train_dlrm_ddp.py under `srun` in a --goldminer job of 2 GPU
# nodes x 2 ranks: DDP (gloo) trains on the shared companion workers'
# batches, through one of those workers killed with SIGKILL mid-run; every
# epoch each sample reaches one rank, the ranks take as many batches and
# end each epoch with the same parameters, and the rank that had the killed
# worker saw it go; ranks 1-3 listened on ports of the site's dw_ports
# reserved for them. (DDP's ranks step together, so every rank, rank 0 with
# its replacing of lost workers included, is still running at the kill.)
test_ddp_example_trains_on_two_nodes_with_the_jobs_workers_through_a_kill() {
    local job out lines=8000 epochs=12 dw i pid victim= st
    /usr/bin/python3 "$ranks_top/bench/dataplane/gen_criteo.py" "$work/ddp.tsv" "$lines" 1 >/dev/null
    job=$(
        use_goldminer_python
        if nodes_have_namespaces; then unset UCX_NET_DEVICES; export GLOO_SOCKET_IFNAME=eth0; fi
        sbatch --parsable --time=4 -o "$work/ddp.%j" --goldminer=dw=4,cpus-per-dw=1 -p gpu -N2 \
            --ntasks-per-node=2 --gpus-per-task=1 --wrap \
            "echo dw_job=\$GOLDMINER_DW_JOB; \
             srun /usr/bin/python3 $ranks_top/examples/train_dlrm_ddp.py --input criteo-tsv:$work/ddp.tsv \
             --epochs $epochs --batch-size 256"
    ) || { echo "sbatch: $job"; return 1; }
    job=${job%%;*}
    # Once the ranks train, kill -9 one of the companion job's workers.
    for i in $(seq 600); do
        grep -q '^{"epoch": 0' "$work/ddp.$job" 2>/dev/null && break
        sleep 0.25
    done
    dw=$(sed -n 's/^dw_job=\([0-9]*\)$/\1/p' "$work/ddp.$job")
    [ -n "$dw" ] || { echo "no companion job: $(cat "$work/ddp.$job")"; return 1; }
    for pid in $(pgrep -x goldminer-dw); do
        if tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx "SLURM_JOB_ID=$dw"; then
            victim=$pid
            break
        fi
    done
    [ -n "$victim" ] || { echo "no worker of companion job $dw running"; tail -20 "$work/ddp.$job"; return 1; }
    kill -9 "$victim" || { echo "worker $victim of companion job $dw was gone before the kill"; return 1; }
    for i in $(seq 800); do
        st=$(scontrol -o show job "$job" 2>/dev/null | sed -n 's/.* JobState=\([A-Z_]*\) .*/\1/p')
        case $st in PENDING | RUNNING | CONFIGURING | COMPLETING) sleep 0.25 ;; *) break ;; esac
    done
    expect_eq "job end" "$(final_job_state "$job")" "COMPLETED 0:0" || { tail -30 "$work/ddp.$job"; return 1; }
    out=$(cat "$work/ddp.$job")
    expect_eq "DDP epochs" "$(echo "$out" | /usr/bin/python3 -c '
import json, sys
lines, epochs = int(sys.argv[1]), int(sys.argv[2])
got = [json.loads(l) for l in sys.stdin if l.startswith("{\"epoch\"")]
bad = []
for e in range(epochs):
    of = [g for g in got if g["epoch"] == e]
    ok = (sorted(g["rank"] for g in of) == [0, 1, 2, 3] and len({g["batches"] for g in of}) == 1
          and sum(g["samples"] for g in of) == lines and sum(g["id_sum"] for g in of) == lines * (lines - 1) // 2
          and len({g["params_digest"] for g in of}) == 1)
    if not ok:
        bad.append("epoch %d %s" % (e, of))
print("\n".join(bad) or "every epoch in step")
' "$lines" "$epochs")" "every epoch in step" || return 1
    expect_contains "workers shared" "$out" "sent to rank " || return 1
    # Ranks 1-3 listened on ports the plugin reserved for them within
    # dw_ports (20000-39999), which their step's exit released.
    expect_eq "rank ports in dw_ports" "$(echo "$out" |
        sed -n 's/.*session: rank [123] joined, listening on ucx:\/\/.*:\([0-9]*\) (.*/\1/p' |
        awk '$1 >= 20000 && $1 <= 39999' | wc -l)" 3 || { echo "$out" | grep "joined, listening"; return 1; }
    expect_eq "rank ports released" "$(grep -c "^[0-9]* $job .* rank:" "$state/run/goldminer/ports" 2>/dev/null)" 0 || {
        cat "$state/run/goldminer/ports"; return 1; }
    # The killed worker had joined a rank, which saw it go mid-run (its
    # connection lost, or its leases expired).
    echo "$out" | grep -qE "worker [^ ]+:$victim (left|dropped)" || {
        echo "worker killed: no rank saw worker $victim go"; echo "$out" | grep session | tail -30; return 1; }
}
