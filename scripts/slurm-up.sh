#!/usr/bin/env bash
# Starts a SLURM test cluster on this machine for tests/test_slurm*.py (Debian/Ubuntu, as root, no systemd).
#
# By default 3 simulated nodes (LAZYPHI_SLURM_NODES=N for another number), each a host of its own as far as SLURM,
# Dask and the tests can tell: a network namespace with its own address on a bridge, its own host name (UTS
# namespace), its own slurmd, and a PID namespace that holds every process of the node, so that
# `scripts/slurm-node.sh kill K` kills them all at once. slurmctld, munged and the clients run on the host; the
# file system is shared, as on a cluster. The network is the bridge lzbr0 with $NET.1 (default 10.231.0.1; set
# LAZYPHI_SLURM_NET=a.b.c for another /24) and node K at $NET.(10+K), nothing else: no route off the machine, no
# forwarding, no NAT, IPv6 off on these links. Where namespaces cannot be made (no privileges for them, the /24 in
# use, LAZYPHI_SLURM_NODES=1), one node on the host at 127.0.0.1 instead; cluster.env says why.
#
# Installs Debian's slurm-wlm, munge and iproute2 if missing (apt-get). Everything else it makes is under $BASE
# (LAZYPHI_SLURM_BASE, default /run/lazyphi-slurm, see scripts/slurm-lib.sh): its own munge key and munged, its
# own slurm.conf (non-default ports 16817/16818), spool and logs; /etc/slurm and /etc/munge are neither read nor
# written. Clients use it through `source $BASE/cluster.env` (sets SLURM_CONF), written once all nodes are idle.
# scripts/slurm-down.sh removes all of it again.
#
# Exit status 0 when every node is idle (or when a SLURM that answers was already there: it starts nothing then),
# otherwise non-zero with the reason on stderr, after removing what it had made.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=scripts/slurm-lib.sh
. "$HERE/slurm-lib.sh"

NODES=${LAZYPHI_SLURM_NODES:-3}
NET=${LAZYPHI_SLURM_NET:-10.231.0}
TIMEOUT=${SLURM_UP_TIMEOUT:-60}
BRIDGE=lzbr0

