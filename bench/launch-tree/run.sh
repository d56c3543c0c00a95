#!/usr/bin/env bash
# bench/launch-tree: launch K simulated hosts (--launcher sim: one real
# dlaunch-agent per host on this machine, tests and benches only) x
# RANKS_PER_HOST ranks, several rounds, and print one line per configuration:
#   launch-tree hosts=K ranks=R fanout=F running_s=X done_s=Y launcher_cpu_s=C launcher_conns=N depth=D floor_s=Z
# (medians). running_s: from the command's start to the last rank running;
# done_s: to dlaunch's exit; launcher_cpu_s: the launcher process's own CPU
# (its children's not counted); launcher_conns: the most sockets it held at
# once; floor_s: fork/exec of K agent-sized processes (dlaunch-agent
# --version) and the K x R ranks at once, no coordination: the physical limit
# here, where every simulated host shares this machine's cores. Only the flat
# launch (fanout=0, depth=1) exists to measure.
#
#   bench/launch-tree/run.sh 64            # 64 hosts x 1 rank, RUNS=3 rounds
#   RUNS=5 bench/launch-tree/run.sh 256 8
#   DLAUNCH_BIN=other/bin bench/launch-tree/run.sh 64
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=$(cd "${DLAUNCH_BIN:-$here/../../build/bin}" && pwd)
[ $# -ge 1 ] && [ $# -le 2 ] || { echo "usage: bench/launch-tree/run.sh K [RANKS_PER_HOST]" >&2; exit 2; }
K=$1
R=${2:-1}
runs=${RUNS:-3}
[[ $K =~ ^[0-9]+$ && $R =~ ^[0-9]+$ && $K -ge 1 && $R -ge 1 ]] || { echo "bench: K and RANKS_PER_HOST are positive integers" >&2; exit 2; }
for b in dlaunch dlaunch-agent; do
  [ -x "$bin/$b" ] || { echo "bench: no $bin/$b: build dlaunch first (or set DLAUNCH_BIN)" >&2; exit 2; }
done
work=$(mktemp -d /tmp/dlaunch-launch-tree.XXXXXX); trap 'rm -rf "$work"' EXIT
cc -O2 -o "$work/measure" "$here/measure.c"
cc -O2 -o "$work/stamp" "$here/stamp.c"
cc -O2 -o "$work/floor" "$here/../launch/floor.c"
cd "$work"

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
hosts=$(for ((i = 0; i < K; i++)); do printf 'sim%d:%d\n' "$i" "$R"; done | paste -sd,)
ulimit -n 65536 2>/dev/null || true

# One flat launch: "running_s done_s cpu_s conns", or nothing when it failed.
launch_once() {
  rm -f stamps
  local m
  if ! m=$(DLAUNCH_SIM=1 ./measure "$bin/dlaunch" --launcher sim -H "$hosts" --gpus-per-node 0 --mpi none \
           --agent-timeout 300 "$work/stamp" "$work/stamps"); then
    echo "bench: the launch of $K hosts x $R failed: $(tail -3 measure.err)" >&2; return
  fi
  read -r start done cpu conns <<<"$m"
  local n last
  n=$(wc -l <stamps); last=$(sort -n stamps | tail -1)
  [ "$n" -eq $((K * R)) ] || { echo "bench: $n of $((K * R)) ranks ran" >&2; return; }
  awk -v s="$start" -v l="$last" -v d="$done" -v c="$cpu" -v n="$conns" 'BEGIN {printf "%.3f %s %s %s\n", (l - s) / 1e9, d, c, n}'
}

floor_once() {
  local t0 t1
  t0=$(date +%s%N)
  ./floor "$K" "$bin/dlaunch-agent" --version >/dev/null & local a=$!
  ./floor $((K * R)) /bin/true & local b=$!
  wait "$a" "$b"
  t1=$(date +%s%N)
  awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.3f\n", (b - a) / 1e9}'
}

launch_once >/dev/null  # warm-up (page cache), not counted
printf '%-6s %-8s %-10s %-8s %-16s %-14s %s\n' round fanout running_s done_s launcher_cpu_s launcher_conns floor_s
: >rounds
for ((i = 1; i <= runs; i++)); do
  r=$(launch_once); f=$(floor_once)
  [ -n "$r" ] || exit 1
  echo "$r $f" >>rounds
  read -r run done cpu conns <<<"$r"
  printf '%-6s %-8s %-10s %-8s %-16s %-14s %s\n' "$i" 0 "$run" "$done" "$cpu" "$conns" "$f"
done
col() { awk -v c="$1" '{print $c}' rounds | median; }
echo "launch-tree hosts=$K ranks=$((K * R)) fanout=0 running_s=$(col 1) done_s=$(col 2) launcher_cpu_s=$(col 3)" \
     "launcher_conns=$(col 4) depth=1 floor_s=$(col 5)"
