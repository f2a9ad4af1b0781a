#!/usr/bin/env bash
# One node of the test cluster that scripts/slurm-up.sh started with network namespaces (as root):
#   slurm-node.sh kill K    SIGKILL every process of node K at once (slurmd, job steps, the jobs' processes),
#                           as when a machine loses power; SLURM notices after SlurmdTimeout (or at once after
#                           `scontrol update nodename=lznodeK state=down reason=...`)
#   slurm-node.sh start K   start node K's slurmd again; SLURM returns it to service when it registers
#   slurm-node.sh pids K    the host's ids of node K's processes
set -uo pipefail
# shellcheck source=scripts/slurm-lib.sh
. "$(dirname "$0")/slurm-lib.sh"

usage() { echo "usage: slurm-node.sh kill|start|pids K (K a node number of $ENV_FILE)" >&2; exit 2; }
[ $# = 2 ] && [[ $2 =~ ^[0-9]+$ ]] || usage
[ -e "/run/netns/$NODE_PREFIX$2" ] || { echo "slurm-node: no node $NODE_PREFIX$2 (is the cluster up?)" >&2; exit 1; }
case $1 in
    kill) node_kill "$2" ;;
    start) node_start "$2" ;;
    pids) netns_pids "$NODE_PREFIX$2" ;;
    *) usage ;;
esac
