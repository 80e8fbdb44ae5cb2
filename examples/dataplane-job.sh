#!/bin/bash
# A heterogeneous Slurm job whose data pre-processing runs on CPU-only nodes:
# component 0 (one GPU node) runs the trainer; component 1 (CPU nodes) runs
# one goldminer-dw data worker per task, which connects to the trainer over
# UCX, reads and transforms its share of the input and streams the batches
# back. This script starts those workers by hand, which a job without
# spank_goldminer.so does like this. With `sbatch --goldminer` the plugin
# starts them by itself, as a step of the CPU-only component (and without
# one, as a companion job): spank_goldminer(8); then the script is only
# its trainer line.
#
#   sbatch examples/dataplane-job.sh [TRAINER [ARGS...]]
#
# TRAINER is any program whose goldminer session listens on
# $GOLDMINER_LISTEN with the secret $GOLDMINER_SECRET, as goldminer.Session()
# and goldminer::Session do by default; e.g.
#   sbatch examples/dataplane-job.sh python3 examples/train_dlrm.py \
#       --input criteo-tsv:day_0.tsv --min-workers 2
# Without one, the trainer is goldminer-consume (a trainer with no model that
# checks every sample arrives once per epoch) on $GM_INPUT.
#
# Settings (environment, all optional):
#   GM_INPUT         goldminer-consume's input, FORMAT:PATH[,PATH...]
#                    (text:/usr/share/common-licenses/GPL-3)
#   GM_EPOCHS        its epochs (2)     GM_BATCH   its batch size (64)
#   GM_TRAINER_HOST  address the trainer listens on (the first address of its
#                    node, `hostname -I`)
#   GM_PORT          port it listens on (20000 + job id modulo 20000; if
#                    another process holds it, the trainer says so: set one)
#   GM_BIN           directory of goldminer-consume and goldminer-dw (PATH)
#
#SBATCH --job-name=gm-dataplane
#SBATCH -p gpu --gpus=1 -N1 -n1 -c1
#SBATCH hetjob
#SBATCH -p cpu -N2 -n2 -c1
set -u
bin=${GM_BIN:+$GM_BIN/}

# The job secret reaches every step through the job's environment (never a
# command line); workers without it are refused.
GOLDMINER_SECRET=$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')
export GOLDMINER_SECRET

host=${GM_TRAINER_HOST:-$(srun --het-group=0 hostname -I | awk '{ print $1 }')}
[ -n "$host" ] || { echo "dataplane-job: no address for the trainer's node" >&2; exit 1; }
address=ucx://$host:${GM_PORT:-$((20000 + SLURM_JOB_ID % 20000))}
# The trainer's session listens there; the workers connect there.
export GOLDMINER_LISTEN=$address GOLDMINER_TRAINER=$address

if [ $# -eq 0 ]; then
    set -- "${bin}goldminer-consume" --input "${GM_INPUT:-text:/usr/share/common-licenses/GPL-3}" \
        --epochs "${GM_EPOCHS:-2}" --batch-size "${GM_BATCH:-64}" --workers 0 --listen "$address" \
        --min-workers "$SLURM_NTASKS_HET_GROUP_1" --json -v
fi
srun --het-group=0 "$@" &
trainer=$!

# The data workers, one per task of component 1. Each retries until the
# trainer listens (it may take minutes to set up its model); when training
# ends the trainer drains them and they exit 0.
srun --het-group=1 "${bin}goldminer-dw" --connect-timeout 600 -v &
workers=$!

wait "$trainer"; trainer_rc=$?
if [ "$trainer_rc" -ne 0 ]; then
    # No trainer to drain them: end the workers' step.
    kill -TERM "$workers" 2>/dev/null
fi
wait "$workers"; workers_rc=$?
echo "trainer exit $trainer_rc, workers exit $workers_rc"
[ "$trainer_rc" -eq 0 ] && [ "$workers_rc" -eq 0 ]
