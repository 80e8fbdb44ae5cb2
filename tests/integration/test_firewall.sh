# plugstack.conf firewall=nftables: the step that reserves a trainer's port
# installs an nftables table in its node's network namespace that drops new
# connections to that port from anyone but the job's nodes, firewall_admit
# and the node itself, and deletes it when the step ends.

# fw_probe N ADDR PORT: from node N's namespace ("host": this machine's),
# a TCP connect to ADDR:PORT with a 3 s limit; prints "connected",
# "refused" (the node's TCP stack answered: nothing listens) or "timeout"
# (no answer: dropped).
fw_probe() {
    local run=()
    [ "$1" = host ] || run=(ip netns exec "$(node_namespace "$1")")
    "${run[@]}" python3 -c '
import socket, sys
s = socket.socket()
s.settimeout(3)
try:
    s.connect((sys.argv[1], int(sys.argv[2])))
    print("connected")
except ConnectionRefusedError:
    print("refused")
except (socket.timeout, TimeoutError):
    print("timeout")
except OSError as e:
    print("error: %s" % e)
' "$2" "$3"
}

# The IPv4 address of node N's eth0.
fw_node_address() {
    ip -n "$(node_namespace "$1")" -4 -o addr show dev eth0 | awk '{print $4}' | cut -d/ -f1
}

# The job waits (at most 90 s) for the test's probes, with its trainer's
# port reserved and the table in place but nothing listening there yet, so
# an admitted probe is "refused" and a dropped one "timeout"; then it dumps
# the rules with their counters and runs its epochs with the companion
# job's worker (on c1 or c2, admitted by firewall_admit).
fw_job() {
    local lines=$1
    with_job_ucx sbatch --parsable -o "$work/fw.%j" --time=3 --goldminer=dw=1,cpus-per-dw=1 -p gpu -w g1 --gpus=1 \
        --wrap "echo listen=\$GOLDMINER_LISTEN ucx_port=\$GOLDMINER_UCX_PORT
                nft list ruleset >$work/fw-before.\$SLURM_JOB_ID 2>&1
                for i in \$(seq 450); do [ -e $work/fw-go.\$SLURM_JOB_ID ] && break; sleep 0.2; done
                nft list ruleset >$work/fw-after.\$SLURM_JOB_ID 2>&1
                $tools/goldminer-consume --input text:$work/fw-input.txt --epochs 2 --batch-size 50 --workers 0 \
                  --min-workers 1 --join-timeout 60 --json -v &
                consume=\$!
                seen=0
                while kill -0 \$consume 2>/dev/null; do
                  ss -Hltnp \"sport = :\$GOLDMINER_UCX_PORT\" | grep -q goldminer-cons && seen=1
                  sleep 0.02
                done
                echo ucx_listened_on_its_port=\$seen
                wait \$consume"
}

test_firewall_drops_strangers_and_admits_the_jobs_nodes_and_workers() {
    local lines=3000 c1 c2 g1 bridge
    nodes_have_namespaces || { echo "skipped: needs node namespaces (netns mode): each node its own nftables"; return 77; }
    command -v nft >/dev/null || { echo "skipped: needs nft (Debian: nftables)"; return 77; }
    seq 1 "$lines" | sed 's/^/sample /' >"$work/fw-input.txt"
    c1=$(fw_node_address c1) c2=$(fw_node_address c2) g1=$(fw_node_address g1)
    bridge=$(awk -F= '$1 == "subnet" {print $2 ".1"}' "$state/run/cluster")
    [ -n "$c1" ] && [ -n "$c2" ] && [ -n "$g1" ] && [ -n "$bridge" ] ||
        { echo "node addresses: c1=$c1 c2=$c2 g1=$g1 this machine=$bridge"; return 1; }
    # The setting stays until the job ended: its steps read it when they start.
    with_plugstack_arg "firewall=nftables firewall_admit=$c1,$c2" fw_check "$lines"
}

