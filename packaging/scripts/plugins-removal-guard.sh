#!/bin/sh
# The plugin packages' removal guard, run by their prerm (Debian:
# `remove`) and %preun (RPM: erase, $1 = 0), never on upgrade, while the
# plugin is still installed; each package installs its own copy
# (goldminer-select: select-removal-guard, goldminer-spank:
# spank-removal-guard). Slurm's configuration is read from $SLURM_CONF
# (default /etc/slurm/slurm.conf), plugstack.conf from its PlugStackConfig
# (default beside slurm.conf) and every file it includes; on a configless
# node also slurmd's copy of what slurmctld sent (slurm.conf,
# plugstack.conf and the files it includes), in the directory
# $GOLDMINER_SLURMD_CONF_CACHE (default /run/slurm/conf, the link slurmd
# makes to its conf-cache).
#
# --select: refuses (exit 1), naming the file and line to change first,
#   while slurm.conf says SelectType=select/goldminer_cons_tres: slurmctld
#   and slurmd do not start without that plugin, nor, up to Slurm 24.11, do
#   sinfo and scontrol show node. From 25.11 on only slurmctld loads it: on
#   a host without slurmctld (no slurmctld on the PATH) of a package built
#   for 25.11 or later, the removal goes on.
# --spank EXAMPLE: refuses while a plugstack.conf file (not a link to the
#   package's example EXAMPLE) names spank_goldminer.so: srun, sbatch and
#   every job step would fail to load it ("required") or log the failure
#   at each step ("optional"); otherwise removes each plugstack include
#   that is a link to EXAMPLE: once the package is gone it would dangle,
#   and Slurm fails to open a dangling include whether the line in it says
#   required or optional, so that every srun would fail.
#
# Usage: plugins-removal-guard.sh --select
#        plugins-removal-guard.sh --spank EXAMPLE
#   EXAMPLE: the example file goldminer-spank installs
#            (/usr/share/goldminer/plugstack.conf.d/goldminer.conf)
set -u
usage="usage: plugins-removal-guard.sh --select | --spank EXAMPLE"
case ${1:-} in
    --select) me=goldminer-select example= ;;
    --spank) me=goldminer-spank example=${2:?$usage} ;;
    *) echo "$usage" >&2; exit 2 ;;
esac
# The Slurm release the package was built for: the packages install this
# script with it filled in; GOLDMINER_GUARD_SLURM_VERSION names another (a
# copy run elsewhere, the tests). Unknown: treated as one before 25.11.
built_for=${GOLDMINER_GUARD_SLURM_VERSION:-@SLURM_VERSION@}
case $built_for in [0-9]*.[0-9]*) ;; *) built_for= ;; esac
conf=${SLURM_CONF:-/etc/slurm/slurm.conf}
confdir=$(dirname "$conf")
cache=${GOLDMINER_SLURMD_CONF_CACHE:-/run/slurm/conf}
[ -d "$cache" ] || cache=
status=0
# What to change for a line of slurmd's copy: the file slurmctld sends.
from_cache="is slurmd's copy of what slurmctld sends this configless node: change the file on the slurmctld host and run 'scontrol reconfigure' first"

# The first non-comment line of FILE matching the extended regex RE, as
# "LINE: TEXT" (its number), or nothing.
first_line() {
    grep -n -E "$2" "$1" 2>/dev/null | grep -v -E '^[0-9]+:[[:space:]]*#' | head -1
}

if [ "$me" = goldminer-select ]; then
    if [ -n "$built_for" ] && [ "$(printf '%s\n25.11\n' "${built_for%.*}" | sort -V | head -1)" = 25.11 ] &&
        ! command -v slurmctld >/dev/null 2>&1; then
        exit 0
    fi
    for f in "$conf" ${cache:+"$cache/slurm.conf"}; do
        [ -r "$f" ] || continue
        line=$(first_line "$f" '^[[:space:]]*SelectType[[:space:]]*=[[:space:]]*select/goldminer_cons_tres')
        [ -n "$line" ] || continue
        where=
        [ "$f" = "$conf" ] || where=" ($f $from_cache)"
        echo "$me: not removed: $f line ${line%%:*} says SelectType=select/goldminer_cons_tres$where, and" \
            "slurmctld and slurmd do not start without that plugin. Change it to SelectType=select/cons_tres," \
            "restart slurmctld, then every slurmd, then remove the package." >&2
        exit 1
    done
    exit 0
fi

plugstack=$(sed -n 's/^[[:space:]]*[Pp]lug[Ss]tack[Cc]onfig[[:space:]]*=[[:space:]]*\([^[:space:]#]*\).*/\1/p' "$conf" \
    2>/dev/null | tail -1)
[ -n "$plugstack" ] || plugstack=$confdir/plugstack.conf

# plugstack_files FILE: FILE (a plugstack.conf), then the files its include
# lines name (a relative pattern is relative to FILE's directory), one per
# line.
plugstack_files() {
    [ -e "$1" ] || [ -L "$1" ] || return 0
    echo "$1"
    sed -n 's/^[[:space:]]*include[[:space:]]\{1,\}\([^[:space:]#]*\).*/\1/p' "$1" 2>/dev/null |
        while read -r pattern; do
            case $pattern in /*) ;; *) pattern=$(dirname "$1")/$pattern ;; esac
            # shellcheck disable=SC2086  # the include's glob, expanded as Slurm does
            for f in $pattern; do
                if [ -e "$f" ] || [ -L "$f" ]; then echo "$f"; fi
            done
        done
}

# Each file the plugin stack reads: a link to EXAMPLE is noted for removal;
# any other file that names the plugin refuses the removal. slurmd's copy
# holds the controller's files, but its absolute includes (e.g. Debian's
# /etc/slurm/plugstack.conf.d/*) name this node's own.
links=
for f in $(plugstack_files "$plugstack"; [ -z "$cache" ] || plugstack_files "$cache/plugstack.conf"); do
    if [ -L "$f" ] && [ "$(readlink -f "$f")" = "$(readlink -f "$example")" ]; then
        case " $links " in *" $f "*) ;; *) links="$links $f" ;; esac
        continue
    fi
    line=$(first_line "$f" 'spank_goldminer\.so')
    [ -n "$line" ] || continue
    if [ -n "$cache" ] && [ "${f#"$cache"/}" != "$f" ]; then
        echo "$me: not removed: $f line ${line%%:*} loads spank_goldminer.so, which goes with the package;" \
            "$f $from_cache (every job step on this node would fail to load the plugin)." >&2
    else
        echo "$me: not removed: $f line ${line%%:*} loads spank_goldminer.so, which goes with the package: remove" \
            "that line first (srun and every job step would fail to load the plugin)." >&2
    fi
    status=1
done
[ "$status" -eq 0 ] || exit 1

for f in $links; do
    if rm -f "$f"; then
        echo "$me: removed the plugstack include $f, a link to $example: it would dangle once the package is gone," \
            "and Slurm fails every srun on a dangling include." >&2
    else
        echo "$me: not removed: cannot remove the plugstack include $f (a link to $example): remove it first." >&2
        exit 1
    fi
done
exit 0
