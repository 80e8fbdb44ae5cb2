#!/bin/bash
# Benchmark (i): CPU instructions per sample of a goldminer-dw worker and of
# the trainer (goldminer-consume) against the same reader and worker program
# in one process (bench/inprocess_bench), counted by valgrind's callgrind:
# instruction counts repeat from run to run on a shared machine, where CPU
# seconds do not.
#
# Method: each program runs twice, over EPOCHS_A and EPOCHS_B epochs of the
# same input; per sample = (instructions of the longer run - those of the
# shorter) / (the samples the longer one added). Start-up (loading libtorch,
# UCX, the program, TorchScript's first profiled calls) is in both runs and
# cancels out: what is left is what every further sample costs.
#   in-process   inprocess_bench under callgrind (1 intra-op thread)
#   worker, k=K  K goldminer-dw with the arguments goldminer-consume
#                --workers K gives them (--threads 1 --intra-op-threads 1),
#                each under callgrind, joining a native goldminer-consume
#                that waits for them. Their instructions summed.
#   trainer      goldminer-consume under callgrind with one native worker:
#                receiving, the exactly-once checks, the queue. It is the
#                slow side then, so its transport rarely waits (a waiting
#                trainer's progress loop would count instructions by time).
# Prints instructions per sample of each and the ratios to in-process.
#
# usage: bench/dataplane/worker_cost.sh [BUILDDIR]   (default: ./build)
# environment: K="1 2" (worker counts), ROWS=20000 (generated Criteo rows,
#   one epoch), EPOCHS_A=1, EPOCHS_B=3, BATCH=4096, PYTHON=/usr/bin/python3,
#   PROGRAMS_DIR (a folder with a ready criteo.pt), VALGRIND=valgrind,
#   JOBS=2 (runs at once; each is one process or K under callgrind)
# Takes about 10 minutes on 2 shared cores (each run loads libtorch under
# callgrind, about 90 s of it).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/common.sh" "$@"
K=${K:-"1 2"}
ROWS=${ROWS:-20000}
# shellcheck disable=SC2034  # make_criteo_and_programs (common.sh) reads it
REPEAT=1
EPOCHS_A=${EPOCHS_A:-1}
EPOCHS_B=${EPOCHS_B:-3}
BATCH=${BATCH:-4096}
VALGRIND=${VALGRIND:-valgrind}
JOBS=${JOBS:-2}

require_built goldminer-consume goldminer-dw bench/inprocess_bench
command -v "$VALGRIND" > /dev/null || { echo "$bench: $VALGRIND missing: apt install valgrind (or set VALGRIND)" >&2; exit 1; }
[ "$EPOCHS_B" -gt "$EPOCHS_A" ] || { echo "$bench: EPOCHS_B ($EPOCHS_B) must be more than EPOCHS_A ($EPOCHS_A)" >&2; exit 1; }
[ -n "$PROGRAMS_DIR" ] || skip_without_torch "needed to script the worker program"

tmp=$(mktemp -d /tmp/gm-worker-cost.XXXXXX)
# Kept when something failed, to look into.
trap 'if [ $? = 0 ]; then rm -rf "$tmp"; else echo "$bench: its files are kept in $tmp" >&2; fi' EXIT
make_criteo_and_programs criteo.pt
input="criteo-tsv:$tmp/criteo.tsv"
# cg OUT COMMAND...: COMMAND under callgrind, its files OUT.PID.log and OUT.PID.out.
cg() { "$VALGRIND" --tool=callgrind --log-file="$1.%p.log" --callgrind-out-file="$1.%p.out" "${@:2}"; }

# consume EPOCHS WORKERS [ARGUMENTS...]; PREFIX (words): what runs it.
consume() {
  # shellcheck disable=SC2086
  ${PREFIX:-} "$build/goldminer-consume" --input "$input" --program "$tmp/criteo.pt" --batch-size "$BATCH" \
    --epochs "$1" --workers "$2" --json "${@:3}"
}

# K workers under callgrind with the arguments goldminer-consume gives the
# workers it starts (tw_lib/session/worker_processes.cc), joining a
# goldminer-consume that starts none; they leave when it ends (a worker it
# started itself would be stopped by a signal, and callgrind writes nothing
# for a process a signal ends).
workers() {  # workers EPOCHS K OUT
  local i addr pid pids=()
  GOLDMINER_SECRET=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')
  export GOLDMINER_SECRET
  consume "$1" 0 --listen ucx://127.0.0.1:0 > "$3.json" 2> "$3.err" &
  pid=$!
  for ((i = 0; i < 600; i++)); do
    addr=$(sed -n 's/.*listening on //p' "$3.err" 2>/dev/null)
    [ -z "$addr" ] || break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  [ -n "$addr" ] || { kill "$pid" 2>/dev/null; echo "$bench: goldminer-consume did not listen" >&2; return 1; }
  for ((i = 0; i < $2; i++)); do
    cg "$3" "$build/goldminer-dw" --trainer "$addr" \
      --threads 1 --intra-op-threads 1 2> "$3.dw$i.err" &
    pids+=($!)
  done
  wait "$pid" || return 1
  for i in "${pids[@]}"; do wait "$i" || return 1; done
}

