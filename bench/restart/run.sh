#!/usr/bin/env bash
# bench/restart: time from a rank's failure to every rank of the next
# attempt running, dlaunch --max-restarts beside torchrun --max-restarts
# (Debian's python3-torch: /usr/bin/python3 -m torch.distributed.run), on
# this machine, medians of RUNS jobs each; ratio = torchrun / dlaunch
# (> 1: dlaunch restarts faster).
#   bench/restart/run.sh [N...]     ranks per job (default: 4 16; build dlaunch first)
#   RUNS=7                          jobs per row (default 7)
#   DLAUNCH_BIN=build/bin           the dlaunch to measure
#
# Every rank is the same shell script under both launchers (no Python or
# torch import in the measured path): on attempt 0 rank 1 writes its clock
# (date +%s.%N) and exits 1 while the others sleep; the launcher tears the
# attempt down and starts attempt 1, whose ranks each write their clock at
# start and exit 0. The time is max(attempt-1 starts) - the failure. Both
# launchers get --kill-grace/SIGTERM-obeying sleepers, so teardown waits for
# no grace period. torchrun is measured as it comes (its agent checks its
# workers every --monitor-interval, 5 s by default in torch 1.13) and with
# --monitor-interval 0.1, its fastest sensible setting.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=${DLAUNCH_BIN:-$here/../../build/bin}
ns=("${@:-4 16}"); ns=(${ns[*]})
runs=${RUNS:-7}
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT

cat > "$work/rank.sh" <<'SH'
#!/bin/sh
# $1: the directory for the clocks. TORCHELASTIC_RESTART_COUNT: which attempt.
if [ "${TORCHELASTIC_RESTART_COUNT:-0}" = 0 ]; then
  if [ "$RANK" = 1 ]; then sleep 1; date +%s.%N > "$1/fail"; exit 1; fi
  exec sleep 60
fi
date +%s.%N > "$1/start.$RANK"
SH
chmod +x "$work/rank.sh"

one() {  # name n command... ; prints the seconds from the failure to the last start
  local name=$1 n=$2; shift 2
  local d="$work/$name-$n-run"; rm -rf "$d"; mkdir -p "$d"
  if ! timeout 120 "$@" "$work/rank.sh" "$d" </dev/null >"$d.out" 2>&1; then echo FAILED; return; fi
  python3 - "$d" "$n" <<'PY'
import glob, os, sys
d, n = sys.argv[1], int(sys.argv[2])
starts = [float(open(p).read()) for p in glob.glob(os.path.join(d, "start.*"))]
if len(starts) != n or not os.path.exists(os.path.join(d, "fail")):
    print("FAILED"); sys.exit()
print("%.4f" % (max(starts) - float(open(os.path.join(d, "fail")).read())))
PY
}

measure() {  # name n command...
  local name=$1 n=$2; shift 2
  local out=()
  for _ in $(seq "$runs"); do out+=("$(one "$name" "$n" "$@")"); done
  echo "$name $n ${out[*]}"
}

{
for n in "${ns[@]}"; do
  measure dlaunch "$n" "$bin/dlaunch" -n "$n" --max-restarts 1 --kill-grace 3
  measure torchrun "$n" /usr/bin/python3 -m torch.distributed.run --standalone --nproc_per_node "$n" \
    --max_restarts 1 -r 2 -t 2 --log_dir "$work/logs" --no_python
  measure torchrun--monitor-interval-0.1 "$n" /usr/bin/python3 -m torch.distributed.run --standalone \
    --nproc_per_node "$n" --max_restarts 1 --monitor_interval 0.1 -r 2 -t 2 --log_dir "$work/logs" --no_python
done
} > "$work/results.txt"

python3 - "$work/results.txt" "$runs" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    name, n, *vals = line.split()
    ok = [float(v) for v in vals if v != "FAILED"]
    rows.setdefault(name, {})[int(n)] = (statistics.median(ok) if ok else None, len(vals) - len(ok))
ns = sorted({n for r in rows.values() for n in r})
print("median seconds from a rank's failure to every rank of the next attempt running, %s jobs each; "
      "(x) = ratio to dlaunch (> 1: dlaunch faster); load %s" % (sys.argv[2], open("/proc/loadavg").read().split()[0]))
print("| launcher | " + " | ".join("N=%d" % n for n in ns) + " |")
print("|---|" + "---|" * len(ns))
for name, r in rows.items():
    cells = []
    for n in ns:
        v, failed = r.get(n, (None, 0))
        d = rows["dlaunch"].get(n, (None, 0))[0]
        cell = "failed" if v is None else "%.3f" % v
        if v is not None and d and name != "dlaunch":
            cell += " (%.1fx)" % (v / d)
        if failed:
            cell += " [%d failed]" % failed
        cells.append(cell)
    print("| %s | %s |" % (name, " | ".join(cells)))
PY
