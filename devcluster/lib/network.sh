# shellcheck shell=bash
#
# goldminer-devcluster: the cluster's network.  One network namespace per
# node, its veth (eth0) on a private bridge, in a /24 of 10.213.0.0/16 that
# no interface uses, and a second veth (eth1) with only an IPv6 address, on
# a second bridge in a ULA /64 (fd00:6d67:HASH::/64): a multi-homed node
# whose second network is IPv6 only, for dw_network=eth1.  Each object is
# recorded in the state directory as soon as it exists, and
# teardown_network deletes exactly those.  Without namespaces, every slurmd
# listens on 127.0.0.1 (choose_network).
#
# Sourced by goldminer-devcluster (load_libs), whose globals it reads: the
# paths of set_paths, the opt_* options, nodes, node_count, network.
# shellcheck disable=SC2154

net_error=
subnet=
# net CMD...: run a network command; on failure keep its exact error.
net() {
  local out rc=0
  out=$("$@" 2>&1) || rc=$?
  [ "$rc" -ne 0 ] || return 0
  net_error="'$*' failed: ${out:-exit status $rc}"
  return 1
}

record_net() { printf '%s %s\n' "$1" "$2" >>"$net_record"; }

# A /24 inside 10.213.0.0/16 no interface of this machine uses yet; starts
# from a hash of the state directory so that it is stable across runs.
pick_subnet() {
  local start k x used
  start=$((16#$(printf '%s' "$dir" | md5sum | cut -c7-8)))
  used=$(ip -o -4 addr show 2>/dev/null | awk '{ print $4 }')
  for ((k = 0; k < 254; k++)); do
    x=$(((start + k) % 254 + 1))
    printf '%s\n' "$used" | grep -q "^10\.213\.$x\." || { printf '10.213.%d\n' "$x"; return 0; }
  done
  net_error="no free /24 in 10.213.0.0/16"
  return 1
}

# One namespace per node, its veths on our bridges; records each object as
# soon as it exists so that down (or a failed up) deletes exactly those.
# IPv6 addresses skip duplicate address detection (nodad): a tentative
# address cannot be bound, and these are unique by construction.
setup_netns() {
  local cmd node ns i=0
  for cmd in ip nsenter unshare hostname; do
    command -v "$cmd" >/dev/null || { net_error="$cmd not found"; return 1; }
  done
  subnet=$(pick_subnet) || return 1
  net ip link add "$bridge" type bridge || return 1
  record_net link "$bridge"
  net ip addr add "$subnet.1/24" dev "$bridge" || return 1
  net ip link set "$bridge" up || return 1
  net ip link add "$bridge6" type bridge || return 1
  record_net link "$bridge6"
  net ip addr add "$ula::1/64" dev "$bridge6" nodad || return 1
  net ip link set "$bridge6" up || return 1
  for node in $nodes; do
    ns=$prefix-$node
    net ip netns add "$ns" || return 1
    record_net netns "$ns"
    net ip link add "$prefix-$node" type veth peer name "${prefix}p$node" || return 1
    record_net link "$prefix-$node"
    net ip link set "${prefix}p$node" netns "$ns" || return 1
    net ip -n "$ns" link set "${prefix}p$node" name eth0 || return 1
    net ip -n "$ns" addr add "$subnet.$((11 + i))/24" dev eth0 || return 1
    net ip -n "$ns" link set eth0 up || return 1
    net ip -n "$ns" link set lo up || return 1
    net ip link set "$prefix-$node" master "$bridge" || return 1
    net ip link set "$prefix-$node" up || return 1
    net ip link add "${prefix}q$node" type veth peer name "${prefix}r$node" || return 1
    record_net link "${prefix}q$node"
    net ip link set "${prefix}r$node" netns "$ns" || return 1
    net ip -n "$ns" link set "${prefix}r$node" name eth1 || return 1
    net ip -n "$ns" addr add "$ula::$((11 + i))/64" dev eth1 nodad || return 1
    net ip -n "$ns" link set eth1 up || return 1
    net ip link set "${prefix}q$node" master "$bridge6" || return 1
    net ip link set "${prefix}q$node" up || return 1
    i=$((i + 1))
  done
}

# Delete the recorded network objects, newest first.  Deleting a namespace
# with processes left in it only removes its name: report them.
teardown_network() {
  local kind name pids
  [ -s "$net_record" ] || { rm -f -- "$net_record"; return 0; }
  while read -r kind name; do
    case $kind in
      link)
        if ip link show "$name" >/dev/null 2>&1; then
          ip link del "$name" 2>/dev/null || error "cannot delete link $name"
        fi ;;
      netns)
        [ -e "/run/netns/$name" ] || continue
        pids=$(ip netns pids "$name" 2>/dev/null | tr '\n' ' ')
        [ -z "$pids" ] || error "namespace $name still has processes: $pids"
        ip netns del "$name" 2>/dev/null || error "cannot delete namespace $name" ;;
    esac
  done < <(tac -- "$net_record")
  rm -f -- "$net_record"
}

# Sets network and network_note; undoes a half-made netns setup.
# shellcheck disable=SC2034  # network_note: read by cmd_up
choose_network() {
  network=$opt_network
  local ports="$((opt_port_base + 1))-$((opt_port_base + node_count))"
  if [ "$network" != localhost ]; then
    if setup_netns; then
      network=netns
      network_note="one namespace per node on bridge $bridge, $subnet.0/24 (eth0), and $bridge6, $ula::/64 (eth1)"
      return 0
    fi
    teardown_network
    [ "$opt_network" = auto ] || die "network namespaces: $net_error"
    network=localhost
    network_note="fallback: $net_error"
    return 0
  fi
  network_note="one slurmd per node on 127.0.0.1, ports $ports"
}
