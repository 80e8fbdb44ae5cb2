#!/bin/bash
# Benchmark (b) of issue 4: goldminer-consume with k local data workers
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
#   GNU_TIME=/usr/bin/time (GNU time, for the CPU seconds)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bench=scaling.sh
. "$here/common.sh"
build=$(cd "${1:-$here/../../build}" && pwd)
K=${K:-"1 2 4"}
ROWS=${ROWS:-100000}
REPEAT=${REPEAT:-5}
EPOCHS=${EPOCHS:-3}
BATCH=${BATCH:-4096}
PYTHON=${PYTHON:-/usr/bin/python3}
PROGRAMS_DIR=${PROGRAMS_DIR:-}
GNU_TIME=${GNU_TIME:-/usr/bin/time}
export UCX_NET_DEVICES=${UCX_NET_DEVICES:-lo}

require_built goldminer-consume goldminer-dw bench/inprocess_bench
require_gnu_time
if [ -n "$PROGRAMS_DIR" ]; then
  [ -f "$PROGRAMS_DIR/criteo.pt" ] || { echo "scaling.sh: PROGRAMS_DIR: $PROGRAMS_DIR/criteo.pt missing" >&2; exit 1; }
else
  "$PYTHON" -c 'import torch' 2>/dev/null || { echo "scaling.sh: skipped: $PYTHON cannot import torch (needed to script the worker program)"; exit 0; }
fi

tmp=$(mktemp -d /tmp/gm-scaling.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
make_criteo_and_programs criteo.pt
input="criteo-tsv:$tmp/criteo.tsv"
echo "scaling.sh: $((ROWS * REPEAT)) generated Criteo rows ($(du -m "$tmp/criteo.tsv" | cut -f1) MB), batch $BATCH, $EPOCHS epochs (first not counted), $(nproc) cores"

timed "$tmp/inproc.time" "$build/bench/inprocess_bench" --input "$input" --program "$tmp/criteo.pt" \
  --batch-size "$BATCH" --epochs "$EPOCHS" > "$tmp/inproc.json"
for k in $K; do
  timed "$tmp/k$k.time" "$build/goldminer-consume" --input "$input" --program "$tmp/criteo.pt" \
    --batch-size "$BATCH" --epochs "$EPOCHS" --workers "$k" --json > "$tmp/k$k.json" 2> "$tmp/k$k.err" ||
    { echo "scaling.sh: goldminer-consume --workers $k failed:" >&2; cat "$tmp/k$k.err" >&2; exit 1; }
done

"$PYTHON" - "$tmp" "$K" "$(nproc)" <<'PY'
import json, sys
tmp, ks, cores = sys.argv[1], [int(k) for k in sys.argv[2].split()], int(sys.argv[3])

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
