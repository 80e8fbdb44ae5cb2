# A --goldminer GPU job with a CPU-only companion het component.

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
