# A --goldminer GPU job with a CPU-only het component: the component lands
# on CPU nodes, and spank_goldminer.so starts the job's data workers there
# as a step of that component (goldminer-dw.J on J+1), with no srun in the
# user's script: for sbatch, salloc and srun hetjobs.

test_hetjob_cpu_component_lands_on_cpu_nodes() {
    local job out
    cat >"$work/het.sh" <<'SCRIPT'
#!/bin/bash
#SBATCH -p gpu --gpus=1 -N1 -n1
#SBATCH hetjob
#SBATCH -p cpu -N2 -n2
srun --het-group=0 sh -c 'echo "trainer $(hostname) gpus=$CUDA_VISIBLE_DEVICES dw=$GOLDMINER_DW"'
srun --het-group=1 sh -c 'echo "worker $(hostname) dw=$GOLDMINER_DW"'
SCRIPT
    job=$(submit_wait --goldminer=dw=2 -o "$work/het.%j" "$work/het.sh") || return 1
    out=$(cat "$work/het.$job")
    echo "$out" | grep -Eq '^trainer g[0-9]+ gpus=0 dw=2$' || { echo "trainer line: $out"; return 1; }
    expect_eq "workers" "$(echo "$out" | sed -n 's/^worker \(c[0-9]*\) dw=2$/\1/p' | sort | tr '\n' ' ')" "c1 c2 "
}

# goldminer-consume's epochs in OUT: each must hold every one of LINES
# samples exactly once; prints how many do.
clean_epochs() {
    echo "$1" | grep -c "^{\"epoch\": [0-9]*, \"samples\": $2, \"unique_samples\": $2, \"duplicates\": 0, \"missing\": 0,"
}

# The trainer, as a job's script or step runs it: goldminer-consume on
# GOLDMINER_LISTEN, waiting for MIN workers.
consume_command() {
    echo "$tools/goldminer-consume --input text:$work/het-input.txt --epochs 2 --batch-size 50 \
--workers 0 --min-workers $1 --join-timeout 60 --json -v"
}

test_hetjob_workers_are_a_step_of_its_cpu_component() {
    local job out lines=3000 dwout
    seq 1 "$lines" | sed 's/^/sample /' >"$work/het-input.txt"
    # The script is the trainer alone: no srun, no worker line.
    cat >"$work/het-consume.sh" <<SCRIPT
#!/bin/bash
#SBATCH -p gpu --gpus=1 -n1
#SBATCH hetjob
#SBATCH -p cpu -N1 -n3 -c2
echo "step=\$GOLDMINER_DW_STEP dw=\$GOLDMINER_DW job=\${GOLDMINER_DW_JOB-none}"
$(consume_command 3)
SCRIPT
    job=$(submit_goldminer_job --goldminer "$work/het-consume.sh") || { echo "$job"; return 1; }
    out=$(cat "$work/cj.$job")
    expect_contains "trainer environment" "$out" "step=$job+1 dw=3 job=none" || return 1
    expect_eq "clean epochs" "$(clean_epochs "$out" "$lines")" 2 || { echo "$out"; return 1; }
    # The three workers ran in component 1, on one CPU node.
    expect_eq "workers joined" \
        "$(echo "$out" | sed -n 's/.*session: worker \(c[0-9]*\):[0-9]* joined.*/\1/p' | sort -u | wc -l) \
$(echo "$out" | grep -c 'session: worker c[0-9]*:[0-9]* joined')" "1 3" || { echo "$out"; return 1; }
    # No companion job: the component's CPUs were enough.
    expect_eq "companion jobs" "$(squeue --noheader --name="goldminer-dw.$job" --states=all | wc -l)" 0 || return 1
    grep -q "job $job: data workers are step goldminer-dw.$job of component $job+1 (3 x goldminer-dw, 2 CPUs each)" \
        "$state"/log/slurmd-g*.log || { echo "no 'data workers are step' line in the GPU nodes' slurmd logs"; return 1; }
    # The session drained them (two threads each: the component's CPUs per task).
    dwout="$work/goldminer-dw-$job+1.out"
    for _ in $(seq 40); do
        [ "$(grep -c '^goldminer-dw: [^ ]*: sent [0-9]* batches' "$dwout" 2>/dev/null)" = 3 ] && break
        sleep 0.25
    done
    expect_eq "workers drained" "$(grep -c '^goldminer-dw: [^ ]*: sent [0-9]* batches' "$dwout")" 3 || {
        cat "$dwout"; return 1; }
}

# salloc: each srun step of component 0 gets a step of workers of its own
# (the port is the job's, reused by the second session); srun A : B too.
test_salloc_and_srun_hetjobs_get_workers_as_a_step() {
    local out lines=3000
    seq 1 "$lines" | sed 's/^/sample /' >"$work/het-input.txt"
    out=$(cd "$work" && with_job_ucx timeout 120 salloc --goldminer -p gpu --gpus=1 -n1 : -p cpu -n2 \
          bash -c "for i in 1 2; do srun --het-group=0 bash -c 'echo step=\$GOLDMINER_DW_STEP; $(consume_command 2)'; \
                   done" 2>&1) || { echo "salloc failed: $out"; return 1; }
    expect_eq "clean epochs (salloc)" "$(clean_epochs "$out" "$lines")" 4 || { echo "$out"; return 1; }
    expect_eq "worker steps (salloc)" "$(echo "$out" | grep -c '^step=[0-9]*+1$')" 2 || { echo "$out"; return 1; }
    out=$(cd "$work" && with_job_ucx timeout 120 srun --goldminer -p gpu --gpus=1 -n1 \
          bash -c "echo step=\$GOLDMINER_DW_STEP; $(consume_command 2)" : -p cpu -n2 true 2>&1) ||
        { echo "srun failed: $out"; return 1; }
    expect_eq "clean epochs (srun)" "$(clean_epochs "$out" "$lines")" 2 || { echo "$out"; return 1; }
    expect_eq "workers from cpu nodes (srun)" \
        "$(echo "$out" | grep -c 'session: worker c[0-9]*:[0-9]* joined')" 2 || { echo "$out"; return 1; }
}
