#!/usr/bin/env bash
# bench/launch/cpu.sh: CPU time (all processes of the job, user + system,
# `perf stat -e task-clock`) to start and finish N ranks of /bin/true, for
# dlaunch beside mpiexec.hydra and the fork/exec floor. CPU time hardly
# depends on what else the machine runs, unlike wall time: use it to compare
# builds on a busy machine, and bench/launch/run.sh for wall time on a quiet one.
#   bench/launch/cpu.sh [N...]          (default: 1 4 16 64)
#   DLAUNCH_BIN=build/bin DLAUNCH_BEFORE_BIN=other/bin RUNS=20
set -euo pipefail
source "$(cd "$(dirname "$0")" && pwd)/common.sh"
command -v perf >/dev/null || { echo "bench/launch/cpu.sh needs perf (apt-get install linux-perf)"; exit 1; }
cpu() {  # command... -> mean ms of task-clock over $runs runs
  perf stat -x, -e task-clock -r "$runs" "$@" </dev/null 2>&1 >/dev/null | awk -F, '/task-clock/ {printf "%.2f", $1}'
}
rows=("floor:$work/floor @N@ /bin/true" "dlaunch:$bin/dlaunch -n @N@ /bin/true" "dlaunch--mpi-none:$bin/dlaunch --mpi none -n @N@ /bin/true")
[ -n "${DLAUNCH_BEFORE_BIN:-}" ] && rows+=("dlaunch-before:$DLAUNCH_BEFORE_BIN/dlaunch -n @N@ /bin/true")
rows+=("mpiexec.hydra:mpiexec.hydra -n @N@ /bin/true")
printf "%-20s" "CPU ms (mean of $runs)"; for n in "${ns[@]}"; do printf "%12s" "N=$n"; done; echo
for row in "${rows[@]}"; do
  name=${row%%:*}; cmd=${row#*:}
  printf "%-20s" "$name"
  for n in "${ns[@]}"; do printf "%12s" "$(cpu ${cmd//@N@/$n})"; done
  echo
done
