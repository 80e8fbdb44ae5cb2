# shellcheck shell=bash
#
# goldminer-devcluster: the cluster's configuration, rewritten by every up:
# the state file, the fake GPUs, slurm.conf, gres.conf, goldminer.conf,
# plugstack.conf and, in netns mode, the nodes' /etc/hosts.
#
# Sourced by goldminer-devcluster (load_libs), whose globals it reads: the
# paths of set_paths, the opt_* options, nodes, node_count, network.
# shellcheck disable=SC2154

write_state() {
  {
    printf 'network=%s\nnodes=%s\nctld=%s\nslurm=%s\n' "$network" "$nodes" "$opt_ctld" "$slurm_prefix"
    [ -z "$opt_slurmd_path" ] || printf 'slurmd_path=%s\n' "$opt_slurmd_path"
    [ -z "$opt_configless" ] || printf 'conf_server=%s:%s\n' "$(controller_addr)" "$opt_port_base"
    slurm_older_than 25.05 || printf 'node_munged=yes\n'  # daemons.sh, start_node_munged
    [ "$network" != netns ] ||
      printf 'bridge=%s\nsubnet=%s\nbridge6=%s\nula=%s::/64\n' "$bridge" "$subnet" "$bridge6" "$ula"
  } >"$state_file"
}

# GPU device files: 22.05 accepts only character/block devices in File= and
# drops GPUs without File=, so each fake GPU is a symlink to /dev/null.
make_gpus() {
  local node i
  for node in $nodes; do
    case $node in g*) ;; *) continue ;; esac
    mkdir -p "$dir/gpus/$node"
    for ((i = 0; i < opt_gpus_per_node; i++)); do
      ln -sfn /dev/null "$dir/gpus/$node/nvidia$i"
    done
  done
}

# Where the nodes reach slurmctld (and goldminer-ctld) on this machine.
controller_addr() {
  if [ "$network" = netns ]; then printf '%s\n' "$subnet.1"; else printf '127.0.0.1\n'; fi
}

ctld_address() { printf '%s:%s\n' "$(controller_addr)" "$((opt_port_base - 1))"; }

write_slurm_conf() {
  local host addr node i=0 plugindir gpu_list='' cpu_list='' all_list=
  host=$(hostname -s)
  addr=$(controller_addr)
  plugindir=$slurm_plugindir
  # A missing directory in PluginDir is fatal to every Slurm program ("Bad
  # value ... for PluginDir"); ours is only needed when it exists, and not
  # twice when installed into Slurm's own (the .debs put them there).
  if [ -d "$opt_plugin_dir" ] && [ ! "$opt_plugin_dir" -ef "$slurm_plugindir" ]; then
    plugindir=$plugindir:$opt_plugin_dir
  fi
  {
    cat <<EOF
# Written by $PROG $VERSION; rewritten by every "$PROG up".
ClusterName=gmdev
SlurmctldHost=$host($addr)
SlurmctldPort=$opt_port_base
SlurmdPort=$((opt_port_base + 1))
SlurmUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$munge_socket
StateSaveLocation=$dir/state
# Several slurmd on one machine: per-node spool, PID, log and TmpFS (pmix).
SlurmdSpoolDir=$dir/spool/%n
SlurmdPidFile=$rundir/slurmd-%n.pid
SlurmdLogFile=$logdir/slurmd-%n.log
TmpFS=$dir/tmp/%n
SlurmctldPidFile=$rundir/slurmctld.pid
SlurmctldLogFile=$logdir/slurmctld.log
PluginDir=$plugindir
PlugStackConfig=$etc/plugstack.conf
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/$opt_select
SelectTypeParameters=CR_Core_Memory
# Without it a job gets a whole node's memory and nodes are never shared.
DefMemPerCPU=$((opt_mem_per_node / opt_cpus_per_node > 0 ? opt_mem_per_node / opt_cpus_per_node : 1))
GresTypes=gpu
SchedulerType=sched/backfill
# Heterogeneous jobs are started by backfill only: run it every second.
SchedulerParameters=bf_interval=1
# Data workers (partition dw, the lowest tier) yield their CPUs to GPU jobs:
# cancelled after GraceTime, in which goldminer-dw drains on SIGTERM. The
# select plugin lets only jobs that ask for GPUs preempt them.
PreemptType=preempt/partition_prio
PreemptMode=CANCEL
# Release the allocation of an srun killed by a test's watchdog (SIGKILL)
# instead of holding its nodes forever (the default, 0).
InactiveLimit=30
ReturnToService=2
# CPUs and memory below are virtual: slurmd must accept them as configured.
SlurmdParameters=config_overrides
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
MinJobAge=60
# Debian has no mail program by default; slurmctld logs an error without one.
MailProg=/bin/true
EOF
    [ -z "$opt_debug_flags" ] || printf 'DebugFlags=%s\n' "$opt_debug_flags"
    # --configless: slurmd is started with --conf-server instead of -f and
    # gets slurm.conf, plugstack.conf (and the files it includes) from here.
    [ -z "$opt_configless" ] || printf 'SlurmctldParameters=enable_configless\n'
    echo
    for node in $nodes; do
      printf 'NodeName=%s' "$node"
      if [ "$network" = netns ]; then
        printf ' NodeHostname=%s NodeAddr=%s' "$node" "$subnet.$((11 + i))"
      else
        printf ' NodeHostname=%s NodeAddr=127.0.0.1 Port=%d' "$node" "$((opt_port_base + 1 + i))"
      fi
      printf ' Sockets=1 CoresPerSocket=%d ThreadsPerCore=1 RealMemory=%d' \
        "$opt_cpus_per_node" "$opt_mem_per_node"
      case $node in
        g*) printf ' Gres=gpu:%d Feature=gpu' "$opt_gpus_per_node"
            gpu_list=$gpu_list,$node ;;
        *)  printf ' Feature=cpu'
            cpu_list=$cpu_list,$node ;;
      esac
      printf ' State=UNKNOWN\n'
      all_list=$all_list,$node
      i=$((i + 1))
    done
    [ -z "$gpu_list" ] || printf 'PartitionName=gpu Nodes=%s MaxTime=INFINITE State=UP PriorityTier=2 PreemptMode=OFF\n' "${gpu_list#,}"
    [ -z "$cpu_list" ] || printf 'PartitionName=cpu Nodes=%s MaxTime=INFINITE State=UP PriorityTier=2 PreemptMode=OFF\n' "${cpu_list#,}"
    printf 'PartitionName=all Nodes=%s MaxTime=INFINITE State=UP Default=YES PriorityTier=2 PreemptMode=OFF\n' "${all_list#,}"
    # Data workers may run anywhere: the select plugin places them.
    printf 'PartitionName=dw Nodes=%s MaxTime=INFINITE State=UP PriorityTier=1 PreemptMode=CANCEL GraceTime=15\n' "${all_list#,}"
  } >"$conf"
}

