#!/usr/bin/env bash
# Launch time of an OpenMPI hello (MPI_Init, Allreduce, Barrier, Finalize):
# dlaunch (the agents' PMIx servers) vs Debian's mpirun, N = 1, 4, 16 ranks on
# this host, then 4 x 2 ranks across 4 namespace hosts (tests/cluster, needs
# root; both launchers inside h0, over ssh). Then the same hello built with
# MPICH (bin/mpich_hello, tests/mpi/pmi): dlaunch (the agents' PMI servers) vs
# MPICH's mpiexec.hydra, on this host and on the 4 x 2 hosts. Prints medians
# of REPS runs and the ratio against the anchor (< 1: we are faster), all
# measured in one run. Then MPI_Comm_spawn: mpi4py's MPIPoolExecutor
# starting 3 workers and mapping over them (tests/mpi/pmix/mpi4py_pool.py), and
# bin/mpi_spawn (2 children all-reduce with their parent), under
# `dlaunch -n 1 --oversubscribe` vs `mpirun -n 1 --oversubscribe` (SPAWN=0
# skips them).
#
#   bench/launch-mpi/run.sh [BUILD_DIR]       (default: build)
#   REPS=10 NS="1 4 16" MULTIHOST=0 MPICH=0 bench/launch-mpi/run.sh build
#   DLAUNCH_CMD="build/bin/dl_pmix_run" bench/launch-mpi/run.sh   # the standalone driver instead
#
# DLAUNCH_CMD is the command that takes "N program args" (default: dlaunch -n).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
CLUSTER="$SRC/tests/cluster/cluster.sh"
REPS=${REPS:-10}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# median_ms CMD...: runs CMD REPS times (after one warm-up), prints the median
# wall time in ms; fails loudly if a run fails.
median_ms() {
  "$@" >/dev/null 2>&1 || { echo "run.sh: failed: $*" >&2; "$@" >&2 || true; exit 1; }
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

row() {  # label ours theirs
  printf '%-14s %12s %12s %8s\n' "$1" "$2" "$3" "$(awk -v a="$2" -v b="$3" 'BEGIN {printf "%.2f", a / b}')"
}

if [ "${1:-}" = "--inside" ]; then  # inside h0 of the cluster: one 4 x 2 row
  DIR=$2; BIN=$3
  cfg="$DIR/ssh_config"
  net=$(awk 'NR==1 {sub(/\.[0-9]+$/, "", $1); print $1 ".0/24"}' "$DIR/hostfile")
  ours=$(median_ms "$BIN/dlaunch" -n 8 --hostfile "$DIR/hostfile" --ssh-config "$cfg" \
         -x OMPI_ALLOW_RUN_AS_ROOT=1 -x OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "$BIN/mpi_hello" 8)
  theirs=$(median_ms mpirun.openmpi --allow-run-as-root -n 8 --hostfile "$DIR/hostfile" \
           --mca plm_rsh_args "-F $cfg" --mca oob_tcp_if_include "$net" --mca btl tcp,vader,self \
           --mca btl_tcp_if_include "$net" "$BIN/mpi_hello" 8)
  row "4x2 hosts" "$ours" "$theirs"
  exit 0
fi
if [ "${1:-}" = "--inside-mpich" ]; then  # inside h0: the 4 x 2 MPICH row
  DIR=$2; BIN=$3
  printf '#!/bin/sh\nexec ssh -F %s "$@"\n' "$DIR/ssh_config" > "$DIR/hydra_ssh"
  chmod +x "$DIR/hydra_ssh"
  hosts=$(awk '{printf "%s%s:2", (NR > 1 ? "," : ""), $1}' "$DIR/hostfile")
  ours=$(median_ms "$BIN/dlaunch" -n 8 --hostfile "$DIR/hostfile" --ssh-config "$DIR/ssh_config" "$BIN/mpich_hello" 8)
  theirs=$(median_ms mpiexec.hydra -launcher ssh -launcher-exec "$DIR/hydra_ssh" -hosts "$hosts" -n 8 \
           "$BIN/mpich_hello" 8)
  row "4x2 hosts" "$ours" "$theirs"
  exit 0
fi

BUILD=${1:-build}
BIN=$(cd "$BUILD/bin" && pwd)
NS=${NS:-"1 4 16"}
DLAUNCH_CMD=${DLAUNCH_CMD:-"$BIN/dlaunch -n"}
MPIRUN_CMD=${MPIRUN_CMD:-"mpirun.openmpi --allow-run-as-root --oversubscribe -n"}
HELLO="$BIN/mpi_hello"
[ -x "$HELLO" ] || { echo "run.sh: $HELLO missing; build test_pmix first" >&2; exit 2; }

echo "# launch-mpi: mpi_hello, median of $REPS runs (ms); $(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg) at start"
printf '%-14s %12s %12s %8s\n' "ranks" "dlaunch ms" "mpirun ms" "ratio"
for n in $NS; do
  # shellcheck disable=SC2086
  ours=$(median_ms $DLAUNCH_CMD "$n" "$HELLO" "$n")
  # shellcheck disable=SC2086
  theirs=$(median_ms $MPIRUN_CMD "$n" "$HELLO" "$n")
  row "$n" "$ours" "$theirs"
done
cluster_up() {  # once, for both tables
  [ -n "${DL_CLUSTER_ID:-}" ] && return 0
  up=$("$CLUSTER" up --hosts 4 --owner $$) || { echo "$up" >&2; exit 1; }
  eval "$up"
  trap '"$CLUSTER" down "$DL_CLUSTER_ID" >/dev/null' EXIT
}
multihost() { [ "${MULTIHOST:-1}" != 0 ] && [ "$(id -u)" = 0 ]; }
if multihost; then
  cluster_up
  REPS=$REPS "$CLUSTER" exec "$DL_CLUSTER_ID" h0 -- bash "$HERE/run.sh" --inside "$DL_CLUSTER_DIR" "$BIN"
elif [ "${MULTIHOST:-1}" != 0 ]; then
  echo "(4x2 hosts skipped: the namespace cluster needs root)"
fi
echo "ratio = dlaunch / mpirun (below 1.00: dlaunch is faster)"
MPICH_HELLO="$BIN/mpich_hello"
if [ "${MPICH:-1}" != 0 ] && [ -x "$MPICH_HELLO" ] && command -v mpiexec.hydra >/dev/null; then
  echo
  echo "# launch-mpi: mpich_hello (MPICH $(mpichversion 2>/dev/null | awk '/Version/ {print $3}'), PMI-1), median of $REPS runs (ms)"
  printf '%-14s %12s %12s %8s\n' "ranks" "dlaunch ms" "hydra ms" "ratio"
  for n in $NS; do
    ours=$(median_ms "$BIN/dlaunch" -n "$n" "$MPICH_HELLO" "$n")
    theirs=$(median_ms mpiexec.hydra -n "$n" "$MPICH_HELLO" "$n")
    row "$n" "$ours" "$theirs"
  done
  if multihost; then
    cluster_up
    REPS=$REPS "$CLUSTER" exec "$DL_CLUSTER_ID" h0 -- bash "$HERE/run.sh" --inside-mpich "$DL_CLUSTER_DIR" "$BIN"
  fi
  echo "ratio = dlaunch / mpiexec.hydra (below 1.00: dlaunch is faster)"
elif [ "${MPICH:-1}" != 0 ]; then
  echo "(MPICH rows skipped: build dl_mpich_programs (needs libmpich-dev) and install mpich)"
fi
if [ "${SPAWN:-1}" != 0 ]; then
  echo
  echo "# launch-mpi: MPI_Comm_spawn under -n 1 --oversubscribe, median of $REPS runs (ms)"
  printf '%-14s %12s %12s %8s\n' "program" "dlaunch ms" "mpirun ms" "ratio"
  POOL="$SRC/tests/mpi/pmix/mpi4py_pool.py"
  ours=$(median_ms "$BIN/dlaunch" -n 1 --oversubscribe /usr/bin/python3 "$POOL")
  theirs=$(median_ms mpirun.openmpi --allow-run-as-root -n 1 --oversubscribe /usr/bin/python3 "$POOL")
  row "pool 1+3" "$ours" "$theirs"
  ours=$(median_ms "$BIN/dlaunch" -n 1 --oversubscribe "$BIN/mpi_spawn")
  theirs=$(median_ms mpirun.openmpi --allow-run-as-root -n 1 --oversubscribe "$BIN/mpi_spawn")
  row "mpi_spawn 1+2" "$ours" "$theirs"
  echo "ratio = dlaunch / mpirun (below 1.00: dlaunch is faster)"
fi
echo "load $(cut -d' ' -f1 /proc/loadavg) at end"
