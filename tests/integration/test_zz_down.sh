# Runs last (run.sh calls it explicitly): `down` stops every process the
# cluster started and removes every namespace and link it made.

test_zz_down_leaves_nothing() {
    local pids pid netns links name left=""
    pids=$(cat "$state"/run/*.pid 2>/dev/null)
    netns=$(awk '$1 == "netns" {print $2}' "$state/run/network" 2>/dev/null)
    links=$(awk '$1 == "link" {print $2}' "$state/run/network" 2>/dev/null)
    [ -n "$pids" ] || { echo "no PID files in $state/run"; return 1; }
    if grep -q '^network=netns' "$state/run/cluster" 2>/dev/null && [ -z "$netns" ]; then
        echo "netns cluster without a record of its namespaces"
        return 1
    fi
    timeout 60 "$devcluster" down --dir "$state" || { echo "down failed"; return 1; }
    for pid in $pids; do
        pid_running "$pid" && left="$left $pid($(cat "/proc/$pid/comm"))"
    done
    [ -z "$left" ] || { echo "still running after down:$left"; return 1; }
    for name in $netns; do
        [ -e "/run/netns/$name" ] && left="$left $name"
    done
    [ -z "$left" ] || { echo "namespaces left after down:$left"; return 1; }
    for name in $links; do
        ip link show "$name" >/dev/null 2>&1 && left="$left $name"
    done
    [ -z "$left" ] || { echo "links left after down:$left"; return 1; }
    if "$devcluster" status --dir "$state" >/dev/null 2>&1; then
        echo "status says up after down"
        return 1
    fi
}
