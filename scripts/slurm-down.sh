#!/usr/bin/env bash
# Stops the daemons that scripts/slurm-up.sh started (listed in /run/lazyphi-slurm/started), newest first,
# each by the pid in its pid file. Leaves alone anything up did not start. Always exits 0.
set -uo pipefail
STATE=/run/lazyphi-slurm
[ -f "$STATE/started" ] || { echo "slurm-down: nothing started by slurm-up.sh"; exit 0; }

tac "$STATE/started" | while read -r name pidfile; do
    pid=$(cat "$pidfile" 2>/dev/null || true)
    if [ -z "$pid" ] || ! kill -0 "$pid" 2>/dev/null; then
        echo "slurm-down: $name not running"
        continue
    fi
    kill -TERM "$pid" 2>/dev/null
    for _ in $(seq 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    if kill -0 "$pid" 2>/dev/null; then
        kill -KILL "$pid" 2>/dev/null
        echo "slurm-down: $name (pid $pid) killed"
    else
        echo "slurm-down: $name (pid $pid) stopped"
    fi
done
rm -f "$STATE/started"
exit 0
