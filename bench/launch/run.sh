#!/usr/bin/env bash
# bench/launch: median wall time to start and finish N ranks of /bin/true,
# dlaunch beside mpirun (OpenMPI), mpiexec.hydra (MPICH), torchrun and a
# plain fork/exec loop (the floor), in one run; ratios are to the floor.
#   bench/launch/run.sh [N...]        (default: 1 4 16 64; build dlaunch first)
#   DLAUNCH_BIN=build/bin             dlaunch to measure (default: build/bin)
#   DLAUNCH_BEFORE_BIN=other/bin      also measure another build's dlaunch (row "dlaunch-before")
#   LAUNCHERS="dlaunch mpirun"        only the rows whose name starts with one of these (default: all)
set -euo pipefail
source "$(cd "$(dirname "$0")" && pwd)/common.sh"
command -v hyperfine >/dev/null || { echo "bench/launch needs hyperfine (apt-get install hyperfine)"; exit 1; }

measure() {  # name N runs command...
  local name=$1 n=$2 r=$3; shift 3
  if [ -n "${LAUNCHERS:-}" ] && [ "$name" != floor ]; then
    local want=0 l
    for l in $LAUNCHERS; do [[ $name == "$l"* ]] && want=1; done
    [ $want = 1 ] || return 0
  fi
  # Every launcher gets /dev/null as stdin and 120 s per run: mpirun -n 64
  # was seen to hang forever on this 2-core machine.
  if ! timeout 120 "$@" </dev/null >/dev/null 2>&1; then echo "$name $n FAILED"; return; fi
  timeout 900 hyperfine -N -w 2 -r "$r" --export-json "$work/$name-$n.json" "$(printf '%q ' "$@")" </dev/null >/dev/null 2>&1 \
    && python3 -c "import json,sys; d=json.load(open(sys.argv[1]))['results'][0]; print(sys.argv[2], sys.argv[3], d['median']*1000)" \
       "$work/$name-$n.json" "$name" "$n" || echo "$name $n FAILED"
}

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
{
for n in "${ns[@]}"; do
  measure floor "$n" "$runs" "$work/floor" "$n" /bin/true
  measure dlaunch "$n" "$runs" "$bin/dlaunch" -n "$n" /bin/true
  [ -n "${DLAUNCH_BEFORE_BIN:-}" ] && measure dlaunch-before "$n" "$runs" "$DLAUNCH_BEFORE_BIN/dlaunch" -n "$n" /bin/true
  measure dlaunch--mpi-none "$n" "$runs" "$bin/dlaunch" --mpi none -n "$n" /bin/true
  # Each rank's stdout is a pty by default; this row is the pipes it replaced.
  measure dlaunch--no-output-pty "$n" "$runs" "$bin/dlaunch" --no-output-pty -n "$n" /bin/true
  measure mpiexec.hydra "$n" "$runs" mpiexec.hydra -n "$n" /bin/true
  measure mpirun "$n" "$runs" mpirun --oversubscribe -n "$n" /bin/true
  measure torchrun "$n" 5 /usr/bin/python3 -m torch.distributed.run --standalone --nproc_per_node "$n" -r 2 -t 2 --no_python /bin/true
done
} > "$work/results.txt"
python3 - "$work/results.txt" <<'PY'
import sys, collections
rows = collections.OrderedDict()
for line in open(sys.argv[1]):
    parts = line.split()
    rows.setdefault(parts[0], {})[int(parts[1])] = None if parts[2] == "FAILED" else float(parts[2])
ns = sorted({n for r in rows.values() for n in r})
import os
print("median wall time (ms) to start and finish N ranks of /bin/true; (x) = ratio to the fork/exec floor; load %s" % open("/proc/loadavg").read().split()[0])
print(f"{'launcher':<24}" + "".join(f"{'N='+str(n):>20}" for n in ns))
for name, r in rows.items():
    cells = []
    for n in ns:
        v, f = r.get(n), rows.get("floor", {}).get(n)
        cells.append("failed" if v is None else (f"{v:8.2f} ({v/f:6.2f}x)" if f else f"{v:8.2f}"))
    print(f"{name:<24}" + "".join(f"{c:>20}" for c in cells))
PY
