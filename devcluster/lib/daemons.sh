# shellcheck shell=bash
#
# goldminer-devcluster: the cluster's daemons.  Starts munged, slurmctld,
# goldminer-ctld (unless --ctld none) and one slurmd per node (in the node's namespaces in netns mode), waits for each
# to write its PID file and for the nodes to be idle, and says why one failed.
#
# Sourced by goldminer-devcluster (load_libs), whose globals it reads: the
# paths of set_paths, the opt_* options, nodes, node_count, network.
# shellcheck disable=SC2154

# Daemons must not inherit the lock (fd 9): it would stay held while they run.

start_munged() {
  # munged refuses a socket directory others can write to.
  chmod 755 "$mungedir"
  if [ ! -e "$munge_key" ]; then
    mungekey --create --keyfile="$munge_key" 9>&- ||
      die "mungekey --create --keyfile=$munge_key failed"
  fi
  munged --force --socket="$munge_socket" --key-file="$munge_key" \
    --pid-file="$rundir/munged.pid" --log-file="$logdir/munged.log" \
    --seed-file="$mungedir/munged.seed" \
    </dev/null >>"$logdir/munged.out" 2>&1 9>&- || start_failed munged $?
  wait_pid munged munged_pid
}

# From Slurm 25.05 on slurmd checks the munge signature of every RPC it
# gets, also one another slurmd forwarded to it (a step's launch on its
# second node): one munged for all the nodes decodes that credential twice
# and refuses the second as replayed. So (state key node_munged) each node
# gets a munged of its own with the cluster's key, as each node of a real
# cluster has, bound over the cluster's munge directory in its slurmd's
# mount namespace (start_slurmd): the node's slurmd, steps and jobs reach
# it at the cluster's socket path.
start_node_munged() {
  local node=$1 d=$mungedir/node-$1
  mkdir -p "$d" && chmod 755 "$d"
  munged --force --socket="$d/${munge_socket##*/}" --key-file="$munge_key" \
    --pid-file="$rundir/munged-$node.pid" --log-file="$logdir/munged-$node.log" \
    --seed-file="$d/munged.seed" \
    </dev/null >>"$logdir/munged-$node.out" 2>&1 9>&- || start_failed "munged $node" $?
  wait_pid "munged $node" node_munged_pid "$node"
}

start_slurmctld() {
  # -c: start from an empty state; the cluster is rebuilt by every up.
  slurmctld -c -f "$conf" </dev/null >>"$logdir/slurmctld.out" 2>&1 9>&- ||
    start_failed slurmctld $?
  wait_pid slurmctld slurmctld_pid
}

# goldminer-ctld next to slurmctld: it does not fork; its PID file is
# written once it listens. Spare CPUs are counted on the workers' partition.
start_ctld() {
  setsid env SLURM_CONF="$conf" "$opt_ctld" --listen "0.0.0.0:$((opt_port_base - 1))" --partition dw \
    --munge-socket "$munge_socket" "--pid-file=$rundir/goldminer-ctld.pid" \
    </dev/null >>"$logdir/goldminer-ctld.log" 2>&1 9>&- &
  wait_pid goldminer-ctld ctld_pid
}

# slurmd (and the slurmstepd it starts) gets --slurmd-path first on its
# PATH: a SPANK plugin such as pyxis runs its tools from there.
start_slurmd() {
  local node=$1 PATH=${opt_slurmd_path:+$opt_slurmd_path:}$PATH
  local -a slurmd_cmd=(slurmd -f "$conf" -N "$node")
  local ns_setup=:
  export PATH
  mkdir -p "$dir/spool/$node" "$dir/tmp/$node"
  if [ "$(state_get node_munged)" = yes ]; then
    node_munged_pid "$node" >/dev/null || start_node_munged "$node"
    ns_setup="mount --bind $(printf '%q' "$mungedir/node-$node") $(printf '%q' "$mungedir")"
  fi
  # --configless: slurmd reads no file; it asks slurmctld for its
  # configuration, before it knows AuthInfo's socket, through munged's
  # default one (/run/munge/munge.socket.2): in its own mount namespace
  # this cluster's munge directory, where that name links to the socket,
  # is bound there. It also links /run/slurm/conf to its conf-cache: a
  # directory of the node's own is bound over /run/slurm, so that the
  # machine's own link (a configless slurmd of its own) stays as it is.
  if [ -n "$(state_get conf_server)" ]; then
    slurmd_cmd=(env -u SLURM_CONF slurmd "$(slurmd_mark)" -N "$node")
    ln -sfn "${munge_socket##*/}" "$mungedir/munge.socket.2"
    [ "$(state_get node_munged)" != yes ] || ln -sfn "${munge_socket##*/}" "$mungedir/node-$node/munge.socket.2"
    mkdir -p "$rundir/slurm-$node"
    ns_setup="$ns_setup && mkdir -p /run/munge /run/slurm && mount --bind $(printf '%q' "$mungedir") /run/munge &&
                mount --bind $(printf '%q' "$rundir/slurm-$node") /run/slurm"
  fi
  if [ "$network" = netns ]; then
    # Not `ip netns exec`: it remounts /sys and slurmd then fails on
    # /sys/fs/cgroup.  A private UTS namespace gives the node its own name,
    # a private mount namespace (propagation private: nothing leaks out) its
    # own /etc/hosts and its own network devices in /sys (a sysfs mounted in
    # the node's network namespace, of which only class/net and
    # devices/virtual/net are bound over the machine's): UCX finds the
    # devices a job may use there.
    mkdir -p "$rundir/sys-$node"
    # shellcheck disable=SC2016  # $1..$4 and $@ are the inner shell's
    nsenter --net="/run/netns/$prefix-$node" unshare --uts --mount \
      sh -c 'hostname "$1" && mount --bind "$2" /etc/hosts &&
             mount -t sysfs sysfs "$3" && mount --bind "$3/class/net" /sys/class/net &&
             mount --bind "$3/devices/virtual/net" /sys/devices/virtual/net && eval "$4" &&
             shift 4 && exec "$@"' sh "$node" "$etc/hosts" "$rundir/sys-$node" "$ns_setup" "${slurmd_cmd[@]}" \
      </dev/null >>"$logdir/slurmd-$node.out" 2>&1 9>&- ||
      start_failed "slurmd $node" $?
  elif [ "$ns_setup" != : ]; then
    # shellcheck disable=SC2016  # $1 is the inner shell's
    unshare --mount sh -c 'eval "$1" && shift && exec "$@"' sh "$ns_setup" "${slurmd_cmd[@]}" \
      </dev/null >>"$logdir/slurmd-$node.out" 2>&1 9>&- ||
      start_failed "slurmd $node" $?
  else
    "${slurmd_cmd[@]}" </dev/null >>"$logdir/slurmd-$node.out" 2>&1 9>&- ||
      start_failed "slurmd $node" $?
  fi
  wait_pid "slurmd $node" slurmd_pid "$node"
}

