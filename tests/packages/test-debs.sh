#!/bin/bash
# Tests the Debian packages as a site gets them: installs the .debs of
# DEB_DIR (`make deb`'s) with apt-get (apt resolves their dependencies),
# runs integration tests on what they installed (tests/integration/run.sh
# --installed /usr), upgrades them to a rebuild of themselves from a local
# repository under a running cluster (upgrade.sh), checks that the plugin
# packages (goldminer-spank, goldminer-select) can be removed under a
# running cluster once slurm.conf and plugstack.conf no longer name their
# plugins, and are refused before (removal.sh), then purges every package
# it installed, leaving dpkg's package list as it found it.
# Prints `PASS: name` / `FAIL: name: why` / `SKIP: name: why` (run.sh's own
# lines included), then `packages: N passed, N failed, N skipped`.
# Needs root; refuses to start when one of the packages is installed
# already (it would purge what it did not install).
#
# Usage: tests/packages/test-debs.sh DEB_DIR [--only REGEX] [--state-dir DIR]
#                                    [--port-base PORT]
# --only: the integration tests to run (extended regex on their function
# names; default: a --goldminer job's workers feeding its trainer every
# sample exactly once, through goldminer-consume and through the Python
# package's DataLoader; the select plugin keeping its reserve of CPUs next
# to free GPUs; the SPANK plugin's tests; a configless cluster's job;
# which commands need the select plugin on a host).
# --state-dir and --port-base as run.sh's (defaults
# /var/tmp/goldminer-debtest and 18817).
set -u

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
deb_dir=
only='^test_(companion_job_feeds_the_batch_jobs_session|dataloader_dataset_runs_on_the_companion_workers'
only+='|select_cpu_job_keeps_out_of_the_reserve|sbatch_help_lists_goldminer|bad_values_are_refused'
only+='|settings_reach_every_task|srun_option_reaches_tasks|job_without_flag_sees_nothing'
only+='|unknown_plugstack_key_is_refused|configless_cluster_runs_a_goldminer_job_with_plugstack_from_slurmctld'
only+='|select_commands_on_a_host_without_the_select_plugin)'
state=/var/tmp/goldminer-debtest
port_base=18817
while [ $# -gt 0 ]; do
    case $1 in
        --only) only=$2; shift 2 ;;
        --state-dir) state=$2; shift 2 ;;
        --port-base) port_base=$2; shift 2 ;;
        -*) echo "test-debs.sh: $1: unknown option" >&2; exit 2 ;;
        *) [ -z "$deb_dir" ] || { echo "test-debs.sh: $1: one DEB_DIR only" >&2; exit 2; }
           deb_dir=$1; shift ;;
    esac
done
[ -n "$deb_dir" ] || { echo "usage: tests/packages/test-debs.sh DEB_DIR [--only REGEX] [--state-dir DIR] [--port-base PORT]" >&2; exit 2; }
deb_dir=$(cd "$deb_dir" 2>/dev/null && pwd) || { echo "test-debs.sh: $deb_dir: no such directory" >&2; exit 2; }

# shellcheck source=tests/integration/tally.sh
. "$top/tests/integration/tally.sh"
started=$SECONDS
finish() {
    [ -z "${work:-}" ] || purge_installed
    tally_line packages "($((SECONDS - started)) s)"
    exit $(( failed > 0 ))
}

if [ "$(id -u)" -ne 0 ]; then
    skip "package tests" "they need root (apt-get install, the devcluster)"
    finish
fi

# Our packages: every goldminer-* and python3-goldminer .deb of DEB_DIR but
# the debug symbols; one version each.
debs=()
packages=()
for f in "$deb_dir"/goldminer-*.deb "$deb_dir"/python3-goldminer_*.deb; do
    [ -f "$f" ] || continue
    case ${f##*/} in *-dbgsym_*) continue ;; esac
    p=$(dpkg-deb -f "$f" Package) || { echo "test-debs.sh: $f: not a .deb" >&2; exit 2; }
    case " ${packages[*]} " in
        *" $p "*) echo "test-debs.sh: $deb_dir holds two .debs of $p: keep one version" >&2; exit 2 ;;
    esac
    debs+=("$f")
    packages+=("$p")
done
[ ${#debs[@]} -gt 0 ] || { echo "test-debs.sh: no goldminer-*.deb in $deb_dir (make deb makes them)" >&2; exit 2; }
for p in goldminer-spank goldminer-select; do
    case " ${packages[*]} " in
        *" $p "*) ;;
        *) echo "test-debs.sh: no $p .deb in $deb_dir" >&2; exit 2 ;;
    esac
