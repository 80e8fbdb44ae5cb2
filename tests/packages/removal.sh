# shellcheck shell=bash
# The removal check of test-debs.sh (sourced by it; uses its pass, fail and
# $work): on a devcluster of the installed goldminer-devcluster, whose
# slurmctld runs the installed select plugin and whose plugstack.conf loads
# the installed SPANK plugin, a site's way to remove the plugins:
#   1. slurm.conf: SelectType=select/cons_tres (instead of
#      select/goldminer_cons_tres); plugstack.conf: the spank_goldminer.so
#      line removed;
#   2. slurmctld restarted, then every slurmd (a SelectType change needs
#      both: a slurmd still running the old select plugin cannot unpack
#      what the new slurmctld sends, and the jobs it is given fail);
#   3. apt-get remove goldminer-spank goldminer-select.
# Checked: before step 1, apt-get remove is refused (the packages' prerm,
# packaging/scripts/plugins-removal-guard.sh) naming the slurm.conf and
# plugstack.conf lines to change, the plugins stay and srun runs on every
# node; at step 1 plugstack.conf takes the packaged form instead (an
# include of plugstack.conf.d/*.conf, there a link to the package's
# example), which the removal deletes rather than leave it dangling; after
# each step srun runs on every node; the plugins' files are gone, the same
# slurmctld still answers (scontrol ping, sinfo), a job runs, and
# slurmctld and a slurmd restart; a job submitted under the select plugin
# is still known after that restart. Then why step 1 comes first: with the
# old SelectType and the plugin gone neither a slurmd nor slurmctld starts
# (their log lines are printed).

# shellcheck disable=SC2154  # work: test-debs.sh's
devcluster_bin=/usr/bin/goldminer-devcluster
removal_dir=   # the cluster's state directory while it is up

# removal_down: stops the cluster if it is up (test-debs.sh's cleanup).
removal_down() {
    [ -n "$removal_dir" ] || return 0
    if [ ! -x "$devcluster_bin" ]; then
        echo "test-debs.sh: $devcluster_bin is gone: cannot stop the cluster in $removal_dir" >&2
    elif ! timeout 60 "$devcluster_bin" down --dir "$removal_dir" >"$work/removal-down.out" 2>&1; then
        echo "test-debs.sh: goldminer-devcluster down --dir $removal_dir failed: $(tail -3 "$work/removal-down.out")" >&2
    fi
    removal_dir=
}

# The cluster's slurmctld PID (its PID file's, if that process is a
# running slurmctld), or status 1.
removal_slurmctld_pid() {
    local pid
    read -r pid 2>/dev/null <"$removal_dir/run/slurmctld.pid" || return 1
    case $pid in '' | *[!0-9]*) return 1 ;; esac
    [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = slurmctld ] || return 1
    # A zombie (exited, not yet reaped by PID 1) has stopped.
    [ "$(awk '{ print $3 }' "/proc/$pid/stat" 2>/dev/null)" != Z ] || return 1
    echo "$pid"
}

# True once slurmctld answers `scontrol ping` as UP (waits up to 30 s).
removal_slurmctld_answers() {
    for _ in $(seq 60); do
        timeout 10 scontrol ping 2>/dev/null | grep -q 'is UP' && return 0
        sleep 0.5
    done
    return 1
}

# Stops the cluster's slurmctld (SIGTERM, up to 30 s).
removal_stop_slurmctld() {
    local pid
    pid=$(removal_slurmctld_pid) || return 0
    kill -TERM "$pid" || return 1
    for _ in $(seq 120); do
        case $(awk '{ print $3 }' "/proc/$pid/stat" 2>/dev/null) in '' | Z) return 0 ;; esac
        sleep 0.25
    done
    return 1
}

# Starts the cluster's slurmctld as a site's restart does: with its saved
# state (no -c), from the cluster's slurm.conf.
removal_start_slurmctld() {
    slurmctld -f "$SLURM_CONF" </dev/null >>"$removal_dir/log/slurmctld.out" 2>&1
}

# removal_restart_slurmds: restarts every node's slurmd, each waited for
# until it has registered; says why one did not.
removal_restart_slurmds() {
    local node
    for node in $(sinfo -h -N -o %N | sort -u); do
        timeout 60 "$devcluster_bin" restart-slurmd "$node" --dir "$removal_dir" >"$work/restart-$node.out" 2>&1 ||
            { echo "restart-slurmd $node: $(tail -2 "$work/restart-$node.out" | tr '\n' '|')"; return 1; }
    done
}

# srun hostname on every node of the cluster (each in its partition),
# within 60 s; says which node failed and why.
removal_srun_everywhere() {
    local node partition out
    while read -r node partition; do
        out=$(timeout 60 srun -p "${partition%\*}" -w "$node" -N1 -n1 -t 1 hostname 2>&1) ||
            { echo "srun hostname on $node: $out"; return 1; }
    done < <(sinfo -h -N -o '%N %P' | sort -u)
}

