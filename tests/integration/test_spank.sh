# spank_goldminer.so: the --goldminer option in sbatch, srun and the job.

test_sbatch_help_lists_goldminer() {
    local help
    # sbatch wraps help text: compare with whitespace collapsed.
    help=$(sbatch --help 2>&1 | tr -s ' \n' '  ')
    expect_contains "sbatch --help" "$help" "--goldminer=[key=value,...] [goldminer] run this job's data pre-processing on elastic data workers; keys: dw, dw-max, cpus-per-dw, transport, mode (see spank_goldminer(8))" || return 1
    expect_contains "srun --help" "$(srun --help 2>&1)" "--goldminer"
}

# Each bad value is refused before submission with its exact reason.
test_bad_values_are_refused_before_submission() {
    local after value expected out rc
    while IFS='|' read -r value expected; do
        out=$(timeout 30 sbatch --goldminer="$value" -J gm-bad-value -p cpu -o /dev/null --wrap true 2>&1)
        rc=$?
        if [ $rc -eq 0 ]; then
            echo "--goldminer=$value was accepted: $out"
            return 1
        fi
        expect_contains "--goldminer=$value" "$out" "$expected" || return 1
        case $out in
            *"Submitted batch job"*) echo "--goldminer=$value submitted a job"; return 1 ;;
        esac
    done <<'CASES'
dw-max=0|goldminer: dw-max: invalid value '0': expected an integer >= 1
dw=-1|goldminer: dw: invalid value '-1': expected an integer >= 0
dw=x|goldminer: dw: invalid value 'x': expected an integer >= 0
cpus-per-dw=0|goldminer: cpus-per-dw: invalid value '0': expected an integer from 1 to 1024
transport=tcp|goldminer: transport: invalid value 'tcp': expected one of ucx, mpi
mode=auto|goldminer: mode: invalid value 'auto': expected one of elastic, static
bogus=1|goldminer: bogus: unknown key (known: dw, dw-max, cpus-per-dw, transport, mode)
dw=1,dw=2|goldminer: dw: given more than once
dw=5,dw-max=4|goldminer: dw: invalid value '5': more than dw-max (4)
dw-max=17|goldminer: dw-max: invalid value '17': exceeds this cluster's limit of 16 (plugstack.conf max_dw_per_job)
transport=mpi,mode=elastic|goldminer: mode: invalid value 'elastic': transport=mpi runs a fixed set of workers
CASES
    # Counted by name: other tests' jobs may end meanwhile.
    after=$(squeue -h -n gm-bad-value | wc -l)
    expect_eq "jobs of these submissions in the queue" "$after" 0 || return 1
    out=$(timeout 30 srun --goldminer=dw-max=0 -p cpu true 2>&1) && { echo "srun accepted dw-max=0"; return 1; }
    expect_contains "srun --goldminer=dw-max=0" "$out" "goldminer: dw-max: invalid value '0': expected an integer >= 1" || return 1
    out=$(timeout 30 salloc --goldminer=cpus-per-dw=0 -p cpu true 2>&1) && { echo "salloc accepted cpus-per-dw=0"; return 1; }
    expect_contains "salloc --goldminer=cpus-per-dw=0" "$out" "goldminer: cpus-per-dw: invalid value '0': expected an integer from 1 to 1024"
}

