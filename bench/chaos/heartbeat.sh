#!/usr/bin/env bash
# bench/chaos/heartbeat.sh: what --heartbeat-timeout S costs at rest and how
# fast it finds a silent host. For each S: a job of `sleep` on K namespace
# hosts x 2 ranks (tests/cluster); the CPU of the launcher and of every agent
# over IDLE_S seconds at rest (schedstat, ns), then h1's agent is SIGSTOPped
# (a silent host) and the time until dlaunch exits with its verdict is taken.
#   bench/chaos/heartbeat.sh              # S = "10 3" (10: the default), K=4, IDLE_S=20
#   TIMEOUTS="10 5 3" HOSTS=8 bench/chaos/heartbeat.sh
# Needs root. The anchor of the detection column is S itself.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
bin=${BUILD:-$src/build}/bin
cluster="$src/tests/cluster/cluster.sh"
K=${HOSTS:-4}; idle=${IDLE_S:-20}
[ "$(id -u)" = 0 ] || { echo "bench: needs root (it builds a namespace cluster)" >&2; exit 3; }
up=$("$cluster" up --hosts "$K" --owner $$) || { echo "$up" >&2; exit 1; }
eval "$up"
trap '"$cluster" down "$DL_CLUSTER_ID" >/dev/null' EXIT
cpu_ns() { for p in "$@"; do cat "/proc/$p"/task/*/schedstat 2>/dev/null; done | awk '{s += $1} END {printf "%d", s}'; }
agents() { for h in $(seq 0 $((K - 1))); do ip netns pids "dl$DL_CLUSTER_ID-h$h"; done | while read -r p; do
  [ "$(cat /proc/"$p"/comm 2>/dev/null)" = dlaunch-agent ] && echo "$p"; done; }
echo "# heartbeat: $K namespace hosts x 2 ranks of sleep, at rest for $idle s; $(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg)"
printf '| %s | %s | %s | %s | %s |\n' "--heartbeat-timeout" "heartbeat frames/s (all agents, both ways: 2K/(S/4))" \
  "launcher CPU at rest" "agents' CPU at rest (sum)" "silent host found after (x S)"
echo "|---|---|---|---|---|"
for S in ${TIMEOUTS:-10 3}; do
  mark="7$RANDOM.$RANDOM"
  "$cluster" exec "$DL_CLUSTER_ID" h0 -- "$bin/dlaunch" --hostfile "$DL_CLUSTER_DIR/hostfile" \
    --ssh-config "$DL_CLUSTER_DIR/ssh_config" -n $((2 * K)) --kill-grace 1 --heartbeat-timeout "$S" \
    sleep "$mark" </dev/null >"$DL_CLUSTER_DIR/out" 2>&1 &
  job=$!
  for _ in $(seq 300); do [ "$(pgrep -fc "^sleep $mark")" -ge $((2 * K)) ] && break; sleep 0.1; done
  launcher=$(pgrep -f "bin/dlaunch .*sleep $mark" | head -1)
  mapfile -t ags < <(agents)
  sleep 1
  l0=$(cpu_ns "$launcher"); a0=$(cpu_ns "${ags[@]}"); t0=$(date +%s%N)
  sleep "$idle"
  l1=$(cpu_ns "$launcher"); a1=$(cpu_ns "${ags[@]}"); t1=$(date +%s%N)
  victim=$(for p in $(ip netns pids "dl$DL_CLUSTER_ID-h1"); do
    [ "$(cat /proc/"$p"/comm 2>/dev/null)" = dlaunch-agent ] && echo "$p"; done | head -1)
  s0=$(date +%s%N); kill -STOP "$victim"; wait "$job"; s1=$(date +%s%N); kill -CONT "$victim"
  grep -q "lost the agent" "$DL_CLUSTER_DIR/out" || { echo "bench: no verdict for S=$S: $(tail -2 "$DL_CLUSTER_DIR/out")" >&2; }
  awk -v S="$S" -v K="$K" -v l="$((l1 - l0))" -v a="$((a1 - a0))" -v ns="$((t1 - t0))" -v d="$((s1 - s0))" 'BEGIN {
    det = d / 1e9
    printf "| %g s | %.1f | %.3f%% | %.3f%% | %.1f s (%.2f) |\n", S, 2 * K / (S / 4), 100 * l / ns, 100 * a / ns, det, det / S }'
  for _ in $(seq 100); do pgrep -f "sleep $mark" >/dev/null || break; sleep 0.1; done
done
