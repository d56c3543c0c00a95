#!/bin/bash
# mpi4py's own test suite under dlaunch at 1..N ranks (docs/mpi.md, "mpi4py's
# test suite"), as mpi4py's CI runs it under mpiexec. Debian's python3-mpi4py
# does not ship the suite, so it is a manual check against a checkout of
# mpi4py's source at the installed version:
#   git clone -b 3.1.4 https://github.com/mpi4py/mpi4py /tmp/mpi4py
#   scripts/check-mpi4py.sh /tmp/mpi4py [MAX_RANKS] [--anchor]
# --anchor runs OpenMPI's mpirun the same way after each dlaunch run. Prints
# one line per run: launcher, ranks, exit code, seconds, the suite's verdict.
set -u
src=${1:?usage: check-mpi4py.sh MPI4PY_SOURCE_DIR [MAX_RANKS] [--anchor]}
max=${2:-4}
anchor=${3:-}
here=$(cd "$(dirname "$0")/.." && pwd)
dlaunch=${DLAUNCH:-$here/build/bin/dlaunch}
python=${PYTHON:-/usr/bin/python3}
[ -f "$src/test/runtests.py" ] || { echo "check-mpi4py: $src/test/runtests.py: no mpi4py test suite there" >&2; exit 2; }
log=$(mktemp -d /tmp/check-mpi4py-XXXXXX)
one() {  # launcher-name ranks command...
  local name=$1 n=$2; shift 2
  local start end rc verdict
  start=$(date +%s.%N)
  (cd "$src" && timeout 1200 "$@" "$python" test/runtests.py) > "$log/$name-$n.log" 2>&1
  rc=$?
  end=$(date +%s.%N)
  verdict=$(grep -E "^(OK|FAILED)" "$log/$name-$n.log" | sort | uniq -c | tr -s ' ' | paste -sd ';' -)
  printf 'mpi4py-suite launcher=%s ranks=%d exit=%d seconds=%.1f verdict=%s\n' "$name" "$n" "$rc" \
    "$(echo "$end - $start" | bc)" "${verdict:-none}"
}
for n in $(seq 1 "$max"); do
  # As mpi4py's CI: more ranks (and spawned children) than CPUs are allowed.
  one dlaunch "$n" "$dlaunch" -n "$n" --oversubscribe
  [ "$anchor" = --anchor ] && one mpirun "$n" mpirun --allow-run-as-root --oversubscribe -n "$n"
done
echo "logs: $log"
