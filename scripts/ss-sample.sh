#!/bin/bash
# Sample the kernel's view of every TCP/MPTCP socket in the lab's emulators while they run.
#
# Usage: scripts/ss-sample.sh OUT [SECONDS] [INTERVAL]
#
# Every INTERVAL seconds (default 1) for SECONDS (default 600), for each network namespace
# other than init's (the emulator's anonymous client and server namespaces), appends
# `=== <unix time> <namespace>` and that namespace's `ss -tinM` to OUT. Needs root (nsenter).
# scripts/ss-subflows.py reads the result. Start it beside `roam lab in-paper ...`; it is how
# docs/results/notebook.md ("Linux MPTCP after a long WiFi absence") saw data parked in a WiFi subflow.
set -u
out=${1:?usage: scripts/ss-sample.sh OUT [SECONDS] [INTERVAL]}
secs=${2:-600}
every=${3:-1}
[ "$(id -u)" = 0 ] || { echo "ss-sample: needs root (nsenter into the emulator's namespaces)" >&2; exit 1; }
root=$(readlink /proc/1/ns/net)
end=$((SECONDS + secs))
while [ $SECONDS -lt $end ]; do
  declare -A seen=()
  for t in /proc/[0-9]*/task/[0-9]*; do
    ns=$(readlink "$t/ns/net" 2>/dev/null) || continue
    [ "$ns" = "$root" ] && continue
    [ -n "${seen[$ns]:-}" ] && continue
    seen[$ns]=$t
  done
  for ns in "${!seen[@]}"; do
    echo "=== $(date +%s.%N) $ns"
    nsenter --net="${seen[$ns]}/ns/net" ss -tinM 2>&1
  done >> "$out"
  unset seen
  sleep "$every"
done