# removal_up CHECK STATE PORT: the installed devcluster up in STATE at
# PORT (removal_down stops it), SLURM_CONF naming it; else fails CHECK,
# saying why, and returns 1.
removal_up() {
    local check=$1 dir=$2 port=$3
    if ! timeout 120 "$devcluster_bin" up --dir "$dir" --port-base "$port" >"$work/$check-up.out" 2>&1; then
        fail "$check" "goldminer-devcluster up failed: $(tail -5 "$work/$check-up.out" | tr '\n' '|')"
        timeout 60 "$devcluster_bin" down --dir "$dir" >/dev/null 2>&1
        return 1
    fi
    removal_dir=$dir
    export SLURM_CONF=$dir/etc/slurm.conf
}

# removal_check STATE PORT: the check, on a cluster in STATE at PORT.
removal_check() {
    local dir=$1 port=$2 plugindir pid selecttype out line node early release rc
    removal_up removal "$dir" "$port" || return
    selecttype=$(scontrol show config | sed -n 's/^SelectType *= *//p')
    plugindir=$(dirname "$(sed -n 's/^required \([^ ]*spank_goldminer\.so\).*/\1/p' "$dir/etc/plugstack.conf")")
    if [ "$selecttype" != select/goldminer_cons_tres ] || [ ! -f "$plugindir/spank_goldminer.so" ]; then
        fail removal "the cluster runs SelectType=$selecttype, plugstack.conf: $(cat "$dir/etc/plugstack.conf")"
        return
    fi
    pass "removal_cluster_runs_the_installed_plugins ($plugindir)"
    out=$(removal_srun_everywhere) || { fail removal "$out"; return; }

    # Each package's prerm refuses while the configuration names its plugin
    # (one apt-get each: dpkg stops at the first refusal).
    if apt-get remove -y goldminer-select >"$work/remove-refused.out" 2>&1; then
        fail removal "apt-get remove goldminer-select was not refused under SelectType=select/goldminer_cons_tres"
        return
    fi
    if apt-get remove -y goldminer-spank >>"$work/remove-refused.out" 2>&1; then
        fail removal "apt-get remove goldminer-spank was not refused with spank_goldminer.so in plugstack.conf"
        return
    fi
    line=$(grep -m1 'goldminer-select: not removed: .* says SelectType=select/goldminer_cons_tres' "$work/remove-refused.out")
    if [ -z "$line" ] ||
        ! grep -q "goldminer-spank: not removed: $dir/etc/plugstack.conf line [0-9]* loads spank_goldminer.so" \
            "$work/remove-refused.out" ||
        [ ! -f "$plugindir/spank_goldminer.so" ] || [ ! -f "$plugindir/select_goldminer_cons_tres.so" ]; then
        fail removal "the refusal: $(tail -6 "$work/remove-refused.out" | tr '\n' '|')"
        return
    fi
    out=$(removal_srun_everywhere) || { fail removal "after the refused removal: $out"; return; }
    pass "removal_refused_while_the_configuration_names_the_plugins (${line#*: })"

    # A job submitted while the select plugin decides.
    early=$(sbatch --parsable --time=10 -p cpu -o /dev/null --wrap 'sleep 600' 2>&1) ||
        { fail removal "sbatch of the early job: $early"; return; }

    # 1 and 2: the configuration change (plugstack.conf in the packaged
    # form: an include of a link to the example), then the restart.
    sed -i 's|^SelectType=select/goldminer_cons_tres$|SelectType=select/cons_tres|' "$SLURM_CONF"
    sed -i '/spank_goldminer\.so/d' "$dir/etc/plugstack.conf"
    mkdir -p "$dir/etc/plugstack.conf.d"
    echo "include $dir/etc/plugstack.conf.d/*.conf" >>"$dir/etc/plugstack.conf"
    ln -sf /usr/share/goldminer/plugstack.conf.d/goldminer.conf "$dir/etc/plugstack.conf.d/goldminer.conf"
    if ! removal_stop_slurmctld || ! removal_start_slurmctld || ! removal_slurmctld_answers; then
        fail removal "slurmctld did not come back after the slurm.conf change: $(tail -3 "$dir/log/slurmctld.log" | tr '\n' '|')"
        return
    fi
    out=$(removal_restart_slurmds) || { fail removal "$out"; return; }
    selecttype=$(scontrol show config | sed -n 's/^SelectType *= *//p')
    [ "$selecttype" = select/cons_tres ] || { fail removal "after the restart SelectType=$selecttype"; return; }
    pid=$(removal_slurmctld_pid)
    out=$(removal_srun_everywhere) || { fail removal "after the restart with cons_tres: $out"; return; }
    pass "removal_slurmctld_and_slurmds_restarted_with_cons_tres (slurmctld pid $pid)"

    # 3: the package removed under the running cluster.
    if ! apt-get remove -y goldminer-spank goldminer-select >"$work/remove.out" 2>&1; then
        fail removal "apt-get remove goldminer-spank goldminer-select: $(tail -3 "$work/remove.out" | tr '\n' '|')"
        return
    fi
    out=$(ls "$plugindir"/*goldminer*.so 2>/dev/null)
    [ -z "$out" ] || { fail removal "left after apt-get remove: $out"; return; }
    if [ -e "$dir/etc/plugstack.conf.d/goldminer.conf" ] || [ -L "$dir/etc/plugstack.conf.d/goldminer.conf" ] ||
        ! grep -q "goldminer-spank: removed the plugstack include $dir/etc/plugstack.conf.d/goldminer.conf" \
            "$work/remove.out"; then
        fail removal "the include's link after apt-get remove: $(ls -l "$dir/etc/plugstack.conf.d/" 2>&1 | tr '\n' '|')"
        return
    fi
    out=$(removal_srun_everywhere) || { fail removal "after apt-get remove: $out"; return; }
    pass "removal_removes_the_include_that_would_dangle_and_srun_runs_everywhere"
    [ "$(removal_slurmctld_pid)" = "$pid" ] || { fail removal "slurmctld (pid $pid) is gone after apt-get remove"; return; }
    removal_slurmctld_answers || { fail removal "slurmctld does not answer scontrol ping after apt-get remove"; return; }
    out=$(timeout 30 sinfo -h -o '%D %t' 2>&1) || { fail removal "sinfo after apt-get remove: $out"; return; }
    out=$(timeout 90 sbatch --parsable --wait --time=1 -p cpu -o "$work/removal-job.%j" --wrap 'hostname' 2>&1) ||
        { fail removal "a job after apt-get remove: $out"; return; }
    pass "removal_leaves_slurmctld_running_and_jobs_running (sinfo: $(timeout 30 sinfo -h -o '%D %t' | tr '\n' ' '))"
    if ! removal_stop_slurmctld || ! removal_start_slurmctld || ! removal_slurmctld_answers; then
        fail removal "slurmctld does not restart after apt-get remove: $(tail -3 "$dir/log/slurmctld.log" | tr '\n' '|')"
        return
    fi
    out=$(removal_restart_slurmds) || { fail removal "after apt-get remove: $out"; return; }
    out=$(removal_srun_everywhere) || { fail removal "after the restart without the plugins: $out"; return; }
    pass removal_slurmctld_and_slurmds_restart_without_the_plugins
    out=$(squeue -h -j "$early" -o '%i %T' 2>&1)
    scancel "$early" 2>/dev/null
    case $out in
        "$early "*) pass "removal_a_job_submitted_under_the_select_plugin_is_known_after_the_restart ($out)" ;;
        *) fail removal "job $early, submitted under select/goldminer_cons_tres, after the restart: ${out:-not listed}" ;;
    esac

    # Why the change comes first: the old SelectType, the plugin gone. A
    # slurmd restarted (slurmctld, still running, read the file before):
    # up to 24.11 slurmd loads the select plugin and does not start; from
    # 25.11 on only slurmctld loads it.
    node=$(sinfo -h -N -o %N | sort -u | tail -1)
    release=$(slurmctld -V | sed -n 's/^slurm[^ ]* \([0-9]*\.[0-9]*\).*/\1/p')
    sed -i 's|^SelectType=select/cons_tres$|SelectType=select/goldminer_cons_tres|' "$SLURM_CONF"
    timeout 60 "$devcluster_bin" restart-slurmd "$node" --dir "$dir" >"$work/restart-old.out" 2>&1
    rc=$?
    if [ "$(printf '%s\n25.11\n' "$release" | sort -V | head -1)" = 25.11 ]; then
        if [ $rc -eq 0 ]; then
            pass "removal_without_the_change_slurmd_still_starts (Slurm $release: only slurmctld loads the select plugin)"
        else
            fail removal "slurmd $node did not start on Slurm $release, where it should not load the select\
 plugin: $(tail -2 "$work/restart-old.out" | tr '\n' '|')"
        fi
    elif [ $rc -eq 0 ]; then
        fail removal "slurmd $node started with SelectType=select/goldminer_cons_tres and no such plugin (Slurm $release)"
    else
        pass "removal_without_the_change_slurmd_does_not_start ($(grep -m1 -i 'fatal' "$dir/log/slurmd-$node.log" ||
            tail -1 "$work/restart-old.out"))"
    fi
    removal_stop_slurmctld || { fail removal "slurmctld did not stop"; return; }
    : >"$dir/log/slurmctld.log"
    removal_start_slurmctld
    for _ in $(seq 40); do
        line=$(grep -m1 -i 'fatal' "$dir/log/slurmctld.log")
        [ -z "$line" ] || break
        sleep 0.25
    done
    sleep 1
    if removal_slurmctld_pid >/dev/null; then
        fail removal "slurmctld runs with SelectType=select/goldminer_cons_tres and no such plugin:\
 $(ps -o pid,stat,lstart,args -p "$(removal_slurmctld_pid)" | tail -1); its log: $(tail -3 "$dir/log/slurmctld.log" | tr '\n' '|')"
    else
        pass "removal_without_the_change_slurmctld_does_not_start (slurmctld.log: ${line:-no error logged})"
    fi
    sed -i 's|^SelectType=select/goldminer_cons_tres$|SelectType=select/cons_tres|' "$SLURM_CONF"
    removal_down
}