die() { echo "slurm-up: $*" >&2; exit 1; }
fail() {  # after something was made: say why, show the logs' ends, remove it all
    echo "slurm-up: $*" >&2
    for log in "$BASE"/log/*; do [ -s "$log" ] && { echo "--- $log" >&2; tail -n 3 "$log" >&2; }; done
    bash "$HERE/slurm-down.sh" >/dev/null
    exit 1
}
made() { echo "$*" >>"$MADE"; }

# Why this machine cannot have namespace nodes (nothing printed when it can); makes and removes a trial of each.
why_no_namespaces() {
    local cmd
    for cmd in ip nsenter unshare; do
        command -v "$cmd" >/dev/null || { echo "$cmd is not installed"; return; }
    done
    if ip -4 route show | grep -q "^$NET\." || ip -4 addr show | grep -q "inet $NET\."; then
        echo "$NET.0/24 is in use on this machine (set LAZYPHI_SLURM_NET to a free /24)"
        return
    fi
    ip link show "$BRIDGE" >/dev/null 2>&1 && { echo "a link $BRIDGE exists already"; return; }
    ip link add lzprobe0 type veth peer name lzprobe1 2>/dev/null || { echo "cannot create veth links"; return; }
    ip link del lzprobe0
    ip link add lzprobe0 type bridge 2>/dev/null || { echo "cannot create a bridge"; return; }
    ip link del lzprobe0
    ip netns add lzprobe 2>/dev/null || { echo "cannot create network namespaces (ip netns add)"; return; }
    nsenter --net=/run/netns/lzprobe unshare --uts --pid --fork --mount-proc --kill-child true 2>/dev/null \
        || echo "cannot create UTS, PID and mount namespaces (unshare)"
    ip netns del lzprobe
}

# No IPv6 on a link of ours: it would send neighbour discovery to multicast addresses on the bridge.
no_ipv6() {  # interface, optionally a network namespace
    local set="echo 1 >/proc/sys/net/ipv6/conf/$1/disable_ipv6"
    [ -e /proc/sys/net/ipv6 ] || return 0
    if [ $# = 2 ]; then nsenter --net="/run/netns/$2" sh -c "$set"; else sh -c "$set"; fi
}

[ "$(id -u)" = 0 ] || die "must run as root"
[[ $NODES =~ ^[1-9][0-9]?$ ]] || die "LAZYPHI_SLURM_NODES=$NODES: expected a number of nodes from 1 to 99"
[[ $NET =~ ^[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}$ ]] \
    || die "LAZYPHI_SLURM_NET=$NET: expected the first three numbers of a /24, like 10.231.0"

if [ -s "$ENV_FILE" ] && SLURM_CONF=$CONF timeout 5 sinfo -h -o '%n' 2>/dev/null | grep -q .; then
    echo "slurm-up: the test cluster is up already ($ENV_FILE); starting nothing"
    exit 0
fi
[ -e "$MADE" ] && { echo "slurm-up: removing what an earlier run left"; bash "$HERE/slurm-down.sh" >/dev/null; }
# another SLURM configured here (not asked for through DNS, which SLURM tries without a configuration file)
other=${SLURM_CONF:-/etc/slurm/slurm.conf}
[ "$other" = "$CONF" ] && other=/etc/slurm/slurm.conf
if [ -e "$other" ] && command -v sinfo >/dev/null \
        && SLURM_CONF=$other timeout 5 sinfo -h -o '%n %T' 2>/dev/null | grep -q .; then
    echo "slurm-up: the SLURM of $other answers; starting nothing:"
    SLURM_CONF=$other sinfo
    exit 0
fi

missing=()
command -v slurmctld >/dev/null && command -v slurmd >/dev/null || missing+=(slurm-wlm)
command -v munged >/dev/null || missing+=(munge)
command -v ip >/dev/null || [ "$NODES" = 1 ] || missing+=(iproute2)
if [ ${#missing[@]} -gt 0 ]; then
    command -v apt-get >/dev/null || die "${missing[*]} missing and apt-get unavailable"
    echo "slurm-up: installing ${missing[*]} with apt-get"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null 2>&1 || die "apt-get update failed"
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/tmp/lazyphi-slurm-apt.log 2>&1 \
        || die "apt-get install ${missing[*]} failed (see /tmp/lazyphi-slurm-apt.log)"
fi

why_one=''
if [ "$NODES" = 1 ]; then
    why_one='LAZYPHI_SLURM_NODES=1'
else
    why_one=$(why_no_namespaces)
fi

mkdir -p "$BASE"/{munge,spool/slurmctld,log,run} || die "cannot create $BASE"
: >"$MADE"
export SLURM_CONF=$CONF

# munge: a key of its own, its own daemon and socket
chmod 700 "$BASE/munge"
dd if=/dev/urandom of="$BASE/munge/munge.key" bs=1024 count=1 status=none || fail "cannot write a munge key"
chmod 400 "$BASE/munge/munge.key"
SOCKET=$BASE/munge/munge.socket.2
setsid munged -F --force --socket="$SOCKET" --key-file="$BASE/munge/munge.key" --pid-file="$BASE/run/munged.pid" \
    --log-file="$BASE/log/munged.log" --seed-file="$BASE/munge/seed" </dev/null >>"$BASE/log/munged.out" 2>&1 &
made pid munged $!
disown
munge_answers() { munge -S "$SOCKET" -n 2>/dev/null | unmunge -S "$SOCKET" >/dev/null 2>&1; }
for _ in $(seq 50); do munge_answers && break; sleep 0.1; done
munge_answers || fail "munged does not answer"

if [ -z "$why_one" ]; then
    mode=namespaces
    ctl_host=lzctl ctl_addr=$NET.1 scheduler_host=$NET.1
    names=() addrs=()
    for k in $(seq "$NODES"); do names+=("$NODE_PREFIX$k"); addrs+=("$NET.$((10 + k))"); done
    cpus=1 real_mem=2000  # one 1-CPU job fills a node: N jobs land on N nodes
else
    echo "slurm-up: one node on this host at 127.0.0.1, not $NODES: $why_one"
    mode=host
    ctl_host=$(hostname -s) || fail "hostname -s failed"
    ctl_addr=127.0.0.1 scheduler_host=127.0.0.1
    names=("$ctl_host") addrs=(127.0.0.1)
    mem_mb=$(awk '/^MemTotal:/ {print int($2 / 1024)}' /proc/meminfo)
    margin=$(( mem_mb / 10 > 512 ? mem_mb / 10 : 512 ))
    cpus=2 real_mem=$(( mem_mb - margin ))
    [ "$real_mem" -ge 1024 ] || fail "too little memory for a test node (${mem_mb} MB)"
fi

{
    cat <<EOF
# written by lazyphi scripts/slurm-up.sh; removed by scripts/slurm-down.sh
ClusterName=lazyphi-test
SlurmctldHost=$ctl_host($ctl_addr)
SlurmctldPort=16817
SlurmdPort=16818
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$SOCKET
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/backfill
# a pending job waits at most 2 s for a freed node (the default passes come every 30 and 60 s)
SchedulerParameters=sched_interval=2,bf_interval=2
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU_Memory
ReturnToService=2
SlurmctldPidFile=$BASE/run/slurmctld.pid
SlurmdPidFile=$BASE/run/slurmd.%n.pid
SlurmctldLogFile=$BASE/log/slurmctld.log
SlurmdLogFile=$BASE/log/slurmd.%n.log
SlurmdSpoolDir=$BASE/spool/slurmd.%n
StateSaveLocation=$BASE/spool/slurmctld
SlurmctldTimeout=30
SlurmdTimeout=10
InactiveLimit=0
MinJobAge=60
KillWait=5
Waittime=0
EOF
    for i in "${!names[@]}"; do
        echo "NodeName=${names[$i]} NodeAddr=${addrs[$i]} NodeHostname=${names[$i]} CPUs=$cpus" \
            "RealMemory=$real_mem State=UNKNOWN"
    done
    echo "PartitionName=debug Nodes=$(IFS=,; echo "${names[*]}") Default=YES MaxTime=INFINITE State=UP"
} >"$CONF"
echo '# written by lazyphi scripts/slurm-up.sh' >"$BASE/cgroup.conf"  # some slurmd versions want one

if [ "$mode" = namespaces ]; then
    {
        echo '127.0.0.1 localhost'
        echo "$ctl_addr $ctl_host"
        for i in "${!names[@]}"; do echo "${addrs[$i]} ${names[$i]}"; done
    } >"$BASE/hosts"  # each node's /etc/hosts
    ip link add "$BRIDGE" type bridge || fail "cannot create the bridge $BRIDGE"
    made link "$BRIDGE"
    no_ipv6 "$BRIDGE"
    ip addr add "$ctl_addr/24" dev "$BRIDGE" && ip link set "$BRIDGE" up || fail "cannot set up $BRIDGE"
    for i in "${!names[@]}"; do
        k=$((i + 1)) name=${names[$i]}
        ip netns add "$name" || fail "cannot create the network namespace $name"
        made netns "$name"
        no_ipv6 all "$name" && no_ipv6 default "$name"
        ip link add "lzv$k" type veth peer name eth0 netns "$name" || fail "cannot create the link lzv$k"
        made link "lzv$k"
        no_ipv6 "lzv$k"
        ip link set "lzv$k" master "$BRIDGE" up && ip -n "$name" link set lo up \
            && ip -n "$name" addr add "${addrs[$i]}/24" dev eth0 && ip -n "$name" link set eth0 up \
            || fail "cannot set up the network of $name"
    done
    # slurmctld must find its own host name in SlurmctldHost: it gets one of its own rather than the host's
    setsid unshare --uts sh -c "hostname $ctl_host && exec slurmctld -D -c -f $CONF" \
        </dev/null >>"$BASE/log/slurmctld.out" 2>&1 &
    made pid slurmctld $!
    disown
    for k in $(seq "$NODES"); do
        node_start "$k" || fail "node $NODE_PREFIX$k did not start"
    done
else
    mkdir -p "$BASE/spool/slurmd.${names[0]}"
    setsid slurmctld -D -c -f "$CONF" </dev/null >>"$BASE/log/slurmctld.out" 2>&1 &
    made pid slurmctld $!
    disown
    setsid slurmd -D -f "$CONF" </dev/null >>"$BASE/log/slurmd.out" 2>&1 &
    made pid slurmd $!
    disown
fi

idle=0
for _ in $(seq $((TIMEOUT * 5))); do
    idle=$(sinfo -h -N -t idle -o '%N' 2>/dev/null | sort -u | wc -l)
    [ "$idle" = "${#names[@]}" ] && break
    sleep 0.2
done
[ "$idle" = "${#names[@]}" ] || { sinfo -N >&2; fail "$idle of ${#names[@]} nodes idle after $TIMEOUT s"; }

cat >"$ENV_FILE" <<EOF
# the SLURM test cluster of scripts/slurm-up.sh: \`source\` this file to use it (sinfo, sbatch, dask-jobqueue)
export SLURM_CONF=$CONF
# namespaces: one simulated node per namespace; host: one node on this host (LAZYPHI_SLURM_WHY_ONE_NODE says why)
export LAZYPHI_SLURM_MODE=$mode
export LAZYPHI_SLURM_WHY_ONE_NODE='${why_one//\'/}'
export LAZYPHI_SLURM_NODE_NAMES='${names[*]}'
export LAZYPHI_SLURM_NODE_ADDRS='${addrs[*]}'
# the address a Dask scheduler must listen on to be reachable from the nodes
export LAZYPHI_SLURM_SCHEDULER_HOST=$scheduler_host
# kill|start|pids K: one node's processes
export LAZYPHI_SLURM_NODE_SCRIPT=$HERE/slurm-node.sh
EOF
sinfo -N
echo "slurm-up: ${#names[@]} node(s) idle ($mode); use it with: source $ENV_FILE"
