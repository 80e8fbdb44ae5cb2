# shellcheck shell=bash
#
# goldminer-devcluster: the cluster's processes.  Which processes are ours
# (the live PIDs in the state directory's PID files, the job processes in our
# namespaces or spool directory) and how they are stopped: jobs first, then
# the daemons, then the network (stop_cluster).
#
# Sourced by goldminer-devcluster (load_libs), whose globals it reads: the
# paths of set_paths, the opt_* options, nodes, node_count, network.
# shellcheck disable=SC2154

stopped=()   # PID:COMM of each process stop_cluster signalled

# live_pid PIDFILE COMM ARG: print the PID recorded in PIDFILE if that process
# is alive, is COMM and has ARG among its arguments (so a reused PID, or the
# same daemon of another cluster, is never taken for ours).
live_pid() {
  local pid
  [ -r "$1" ] || return 1
  read -r pid 2>/dev/null <"$1" || return 1
  case $pid in ''|*[!0-9]*) return 1 ;; esac
  pid_is "$pid" "$2" "$3" || return 1
  printf '%s\n' "$pid"
}

pid_is() {
  local comm
  comm=$(cat "/proc/$1/comm" 2>/dev/null) || return 1
  # Debian 13's Slurm runs slurmctld-wlm, slurmd-wlm (through alternatives).
  case $comm in
    "$2" | "$2-wlm") ;;
    *) return 1 ;;
  esac
  # A zombie has exited: the daemons are reparented, so we never reap them.
  is_alive "$1" || return 1
  tr '\0' '\n' <"/proc/$1/cmdline" 2>/dev/null | grep -qxF -- "$3"
}

munged_pid()    { live_pid "$rundir/munged.pid" munged "--pid-file=$rundir/munged.pid"; }
node_munged_pid() { live_pid "$rundir/munged-$1.pid" munged "--pid-file=$rundir/munged-$1.pid"; }
slurmctld_pid() { live_pid "$rundir/slurmctld.pid" slurmctld "$conf"; }
slurmd_pid()    { live_pid "$rundir/slurmd-$1.pid" slurmd "$(slurmd_mark)"; }
# What a slurmd of this cluster has on its command line: -f's slurm.conf,
# or --configless's --conf-server=ADDR:PORT (the state file's).
slurmd_mark() {
  local server
  server=$(state_get conf_server)
  if [ -n "$server" ]; then printf -- '--conf-server=%s\n' "$server"; else printf '%s\n' "$conf"; fi
}
ctld_pid()      { live_pid "$rundir/goldminer-ctld.pid" goldminer-ctld "--pid-file=$rundir/goldminer-ctld.pid"; }

# daemon_pid LABEL: the live PID of "munged", "slurmctld", "goldminer-ctld"
# or "slurmd NODE".
daemon_pid() {
  case $1 in
    munged) munged_pid ;;
    "munged "*) node_munged_pid "${1#munged }" ;;
    slurmctld) slurmctld_pid ;;
    goldminer-ctld) ctld_pid ;;
    "slurmd "*) slurmd_pid "${1#slurmd }" ;;
  esac
}

