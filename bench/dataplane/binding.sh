#!/bin/bash
# Thread-binding benchmark: goldminer-dw's threads bound one a core
# (--bind cores, hwloc; the default) against left to the kernel (--bind
# none), same input, program, workers and threads, the two runs alternating
# ROUNDS times. Prints samples/s of each round and the ratio of the means.
#
# usage: bench/dataplane/binding.sh [BUILDDIR]   (default: ./build)
# environment: WORKERS=1, THREADS=2 (threads a worker), ROWS=100000,
#   REPEAT=3, EPOCHS=3 (the first is warm-up and not counted), BATCH=4096,
#   ROUNDS=3, PYTHON=/usr/bin/python3, PROGRAMS_DIR (as scaling.sh)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/common.sh" "$@"
WORKERS=${WORKERS:-1}
THREADS=${THREADS:-2}
ROWS=${ROWS:-100000}
REPEAT=${REPEAT:-3}
EPOCHS=${EPOCHS:-3}
BATCH=${BATCH:-4096}
ROUNDS=${ROUNDS:-3}

require_built goldminer-consume goldminer-dw
[ -n "$PROGRAMS_DIR" ] || skip_without_torch "needed to script the worker program"
tmp=$(mktemp -d /tmp/gm-binding.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
make_criteo_and_programs criteo.pt
echo "binding.sh: $((ROWS * REPEAT)) Criteo rows, batch $BATCH, $WORKERS worker(s) x $THREADS threads, $EPOCHS epochs" \
     "(first not counted), $ROUNDS rounds, $(nproc) cores:" \
     "$(GOLDMINER_SECRET=x "$build/goldminer-dw" --trainer ucx://127.0.0.1:1 --threads "$THREADS" --connect-timeout 0 -v 2>&1 |
        sed -n 's/^goldminer-dw: \(.* threads on .*\)/\1/p' | head -1)"

for ((r = 1; r <= ROUNDS; r++)); do
  for mode in none cores; do
    GOLDMINER_DW_BIND=$mode "$build/goldminer-consume" --input "criteo-tsv:$tmp/criteo.tsv" --program "$tmp/criteo.pt" \
      --batch-size "$BATCH" --epochs "$EPOCHS" --workers "$WORKERS" --threads "$THREADS" --json \
      > "$tmp/$mode.$r.json" 2> "$tmp/$mode.$r.err" ||
      { echo "binding.sh: --bind $mode failed:" >&2; cat "$tmp/$mode.$r.err" >&2; exit 1; }
  done
done

"$PYTHON" - "$tmp" "$ROUNDS" <<'PY'
import json, sys
tmp, rounds = sys.argv[1], int(sys.argv[2])

def rate(name):
    epochs = [json.loads(l) for l in open(f"{tmp}/{name}.json") if l.startswith("{")][1:]
    return sum(e["samples"] for e in epochs) / sum(e["seconds"] for e in epochs)

means = {}
for mode in ("none", "cores"):
    rates = [rate(f"{mode}.{r}") for r in range(1, rounds + 1)]
    means[mode] = sum(rates) / len(rates)
    print(f"--bind {mode:<6} samples/s by round: " + " ".join(f"{x:.0f}" for x in rates) + f"  mean {means[mode]:.0f}")
print(f"ratio bound / unbound: {means['cores'] / means['none']:.3f}")
print("assumptions: the trainer (goldminer-consume) and the workers share these cores with each other and with\n"
      "  other users' processes; unbound threads may run on any of them, bound ones only on their core. The\n"
      "  program's intra-op threads are the worker's cores over its threads in both runs.")
PY
