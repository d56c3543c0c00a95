#!/usr/bin/env bash
# Launch time under Slurm: inside one `salloc -N4` on the test Slurm cluster
# (tests/slurm/slurm_cluster.sh: 4 nodes of 2 CPUs in network namespaces,
# needs root, slurm-wlm and munge), 8 ranks of /bin/true and of an OpenMPI
# hello (MPI_Init, Allreduce, Barrier, Finalize): dlaunch (agents started by
# one srun step) against `srun -n 8` (`--mpi=pmix` for MPI) and OpenMPI's
# mpirun (its daemons also started by srun), all in the same allocation.
# Prints the median of REPS runs (after one warm-up) and each one's ratio to
# srun's (< 1: faster than srun).
#
#   bench/launch-slurm/run.sh [BUILD_DIR]     (default: build; needs bin/mpi_hello from test_pmix)
#   REPS=20 bench/launch-slurm/run.sh build
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
REPS=${REPS:-10}

median_s() {  # CMD...: median wall time in seconds of REPS runs after a warm-up; a failing run fails the bench
  "$@" >/dev/null 2>&1 || { echo "run.sh: failed: $*" >&2; "$@" >&2 || true; exit 1; }
  local times=() t0 t1
  for _ in $(seq "$REPS"); do
    t0=$(date +%s%N)
    "$@" >/dev/null 2>&1 || { echo "run.sh: failed: $*" >&2; exit 1; }
    t1=$(date +%s%N)
    times+=($(( (t1 - t0) / 1000 )))
  done
  printf '%s\n' "${times[@]}" | sort -n | awk '{a[NR]=$1} END {m=(NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2; printf "%.3f", m/1e6}'
}
row() {  # program launcher seconds srun_seconds
  printf '| %-9s | %-48s | %8s | %6s |\n' "$1" "$2" "$3" "$(awk -v a="$3" -v b="$4" 'BEGIN {printf "%.2f", a / b}')"
}

if [ "${1:-}" = "--inside" ]; then  # on the login node, inside salloc -N4
  BIN=$2 NET=$3
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_oob_tcp_if_include=$NET \
         OMPI_MCA_btl_tcp_if_include=$NET OMPI_MCA_btl=tcp,vader,self
  srun_true=$(median_s srun -n 8 /bin/true)
  ours_true=$(median_s "$BIN/dlaunch" -n 8 /bin/true)
  srun_mpi=$(median_s srun --mpi=pmix -n 8 "$BIN/mpi_hello" 8)
  ours_mpi=$(median_s "$BIN/dlaunch" -n 8 "$BIN/mpi_hello" 8)
  mpirun_mpi=$(median_s mpirun.openmpi --allow-run-as-root -n 8 "$BIN/mpi_hello" 8)
  echo "| program   | launcher                                         | median s | × srun |"
  echo "|---|---|---|---|"
  row "/bin/true" "srun -n 8" "$srun_true" "$srun_true"
  row "/bin/true" "dlaunch -n 8 (--launcher slurm)" "$ours_true" "$srun_true"
  row "mpi_hello" "srun --mpi=pmix -n 8" "$srun_mpi" "$srun_mpi"
  row "mpi_hello" "mpirun -n 8 (orted by srun)" "$mpirun_mpi" "$srun_mpi"
  row "mpi_hello" "dlaunch -n 8 (--launcher slurm, dlaunch's PMIx)" "$ours_mpi" "$srun_mpi"
  exit 0
fi

BUILD=${1:-build}
BIN=$(cd "$BUILD/bin" && pwd)
[ -x "$BIN/mpi_hello" ] || { echo "run.sh: $BIN/mpi_hello missing; build test_pmix first" >&2; exit 2; }
CLUSTER="$SRC/tests/cluster/cluster.sh"
out=$("$CLUSTER" up --hosts 5 --owner $$) || { echo "$out" >&2; exit 1; }
ID=$(echo "$out" | sed -n 's/^DL_CLUSTER_ID=//p')
trap '"$CLUSTER" down "$ID" >/dev/null' EXIT
conf=$("$SRC/tests/slurm/slurm_cluster.sh" up "$ID" | sed -n 's/^SLURM_CONF=//p')
DIR=$(echo "$out" | sed -n 's/^DL_CLUSTER_DIR=//p')
NET=$(. "$DIR/cluster.env"; echo "$NET.0/24")
echo "# launch-slurm: 8 ranks inside salloc -N4 (4 namespace nodes x 2 CPUs), median of $REPS runs;"
echo "# $(nproc) cores, load $(cut -d" " -f1 /proc/loadavg) at start, $(SLURM_CONF=$conf srun --version)"
"$CLUSTER" exec "$ID" h0 -- env SLURM_CONF="$conf" REPS="$REPS" salloc -Q -N4 -K "$0" --inside "$BIN" "$NET" </dev/null
