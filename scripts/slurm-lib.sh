# shellcheck shell=bash disable=SC2034  # sourced: the scripts that source it use these names
# Shared by scripts/slurm-up.sh, slurm-node.sh and slurm-down.sh (sourced, not run): where the test cluster keeps
# its state and how one simulated node is started, listed and killed.
#
# Everything the scripts make is under $BASE (default /run/lazyphi-slurm): the SLURM and munge configuration,
# keys, sockets, spool, logs, and two records that slurm-down.sh reads:
#   $BASE/made         one line per thing made, in order: `netns NAME`, `link NAME`, `pid NAME PID`
#   $BASE/cluster.env  written last, once every node is idle: what clients and tests need (SLURM_CONF, node names
#                      and addresses, the address a Dask scheduler must listen on); `source` it to use the cluster

BASE=${LAZYPHI_SLURM_BASE:-/run/lazyphi-slurm}
CONF=$BASE/slurm.conf
MADE=$BASE/made
ENV_FILE=$BASE/cluster.env
NODE_PREFIX=lznode  # node K is host name, SLURM node name and network namespace lznodeK, with host-side link lzvK

# The process ids of network namespace $1 that have not ended (a zombie has); none when it does not exist.
netns_pids() {
    local pid state
    for pid in $(ip netns pids "$1" 2>/dev/null); do
        state=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null) || continue
        [ -n "$state" ] && [ "$state" != Z ] && echo "$pid"
    done
}

# The host's id of the first process (the init) of node $1's PID namespace, which the node's processes die with.
node_init() {
    local pid
    for pid in $(netns_pids "$NODE_PREFIX$1"); do
        # NSpid lists the ids a process has from the host's namespace inward: the init's innermost one is 1
        awk '/^NSpid:/ {exit !(NF == 3 && $3 == 1)}' "/proc/$pid/status" 2>/dev/null && { echo "$pid"; return 0; }
    done
    return 1
}

# Starts node $1's slurmd in its network namespace, in new UTS (its host name), PID and mount namespaces (its own
# /etc/hosts). The init of the PID namespace is a shell that reaps the orphans slurmd leaves (its finished job
# steps); with --kill-child the namespace dies with the unshare process too.
node_start() {
    local name=$NODE_PREFIX$1 init=''
    [ -e "/run/netns/$name" ] || { echo "no network namespace $name: start the cluster with scripts/slurm-up.sh" >&2
                                   return 1; }
    if node_init "$1" >/dev/null; then
        echo "node $name is running already" >&2
        return 1
    fi
    mkdir -p "$BASE/spool/slurmd.$name"
    # nsenter joins only the network namespace: `ip netns exec` would remount /sys and hide the cgroup file system
    # that slurmd needs
    setsid nsenter --net="/run/netns/$name" unshare --uts --pid --fork --mount-proc --kill-child \
        sh -c "hostname $name && mount --bind $BASE/hosts /etc/hosts && { slurmd -D -f $CONF & wait; }" \
        </dev/null >>"$BASE/log/$name.out" 2>&1 &
    disown  # the node outlives this shell, which then does not report its end
    for _ in $(seq 50); do
        init=$(node_init "$1") && break
        sleep 0.1
    done
    [ -n "$init" ] || { echo "node $name did not start (see $BASE/log/$name.out)" >&2; return 1; }
    echo "pid $name $init" >>"$MADE"
}

# SIGKILLs every process of node $1 at once (the kernel ends a PID namespace with its init), then whatever is
# left in its network namespace (the unshare process outside it), and waits until none is left.
node_kill() {
    local name=$NODE_PREFIX$1 init pids
    init=$(node_init "$1") && kill -KILL "$init" 2>/dev/null
    for _ in $(seq 100); do
        pids=$(netns_pids "$name")
        [ -z "$pids" ] && return 0
        # shellcheck disable=SC2086
        kill -KILL $pids 2>/dev/null
        sleep 0.1
    done
    echo "processes of $name still alive after SIGKILL: $pids" >&2
    return 1
}
