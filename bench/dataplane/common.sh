# Sourced by the data-plane benchmarks (scaling.sh, binding.sh,
# worker_cost.sh, dataloader_compare.sh) as `. "$here/common.sh" "$@"`: the
# settings and the steps they take alike before measuring. The caller sets
# `here` (its folder) and the rest of the environment it documents (ROWS,
# REPEAT, ...).

# Set here: `bench` (the benchmark's name, for messages), `build` (the
# build tree: its first argument, else the checkout's build/), and where the
# environment does not set them PYTHON, PROGRAMS_DIR, GNU_TIME and
# UCX_NET_DEVICES (exported: the runs stay on the loopback).
bench=$(basename "$0")
build=$(cd "${1:-$here/../../build}" && pwd)
PYTHON=${PYTHON:-/usr/bin/python3}
PROGRAMS_DIR=${PROGRAMS_DIR:-}
GNU_TIME=${GNU_TIME:-/usr/bin/time}
export UCX_NET_DEVICES=${UCX_NET_DEVICES:-lo}

# Exits 0, saying it skipped and why torch was wanted ($1), unless $PYTHON
# imports torch.
skip_without_torch() {
  "$PYTHON" -c 'import torch' 2>/dev/null || { echo "$bench: skipped: $PYTHON cannot import torch ($1)"; exit 0; }
}

# Exits 1 unless each program named is built in $build.
require_built() {
  local p
  for p in "$@"; do
    [ -x "$build/$p" ] || { echo "$bench: $build/$p missing: build it first (make -j2 $p)" >&2; exit 1; }
  done
}

# Exits 1 unless $GNU_TIME is there (timed needs it).
require_gnu_time() {
  [ -x "$GNU_TIME" ] ||
    { echo "$bench: $GNU_TIME missing: install GNU time (apt install time) or set GNU_TIME" >&2; exit 1; }
}

# $tmp/criteo.tsv: $ROWS seeded Criteo-like rows (gen_criteo.py), the block
# $REPEAT times; and the worker programs in $tmp: the files named copied
# from $PROGRAMS_DIR, or all of them scripted with $PYTHON (make_programs.py).
make_criteo_and_programs() {
  local i
  "$PYTHON" "$here/gen_criteo.py" "$tmp/block.tsv" "$ROWS" 1
  for ((i = 0; i < REPEAT; i++)); do cat "$tmp/block.tsv"; done > "$tmp/criteo.tsv"
  rm -f "$tmp/block.tsv"
  if [ -n "$PROGRAMS_DIR" ]; then
    for i in "$@"; do cp "$PROGRAMS_DIR/$i" "$tmp/"; done
  else
    "$PYTHON" "$here/make_programs.py" "$tmp" >/dev/null
  fi
}

# CPU seconds (user + system) of a command and all the children it waited
# for, written to the file $1: timed FILE COMMAND...
timed() { "$GNU_TIME" -f "cpu %U %S" -o "$1" "${@:2}"; }
