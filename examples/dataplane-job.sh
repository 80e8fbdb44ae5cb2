#!/bin/bash
# A heterogeneous Slurm job whose data pre-processing runs on CPU-only nodes:
# component 0 (one GPU node) runs the trainer, here goldminer-consume, a
# trainer with no model that checks every sample arrives once per epoch;
# component 1 (CPU nodes) runs one goldminer-dw data worker per task, which
# connects to the trainer over UCX, reads and transforms its share of the
# input and streams the batches back. Until the SPANK plugin starts data
# workers itself (docs/ARCHITECTURE.md, "Planned"), a job script does it
# like this. A training script takes goldminer-consume's place (Python:
# goldminer.Session(..., listen="ucx://HOST:0")).
#
#   sbatch examples/dataplane-job.sh
#
# Settings (environment, all optional):
#   GM_INPUT         FORMAT:PATH[,PATH...]   (text:/usr/share/common-licenses/GPL-3)
#   GM_PROGRAM       worker program, a TorchScript .pt   (none: decoded batches)
#   GM_EPOCHS        epochs (2)      GM_BATCH   samples per batch (64)
#   GM_TRAINER_HOST  address the trainer listens on (the first address of its
#                    node, `hostname -I`)
#   GM_BIN           directory of goldminer-consume and goldminer-dw (PATH)
#
#SBATCH --job-name=gm-dataplane
#SBATCH -p gpu --gpus=1 -N1 -n1 -c1
#SBATCH hetjob
#SBATCH -p cpu -N2 -n2 -c1
set -u
bin=${GM_BIN:+$GM_BIN/}
input=${GM_INPUT:-text:/usr/share/common-licenses/GPL-3}

# The job secret reaches every step through the job's environment (never a
# command line); workers without it are refused.
GOLDMINER_SECRET=$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')
export GOLDMINER_SECRET

host=${GM_TRAINER_HOST:-$(srun --het-group=0 hostname -I | awk '{ print $1 }')}
[ -n "$host" ] || { echo "dataplane-job: no address for the trainer's node" >&2; exit 1; }

# The trainer: port 0 takes a free port, which it names on stderr.
log=$(mktemp /tmp/gm-trainer.XXXXXX)
trap 'rm -f "$log"' EXIT
srun --het-group=0 "${bin}goldminer-consume" --input "$input" ${GM_PROGRAM:+--program "$GM_PROGRAM"} \
    --epochs "${GM_EPOCHS:-2}" --batch-size "${GM_BATCH:-64}" --workers 0 \
    --min-workers "$SLURM_NTASKS_HET_GROUP_1" --listen "ucx://$host:0" --json -v 2> >(tee "$log" >&2) &
trainer=$!
address=
for _ in $(seq 600); do
    address=$(sed -n 's/^goldminer-consume: listening on //p' "$log")
    [ -n "$address" ] || ! kill -0 "$trainer" 2>/dev/null && break
    sleep 0.1
done
[ -n "$address" ] || { echo "dataplane-job: the trainer did not start" >&2; wait "$trainer"; exit 1; }

# The data workers: one per task of component 1. When the trainer is done it
# drains them and they exit 0.
srun --het-group=1 "${bin}goldminer-dw" --trainer "$address" -v &
workers=$!

wait "$trainer"; trainer_rc=$?
wait "$workers"; workers_rc=$?
echo "trainer exit $trainer_rc, workers exit $workers_rc"
[ "$trainer_rc" -eq 0 ] && [ "$workers_rc" -eq 0 ]