fw_check() {
    local lines=$1 job out listen addr port ucx_port guarded probes n i
    job=$(fw_job "$lines") || { echo "sbatch: $job"; return 1; }
    for i in $(seq 300); do
        listen=$(sed -n 's/^listen=//p' "$work/fw.$job" 2>/dev/null)
        [ -n "$listen" ] && break
        sleep 0.2
    done
    ucx_port=${listen##*ucx_port=} listen=${listen% ucx_port=*}
    addr=${listen#ucx://} port=${addr##*:} addr=${addr%:*}
    [ -n "$port" ] && [ -n "$ucx_port" ] ||
        { echo "job $job printed no listen address or UCX port: $(cat "$work/fw.$job" 2>&1)"; scancel "$job"; return 1; }
    # What the table holds (the step installed it before the script ran):
    # the trainer's port and its UCX's, in the registry's order.
    guarded="tcp dport { $(printf '%s\n' "$port" "$ucx_port" | sort -n | paste -sd, | sed 's/,/, /') }"
    out=$(cat "$work/fw-before.$job")
    expect_contains "rules in g1's namespace" "$out" "table inet goldminer_j${job}_p" || { scancel "$job"; return 1; }
    expect_contains "guarded ports" "$out" "$guarded ip saddr != @admitted_v4 counter packets 0 bytes 0 drop" ||
        { scancel "$job"; return 1; }
    # A stranger on this machine (the bridge's address) and one on g2, a
    # node of the cluster but not of the job: dropped. c1 (firewall_admit)
    # and g1 itself: they reach the node's TCP stack.
    probes="host=$(fw_probe host "$addr" "$port") g2=$(fw_probe g2 "$addr" "$port")"
    probes="$probes c1=$(fw_probe c1 "$addr" "$port") g1=$(fw_probe g1 "$addr" "$port")"
    probes="$probes ucx:host=$(fw_probe host "$addr" "$ucx_port") ucx:c1=$(fw_probe c1 "$addr" "$ucx_port")"
    touch "$work/fw-go.$job"
    expect_eq "probes of $addr:$port and UCX's $ucx_port" "$probes" \
        "host=timeout g2=timeout c1=refused g1=refused ucx:host=timeout ucx:c1=refused" || { scancel "$job"; return 1; }
    expect_eq "job $job" "$(final_job_state "$job")" "COMPLETED 0:0" || { cat "$work/fw.$job"; return 1; }
    out=$(cat "$work/fw.$job")
    # The kernel counted the strangers' SYNs (each retried within 3 s).
    n=$(sed -n "s/.*$guarded ip saddr != @admitted_v4 counter packets \([0-9]*\) bytes.*/\1/p" "$work/fw-after.$job")
    [ "${n:-0}" -ge 3 ] || { echo "dropped packets counted: '${n}'"; cat "$work/fw-after.$job"; return 1; }
    # The trainer's UCX listened on the port the rules guard.
    expect_contains "trainer's UCX" "$out" "ucx_listened_on_its_port=1" || { echo "$out"; return 1; }
    n=$(echo "$out" | grep -c "^{\"epoch\": [01], \"samples\": $lines, \"unique_samples\": $lines, \"duplicates\": 0, \"missing\": 0,")
    expect_eq "clean epochs through the firewall" "$n" 2 || { echo "$out"; return 1; }
    # The step's end deleted the table: the same stranger now reaches the
    # node (nothing listens: refused), so the drop above was the table's.
    out=$(ip netns exec "$(node_namespace g1)" nft list tables)
    expect_eq "goldminer tables left on g1" "$(echo "$out" | grep -c goldminer_)" 0 || { echo "$out"; return 1; }
    expect_eq "stranger after the job" "$(fw_probe host "$addr" "$port")" refused
}

# The ranks of an srun step: each task but rank 0 gets its own port and
# its UCX's (GOLDMINER_RANK_LISTEN, GOLDMINER_RANK_UCX_PORT); the step's
# table on the node guards those four and the two reserved for rank 0's
# trainer and its UCX.
test_firewall_guards_every_ranks_ports() {
    local out guarded p
    nodes_have_namespaces || { echo "skipped: needs node namespaces (netns mode)"; return 77; }
    command -v nft >/dev/null || { echo "skipped: needs nft (Debian: nftables)"; return 77; }
    out=$(with_plugstack_arg firewall=nftables with_job_ucx timeout 60 srun --immediate=30 --goldminer=dw=1 -p gpu -w g1 \
          -N1 -n3 sh -c 'echo "rank $SLURM_PROCID ${GOLDMINER_RANK_LISTEN##*:} ${GOLDMINER_RANK_UCX_PORT:-none}"
                        [ "$SLURM_PROCID" != 0 ] || nft list ruleset | grep -o "tcp dport { [0-9, ]* } ip saddr"' 2>&1) ||
        { echo "srun: $out"; return 1; }
    guarded=$(echo "$out" | sed -n 's/^tcp dport { \([0-9, ]*\) } ip saddr$/\1/p' | tr -d ' ' | tr , '\n')
    expect_eq "ports guarded on g1" "$(echo "$guarded" | sort -u | grep -c .)" 6 || { echo "$out"; return 1; }
    for p in $(echo "$out" | awk '$1 == "rank" && $2 != 0 {print $3; print $4}'); do
        echo "$guarded" | grep -qx "$p" || { echo "rank port $p not guarded: $out"; return 1; }
    done
    expect_eq "rank ports" "$(echo "$out" | awk '$1 == "rank" && $2 != 0 {print $3; print $4}' | sort -u | grep -c '^[0-9][0-9]*$')" 4 ||
        { echo "$out"; return 1; }
}

# A site that asks for the rules gets no step without them: with an nft
# that fails, the step fails before the script runs, and the node's log
# names the cause. A batch step that fails so drains its node (Slurm's
# "batch job complete failure", as for a failing prolog): checked, then
# the node is resumed for the tests after this one.
test_firewall_that_cannot_be_installed_fails_the_step() {
    local job out
    nodes_have_namespaces || { echo "skipped: needs node namespaces (netns mode)"; return 77; }
    # sbatch --wait fails with the job: its id is the first line.
    out=$(with_plugstack_arg "firewall=nftables nft=/bin/false" \
          timeout 100 sbatch --parsable --wait --time=2 -o "$work/fwbad.%j" --goldminer=dw=1 -p gpu -w g1 \
          --wrap 'echo ran' 2>&1)
    job=$(echo "$out" | grep -m1 -o '^[0-9][0-9]*')
    [ -n "$job" ] || { echo "sbatch: $out"; return 1; }
    final_job_state "$job" >/dev/null
    # Slurm records the step's failure (the job's state is Slurm's to say:
    # 22.05 calls it COMPLETED); the script never ran.
    ! grep -q '^ran$' "$work/fwbad.$job" 2>/dev/null || { echo "job $job's script ran without its firewall"; return 1; }
    local drained
    drained=$(scontrol show node g1 | sed -n 's/.*Reason=\(.*\) \[.*/\1/p')
    scontrol update nodename=g1 state=resume >/dev/null 2>&1
    grep -q "slurmd error running JobId=$job on node(s)=g1: Plugin initialization failed" "$state/log/slurmctld.log" ||
        { echo "slurmctld did not see job $job's step fail"; grep "JobId=$job " "$state/log/slurmctld.log" | tail -5; return 1; }
    expect_eq "g1's drain reason" "$drained" "batch job complete failure" || return 1
    expect_eq "g1 after resume" "$(sinfo -h -n g1 -o %t)" idle
    grep -q "goldminer: job $job: firewall=nftables: /bin/false list tables: exit 1" "$state"/log/slurmd*.log || {
        echo "no firewall error for job $job in the slurmd logs:"; grep -h "job $job" "$state"/log/slurmd*.log | tail -5
        return 1
    }
}