done
# The first of our packages that dpkg knows in any state but not-installed
# (config-files included), as "PACKAGE STATE"; nothing when there is none.
one_known() {
    local p st
    for p in "${packages[@]}"; do
        st=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null)
        case $st in
            '' | not-installed) ;;
            *) echo "$p $st"; return ;;
        esac
    done
}
known=$(one_known)
[ -z "$known" ] ||
    { echo "test-debs.sh: ${known% *} is ${known##* } here already: remove it first (this test purges what it installs)" >&2; exit 2; }

work=$(mktemp -d /tmp/goldminer-debtest.XXXXXX)
export DEBIAN_FRONTEND=noninteractive
# The packages' Slurm is the distribution's (slurmctld in /usr/sbin).
PATH=/usr/sbin:/usr/bin:$PATH
export PATH
# Every installed package with its version, before and after.
installed_list() {
    dpkg-query -W -f='${db:Status-Status} ${Package}:${Architecture} ${Version}\n' |
        sed -n 's/^installed //p' | sort
}
installed_list >"$work/before"
# The packages installed since (name:arch), one a line.
added_packages() {
    installed_list | awk '{ print $1 }' | comm -13 <(awk '{ print $1 }' "$work/before") -
}

# Whatever happens, the packages this run installed (ours and the
# dependencies apt added) are purged at the end.
cleanup_done=
purge_installed() {
    [ -z "$cleanup_done" ] || return 0
    cleanup_done=1
    removal_down
    local added p
    added=$(added_packages)
    # Ours removed but not purged (conffiles left) are purged too.
    for p in "${packages[@]}"; do
        case $(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null) in
            '' | not-installed | installed) ;;
            *) added+=" $p" ;;
        esac
    done
    if [ -n "$added" ]; then
        # The test cluster's slurm.conf may still name the plugins (a check
        # stopped early), which the packages' prerm would refuse: the purge
        # reads the system's Slurm configuration instead.
        # shellcheck disable=SC2086  # package names: one word each
        env -u SLURM_CONF apt-get purge -y $added >"$work/purge.out" 2>&1 || { fail purge "apt-get purge failed: $(tail -3 "$work/purge.out" | tr '\n' '|')"; return; }
    fi
    # Purged packages leave no conffiles or state either.
    known=$(one_known)
    [ -z "$known" ] || { fail purge "${known% *} is still ${known##* } after apt-get purge"; return; }
    installed_list >"$work/after"
    if cmp -s "$work/before" "$work/after"; then
        pass "purge_leaves_the_packages_as_they_were ($(echo "$added" | wc -w) purged)"
    else
        fail purge "dpkg's list differs from before the install (apt changed a version?):\
 $(diff "$work/before" "$work/after" | grep '^[<>]' | head -5 | tr '\n' '|')"
    fi
}
trap 'purge_installed >/dev/null; rm -rf "$work"' EXIT

# shellcheck source=tests/packages/removal.sh
. "$here/removal.sh"
# shellcheck source=tests/packages/upgrade.sh
. "$here/upgrade.sh"

echo "packages: apt-get install ${debs[*]}"
if apt-get install -y "${debs[@]}" >"$work/install.out" 2>&1; then
    pass "apt_get_install (installed: $(added_packages | tr '\n' ' '))"
else
    fail apt_get_install "$(tail -5 "$work/install.out" | tr '\n' '|')"
    finish
fi

# The integration tests on the installation. Their PASS/FAIL/SKIP lines
# count here too.
"$top/tests/integration/run.sh" --installed /usr --state-dir "$state" --port-base "$port_base" --only "$only" \
    2>&1 | tee "$work/integration.out"
rc=${PIPESTATUS[0]}
passed=$((passed + $(grep -c '^PASS: ' "$work/integration.out")))
failed=$((failed + $(grep -c '^FAIL: ' "$work/integration.out")))
skipped=$((skipped + $(grep -c '^SKIP: ' "$work/integration.out")))
if [ "$rc" -ne 0 ] && ! grep -q '^FAIL: ' "$work/integration.out"; then
    fail integration "run.sh --installed /usr exited $rc without a test result"
fi

upgrade_then_srun "$state" "$port_base"
removal_check "$state" "$port_base"
finish
