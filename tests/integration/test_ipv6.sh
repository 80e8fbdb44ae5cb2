# dw_network naming an interface with only IPv6 addresses (the devcluster's
# eth1 on each node, on a ULA /64): the trainer's address is [IPV6]:PORT,
# and its workers on other nodes reach it over that network.

# with_plugstack_arg ARG CMD...: runs CMD with ARG added to the SPANK
# plugin's line of plugstack.conf, as an admin changes it (sbatch and every
# slurmstepd read the file afresh), and puts the file back afterwards, also
# when the test is stopped.
with_plugstack_arg() {
    local arg=$1 file=$state/etc/plugstack.conf rc=0
    shift
    cp -p "$file" "$file.saved"
    trap 'mv -f "$file.saved" "$file"; exit 1' TERM INT
    sed -i "/^required / s|\$| $arg|" "$file"
    "$@" || rc=$?
    mv -f "$file.saved" "$file"
    trap - TERM INT
    return $rc
}

# Bytes received on eth1 of node N.
eth1_rx_bytes() {
    local ns
    ns=$(node_namespace "$1")
    [ -n "$ns" ] || return 1
    ip -n "$ns" -s -j link show eth1 | jq -e '.[0].stats64.rx.bytes'
}

test_ipv6_only_dw_network_carries_trainer_and_workers() {
    local job out lines=3000 n node before after addr
    nodes_have_namespaces || { echo "skipped: needs node namespaces (netns mode) for eth1"; return 77; }
    seq 1 "$lines" | sed 's/^/sample /' >"$work/v6-input.txt"
    before=$(eth1_rx_bytes g1) || { echo "no eth1 on g1"; return 1; }
    # UCX_NET_DEVICES=eth1: UCX may use no other network, so the batches
    # cross the IPv6 one (the companion job inherits it from the job).
    job=$(with_plugstack_arg dw_network=eth1 submit_wait -o "$work/v6.%j" --export=ALL,UCX_NET_DEVICES=eth1 \
          --goldminer=dw=1,cpus-per-dw=1 -p gpu -w g1 --gpus=1 --wrap \
          "echo listen=\$GOLDMINER_LISTEN; $tools/goldminer-consume --input text:$work/v6-input.txt --epochs 2 \
           --batch-size 50 --workers 0 --min-workers 1 --join-timeout 60 --json -v") || { echo "$job"; return 1; }
    after=$(eth1_rx_bytes g1)
    out=$(cat "$work/v6.$job")
    addr=$(echo "$out" | sed -n 's/^listen=ucx:\/\/\[\(.*\)\]:[0-9]*$/\1/p')
    case $addr in
        fd00:6d67:*) ;;
        *) echo "listen address not on g1's eth1 (fd00:6d67:...): $(echo "$out" | grep '^listen=')"; return 1 ;;
    esac
    n=$(echo "$out" | grep -c "^{\"epoch\": [01], \"samples\": $lines, \"unique_samples\": $lines, \"duplicates\": 0, \"missing\": 0,")
    expect_eq "clean epochs" "$n" 2 || { echo "$out"; return 1; }
    node=$(echo "$out" | sed -n 's/.*session: worker \([a-z0-9]*\):[0-9]* joined.*/\1/p' | head -1)
    [ -n "$node" ] && [ "$node" != g1 ] || { echo "no worker joined from another node: $out"; return 1; }
    # Two epochs of 3000 samples of at least 11 bytes each came in on eth1.
    [ $((after - before)) -ge $((2 * lines * 11)) ] ||
        { echo "g1's eth1 received $((after - before)) bytes, fewer than the two epochs"; return 1; }
}
