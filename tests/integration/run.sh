#!/bin/bash
# Integration tests on a real Slurm cluster on this machine: brings up
# goldminer-devcluster with GoldMiner's plugins, runs each test_* function
# under a watchdog, tears the cluster down and checks nothing is left.
# What is tested is either a build tree (--build-dir: its plugins, tools and
# staged Python package, on the Slurm installation the build was configured
# with: 22.05, 24.11 or 26.05) or an installation (--installed PREFIX, e.g.
# what the .debs put in /usr: PREFIX's goldminer-devcluster, tools,
# goldminer-ctld, plugins and Python package, on the Slurm that installed
# goldminer-devcluster was built for). Tests an installation cannot run
# (they need a build-tree-only file) are skipped with the reason.
# Prints `integration: Slurm VERSION (PREFIX)`, what is tested,
# `PASS: name` / `FAIL: name: why` / `SKIP: name: why` per test, then
# `integration: N passed, N failed, N skipped`.
# Clusters of different --state-dir and --port-base (the tests' own extra
# clusters use PORT+4000 and PORT+5000) can run side by side.
#
# Usage: tests/integration/run.sh --build-dir DIR | --installed [PREFIX]
#                                 [--plugin-dir DIR] [--state-dir DIR]
#                                 [--port-base PORT] [--keep] [--only REGEX]
# (--installed: PREFIX defaults to /usr; --plugin-dir: the directory holding
# spank_goldminer.so, default probed under PREFIX (installed) or BUILD/.libs;
# --only: just the tests whose names match the extended regex REGEX;
# --keep: the cluster stays up and the tests' files in /tmp stay)
# Environment: GOLDMINER_TORCH2_PYTHON, the python of a venv with torch 2.x
# (scripts/run-tests sets it to scripts/python-venv's) for test_torch2.sh,
# which also needs the package pip installed into BUILD/python-torch2.
# GOLDMINER_TEST_CONTAINER_IMAGE, the .sqsh of scripts/container-image
# (its directory image is the root/ beside it; scripts/run-tests makes it
# and sets this), for test_containers.sh, which also needs that package;
# with a build tree on Debian's Slurm, run.sh builds (cached) enroot and
# pyxis with scripts/container-tools before the cluster starts (their run
# files under STATE_DIR/containers) and puts enroot's bin first on
# slurmd's PATH (--slurmd-path): pyxis runs `enroot` from there.
set -u

here=$(cd "$(dirname "$0")" && pwd)
build=
installed=
plugin_dir=
state=/var/tmp/goldminer-itest
port_base=16817
keep=no
only=
while [ $# -gt 0 ]; do
    case $1 in
        --build-dir) build=$2; shift 2 ;;
        --installed)
            case ${2-} in
                /*) installed=$2; shift 2 ;;
                ''|--*) installed=/usr; shift ;;
                *) echo "run.sh: --installed: invalid prefix '$2': expected an absolute path" >&2; exit 2 ;;
            esac ;;
        --plugin-dir) plugin_dir=$2; shift 2 ;;
        --state-dir) state=$2; shift 2 ;;
        --port-base) port_base=$2; shift 2 ;;
        --keep) keep=yes; shift ;;
        --only) only=$2; shift 2 ;;
        *) echo "run.sh: $1: unknown option" >&2; exit 2 ;;
    esac
done
if [ -n "$build" ] && [ -n "$installed" ]; then
    echo "run.sh: --build-dir and --installed exclude each other" >&2; exit 2
fi
[ -n "$build$installed" ] || { echo "run.sh: --build-dir DIR or --installed [PREFIX] is required" >&2; exit 2; }
# Kept unexported for test_torch2.sh: every job inherits this environment
# (sbatch --export=ALL), and the spank tests check that a job sees only the
# GOLDMINER_* variables its options set.
torch2_python=${GOLDMINER_TORCH2_PYTHON:-/var/cache/goldminer/venv-torch2/bin/python}
unset GOLDMINER_TORCH2_PYTHON
container_image=${GOLDMINER_TEST_CONTAINER_IMAGE-}
unset GOLDMINER_TEST_CONTAINER_IMAGE
case $port_base in
    ''|*[!0-9]*) echo "run.sh: --port-base: invalid value '$port_base': expected a port number" >&2; exit 2 ;;
esac

# shellcheck source=tests/integration/tally.sh
. "$here/tally.sh"
finish() { tally_line integration; exit $(( failed > 0 )); }

if [ "$(id -u)" -ne 0 ]; then
    skip "integration tests" "they need root (munge, slurmd, network namespaces)"
    finish
fi

work=$(mktemp -d /tmp/goldminer-itest.XXXXXX)
export UCX_NET_DEVICES=lo

# What is tested, for every test file (lib.sh's run_test hands these on):
#   devcluster    goldminer-devcluster
#   tools         the directory of goldminer-consume, goldminer-dw, goldminer-top
#   ctld_program  goldminer-ctld
#   plugins       the directory of spank_goldminer.so and the select plugin
#   python_dir    the directory holding the goldminer package, put first on
#                 PYTHONPATH by the tests (with_goldminer_python); empty when
#                 /usr/bin/python3 finds the installed package by itself
#   build         the build tree (empty when testing an installation)
#   slurm_prefix  the Slurm installation the cluster runs
# shellcheck source=tests/integration/targets.sh
. "$here/targets.sh"
if [ -n "$build" ]; then
    build_targets "$build" || { rm -rf "$work"; exit 2; }
else
    installed_targets "$installed" || { rm -rf "$work"; exit 2; }
fi
PATH=$slurm_prefix/sbin:$slurm_prefix/bin:$PATH
export PATH
# slurmctld -V reads no slurm.conf (sinfo --version does, from 24.11 on).
slurm_version=$(slurmctld -V 2>/dev/null | sed -n 's/^slurm[^ ]* \([0-9][0-9.]*\).*/\1/p')
echo "integration: Slurm $slurm_version ($slurm_prefix)"
describe_targets

