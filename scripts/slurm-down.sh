#!/usr/bin/env bash
# Removes everything scripts/slurm-up.sh made, newest first, as listed in $BASE/made: the nodes (every process in
# each node's network namespace), slurmctld and munged (each by its recorded id, checked against its name), the
# network namespaces and links, then the files under $BASE. Leaves alone anything up did not make. Safe to run
# when nothing is up. Exit status 0 when nothing of it is left, else 1 (saying what is).
set -uo pipefail
# shellcheck source=scripts/slurm-lib.sh
. "$(dirname "$0")/slurm-lib.sh"

[ -f "$MADE" ] || { echo "slurm-down: nothing to remove ($MADE does not exist)"; exit 0; }

# Stops daemon $1 (host id $2) if that id is still $1: SIGTERM, SIGKILL after 5 s.
stop() {
    local name=$1 pid=$2 state
    [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$name" ] || return 0
    kill -TERM "$pid" 2>/dev/null
    for _ in $(seq 50); do
        state=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)
        [ -z "$state" ] || [ "$state" = Z ] && return 0  # ended (a zombie has)
        sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null
    echo "slurm-down: $name ($pid) did not stop on SIGTERM; killed"
}

left=''
while read -r kind name pid; do
    case $kind in
        pid)
            if [[ $name == "$NODE_PREFIX"* ]]; then
                node_kill "${name#"$NODE_PREFIX"}" || left+=" processes of $name;"
            else
                stop "$name" "$pid"
            fi ;;
        netns)
            node_kill "${name#"$NODE_PREFIX"}" || left+=" processes of $name;"
            ip netns del "$name" 2>/dev/null || [ ! -e "/run/netns/$name" ] || left+=" netns $name;" ;;
        link)  # a veth went with its namespace's end already
            ip link del "$name" 2>/dev/null || ! ip link show "$name" >/dev/null 2>&1 || left+=" link $name;" ;;
    esac
done < <(tac "$MADE")

if [ -n "$left" ]; then
    echo "slurm-down: could not remove:$left (kept $BASE)" >&2
    exit 1
fi
rm -rf "$BASE"/{munge,spool,log,run} "$BASE"/{slurm.conf,cgroup.conf,hosts,cluster.env,made}
rmdir "$BASE" 2>/dev/null || echo "slurm-down: $BASE holds files it did not make; left it there"
echo "slurm-down: stopped and removed the test cluster"
