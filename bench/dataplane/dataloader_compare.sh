#!/bin/bash
# DataLoader benchmark: goldminer-consume with k data workers against a
# PyTorch DataLoader with num_workers = k (dataloader_compare.py), same batch
# size, same files, same TorchScript transforms (make_programs.py):
#   criteo  a seeded Criteo-like TSV (gen_criteo.py), DLRM-style preprocessing
#   jpeg    ../shared/data/datasets/images_jpeg (268 real JPEGs), decode +
#           resize to 224x224 + normalize; skipped, with the reason, if absent
# Figure of merit: samples per CPU-second (user + system of the trainer or
# main process and every worker it waited for), i.e. samples/s per core;
# goal >= 3x. Twice: over the whole run (start-up included), and "steady":
# the epochs after the first against the CPU time they added (start-up and
# warm-up excluded, as in a long training job). Also prints samples/s
# (wall, epochs after the first). All measured in this one run. For JPEG
# also the ceiling on equal work: the DataLoader's CPU per image against
# goldminer's reader alone (bench/jpeg_decode_bench, when built), which the
# ratio cannot pass whatever the program and the data plane cost.
#
# JPEG_DECODE=scale:S, crop:S or resized-crop:S turns on the jpeg reader's
# decode options: goldminer-consume --jpeg-decode; with crop:S and
# resized-crop:S the DataLoader crops alike (torchvision's RandomResizedCrop
# box of the decoded image, then the same one(): resize and normalize), with
# scale:S it decodes in full, as with JPEG_DECODE=full. With
# resized-crop:224 goldminer's reader resizes and jpeg.pt only normalizes.
#
# usage: bench/dataplane/dataloader_compare.sh [BUILDDIR]   (default: ./build)
# environment: K="1 2", DATASETS="criteo jpeg", JPEG_DECODE=full,
#   ROWS=100000 (generated Criteo rows, REPEAT=2 times),
#   CRITEO_EPOCHS=2, CRITEO_BATCH=4096, JPEG_EPOCHS=4, JPEG_BATCH=32,
#   SHARED_DATA=../shared/data (relative to the source tree), PYTHON=/usr/bin/python3,
#   PROGRAMS_DIR (a folder with a ready criteo.pt and jpeg.pt: copied instead of
#   scripting them with $PYTHON, e.g. when its torch is newer than the binaries'
#   libtorch), GNU_TIME=/usr/bin/time (GNU time, for the CPU seconds)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/common.sh" "$@"
src=$(cd "$here/../.." && pwd)
K=${K:-"1 2"}
DATASETS=${DATASETS:-"criteo jpeg"}
JPEG_DECODE=${JPEG_DECODE:-full}
ROWS=${ROWS:-100000}
REPEAT=${REPEAT:-2}
CRITEO_EPOCHS=${CRITEO_EPOCHS:-2}
CRITEO_BATCH=${CRITEO_BATCH:-4096}
JPEG_EPOCHS=${JPEG_EPOCHS:-4}
JPEG_BATCH=${JPEG_BATCH:-32}
SHARED_DATA=${SHARED_DATA:-$src/../shared/data}

require_built goldminer-consume goldminer-dw
skip_without_torch "Debian: apt install python3-torch"
require_gnu_time
for p in criteo.pt jpeg.pt; do
  [ -z "$PROGRAMS_DIR" ] || [ -f "$PROGRAMS_DIR/$p" ] ||
    { echo "dataloader_compare.sh: PROGRAMS_DIR: $PROGRAMS_DIR/$p missing" >&2; exit 1; }
done

