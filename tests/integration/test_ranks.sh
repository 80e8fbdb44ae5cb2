# Data-parallel jobs: `sbatch --goldminer -N2 --ntasks-per-node=2
# --gpus-per-task=1` whose script runs `srun TRAINER`: four ranks
# (SLURM_PROCID of SLURM_STEP_NUM_TASKS) on two GPU nodes share the
# companion job's workers through rank 0, which listens on the job's
# GOLDMINER_LISTEN; every epoch each sample goes to one rank and every rank
# takes as many batches.

ranks_top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

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