# Nodes with a slurmd PID file: those of the state file plus any left from
# an earlier, larger cluster in the same directory.
recorded_nodes() {
  local f
  { state_get nodes | tr ' ' '\n'
    for f in "$rundir"/slurmd-*.pid; do
      [ -e "$f" ] || continue
      f=${f##*/slurmd-}; printf '%s\n' "${f%.pid}"
    done
  } | awk 'NF && !seen[$0]++'
}

# stop_group COMM ARG LABEL:PIDFILE...: SIGTERM every live daemon, wait up to
# STOP_WAIT_S for all, then SIGKILL those same PIDs.  Removes the PID files.
stop_group() {
  local comm=$1 arg=$2 item label pidfile pid deadline i
  local -a pids=() labels=() left=() left_labels=()
  shift 2
  for item in "$@"; do
    label=${item%%:*} pidfile=${item#*:}
    if pid=$(live_pid "$pidfile" "$comm" "$arg"); then
      say "stopping $label (pid $pid)"
      kill -TERM "$pid" 2>/dev/null || true
      pids+=("$pid") labels+=("$label")
      stopped+=("$pid:$comm")
    fi
    rm -f -- "$pidfile"
  done
  deadline=$((SECONDS + STOP_WAIT_S))
  while [ ${#pids[@]} -gt 0 ] && [ $SECONDS -lt $deadline ]; do
    left=() left_labels=()
    for i in "${!pids[@]}"; do
      if pid_is "${pids[i]}" "$comm" "$arg"; then
        left+=("${pids[i]}") left_labels+=("${labels[i]}")
      fi
    done
    pids=("${left[@]}") labels=("${left_labels[@]}")
    [ ${#pids[@]} -eq 0 ] || sleep 0.1
  done
  for i in "${!pids[@]}"; do
    error "${labels[i]} (pid ${pids[i]}) ignored SIGTERM for ${STOP_WAIT_S} s: sending SIGKILL"
    kill -KILL "${pids[i]}" 2>/dev/null || true
  done
}

# is_alive PID: the process exists and is not a zombie.
is_alive() {
  local state
  read -r _ _ state _ 2>/dev/null <"/proc/$1/stat" || return 1
  [ "$state" != Z ]
}

# Job processes that survived scancel (a hung step, a task ignoring SIGTERM
# for KillWait).  They are ours without doubt: they run in one of our
# namespaces, or (on localhost) listen on a socket in our spool directory.
# Our daemons, in the PID files, are not among them; the descendants of
# those found are (a task whose slurmstepd died is reparented).
leftover_pids() {
  local kind name
  {
    if [ -s "$net_record" ]; then
      while read -r kind name; do
        if [ "$kind" = netns ] && [ -e "/run/netns/$name" ]; then
          ip netns pids "$name" 2>/dev/null || true
        fi
      done <"$net_record"
    fi
    ss -Hxlp 2>/dev/null | awk -v d="$dir/spool/" 'index($5, d) == 1' |
      grep -o 'pid=[0-9]*' | cut -d= -f2
  } | sort -un | grep -vxF -f <(cat "$rundir"/*.pid 2>/dev/null; echo x) |
    with_descendants
}

# with_descendants: the PIDs read, one a line, and all their descendants.
with_descendants() {
  local seeds
  seeds=$(cat)
  [ -n "$seeds" ] || return 0
  ps -eo pid=,ppid= | awk -v seeds="$seeds" '
    BEGIN { n = split(seeds, a, "\n"); for (i = 1; i <= n; i++) seed[a[i]] = 1 }
    { parent[$1] = $2 }
    END {
      for (p in parent) {
        for (q = p; !(q in seed) && (q in parent) && q > 1; q = parent[q]) ;
        if (q in seed) print p
      }
    }' | sort -n
}

# Short grace: they already had scancel's SIGTERM.
stop_leftovers() {
  local pids pid left comm deadline=$((SECONDS + 3))
  pids=$(leftover_pids | tr '\n' ' ')
  [ -n "${pids// /}" ] || return 0
  say "stopping job processes left behind: $pids"
  for pid in $pids; do
    comm=$(cat "/proc/$pid/comm" 2>/dev/null) || continue
    stopped+=("$pid:$comm")
    kill -TERM "$pid" 2>/dev/null || true
  done
  while :; do
    left=
    for pid in $pids; do is_alive "$pid" && left="$left $pid"; done
    if [ -z "$left" ] || [ $SECONDS -ge $deadline ]; then break; fi
    sleep 0.1
  done
  if [ -n "$left" ]; then
    error "job processes ignored SIGTERM for 3 s: sending SIGKILL to$left"
    # shellcheck disable=SC2086  # one word per PID
    kill -KILL $left 2>/dev/null || true
  fi
}

# Cancel every job so that no slurmstepd or job task outlives the cluster
# (they are not in our PID files).  Best effort: waits up to STOP_WAIT_S.
cancel_jobs() {
  local jobs deadline
  jobs=$(squeue -h -o '%i' 2>/dev/null) || return 0
  [ -n "$jobs" ] || return 0
  say "cancelling jobs: $(printf '%s' "$jobs" | tr '\n' ' ')"
  # shellcheck disable=SC2086  # one word per job id
  scancel $jobs 2>/dev/null || true
  deadline=$((SECONDS + STOP_WAIT_S))
  while [ -n "$(squeue -h -o '%i' 2>/dev/null)" ] && [ $SECONDS -lt $deadline ]; do
    sleep 0.2
  done
}

# wait_reaped PID:COMM...: the daemons were reparented to PID 1, which may
# reap them late (seen: ~2 s); wait a little so that none is left even as a
# zombie when down returns.  Never fails.
wait_reaped() {
  local item pid state comm deadline=$((SECONDS + 5))
  for item in "$@"; do
    pid=${item%%:*}
    while [ $SECONDS -lt $deadline ] &&
          read -r _ comm state _ 2>/dev/null <"/proc/$pid/stat" &&
          [ "$comm" = "(${item#*:})" ] && [ "$state" = Z ]; do
      sleep 0.1
    done
  done
}

# Stop everything recorded in the state directory, jobs first.
stop_cluster() {
  local node
  local -a items=()
  stopped=()
  if slurmctld_pid >/dev/null; then cancel_jobs; fi
  # Before slurmd: it waits for its steps when asked to stop.
  stop_leftovers
  for node in $(recorded_nodes); do
    items+=("slurmd $node:$rundir/slurmd-$node.pid")
  done
  [ ${#items[@]} -eq 0 ] || stop_group slurmd "$(slurmd_mark)" "${items[@]}"
  stop_group goldminer-ctld "--pid-file=$rundir/goldminer-ctld.pid" "goldminer-ctld:$rundir/goldminer-ctld.pid"
  stop_group slurmctld "$conf" "slurmctld:$rundir/slurmctld.pid"
  for node in $(recorded_nodes); do
    [ ! -e "$rundir/munged-$node.pid" ] ||
      stop_group munged "--pid-file=$rundir/munged-$node.pid" "munged $node:$rundir/munged-$node.pid"
  done
  stop_group munged "--pid-file=$rundir/munged.pid" "munged:$rundir/munged.pid"
  teardown_network
  wait_reaped "${stopped[@]}"
}