tmp=$(mktemp -d /tmp/gm-dlcompare.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
make_criteo_and_programs criteo.pt jpeg.pt

jpeg_dir="$SHARED_DATA/datasets/images_jpeg"
datasets=$(echo " $DATASETS " | grep -q " criteo " && echo criteo || true)
if ! echo " $DATASETS " | grep -q " jpeg "; then
  :
elif [ -d "$jpeg_dir" ] && "$PYTHON" -c 'import torchvision' 2>/dev/null; then
  datasets="$datasets jpeg"
elif [ ! -d "$jpeg_dir" ]; then
  echo "dataloader_compare.sh: jpeg skipped: $jpeg_dir is absent (the shared data set is not on this machine)"
else
  echo "dataloader_compare.sh: jpeg skipped: $PYTHON cannot import torchvision (apt install python3-torchvision)"
fi
echo "dataloader_compare.sh: criteo $((ROWS * REPEAT)) generated rows, batch $CRITEO_BATCH, $CRITEO_EPOCHS epochs;" \
  "jpeg $jpeg_dir, batch $JPEG_BATCH, $JPEG_EPOCHS epochs, decode $JPEG_DECODE; k in {$K}; $(nproc) cores"

for d in $datasets; do
  if [ "$d" = criteo ]; then
    path="$tmp/criteo.tsv" input="criteo-tsv:$tmp/criteo.tsv" batch=$CRITEO_BATCH epochs=$CRITEO_EPOCHS split=0
    gm_extra=() dl_extra=()
  else
    # One batch per split, so that k workers share the 268 images.
    path="$jpeg_dir" input="jpeg:$jpeg_dir" batch=$JPEG_BATCH epochs=$JPEG_EPOCHS split=$JPEG_BATCH
    gm_extra=(--jpeg-decode "$JPEG_DECODE") dl_extra=()
    case $JPEG_DECODE in crop:* | resized-crop:*) dl_extra=(--crop) ;; esac
  fi
  for k in $K; do
    timed "$tmp/$d-dl-$k.time" "$PYTHON" "$here/dataloader_compare.py" "$d" "$path" "$tmp/$d.pt" \
      --workers "$k" --batch-size "$batch" --epochs "$epochs" "${dl_extra[@]}" > "$tmp/$d-dl-$k.json"
    timed "$tmp/$d-gm-$k.time" "$build/goldminer-consume" --input "$input" --program "$tmp/$d.pt" \
      --batch-size "$batch" --epochs "$epochs" --records-per-split "$split" --workers "$k" --json "${gm_extra[@]}" \
      > "$tmp/$d-gm-$k.json" 2> "$tmp/$d-gm-$k.err" ||
      { echo "dataloader_compare.sh: goldminer-consume ($d, $k workers) failed:" >&2; cat "$tmp/$d-gm-$k.err" >&2; exit 1; }
  done
done