# A good value reaches every task: the batch script and each task of a step
# (and each rank but 0 the port reserved for it, GOLDMINER_RANK_LISTEN).
test_settings_reach_every_task() {
    local job out
    job=$(submit_wait --goldminer=dw=2,dw-max=4,cpus-per-dw=3 -p cpu -N2 -n2 -o "$work/env.%j" \
          --wrap 'echo "batch $(env | grep ^GOLDMINER_ | sort | tr "\n" " ")"
                  srun sh -c '\''echo "task $SLURM_PROCID $(env | grep ^GOLDMINER_ | sort | tr "\n" " ")"'\''') || return 1
    # The batch job's companion job of workers (test_companion.sh) adds
    # where its session listens, how its workers prove the job (munge, job
    # J: no secret), the companion job's id and (mode=elastic) how to add a
    # worker; the steps inherit them from the batch script.
    out=$(sed -e 's/GOLDMINER_\(LISTEN\|TRAINER\)=ucx:[^ ]* //g' -e 's/GOLDMINER_AUTH=munge //' -e "s/GOLDMINER_AUTH_JOB=$job //" \
              -e 's/GOLDMINER_CTLD=[0-9.]*:[0-9]* /GOLDMINER_CTLD=ADDR /' \
              -e 's/GOLDMINER_DW_JOB=[0-9]* //' -e 's/GOLDMINER_DW_SBATCH=.* GOLDMINER_MODE=/GOLDMINER_MODE=/' \
              "$work/env.$job")
    # The devcluster runs goldminer-ctld: elastic sessions learn where.
    local want="GOLDMINER_CPUS_PER_DW=3 GOLDMINER_CTLD=ADDR GOLDMINER_CTLD_USER=root GOLDMINER_DW=2 GOLDMINER_DW_MAX=4 GOLDMINER_DW_PARTITION=dw GOLDMINER_MODE=elastic GOLDMINER_MUNGE_SOCKET=$state/munge/munge.socket GOLDMINER_OPTIONS=dw=2,dw-max=4,cpus-per-dw=3,transport=ucx,mode=elastic GOLDMINER_TRANSPORT=ucx "
    expect_eq "batch script env" "$(echo "$out" | sed -n 's/^batch //p')" "$want" || return 1
    expect_eq "task 0 env" "$(echo "$out" | sed -n 's/^task 0 //p')" "$want" || return 1
    # Task 1, a rank other than 0, also gets the port reserved for it
    # within dw_ports (20000-39999) on its node's address.
    expect_eq "task 1 env" "$(echo "$out" | sed -n 's/^task 1 //p' |
        sed 's/GOLDMINER_RANK_LISTEN=ucx:\/\/[0-9.]*:\(2[0-9][0-9][0-9][0-9]\|3[0-9][0-9][0-9][0-9]\) //')" "$want" || {
        echo "$out" | grep "^task 1"; return 1; }
    expect_eq "rank ports" "$(grep -c "GOLDMINER_RANK_LISTEN" "$work/env.$job")" 1 || return 1
    expect_eq "munge for job $job in each" \
        "$(grep "GOLDMINER_AUTH=munge" "$work/env.$job" | grep -c "GOLDMINER_AUTH_JOB=$job ")" 3 || return 1
    expect_eq "secrets in any" "$(grep -c SECRET "$work/env.$job")" 0 || return 1
    expect_eq "companion variables in each" \
        "$(grep -c "GOLDMINER_DW_JOB=[0-9]* GOLDMINER_DW_MAX=4 GOLDMINER_DW_PARTITION=dw GOLDMINER_DW_SBATCH=--parsable --job-name=goldminer-dw.$job .*--ntasks=1 .*GOLDMINER_LISTEN=ucx://[0-9.]*:[0-9]* .*GOLDMINER_TRAINER=ucx://" \
           "$work/env.$job")" 3
}

test_srun_option_reaches_tasks() {
    local out
    out=$(timeout 60 srun --immediate=30 --goldminer=transport=mpi -p cpu -N2 -n2 \
          sh -c 'echo "$GOLDMINER_TRANSPORT $GOLDMINER_MODE"' 2>&1) || { echo "srun: $out"; return 1; }
    expect_eq "srun tasks" "$(echo "$out" | sort | uniq -c | awk '{print $1, $2, $3}')" "2 mpi static"
}

test_job_without_flag_sees_nothing() {
    local job out
    job=$(submit_wait -p cpu -N1 -o "$work/plain.%j" \
          --wrap 'env | grep -c ^GOLDMINER_; srun sh -c "env | grep -c ^GOLDMINER_; true"') || return 1
    out=$(cat "$work/plain.$job" | tr '\n' ' ')
    expect_eq "GOLDMINER_* variables in batch script and task" "$out" "0 0 "
}

# A site setting nobody knows is refused where the plugin loads.
test_unknown_plugstack_key_is_refused() {
    local conf out
    conf=$(mktemp -d "$work/badconf.XXXXXX")
    cp "$state"/etc/* "$conf"/
    sed -i "s|^PlugStackConfig=.*|PlugStackConfig=$conf/plugstack.conf|" "$conf/slurm.conf"
    sed -i 's|$| dw_partion=cpu|' "$conf/plugstack.conf"
    out=$(SLURM_CONF="$conf/slurm.conf" timeout 30 sbatch --goldminer -p cpu -o /dev/null --wrap true 2>&1) && {
        echo "sbatch accepted a plugstack.conf with an unknown key: $out"
        return 1
    }
    expect_contains "sbatch with bad plugstack.conf" "$out" \
        "goldminer: plugstack.conf: dw_partion: unknown key (known: dw_partition, dw_qos, max_dw_per_job, max_cpus_per_dw, dw_command, dw_network, dw_ports, port_registry, firewall, firewall_admit, nft, ctld, ctld_user, munge_socket, slurm_bindir, slurm_command_timeout)"
}
