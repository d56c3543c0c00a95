#!/usr/bin/env bash
# Launch time of an OpenMPI hello (MPI_Init, Allreduce, Barrier, Finalize):
# dlaunch's PMIx server vs Debian's mpirun, N = 1, 4, 16 ranks on this host.
# Prints medians of REPS runs and the ratio against mpirun (< 1: we are faster).
#
#   bench/launch-mpi/run.sh [BUILD_DIR]       (default: build)
#   REPS=10 NS="1 4 16" DLAUNCH_CMD="build/bin/dlaunch -n" bench/launch-mpi/run.sh
#
# DLAUNCH_CMD is the command that takes "N program args"; it defaults to the
# standalone PMIx driver dl_pmix_run until dlaunch itself serves PMIx.
set -euo pipefail
BUILD=${1:-build}
BIN=$(cd "$BUILD/bin" && pwd)
REPS=${REPS:-10}
NS=${NS:-"1 4 16"}
DLAUNCH_CMD=${DLAUNCH_CMD:-"$BIN/dl_pmix_run"}
DLAUNCH_LABEL=${DLAUNCH_LABEL:-$(basename "${DLAUNCH_CMD%% *}")}
MPIRUN_CMD=${MPIRUN_CMD:-"mpirun.openmpi --allow-run-as-root --oversubscribe -n"}
HELLO="$BIN/mpi_hello"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
[ -x "$HELLO" ] || { echo "run.sh: $HELLO missing; build test_pmix first" >&2; exit 2; }

# median_ms CMD...: runs CMD REPS times (after one warm-up), prints the median
# wall time in ms; fails loudly if a run fails.
median_ms() {
  "$@" >/dev/null 2>&1 || { echo "run.sh: failed: $*" >&2; exit 1; }
  local times=()
  for _ in $(seq "$REPS"); do
    local t0 t1
    t0=$(date +%s%N)
    "$@" >/dev/null 2>&1 || { echo "run.sh: failed: $*" >&2; exit 1; }
    t1=$(date +%s%N)
    times+=($(( (t1 - t0) / 1000 )))
  done
  printf '%s\n' "${times[@]}" | sort -n | awk '{a[NR]=$1} END {m=(NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2; printf "%.1f", m/1000}'
}

printf '%-6s %14s %14s %8s\n' "ranks" "$DLAUNCH_LABEL ms" "mpirun ms" "ratio"
for n in $NS; do
  # shellcheck disable=SC2086
  ours=$(median_ms $DLAUNCH_CMD "$n" "$HELLO" "$n")
  # shellcheck disable=SC2086
  theirs=$(median_ms $MPIRUN_CMD "$n" "$HELLO" "$n")
  ratio=$(awk -v a="$ours" -v b="$theirs" 'BEGIN {printf "%.2f", a / b}')
  printf '%-6s %14s %14s %8s\n' "$n" "$ours" "$theirs" "$ratio"
done
echo "median of $REPS runs each; ratio = $DLAUNCH_LABEL / mpirun (below 1.00 is faster)"