# exit_reason LABEL: why daemon LABEL ("slurmd g1") stopped, from its log
# (or, before it opened its log, its .out): the last fatal line, else the
# first error line (the later ones tend to be consequences, e.g. "slurmd
# initialization failed"), without the timestamp.
exit_reason() {
  local base=${1/ /-} line
  line=$(cat -- "$logdir/$base.out" "$logdir/$base.log" 2>/dev/null |
         grep -i 'fatal:' | tail -n 1) || true
  [ -n "$line" ] || line=$(cat -- "$logdir/$base.out" "$logdir/$base.log" 2>/dev/null |
         grep -i -m 1 'error:') || true
  line=${line#\[*\] }
  printf '%s\n' "${line:-no reason in $logdir/$base.log}"
}

# start_failed LABEL STATUS: daemon LABEL exited before forking.
start_failed() {
  die "$1 failed to start (exit status $2): $(exit_reason "$1")"
}

# wait_pid LABEL FUNC [ARG]: the daemons fork and write their PID file from
# the child, which may also die before (slurmctld does on a bad SelectType):
# wait up to 10 s for FUNC to find it alive, fail as soon as the log says fatal.
wait_pid() {
  local label=$1 base=${1/ /-} deadline=$((SECONDS + 10))
  shift
  until "$@" >/dev/null; do
    if grep -qi 'fatal:' -- "$logdir/$base.log" 2>/dev/null; then
      die "$label exited at start: $(exit_reason "$label")"
    fi
    [ $SECONDS -lt $deadline ] ||
      die "$label did not start: no live process in its PID file after 10 s"
    sleep 0.05
  done
}

# check_daemons [quiet]: returns 0 if every daemon of the cluster last
# started runs; unless quiet, says so for each.
check_daemons() {
  local quiet=${1:-} label pid node rc=0
  local -a labels=(munged slurmctld)
  [ "$(state_get ctld)" = none ] || labels+=(goldminer-ctld)
  for node in $(state_get nodes); do
    [ "$(state_get node_munged)" != yes ] || labels+=("munged $node")
    labels+=("slurmd $node")
  done
  for label in "${labels[@]}"; do
    if pid=$(daemon_pid "$label"); then
      [ -n "$quiet" ] || say "$label: running (pid $pid)"
    else
      rc=1
      [ -n "$quiet" ] || say "$label: not running"
    fi
  done
  return $rc
}

any_daemon_alive() {
  local node
  if munged_pid >/dev/null || slurmctld_pid >/dev/null || ctld_pid >/dev/null; then return 0; fi
  for node in $(recorded_nodes); do
    if slurmd_pid "$node" >/dev/null || node_munged_pid "$node" >/dev/null; then return 0; fi
  done
  return 1
}

# Wait until every node is idle; fail early if a daemon died.
wait_for_idle() {
  local deadline=$((SECONDS + opt_timeout)) node states not_idle
  while :; do
    slurmctld_pid >/dev/null || { error "slurmctld exited: $(exit_reason slurmctld)"; return 1; }
    for node in $nodes; do
      slurmd_pid "$node" >/dev/null ||
        { error "slurmd $node exited: $(exit_reason "slurmd $node")"; return 1; }
    done
    states=$(sinfo -h -N -o '%N %t' 2>/dev/null | sort -u) || states=
    not_idle=$(printf '%s\n' "$states" | awk 'NF && $2 != "idle" { printf " %s (%s)", $1, $2 }')
    if [ -n "$states" ] && [ -z "$not_idle" ] &&
       [ "$(printf '%s\n' "$states" | awk 'NF' | wc -l)" -eq "$node_count" ]; then
      return 0
    fi
    if [ $SECONDS -ge $deadline ]; then
      error "nodes not idle after $opt_timeout s:${not_idle:- no answer from slurmctld}"
      sinfo -h -R -o '%n: %E' 2>/dev/null | sed "s/^/$PROG: reason: /" >&2 || true
      return 1
    fi
    sleep 0.2
  done
}

show_log_tails() {
  local f
  for f in "$logdir"/*; do
    [ -s "$f" ] || continue
    printf '%s: --- last lines of %s ---\n' "$PROG" "$f"
    tail -n 15 -- "$f"
  done
}
