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
# here, where every simulated host shares this machine's cores. Each round
# runs the tree (--fanout F, FANOUT=32 by default; depth as dlaunch -v says)
# and the flat launch (--fanout 0), interleaved.
#
#   bench/launch-tree/run.sh 64            # 64 hosts x 1 rank, RUNS=3 rounds
#   RUNS=5 bench/launch-tree/run.sh 256 8
#   FANOUT=16 bench/launch-tree/run.sh 1024 8
#   DLAUNCH_BIN=other/bin bench/launch-tree/run.sh 64
#   GATE=1 bench/launch-tree/run.sh 1024 8  # the health gate's cost (below)
#   DLAUNCH_ARGS="--heartbeat-timeout 60" bench/launch-tree/run.sh 1024 8   # more options
#
# With GATE=1 each round runs the tree three ways instead, interleaved: no
# gate (gate=none), the gate of a job with spares (gate=spares: the same
# job and 8 more hosts as --spares 8, so every host checks the ranks'
# program, its interpreter and its clock before it takes ranks), and that
# with an admin's check (gate=check: --health-check true, one fork/exec of
# sh per host). Its lines add gate=G and running_ratio: the median over the
# rounds of running_s over the same round's gate=none.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=$(cd "${DLAUNCH_BIN:-$here/../../build/bin}" && pwd)
[ $# -ge 1 ] && [ $# -le 2 ] || { echo "usage: bench/launch-tree/run.sh K [RANKS_PER_HOST]" >&2; exit 2; }
K=$1
R=${2:-1}
runs=${RUNS:-3}
F=${FANOUT:-32}
[[ $K =~ ^[0-9]+$ && $R =~ ^[0-9]+$ && $K -ge 1 && $R -ge 1 ]] || { echo "bench: K and RANKS_PER_HOST are positive integers" >&2; exit 2; }
[[ $F =~ ^[0-9]+$ && $F -ge 2 ]] || { echo "bench: FANOUT is an integer of at least 2" >&2; exit 2; }
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

spares=8
hosts_spared="$hosts,$(for ((i = K; i < K + spares; i++)); do printf 'sim%d:%d\n' "$i" "$R"; done | paste -sd,)"

# One launch at fanout $1 ($2: the gate, GATE=1 only): "running_s done_s
# cpu_s conns depth", or nothing when it failed.
launch_once() {
  rm -f stamps
  local m h=$hosts gate=()
  case "${2:-none}" in
    spares) h=$hosts_spared; gate=(--spares "$spares") ;;
    check) h=$hosts_spared; gate=(--spares "$spares" --health-check true) ;;
  esac
  local extra=()
  # shellcheck disable=SC2206
  [ -n "${DLAUNCH_ARGS:-}" ] && extra=($DLAUNCH_ARGS)
  if ! m=$(DLAUNCH_SIM=1 ./measure "$bin/dlaunch" -v --launcher sim --fanout "$1" -H "$h" --gpus-per-node 0 \
           --mpi none --agent-timeout 300 ${extra[@]+"${extra[@]}"} ${gate[@]+"${gate[@]}"} -n $((K * R)) "$work/stamp" "$work/stamps"); then
    echo "bench: the launch of $K hosts x $R at fanout $1 failed: $(grep -v '^dlaunch: agent on' measure.err | tail -3)" >&2
    return
  fi
  read -r start done cpu conns <<<"$m"
  local depth
  depth=$(sed -n 's/.*launch tree: .* depth \([0-9]*\).*/\1/p' measure.err | head -1)
  local n last
  n=$(wc -l <stamps); last=$(sort -n stamps | tail -1)
  [ "$n" -eq $((K * R)) ] || { echo "bench: $n of $((K * R)) ranks ran" >&2; return; }
  awk -v s="$start" -v l="$last" -v d="$done" -v c="$cpu" -v n="$conns" -v t="${depth:-1}" \
    'BEGIN {printf "%.3f %s %s %s %s\n", (l - s) / 1e9, d, c, n, t}'
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

launch_once "$F" >/dev/null  # warm-up (page cache), not counted
col() { awk -v c="$2" '{print $c}' "$1" | median; }
if [ "${GATE:-0}" = 1 ]; then
  printf '%-6s %-8s %-10s %-8s %-16s %-14s %s\n' round gate running_s done_s launcher_cpu_s launcher_conns floor_s
  gates="none spares check"
  for g in $gates; do : >"rounds.$g"; done
  for ((i = 1; i <= runs; i++)); do
    f=$(floor_once)
    for g in $gates; do
      r=$(launch_once "$F" "$g")
      [ -n "$r" ] || exit 1
      echo "$r $f" >>"rounds.$g"
      read -r run done cpu conns depth <<<"$r"
      printf '%-6s %-8s %-10s %-8s %-16s %-14s %s\n' "$i" "$g" "$run" "$done" "$cpu" "$conns" "$f"
    done
  done
  for g in $gates; do
    # Each round's gated launch over that round's launch without: the rounds
    # are interleaved, so a round's pair saw the same machine.
    ratio=$(paste -d' ' "rounds.$g" rounds.none | awk '{printf "%.3f\n", $1 / $7}' | median)
    echo "launch-tree hosts=$K ranks=$((K * R)) fanout=$F gate=$g running_s=$(col "rounds.$g" 1)" \
         "done_s=$(col "rounds.$g" 2) launcher_cpu_s=$(col "rounds.$g" 3) launcher_conns=$(col "rounds.$g" 4)" \
         "floor_s=$(col "rounds.$g" 6) running_ratio=$ratio"
  done
  exit 0
fi
printf '%-6s %-8s %-10s %-8s %-16s %-14s %-6s %s\n' round fanout running_s done_s launcher_cpu_s launcher_conns depth floor_s
: >rounds.tree; : >rounds.flat
for ((i = 1; i <= runs; i++)); do
  f=$(floor_once)
  for fan in "$F" 0; do
    r=$(launch_once "$fan")
    [ -n "$r" ] || exit 1
    out=rounds.tree; [ "$fan" = 0 ] && out=rounds.flat
    echo "$r $f" >>"$out"
    read -r run done cpu conns depth <<<"$r"
    printf '%-6s %-8s %-10s %-8s %-16s %-14s %-6s %s\n' "$i" "$fan" "$run" "$done" "$cpu" "$conns" "$depth" "$f"
  done
done
for fan in "$F" 0; do
  in=rounds.tree; [ "$fan" = 0 ] && in=rounds.flat
  echo "launch-tree hosts=$K ranks=$((K * R)) fanout=$fan running_s=$(col $in 1) done_s=$(col $in 2)" \
       "launcher_cpu_s=$(col $in 3) launcher_conns=$(col $in 4) depth=$(col $in 5) floor_s=$(col $in 6)"
done
