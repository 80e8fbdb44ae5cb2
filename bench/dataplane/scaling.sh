#!/bin/bash
# Worker scaling benchmark: goldminer-consume with k local data workers
# (goldminer-dw over the ucx transport on lo) against the same reader and
# worker program run in one process with no transport (bench/inprocess_bench).
# Input: a seeded Criteo-like TSV generated into a temp dir; worker program:
# DLRM-style preprocessing scripted with TorchScript (make_programs.py).
# Prints samples/s of each and the speedups, measured in this one run.
#
# usage: bench/dataplane/scaling.sh [BUILDDIR]   (default: ./build)
# environment: K="1 2 4" (worker counts), ROWS=100000 (generated rows; the
#   file is that block repeated REPEAT=5 times), EPOCHS=3 (the first is
#   warm-up and not counted), BATCH=4096, PYTHON=/usr/bin/python3,
#   PROGRAMS_DIR (a folder with a ready criteo.pt: copied instead of scripting
#   it with $PYTHON, whose torch then need not match the binaries' libtorch),
#   GNU_TIME=/usr/bin/time (GNU time, for the CPU seconds), PERF=perf (where
#   it counts instructions and cycles: instructions per sample and IPC of
#   each run, start-up included)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/common.sh" "$@"
K=${K:-"1 2 4"}
ROWS=${ROWS:-100000}
REPEAT=${REPEAT:-5}
EPOCHS=${EPOCHS:-3}
BATCH=${BATCH:-4096}

require_built goldminer-consume goldminer-dw bench/inprocess_bench
require_gnu_time
if [ -n "$PROGRAMS_DIR" ]; then
  [ -f "$PROGRAMS_DIR/criteo.pt" ] || { echo "scaling.sh: PROGRAMS_DIR: $PROGRAMS_DIR/criteo.pt missing" >&2; exit 1; }
else
  skip_without_torch "needed to script the worker program"
fi

tmp=$(mktemp -d /tmp/gm-scaling.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
make_criteo_and_programs criteo.pt
input="criteo-tsv:$tmp/criteo.tsv"
echo "scaling.sh: $((ROWS * REPEAT)) generated Criteo rows ($(du -m "$tmp/criteo.tsv" | cut -f1) MB), batch $BATCH, $EPOCHS epochs (first not counted), $(nproc) cores"

# perf, where the machine lets it count: instructions and cycles of each
# run (all its processes) tell more work per sample from slower cores
# (hyperthread siblings, lower clocks, caches) when CPU seconds rise with k.
PERF=${PERF:-perf}
perf_ok=0
if command -v "$PERF" > /dev/null && "$PERF" stat -x, -e instructions,cycles -o "$tmp/perf.probe" true 2> /dev/null &&
   grep -qE '^[0-9]+,,instructions' "$tmp/perf.probe"; then
  perf_ok=1
fi
counted() {  # counted NAME COMMAND...: timed, and counted by perf where it can
  if [ "$perf_ok" = 1 ]; then
    timed "$tmp/$1.time" "$PERF" stat -x, -e instructions,cycles -o "$tmp/$1.perf" "${@:2}"
  else
    timed "$tmp/$1.time" "${@:2}"
  fi
}

counted inproc "$build/bench/inprocess_bench" --input "$input" --program "$tmp/criteo.pt" \
  --batch-size "$BATCH" --epochs "$EPOCHS" > "$tmp/inproc.json"
for k in $K; do
  counted "k$k" "$build/goldminer-consume" --input "$input" --program "$tmp/criteo.pt" \
    --batch-size "$BATCH" --epochs "$EPOCHS" --workers "$k" --json > "$tmp/k$k.json" 2> "$tmp/k$k.err" ||
    { echo "scaling.sh: goldminer-consume --workers $k failed:" >&2; cat "$tmp/k$k.err" >&2; exit 1; }
done

"$PYTHON" - "$tmp" "$K" "$(nproc)" "$perf_ok" "$PERF" <<'PY'
import json, sys
tmp, ks, cores = sys.argv[1], [int(k) for k in sys.argv[2].split()], int(sys.argv[3])
perf = sys.argv[4] == "1"

def counts(name):
    c = {}
    for line in open(f"{tmp}/{name}.perf"):
        f = line.strip().split(",")
        if len(f) > 2 and f[0].isdigit():
            c[f[2].split(":")[0]] = int(f[0])
    return c

def rate(name):
    epochs = [json.loads(l) for l in open(f"{tmp}/{name}.json") if l.startswith("{")]
    counted = epochs[1:] or epochs
    samples = sum(e["samples"] for e in counted)
    wait = [e.get("trainer_wait_fraction") for e in counted]
    total = sum(e["samples"] for e in epochs)
    return samples / sum(e["seconds"] for e in counted), total, wait

def cpu(name):
    f = open(f"{tmp}/{name}.time").read().split()
    i = f.index("cpu")
    return float(f[i + 1]) + float(f[i + 2])

base, base_total, _ = rate("inproc")
print(f"\n{'run':<24}{'samples/s':>12}{'x in-process':>14}{'x k=1':>8}{'cpu s/M samples':>17}{'trainer wait':>14}")
print(f"{'in-process (1 thread)':<24}{base:>12.0f}{1.0:>14.2f}{'':>8}{cpu('inproc') / base_total * 1e6:>17.2f}{'-':>14}")
one = None
rows = []
for k in ks:
    r, total, wait = rate(f"k{k}")
    one = one or r
    w = sum(wait) / len(wait)
    rows.append((k, r, w))
    print(f"{'consume, ' + str(k) + ' worker' + ('s' if k > 1 else ''):<24}{r:>12.0f}{r / base:>14.2f}"
          f"{r / one:>8.2f}{cpu(f'k{k}') / total * 1e6:>17.2f}{w:>14.3f}")
if perf:
    print(f"\n{'run (perf stat, all processes)':<32}{'instructions/sample':>21}{'IPC':>7}")
    for name, label in [("inproc", "in-process")] + [(f"k{k}", f"k={k}") for k in ks]:
        c = counts(name)
        if "instructions" in c and c.get("cycles"):
            print(f"{label:<32}{c['instructions'] / rate(name)[1]:>21.0f}{c['instructions'] / c['cycles']:>7.2f}")
        else:
            print(f"{label:<32}{'not counted':>21}")
else:
    print(f"\nperf: {sys.argv[5]} cannot count instructions and cycles here (missing, or no PMU, or"
          " perf_event_paranoid): no instructions or IPC per run")
print("\nsummary")
for k, r, w in rows:
    print(f"  k={k}: {r / base:.2f}x in-process, {r / one:.2f}x one worker (linear would be {k}x)")
print(f"assumptions: {cores} cores shared with other users' jobs; trainer (goldminer-consume), k goldminer-dw\n"
      "  processes and their UCX progress all run on these cores, so beyond k=1 workers compete with\n"
      "  each other and with the trainer: the curve cannot be linear past the core count. In-process is\n"
      "  one thread doing read + program with no transport, no copy into a send buffer and no trainer.\n"
      "  cpu s/M samples = user+system CPU of all processes (incl. start-up and the warm-up epoch) per\n"
      "  million samples delivered. trainer wait = fraction of next() time the trainer waited for data\n"
      "  (near 1: workers, not the trainer, are the bottleneck).")
PY
