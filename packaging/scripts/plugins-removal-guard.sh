#!/bin/sh
# The plugin packages' removal guard, run by their prerm (Debian:
# `remove`) and %preun (RPM: erase, $1 = 0), never on upgrade, while the
# plugin is still installed; each package installs its own copy
# (goldminer-select: select-removal-guard, goldminer-spank:
# spank-removal-guard). Slurm's configuration is read from $SLURM_CONF
# (default /etc/slurm/slurm.conf), plugstack.conf from its PlugStackConfig
# (default beside slurm.conf) and every file it includes.
#
# --select: refuses (exit 1), naming the file and line to change first,
#   while slurm.conf says SelectType=select/goldminer_cons_tres: slurmctld
#   and slurmd do not start without that plugin.
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
conf=${SLURM_CONF:-/etc/slurm/slurm.conf}
confdir=$(dirname "$conf")
status=0

# The first non-comment line of FILE matching the extended regex RE, as
# "LINE: TEXT" (its number), or nothing.
first_line() {
    grep -n -E "$2" "$1" 2>/dev/null | grep -v -E '^[0-9]+:[[:space:]]*#' | head -1
}

if [ "$me" = goldminer-select ]; then
    if [ -r "$conf" ]; then
        line=$(first_line "$conf" '^[[:space:]]*SelectType[[:space:]]*=[[:space:]]*select/goldminer_cons_tres')
        if [ -n "$line" ]; then
            echo "$me: not removed: $conf line ${line%%:*} says SelectType=select/goldminer_cons_tres, and" \
                "slurmctld and slurmd do not start without that plugin. Change it to SelectType=select/cons_tres," \
                "restart slurmctld, then every slurmd, then remove the package." >&2
            exit 1
        fi
    fi
    exit 0
fi

plugstack=$(sed -n 's/^[[:space:]]*[Pp]lug[Ss]tack[Cc]onfig[[:space:]]*=[[:space:]]*\([^[:space:]#]*\).*/\1/p' "$conf" \
    2>/dev/null | tail -1)
[ -n "$plugstack" ] || plugstack=$confdir/plugstack.conf
plugstack_dir=$(dirname "$plugstack")

# plugstack.conf, then the files its include lines name (a relative
# pattern is relative to plugstack.conf's directory), one per line.
plugstack_files() {
    [ -e "$plugstack" ] || [ -L "$plugstack" ] || return 0
    echo "$plugstack"
    sed -n 's/^[[:space:]]*include[[:space:]]\{1,\}\([^[:space:]#]*\).*/\1/p' "$plugstack" 2>/dev/null |
        while read -r pattern; do
            case $pattern in /*) ;; *) pattern=$plugstack_dir/$pattern ;; esac
            # shellcheck disable=SC2086  # the include's glob, expanded as Slurm does
            for f in $pattern; do
                if [ -e "$f" ] || [ -L "$f" ]; then echo "$f"; fi
            done
        done
}

links=
for f in $(plugstack_files); do
    if [ -L "$f" ] && [ "$(readlink -f "$f")" = "$(readlink -f "$example")" ]; then
        links="$links $f"
        continue
    fi
    line=$(first_line "$f" 'spank_goldminer\.so')
    if [ -n "$line" ]; then
        echo "$me: not removed: $f line ${line%%:*} loads spank_goldminer.so, which goes with the package: remove" \
            "that line first (srun and every job step would fail to load the plugin)." >&2
        status=1
    fi
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
