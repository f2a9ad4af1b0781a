#!/usr/bin/env bash
# Starts a one-node SLURM cluster on this machine for tests/test_slurm.py (Debian/Ubuntu, as root, no systemd).
#
# Installs Debian's slurm-wlm and munge if missing, writes /etc/slurm/slurm.conf for one node at 127.0.0.1
# named after `hostname -s`, creates a munge key if there is none, starts munged, slurmctld and slurmd
# directly, and waits until `sinfo` shows the node idle. It records the daemons it started in
# /run/lazyphi-slurm/started, and scripts/slurm-down.sh stops exactly those.
#
# Exit status 0 when the node is idle (or a SLURM that answers was already there), otherwise non-zero with a
# one-line reason on stderr. Never run it on a machine with a real SLURM configuration: it refuses to
# overwrite a slurm.conf it did not write.
set -uo pipefail

STATE=/run/lazyphi-slurm
CONF=/etc/slurm/slurm.conf
MARK='# written by lazyphi scripts/slurm-up.sh'
TIMEOUT=${SLURM_UP_TIMEOUT:-60}

fail() { echo "slurm-up: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || fail "must run as root"
NODE=$(hostname -s) || fail "hostname -s failed"

if command -v sinfo >/dev/null && timeout 5 sinfo -h -o '%n %T' 2>/dev/null | grep -q .; then
    echo "slurm-up: SLURM already answers; starting nothing:"
    sinfo
    exit 0
fi

if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null || ! command -v munged >/dev/null; then
    command -v apt-get >/dev/null || fail "slurm-wlm/munge missing and apt-get unavailable"
    echo "slurm-up: installing slurm-wlm and munge with apt-get"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null 2>&1 || fail "apt-get update failed"
    apt-get install -y -qq --no-install-recommends slurm-wlm munge >/tmp/lazyphi-slurm-apt.log 2>&1 \
        || fail "apt-get install slurm-wlm munge failed (see /tmp/lazyphi-slurm-apt.log)"
fi

if [ -e "$CONF" ] && ! grep -qF "$MARK" "$CONF"; then
    fail "$CONF exists and was not written by this script; not touching it"
fi

mem_mb=$(awk '/^MemTotal:/ {print int($2 / 1024)}' /proc/meminfo)
margin=$(( mem_mb / 10 > 512 ? mem_mb / 10 : 512 ))
real_mem=$(( mem_mb - margin ))
[ "$real_mem" -ge 1024 ] || fail "too little memory for a test node (${mem_mb} MB)"

mkdir -p /etc/slurm /var/spool/slurmctld /var/spool/slurmd /var/log/slurm "$STATE"
cat >"$CONF" <<EOF
$MARK
ClusterName=lazyphi-test
SlurmctldHost=$NODE(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU_Memory
ReturnToService=2
SlurmctldPidFile=$STATE/slurmctld.pid
SlurmdPidFile=$STATE/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
SlurmdSpoolDir=/var/spool/slurmd
StateSaveLocation=/var/spool/slurmctld
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
MinJobAge=60
KillWait=5
Waittime=0
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=2 RealMemory=$real_mem State=UNKNOWN
PartitionName=debug Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
EOF
# slurmd refuses to start with cgroup.conf missing on some versions even without cgroup plugins
[ -e /etc/slurm/cgroup.conf ] || echo "$MARK" >/etc/slurm/cgroup.conf

: >"$STATE/started"

# munge: a key, its run directory, the daemon (as the munge user, the way the package runs it)
if [ ! -s /etc/munge/munge.key ]; then
    mkdir -p /etc/munge
    if command -v mungekey >/dev/null; then
        mungekey --create --keyfile=/etc/munge/munge.key >/dev/null 2>&1 || fail "mungekey --create failed"
    else
        dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none || fail "cannot write a munge key"
    fi
    chown munge:munge /etc/munge/munge.key && chmod 400 /etc/munge/munge.key
fi
mkdir -p /run/munge /var/lib/munge /var/log/munge
chown munge:munge /run/munge /var/lib/munge /var/log/munge
if munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
    echo "slurm-up: munged already running"
else
    runuser -u munge -- /usr/sbin/munged --pid-file=/run/munge/munged.pid >/dev/null 2>&1 \
        || fail "munged did not start (see /var/log/munge/munged.log)"
    echo "munged /run/munge/munged.pid" >>"$STATE/started"
    for _ in $(seq 20); do munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && break; sleep 0.5; done
    munge -n 2>/dev/null | unmunge >/dev/null 2>&1 || fail "munge does not answer after starting munged"
fi

/usr/sbin/slurmctld || fail "slurmctld did not start (see /var/log/slurm/slurmctld.log)"
echo "slurmctld $STATE/slurmctld.pid" >>"$STATE/started"
/usr/sbin/slurmd || fail "slurmd did not start (see /var/log/slurm/slurmd.log)"
echo "slurmd $STATE/slurmd.pid" >>"$STATE/started"

state=''
for _ in $(seq "$TIMEOUT"); do
    state=$(sinfo -h -n "$NODE" -o '%T' 2>/dev/null | head -n 1)
    [ "$state" = idle ] && break
    sleep 1
done
sinfo 2>&1 || true
[ "$state" = idle ] || fail "node $NODE is '${state:-not reported}' after ${TIMEOUT} s, not idle (see /var/log/slurm/)"
echo "slurm-up: node $NODE idle in partition debug"
