#!/bin/bash
# P7: how long a starving trainer waits for a new data worker to deliver,
# measured on a devcluster of its own, in one run, for three settings:
#   ctld-1s    goldminer-ctld's targets, reports every 1 s
#   ctld-5s    goldminer-ctld's targets, reports every 5 s (the default)
#   self-1s    no goldminer-ctld: the session's autosizer (patience 3), 1 s
#
# Each run is one elastic job (dw=2, dw-max=2, 2 CPUs per worker) whose
# trainer (goldminer-consume) takes batches as fast as they come, from
# workers that run a CPU-bound program (tests/integration/busy_program.py,
# ~19 ms per batch of 100), so it needs both. When the first epoch ends the
# job script kills one worker (SIGKILL, as a node loss would): from then on
# the trainer starves. The latency is from the kill to the first batch of
# the worker that replaces it (as the session logs it, timestamped when
# the job script, a POSIX sh, reads the trainer's output), split into: until the session
# started the new worker (sbatch), until it connected (Slurm scheduling
# and launch, goldminer-dw and libtorch start), until its first batch.
#
# Usage: bench/worker_latency.sh BUILD_DIR [RUNS]   (root; about 20 s a run)
set -eu
build=$(cd "${1:?usage: $0 BUILD_DIR [RUNS]}" && pwd)
runs=${2:-8}
top=$(cd "$(dirname "$0")/.." && pwd)
dir=$(mktemp -d /var/tmp/goldminer-p7.XXXXXX)
dc="$build/goldminer-devcluster"
trap 'timeout 60 "$dc" down --dir "$dir" >/dev/null 2>&1 || true; [ -n "${KEEP:-}" ] || rm -rf "$dir"' EXIT
timeout 120 "$dc" up --dir "$dir" --port-base 22817 --plugin-dir "$build/.libs" \
    --plugstack-args "dw_command=$build/goldminer-dw" >/dev/null
export SLURM_CONF=$dir/etc/slurm.conf
cd "$dir"  # job output (and the workers' goldminer-dw-J.out) lands here
if grep -q '^network=netns' "$dir/run/cluster"; then unset UCX_NET_DEVICES; else export UCX_NET_DEVICES=lo; fi
chmod 755 "$dir"
/usr/bin/python3 "$top/tests/integration/busy_program.py" "$dir/busy.pt" 200
seq 1 20000 | sed 's/^/sample /' >"$dir/input.txt"

# run SETTING I: one job; prints "total to_start to_connect to_batch" (s).
run() {
    local setting=$1 i=$2 interval=${1##*-} unset_ctld=''
    interval=${interval%s}
    [ "${setting%%-*}" = ctld ] || unset_ctld='unset GOLDMINER_CTLD;'
    OPENBLAS_NUM_THREADS=1 sbatch --parsable --wait --time=3 -p gpu --gpus=1 \
        --goldminer=dw=2,dw-max=2,cpus-per-dw=2 -o "$dir/$setting.$i.out" --wrap "$unset_ctld
        export GOLDMINER_AUTOSCALE_INTERVAL=$interval
        $build/goldminer-consume --input text:$dir/input.txt --program $dir/busy.pt --batch-size 100 \
          --epochs 8 --workers 0 --json -v 2>&1 | while IFS= read -r line; do
            printf '%s %s\n' \"\$(date +%s.%N)\" \"\$line\"
            case \$line in
              *' delivered its first batch '*) id=\${line#*worker }; id=\${id%% *} ;;
              '{\"epoch\": 0,'*) kill -KILL \${id##*:} && printf '%s KILLED %s\n' \"\$(date +%s.%N)\" \"\$id\" ;;
            esac
          done" >/dev/null
    awk '
      / KILLED / { tk = $1 }
      tk && / more data workers/ && !ts { ts = $1 }
      tk && / joined$/ && !tj { tj = $1 }
      tk && / delivered its first batch / && !t3 { t3 = $1 }
      END {
        if (!tk || !ts || !tj || !t3) { print "incomplete"; exit }
        printf "%.3f %.3f %.3f %.3f\n", t3 - tk, ts - tk, tj - ts, t3 - tj
      }' "$dir/$setting.$i.out"
}

printf '%-8s %5s %8s %8s %8s   %s\n' setting runs p50_s p95_s max_s "mean: to start | to connect | to first batch (s)"
for setting in ctld-1s ctld-5s self-1s; do
    : >"$dir/$setting.txt"
    for i in $(seq "$runs"); do run "$setting" "$i" >>"$dir/$setting.txt"; done
    sort -n "$dir/$setting.txt" | awk -v s="$setting" '
      $1 == "incomplete" { bad++; next }
      { v[n++] = $1; a += $2; b += $3; c += $4 }
      END {
        if (n == 0) { printf "%-8s no complete run (%d incomplete)\n", s, bad; exit }
        p95 = v[int(0.95 * (n - 1) + 0.999)]
        printf "%-8s %5d %8.2f %8.2f %8.2f   %.2f | %.2f | %.2f%s\n", s, n, v[int((n - 1) / 2)], p95, v[n - 1],
               a / n, b / n, c / n, bad ? sprintf("  (%d incomplete)", bad) : ""
      }'
done
