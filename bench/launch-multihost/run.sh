#!/usr/bin/env bash
# bench/launch-multihost: start `true` on K namespace hosts (tests/cluster) x 2
# slots with each launcher, for each K in HOSTS; medians of RUNS runs, ratios
# against pdsh (one `true` per host). For dlaunch's rows also the launcher's
# CPU time for that start (user+sys), and, while a job of the same shape
# sleeps, its thread count and the share of a core it spends (over IDLE_S s). Needs root.
#
#   bench/launch-multihost/run.sh                          # BUILD=build HOSTS="4 16" RUNS=5
#   HOSTS="4 16 64 128" RUNS=3 bench/launch-multihost/run.sh
#   BASE_BIN=/tmp/old/bin bench/launch-multihost/run.sh    # adds a dlaunch-base row (another build)
#   ROWS="dlaunch dlaunch-ssh" IDLE_S=10 bench/launch-multihost/run.sh   # only these rows; idle sampled 10 s
#   FANOUT=8 HOSTS=64 ROWS="pdsh dlaunch dlaunch-flat" bench/launch-multihost/run.sh   # the launch tree vs flat
# Rows: ssh (K plain `ssh host true` at once: the floor), pdsh, hydra
# (mpiexec.hydra -launcher ssh), mpirun (OpenMPI), dl_ssh (remote/ssh
# run_all), dlaunch (--launcher libssh), dlaunch-ssh (--launcher ssh),
# dlaunch-flat and dlaunch-ssh-flat (the same with --fanout 0: every agent
# started by the launcher), dlaunch-base. FANOUT sets --fanout of the
# dlaunch and dlaunch-ssh rows (unset: dlaunch's default). dlaunch runs
# inside h0 like the others; h0's own ranks start without ssh.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
CLUSTER="$SRC/tests/cluster/cluster.sh"

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