# The JPEG ceiling, in this run: goldminer's reader alone on one core
# (decode with JPEG_DECODE, and libjpeg's Huffman decoding alone), for the
# summary to set against the DataLoader's CPU per image.
if echo " $datasets " | grep -q " jpeg " && [ -x "$build/bench/jpeg_decode_bench" ]; then
  size=${JPEG_DECODE#*:}
  [ "$size" != "$JPEG_DECODE" ] || size=224
  "$build/bench/jpeg_decode_bench" --folder "$jpeg_dir" --size "$size" > "$tmp/jpeg_decode.txt" ||
    { echo "dataloader_compare.sh: bench/jpeg_decode_bench failed" >&2; exit 1; }
fi

"$PYTHON" - "$tmp" "$K" "$datasets" "$(nproc)" "$JPEG_DECODE" <<'PY'
import json, os, sys
tmp, ks, datasets, cores, jpeg_decode = sys.argv[1], sys.argv[2].split(), sys.argv[3].split(), sys.argv[4], sys.argv[5]

def cpu(name):
    f = open(f"{tmp}/{name}.time").read().split()
    i = f.index("cpu")
    return float(f[i + 1]) + float(f[i + 2])

def steady(samples, cpu):
    # Samples per CPU-second over the epochs after the first: the cumulative
    # CPU at the end of the first epoch is the start-up and warm-up cost.
    if len(samples) < 2 or cpu[-1] <= cpu[0]:
        return float("nan")
    return sum(samples[1:]) / (cpu[-1] - cpu[0])

def gm(name):
    epochs = [json.loads(l) for l in open(f"{tmp}/{name}.json") if l.startswith("{")]
    counted = epochs[1:] or epochs
    return (sum(e["samples"] for e in counted) / sum(e["seconds"] for e in counted),
            sum(e["samples"] for e in epochs),
            steady([e["samples"] for e in epochs], [e["cpu_seconds"] for e in epochs]))

def dl(name):
    r = json.loads(open(f"{tmp}/{name}.json").read())
    return r["samples_per_s"], r["total_samples"], steady(r["epoch_samples"], r["epoch_cpu_seconds"])

print(f"\n{'dataset':<8}{'k':>3}{'DataLoader/s':>14}{'goldminer/s':>13}{'DL per core':>13}{'gm per core':>13}"
      f"{'per-core x':>12}{'DL steady':>11}{'gm steady':>11}{'steady x':>10}{'wall x':>8}")
summary = []
for d in datasets:
    for k in ks:
        dr, dn, ds = dl(f"{d}-dl-{k}")
        gr, gn, gs = gm(f"{d}-gm-{k}")
        dc, gc = dn / cpu(f"{d}-dl-{k}"), gn / cpu(f"{d}-gm-{k}")
        summary.append((d, k, gc / dc, gs / ds, gr / dr))
        print(f"{d:<8}{k:>3}{dr:>14.0f}{gr:>13.0f}{dc:>13.0f}{gc:>13.0f}{gc / dc:>12.2f}"
              f"{ds:>11.0f}{gs:>11.0f}{gs / ds:>10.2f}{gr / dr:>8.2f}")
print("\nsummary (goal: goldminer samples/s per core >= 3x the DataLoader's)")
for d, k, per_core, per_core_steady, wall in summary:
    print(f"  {d}, k={k}: per core {per_core:.2f}x ({'met' if per_core >= 3 else 'NOT met'}) over the whole run, "
          f"{per_core_steady:.2f}x ({'met' if per_core_steady >= 3 else 'NOT met'}) after the first epoch; "
          f"wall {wall:.2f}x")
decode_bench = f"{tmp}/jpeg_decode.txt"
if "jpeg" in datasets and os.path.exists(decode_bench):
    # Lines: "MODE RATE images per CPU-s ...", the last "entropy-only RATE ...".
    rates = {}
    for line in open(decode_bench):
        f = line.split()
        if len(f) > 2 and f[2] == "images":
            rates[f[0]] = float(f[1])
    if jpeg_decode in rates and "entropy-only" in rates:
        reader_ms, floor_ms = 1000 / rates[jpeg_decode], 1000 / rates["entropy-only"]
        for k in ks:
            dl_ms = 1000 / dl(f"jpeg-dl-{k}")[2]
            print(f"  jpeg ceiling, k={k}: the DataLoader's {dl_ms:.2f} ms CPU per image (steady) against goldminer's "
                  f"reader alone with {jpeg_decode}, {reader_ms:.2f} ms (bench/jpeg_decode_bench, one core): at most "
                  f"{dl_ms / reader_ms:.2f}x before the program and the data plane; libjpeg's Huffman decoding "
                  f"alone is {floor_ms:.2f} ms")
print(f"assumptions: {cores} cores shared with other users' jobs. per core = samples delivered / CPU-seconds of\n"
      "  all processes of the run (trainer or main process + k workers, start-up and warm-up epoch included,\n"
      "  via GNU time, which counts the children each process waited for). steady = samples of the epochs\n"
      "  after the first / the CPU-seconds they added (each side's cumulative CPU of itself and its workers\n"
      "  at every epoch's end: goldminer-consume's cpu_seconds, the script's getrusage + /proc; the\n"
      "  DataLoader's workers are persistent). samples/s (wall) are the\n"
      "  epochs after the first. Both sides run the same TorchScript transforms with 1 intra-op thread per\n"
      "  worker; the DataLoader parses Criteo lines in Python (block of B lines per batch, transforms\n"
      "  batched) and decodes JPEGs with torchvision.io.decode_jpeg (libjpeg-turbo, as goldminer's reader).\n"
      "  goldminer's numbers include the trainer process and the transfer of every batch (on one node:\n"
      "  the worker's shared-memory arena for batches >= 64 KiB, UCX posix eager below).")
PY
