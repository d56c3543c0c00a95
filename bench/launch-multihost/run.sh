#!/usr/bin/env bash
# bench/launch-multihost: start `true` on 4 namespace hosts (tests/cluster) with
# each launcher, medians of RUNS runs each, measured in one run, ratios against
# the parallel-ssh floor (4 plain `ssh host true` at once). Needs root.
#
#   bench/launch-multihost/run.sh                      # BUILD=build-ssh RUNS=10
#   DLAUNCH_CMD='build/bin/dlaunch -n 8 --hostfile {hostfile} true' bench/launch-multihost/run.sh
# In DLAUNCH_CMD, {hostfile} is "<addr> slots=2" per host and {ssh_config} the
# cluster's ssh config; dlaunch runs inside h0 like the other launchers. The
# dlaunch row is skipped when DLAUNCH_CMD is unset.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
CLUSTER="$SRC/tests/cluster/cluster.sh"

if [ "${1:-}" = "--inside" ]; then  # runs inside h0's namespace
  DIR=$2; RUNS=$3; BIN=$4
  cfg="$DIR/ssh_config"
  mapfile -t addrs < <(awk '{print $1}' "$DIR/hostfile")
  hosts=$(IFS=,; echo "${addrs[*]}")
  for a in "${addrs[@]}"; do echo "$a:2"; done >"$DIR/hosts.mpich"
  printf '#!/bin/sh\nexec ssh -F %s "$@"\n' "$cfg" >"$DIR/ssh-wrapper"; chmod +x "$DIR/ssh-wrapper"
  ssh_floor() { for a in "${addrs[@]}"; do ssh -F "$cfg" "$a" true & done; wait; }
  declare -A cmd=(
    [ssh]="ssh_floor"
    [pdsh]="PDSH_SSH_ARGS_APPEND='-F $cfg' pdsh -R ssh -w $hosts true"
    [hydra]="mpiexec.hydra -launcher ssh -launcher-exec $DIR/ssh-wrapper -f $DIR/hosts.mpich -n 8 true"
    [mpirun]="mpirun --allow-run-as-root --hostfile $DIR/hostfile -n 8 --mca plm_rsh_args '-F $cfg' true"
    [dl_ssh]="$BIN/dl_ssh_run -F $cfg ${addrs[*]} -- true"
  )
  order=(ssh pdsh hydra mpirun dl_ssh)
  if [ -n "${DLAUNCH_CMD:-}" ]; then
    c=${DLAUNCH_CMD//\{hostfile\}/$DIR/hostfile}; cmd[dlaunch]=${c//\{ssh_config\}/$cfg}; order+=(dlaunch)
  fi
  declare -A median
  for name in "${order[@]}"; do
    if ! out=$(eval "${cmd[$name]}" 2>&1); then  # warm-up, and a check that it works
      echo "bench: $name failed: ${cmd[$name]}: $out" >&2; median[$name]=FAIL; continue
    fi
    times=()
    for ((r = 0; r < RUNS; r++)); do
      t0=$(date +%s%N); eval "${cmd[$name]}" >/dev/null 2>&1; t1=$(date +%s%N)
      times+=($(( (t1 - t0) / 1000 )))
    done
    median[$name]=$(printf '%s\n' "${times[@]}" | sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}')
  done
  floor=${median[ssh]}
  printf '%-10s %-62s %12s %10s\n' launcher command "median_ms" "x_ssh"
  for name in ssh pdsh hydra mpirun dl_ssh dlaunch; do
    case $name in
      ssh) what="4 x ssh -F cfg ADDR true, in parallel" ;;
      pdsh) what="pdsh -R ssh -w 4 hosts true" ;;
      hydra) what="mpiexec.hydra -launcher ssh -f hosts -n 8 true" ;;
      mpirun) what="mpirun --hostfile hosts -n 8 true (OpenMPI, plm_rsh_args -F)" ;;
      dl_ssh) what="dl_ssh_run (remote/ssh run_all) 4 hosts true" ;;
      dlaunch) what="${DLAUNCH_CMD:-DLAUNCH_CMD unset: lead fills this row}" ;;
    esac
    m=${median[$name]:-}
    if [ -z "$m" ]; then printf '%-10s %-62s %12s %10s\n' "$name" "$what" "-" "-"; continue; fi
    if [ "$m" = FAIL ] || [ "$floor" = FAIL ]; then printf '%-10s %-62s %12s %10s\n' "$name" "$what" FAIL -; continue; fi
    awk -v n="$name" -v w="$what" -v m="$m" -v f="$floor" 'BEGIN {printf "%-10s %-62s %12.1f %10.2f\n", n, w, m/1000, m/f}'
  done
  exit 0
fi

[ "$(id -u)" = 0 ] || { echo "bench: needs root (it builds a namespace cluster)" >&2; exit 3; }
BUILD=${BUILD:-$SRC/build-ssh}
RUNS=${RUNS:-10}
[ -x "$BUILD/bin/dl_ssh_run" ] || { echo "bench: $BUILD/bin/dl_ssh_run missing: ninja -C $BUILD dl_ssh_run" >&2; exit 1; }
up=$("$CLUSTER" up --hosts 4 --owner $$) || { echo "$up" >&2; exit 1; }
eval "$up"
trap '"$CLUSTER" down "$DL_CLUSTER_ID" >/dev/null' EXIT
echo "# launch-multihost: 4 namespace hosts x 2 slots, /bin/true, median of $RUNS runs (ms); $(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg)"
"$CLUSTER" exec "$DL_CLUSTER_ID" h0 -- env DLAUNCH_CMD="${DLAUNCH_CMD:-}" bash "$HERE/run.sh" --inside "$DL_CLUSTER_DIR" "$RUNS" "$BUILD/bin"