# CPU time (ns) of every thread of process $1 so far.
cpu_ns() { cat "/proc/$1"/task/*/schedstat 2>/dev/null | awk '{s += $1} END {printf "%d", s}'; }

# While `dlaunch ... sleep MARK` runs: "threads idle_cpu_percent" of the launcher.
idle_sample() {  # $1 = dlaunch command prefix (without program), $2 = ranks
  local mark="9$RANDOM.$RANDOM" pid="" i t0 t1 c0 c1 th
  eval "$1 --timeout 60 sleep $mark" >"$DIR/idle.out" 2>&1 &
  local job=$!
  for ((i = 0; i < 600; i++)); do  # until every rank runs (60 s at most)
    [ "$(pgrep -fc "^sleep $mark")" -ge "$2" ] && break
    sleep 0.1
  done
  pid=$(pgrep -f "dlaunch .*sleep $mark" | head -1)
  if [ -z "$pid" ] || [ "$(pgrep -fc "^sleep $mark")" -lt "$2" ]; then
    kill -INT "$job" 2>/dev/null; wait "$job" 2>/dev/null; echo "- -"
    echo "bench: the idle job did not get its $2 ranks running: $(tail -3 "$DIR/idle.out")" >&2; return
  fi
  sleep 1
  th=$(ls "/proc/$pid/task" | wc -l)
  # CPU time in ns, every thread's (schedstat), not /proc/PID/stat's clock
  # ticks: 10 ms ticks over a few seconds cannot tell 0.3% from 0.4%.
  c0=$(cpu_ns "$pid"); t0=$(date +%s%N)
  sleep "${IDLE_S:-3}"
  c1=$(cpu_ns "$pid"); t1=$(date +%s%N)
  kill -INT "$pid"; wait "$job" 2>/dev/null
  awk -v th="$th" -v c="$((c1 - c0))" -v ns="$((t1 - t0))" 'BEGIN {printf "%d %.2f\n", th, 100 * c / ns}'
}

if [ "${1:-}" = "--inside" ]; then  # runs inside h0's namespace
  DIR=$2; RUNS=$3; BIN=$4; K=$5
  cfg="$DIR/ssh_config"; np=$((2 * K))
  fanout=${FANOUT:+--fanout $FANOUT}
  mapfile -t addrs < <(awk '{print $1}' "$DIR/hostfile")
  hosts=$(IFS=,; echo "${addrs[*]}")
  for a in "${addrs[@]}"; do echo "$a:2"; done >"$DIR/hosts.mpich"
  printf '#!/bin/sh\nexec ssh -F %s "$@"\n' "$cfg" >"$DIR/ssh-wrapper"; chmod +x "$DIR/ssh-wrapper"
  ssh_floor() { for a in "${addrs[@]}"; do ssh -F "$cfg" "$a" true & done; wait; }
  declare -A cmd=(
    [ssh]="ssh_floor"
    [pdsh]="PDSH_SSH_ARGS_APPEND='-F $cfg' pdsh -R ssh -f $K -w $hosts true"
    [hydra]="mpiexec.hydra -launcher ssh -launcher-exec $DIR/ssh-wrapper -f $DIR/hosts.mpich -n $np true"
    [mpirun]="mpirun --allow-run-as-root --hostfile $DIR/hostfile -n $np --mca plm_rsh_args '-F $cfg' true"
    [dl_ssh]="$BIN/dl_ssh_run -F $cfg -p 32 ${addrs[*]} -- true"
    [dlaunch]="$BIN/dlaunch --launcher libssh $fanout -n $np --hostfile $DIR/hostfile --ssh-config $cfg --agent-timeout 120"
    [dlaunch-ssh]="$BIN/dlaunch --launcher ssh $fanout -n $np --hostfile $DIR/hostfile --ssh-config $cfg --agent-timeout 120"
    [dlaunch-flat]="$BIN/dlaunch --launcher libssh --fanout 0 -n $np --hostfile $DIR/hostfile --ssh-config $cfg --agent-timeout 120"
    [dlaunch-ssh-flat]="$BIN/dlaunch --launcher ssh --fanout 0 -n $np --hostfile $DIR/hostfile --ssh-config $cfg --agent-timeout 120"
  )
  order=(ssh pdsh hydra mpirun dl_ssh dlaunch dlaunch-flat dlaunch-ssh dlaunch-ssh-flat)
  declare -A med cpu
  if [ -n "${BASE_BIN:-}" ]; then
    cmd[dlaunch-base]="$BASE_BIN/dlaunch -n $np --hostfile $DIR/hostfile --ssh-config $cfg --agent-timeout 120"
    order+=(dlaunch-base)
  fi
  # shellcheck disable=SC2206
  [ -n "${ROWS:-}" ] && order=($ROWS) && [[ " $ROWS " != *" pdsh "* ]] && med[pdsh]=FAIL
  for name in "${order[@]}"; do
    c=${cmd[$name]}; [[ $name == dlaunch* ]] && c="$c true"
    if ! out=$(eval "$c" 2>&1 </dev/null); then  # warm-up, and a check that it works
      echo "bench: $name failed: $c: $(echo "$out" | tail -3)" >&2; med[$name]=FAIL; continue
    fi
    times=(); cpus=()
    for ((r = 0; r < RUNS; r++)); do
      t0=$(date +%s%N)
      if [[ $name == dlaunch* ]]; then
        /usr/bin/time -f '%U %S' -o "$DIR/time.out" bash -c "$c" >/dev/null 2>&1 </dev/null
        cpus+=($(awk '{printf "%d", ($1 + $2) * 1000}' "$DIR/time.out"))
      else
        eval "$c" >/dev/null 2>&1 </dev/null
      fi
      t1=$(date +%s%N)
      times+=($(( (t1 - t0) / 1000 )))
    done
    med[$name]=$(printf '%s\n' "${times[@]}" | median)
    [ ${#cpus[@]} -gt 0 ] && cpu[$name]=$(printf '%s\n' "${cpus[@]}" | median)
  done
  printf '%5s %-16s %10s %8s %8s %8s %8s\n' hosts launcher median_s x_pdsh cpu_s threads idle_%
  for name in "${order[@]}"; do
    m=${med[$name]:-FAIL}; p=${med[pdsh]:-FAIL}
    idle="- -"; [[ $name == dlaunch* ]] && [ "$m" != FAIL ] && idle=$(idle_sample "${cmd[$name]}" "$np")
    awk -v k="$K" -v n="$name" -v m="$m" -v p="$p" -v c="${cpu[$name]:--}" -v idle="$idle" 'BEGIN {
      split(idle, i, " ")
      ms = (m == "FAIL") ? "FAIL" : sprintf("%.3f", m / 1e6)
      x = (m == "FAIL" || p == "FAIL") ? "-" : sprintf("%.2f", m / p)
      cs = (c == "-") ? "-" : sprintf("%.2f", c / 1000)
      printf "%5d %-16s %10s %8s %8s %8s %8s\n", k, n, ms, x, cs, i[1], i[2] }'
  done
  exit 0
fi

[ "$(id -u)" = 0 ] || { echo "bench: needs root (it builds a namespace cluster)" >&2; exit 3; }
BUILD=${BUILD:-$SRC/build}
RUNS=${RUNS:-5}
HOSTS=${HOSTS:-"4 16"}
for b in dl_ssh_run dlaunch dlaunch-agent; do
  [ -x "$BUILD/bin/$b" ] || { echo "bench: $BUILD/bin/$b missing: cmake --build $BUILD --target $b" >&2; exit 1; }
done
for K in $HOSTS; do
  up=$("$CLUSTER" up --hosts "$K" --owner $$) || { echo "$up" >&2; exit 1; }
  eval "$up"
  trap '"$CLUSTER" down "$DL_CLUSTER_ID" >/dev/null' EXIT
  echo "# launch-multihost: $K namespace hosts x 2 slots, /bin/true, median of $RUNS runs, dlaunch rows' --fanout ${FANOUT:-default}; $(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg)"
  "$CLUSTER" exec "$DL_CLUSTER_ID" h0 -- env BASE_BIN="${BASE_BIN:-}" ROWS="${ROWS:-}" IDLE_S="${IDLE_S:-3}" FANOUT="${FANOUT:-}" bash "$HERE/run.sh" --inside "$DL_CLUSTER_DIR" "$RUNS" "$BUILD/bin" "$K"
  "$CLUSTER" down "$DL_CLUSTER_ID" >/dev/null; trap - EXIT
done