# shellcheck source=tests/integration/lib.sh
. "$here/lib.sh"

# An installation's plugin runs its own default dw_command (the installed
# goldminer-dw); a build tree's names the built one.
cluster_args=(--dir "$state" --port-base "$port_base" --plugin-dir "$plugins" --debug-flags SelectType
              --plugstack-args "max_dw_per_job=16${build:+ dw_command=$tools/goldminer-dw}")
# enroot and pyxis for test_containers.sh (seconds the first time, cached
# after); the tests skip saying why when they cannot be had.
container_prefix=
if [ -z "$build" ]; then
    container_note="needs the goldminer package built for the image python, which only a build tree has (run.sh --build-dir)"
elif [ "$slurm_prefix" != /usr ]; then
    container_note="pyxis is built against the libslurm-dev of Debian 12 (Slurm 22.05); this cluster runs Slurm $slurm_version ($slurm_prefix)"
elif container_prefix=$("$here/../../scripts/container-tools" "$state/containers" 2>"$work/container-tools.err" | tail -1) &&
     [ -x "$container_prefix/bin/enroot" ]; then
    container_note="$(sed -n 's/^container-tools: \(enroot [^;]*\);.*/\1/p' "$work/container-tools.err") in $container_prefix"
    cluster_args+=(--slurmd-path "$container_prefix/bin")
else
    container_prefix=
    container_note="scripts/container-tools failed: $(tail -1 "$work/container-tools.err")"
fi
if command -v ch-run >/dev/null; then container_note="$container_note; Charliecloud ch-run $(USER=${USER:-root} ch-run --version 2>&1)"; fi
# lib.sh hands it on in single quotes.
container_note=${container_note//\'/}
echo "integration: containers: $container_note"
echo "integration: starting devcluster in $state"
if ! timeout 120 "$devcluster" up "${cluster_args[@]}" >"$work/up.out" 2>&1; then
    cat "$work/up.out"
    fail devcluster_up "goldminer-devcluster up failed"
    timeout 60 "$devcluster" down --dir "$state" >/dev/null 2>&1
    finish
fi
cat "$work/up.out"
pass devcluster_up
export SLURM_CONF="$state/etc/slurm.conf"

# Every test_* function in the test files, in file order.
for file in "$here"/test_*.sh; do
    # shellcheck source=/dev/null
    . "$file"
done
for t in $(grep -ho '^test_[a-z0-9_]*()' "$here"/test_*.sh | tr -d '()' | grep -v '^test_zz_' | grep -E -- "${only:-.}"); do
    run_test "$t"
done

if [ "$keep" = yes ]; then
    echo "integration: --keep: cluster left up in $state, the tests' files in $work"
else
    run_test test_zz_down_leaves_nothing
    rm -rf "$work"
fi
finish