# One measurement: run NAME EPOCHS; its files are $tmp/NAME.E.*.
run() {
  local name=$1 e=$2 out=$tmp/$1.$2
  case $name in
    inproc)
      cg "$out" "$build/bench/inprocess_bench" \
        --input "$input" --program "$tmp/criteo.pt" --batch-size "$BATCH" --epochs "$e" > "$out.json" ;;
    trainer)
      PREFIX="cg $out" consume "$e" 1 > "$out.json" 2> "$out.err" ;;
    worker*) workers "$e" "${name#worker}" "$out" ;;
  esac || { echo "$bench: $name over $e epochs failed:" >&2; cat "$out.err" "$out".*.log 2>/dev/null | tail -20 >&2; return 1; }
}

names="inproc"
for k in $K; do names="$names worker$k"; done
names="$names trainer"
t0=$SECONDS
echo "$bench: $ROWS generated Criteo rows, batch $BATCH, $EPOCHS_A and $EPOCHS_B epochs under callgrind, $JOBS at once"
export -f run consume cg workers
export tmp build input BATCH bench VALGRIND
# shellcheck disable=SC2016  # $0 and $1 are those of the bash xargs starts
for n in $names; do for e in "$EPOCHS_A" "$EPOCHS_B"; do echo "$n $e"; done; done |
  xargs -P "$JOBS" -L 1 bash -c 'run "$0" "$1"'
echo "$bench: runs took $((SECONDS - t0)) s"

"$PYTHON" - "$tmp" "$names" "$EPOCHS_A" "$EPOCHS_B" <<'PY'
import glob, json, re, sys
tmp, names, ea, eb = sys.argv[1], sys.argv[2].split(), sys.argv[3], sys.argv[4]

def instructions(name, e):
    total = 0
    files = glob.glob(f"{tmp}/{name}.{e}.*.out")
    if not files:
        sys.exit(f"worker_cost.sh: no callgrind output for {name} over {e} epochs")
    counted = 0
    for f in files:
        # The trainer's fork for its worker execs goldminer-dw natively:
        # that child's file has no counts.
        m = re.search(r"^(?:summary|totals): (\d+)", open(f).read(), re.M)
        if m:
            total += int(m.group(1))
            counted += 1
    if not counted:
        sys.exit(f"worker_cost.sh: no instruction counts in {files}")
    return total, counted

def samples(name, e):
    epochs = [json.loads(l) for l in open(f"{tmp}/{name}.{e}.json") if l.startswith("{")]
    if any(x.get("duplicates", 0) or x.get("missing", 0) for x in epochs):
        sys.exit(f"worker_cost.sh: {name} over {e} epochs lost or duplicated samples")
    return sum(x["samples"] for x in epochs)

per = {}
for n in names:
    (ia, pa), (ib, pb) = instructions(n, ea), instructions(n, eb)
    added = samples(n, eb) - samples(n, ea)
    per[n] = ((ib - ia) / added, pb)
base = per["inproc"][0]
print(f"\n{'run':<28}{'processes':>10}{'instructions/sample':>21}{'x in-process':>14}")
for n in names:
    label = {"inproc": "in-process (1 thread)", "trainer": "trainer (goldminer-consume)"}.get(n, "")
    if n.startswith("worker"):
        label = f"worker, k={n[6:]} (all workers)"
    print(f"{label:<28}{per[n][1]:>10}{per[n][0]:>21.0f}{per[n][0] / base:>14.3f}")
worker1 = per.get("worker1", (None,))[0]
if worker1 is not None:
    print(f"\nsummary\n  one worker: {worker1 / base:.3f}x the instructions per sample of in-process")
    print(f"  one worker + its trainer: {(worker1 + per['trainer'][0]) / base:.3f}x")
    for n in names:
        if n.startswith("worker") and n != "worker1":
            print(f"  k={n[6:]}: {per[n][0] / worker1:.3f}x one worker's per sample")
print("assumptions: instructions, not time: cache misses, memory bandwidth, lock and spin waits\n"
      "  that grow with cores in use are not counted (they need a machine with the cores). The\n"
      "  epochs beyond the first cost the same each (same input, same program, steady state).")
PY