# /etc/hosts of the nodes in netns mode (bind-mounted in their private mount
# namespace): node names and this machine's name resolve to bridge addresses,
# as on a real cluster.
write_hosts() {
  local node i=0
  {
    printf '# Written by %s %s: /etc/hosts of the nodes.\n' "$PROG" "$VERSION"
    printf '127.0.0.1\tlocalhost\n'
    printf '%s.1\t%s\n' "$subnet" "$(hostname -s)"
    for node in $nodes; do
      printf '%s.%d\t%s\n' "$subnet" "$((11 + i))" "$node"
      i=$((i + 1))
    done
  } >"$etc/hosts"
}

write_gres_conf() {
  local node last=$((opt_gpus_per_node - 1)) files
  if [ "$last" -eq 0 ]; then files=nvidia0; else files="nvidia[0-$last]"; fi
  {
    printf '# Written by %s %s.  Fake GPUs: symlinks to /dev/null.\n' "$PROG" "$VERSION"
    printf 'AutoDetect=off\n'
    for node in $nodes; do
      case $node in g*) ;; *) continue ;; esac
      printf 'NodeName=%s Name=gpu File=%s\n' "$node" "$dir/gpus/$node/$files"
    done
  } >"$etc/gres.conf"
}

# goldminer.conf beside slurm.conf: the select plugin's settings, one per line.
write_goldminer_conf() {
  local setting
  {
    printf '# Written by %s %s: settings of %s.\n' "$PROG" "$VERSION" "$SELECT_SO"
    for setting in $opt_select_conf; do printf '%s\n' "$setting"; done
  } >"$etc/goldminer.conf"
}

write_plugstack_conf() {
  local args=$opt_plugstack_args
  case " $args" in
    *" dw_partition="*) ;;
    *) args="${args:+$args }dw_partition=dw" ;;
  esac
  # All nodes are 127.0.0.1 here: a batch job's data workers reach its
  # trainer on lo, not on this machine's real interface.
  case " $args" in
    *" dw_network="*) ;;
    *) [ "$network" != localhost ] || args="${args:+$args }dw_network=lo" ;;
  esac
  # The trainer ports this cluster's jobs reserve (one registry for all its
  # nodes: they share an address on localhost, and ports unique across
  # nodes are unique on each), under its state directory.
  case " $args" in
    *" port_registry="*) ;;
    *) args="${args:+$args }port_registry=$rundir/goldminer/ports" ;;
  esac
  # Elastic sessions report to goldminer-ctld (run as root, like slurmctld
  # here), through this cluster's munged.
  case " $args" in
    *" ctld="*) ;;
    *) [ "$opt_ctld" = none ] ||
         args="${args:+$args }ctld=$(ctld_address) ctld_user=root munge_socket=$munge_socket" ;;
  esac
  local line='' include=''
  [ -n "$opt_no_spank" ] || line="required $opt_plugin_dir/$SPANK_SO${args:+ $args}"
  rm -f -- "$etc/$PLUGSTACK_INCLUDE"
  # Configless, slurmctld sends plugstack.conf and (24.11 and later) each
  # file it includes by a name without a slash or glob, which the nodes
  # read from their copy: the plugin's line goes in such a file. 22.05
  # sends plugstack.conf alone, so the line stays in it.
  if [ -n "$opt_configless" ] && [ -n "$line" ] && ! slurm_older_than 24.11; then
    printf '# Written by %s %s.\n%s\n' "$PROG" "$VERSION" "$line" >"$etc/$PLUGSTACK_INCLUDE"
    include=$PLUGSTACK_INCLUDE
  fi
  {
    printf '# Written by %s %s.\n' "$PROG" "$VERSION"
    if [ -n "$opt_no_spank" ]; then
      printf '# --no-spank: no SPANK plugin.\n'
    elif [ -n "$include" ]; then
      printf 'include %s\n' "$include"
    else
      printf '%s\n' "$line"
    fi
  } >"$etc/plugstack.conf"
}

# slurm_older_than X.Y: the cluster's Slurm (check_prerequisites's
# slurm_version) is an older release than X.Y.
slurm_older_than() {
  local have=${slurm_version%.*}
  [ -n "$have" ] || return 1
  [ "$(printf '%s\n%s\n' "$have" "$1" | sort -V | head -1)" != "$1" ]
}
