#!/usr/bin/env bash
# bench/restart/host-loss.sh: a host lost mid-job, and the time until every
# rank of the next attempt runs again: dlaunch (--spares, --nnodes MIN:MAX)
# beside torchrun's elastic mode (Debian's python3-torch, torch 1.13) in the
# same run (docs/benchmarks.md, "A lost host"). Needs root.
#
#   bench/restart/host-loss.sh              the namespace cluster (real sshd): 4 hosts x 2 ranks,
#                                           every case below under both launchers
#   bench/restart/host-loss.sh --sim [K]    the simulated test bed (--launcher sim): K hosts x 8 ranks
#                                           + 8 spares (K=64 by default), one agent killed
#   CASES="spare:kill shrink:link"          only these cases (default: all four, MODE:FAULT)
#   LAUNCHERS="dlaunch"                     only these launchers (default: dlaunch torchrun)
#   RUNS=3                                  rounds, each case once per round, medians (default 1)
#   DLAUNCH_BIN=build/bin                   the dlaunch to measure
#   KEEP=1                                  keep every case's files (stamps, logs), and say where
#   PERF=/tmp/restart.perf                  --sim: perf record -a of each job's change (PERF.plain,
#                                           PERF.spare), from just before the fault to the job's end
#   FANOUT=0                                --sim: dlaunch's --fanout (default: dlaunch's own, 32;
#                                           0: flat, every agent started by dlaunch)
#   SIM_ARGS="--heartbeat-timeout 60"       --sim: more dlaunch options for both jobs (a test bed
#                                           whose fork/exec is slow starves its agents past the
#                                           default 10 s; its ranks' stdout is a pipe
#                                           (--no-output-pty): 8,192 ranks would take more
#                                           pseudo-terminals than one kernel has, 4,096)
#
# The cases: mode spare (5 hosts: dlaunch -n 8 --spares 1; torchrun
# --nnodes 4:4 on h0..h3, a fifth torchrun waiting on h4) and mode shrink
# (4 hosts: dlaunch -n 8 --nnodes 3:4; torchrun --nnodes 3:4), each with
# fault kill (kill -9 of every process in h3's namespace: agent or torchrun,
# ranks, sshd) and fault link (h3's cable cut: cluster.sh link ID h3 down).
# dlaunch runs in h0 and reaches every host over ssh; a torchrun runs in
# each host (cluster.sh exec), the c10d rendezvous on h0 (never the lost
# host). Both run the same job, bench/restart/ddp_ckpt.py: DDP over gloo,
# a checkpoint after every step. Its ranks hold at step HOLD (5), still
# talking (a broadcast every 0.2 s), until the fault; the next attempt
# starts from the checkpoint and finishes; its result must equal the
# uninterrupted one (ddp_ckpt.py --reference).
#
# Each case prints, last, one line:
#   recovery launcher=L hosts=K ranks=R mode=M fault=F detect_s=D running_again_s=X launcher_cpu_s=C floor_s=-
#   detect_s         fault -> the launcher knows. dlaunch: the first SIGTERM that a surviving
#                    rank of the failed attempt gets (its teardown starts once the loss is known;
#                    an upper bound by a message's time). torchrun: the first of a surviving
#                    agent's log line that its workers failed ("failed (exitcode: ...)", "Worker
#                    group FAILED") or that a waiting host made it restart them ("Detected N new
#                    nodes"), as it logged it, and a surviving rank's SIGTERM from its agent.
#   running_again_s  fault -> every rank of the next attempt has started: each rank is
#                    bench/restart/stamp_exec.c, which writes its clock and execs python
#                    (the ranks' "pystart" lines say when python itself got going).
#   launcher_cpu_s   the launcher process's own CPU over the whole job (its threads' run time,
#                    bench/launch-tree/measure.c; not its children's). torchrun has no single
#                    launcher: the torchrun on h0, which holds the c10d store as dlaunch holds
#                    its store; the sum of every torchrun is printed above the lines.
#   floor_s          '-' here: the namespace hosts share this machine's CPUs, and a ssh/sshd
#                    hop is in every start; the fork/exec floor is the test bed's (--sim).
#
# --sim K: DLAUNCH_SIM=1 dlaunch --launcher sim, K hosts x 8 ranks + 8 spares, each rank
# bench/restart/hold.c (writes when it started; attempt 0 waits for SIGTERM). Two jobs of the
# same shape: a plain restart (one rank of the last host with ranks killed: the same placement)
# and the spare case (that host's agent and its 8 ranks killed -9: they move to a spare). It
# prints the same line with floor_s = the restart floor of the K x 8 ranks (the next attempt
# relaunches every rank): bench/restart/restart_floor.c, by one process, no coordination,
# SIGTERM to K x 8 running holds, each reaped, and K x 8 new ones fork/exec'd and reaped: what
# any restart of those ranks must do on this machine. The fork/exec alone (bench/launch/floor.c)
# is printed beside it: on the test bed's 2 CPUs, ending 8,192 processes costs about what
# starting them does, where a real host ends its own 8 ranks beside the others. And the launcher's CPU from
# the fault to its exit for both jobs, against the targets (running again within 1.3x the floor;
# the change's CPU at most 2x a plain restart's).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
bin=$(cd "${DLAUNCH_BIN:-$src/build/bin}" 2>/dev/null && pwd) || bin=""
CLUSTER="$src/tests/cluster/cluster.sh"
PY=/usr/bin/python3  # Debian's, with python3-torch
RUNS=${RUNS:-1}
for b in dlaunch dlaunch-agent; do
  [ -n "$bin" ] && [ -x "$bin/$b" ] || { echo "host-loss: no dlaunch build at ${DLAUNCH_BIN:-$src/build/bin}/$b: build dlaunch first (scripts/build.sh), or set DLAUNCH_BIN" >&2; exit 2; }
done
[[ $RUNS =~ ^[1-9][0-9]*$ ]] || { echo "host-loss: RUNS must be a positive integer, got '$RUNS'" >&2; exit 2; }
if [ -n "${PERF:-}" ]; then
  [ "${1:-}" = --sim ] || { echo "host-loss: PERF= records the test bed's restarts: give --sim K" >&2; exit 2; }
  command -v perf >/dev/null || { echo "host-loss: PERF= needs perf (apt-get install linux-perf)" >&2; exit 2; }
fi
[ "$(id -u)" = 0 ] || [ "${1:-}" = --sim ] || { echo "host-loss: needs root (it builds a namespace cluster: tests/cluster/cluster.sh); --sim needs none" >&2; exit 3; }

work=$(mktemp -d /tmp/dlaunch-host-loss.XXXXXX)
clusters=()
perf_pid=""  # a PERF= recording under way
cleanup() {
  local id
  [ -n "$perf_pid" ] && kill -INT "$perf_pid" 2>/dev/null
  for id in "${clusters[@]}"; do "$CLUSTER" down "$id" >/dev/null 2>&1; done
  # Anything of ours still running (a sim job cut short): its processes name $work.
  local p
  for p in $(pgrep -f "$work" 2>/dev/null); do [ "$p" != $$ ] && kill -9 "$p" 2>/dev/null; done
  if [ -n "${KEEP:-}" ]; then echo "host-loss: the cases' files are in $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
cc -O2 -o "$work/measure" "$here/../launch-tree/measure.c" || exit 1
cc -O2 -o "$work/hold" "$here/hold.c" || exit 1
cc -O2 -o "$work/floor" "$here/../launch/floor.c" || exit 1
cc -O2 -o "$work/restart_floor" "$here/restart_floor.c" || exit 1
cc -O2 -o "$work/stamp_exec" "$here/stamp_exec.c" || exit 1
now() { date +%s.%N; }
median() { sort -g | awk '{a[NR]=$1} END {if (NR) print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2); else print "-"}'; }
# CPU time (ns) of every thread of process $1 so far.
cpu_ns() { cat "/proc/$1"/task/*/schedstat 2>/dev/null | awk '{s += $1} END {printf "%d", s}'; }
# Waits until command $2... succeeds, polling every 0.1 s, at most $1 s.
wait_for() {
  local limit=$1; shift
  local end; end=$(awk -v n="$(now)" -v l="$limit" 'BEGIN {printf "%.3f", n + l}')
  until "$@"; do
    awk -v n="$(now)" -v e="$end" 'BEGIN {exit !(n > e)}' && return 1
    sleep 0.1
  done
}

# ---- the test bed: --sim K ----------------------------------------------------------
sim_job() {  # $1 = plain|spare, $2 = K, $3 = ranks per host, $4 = spares; prints the case's numbers
  local kind=$1 K=$2 R=$3 S=$4 d="$work/sim-$1-$RANDOM"
  mkdir -p "$d"
  local mark="hl$$r$RANDOM" hosts
  hosts=$(for ((i = 0; i < K + S; i++)); do printf '%sh%d:%d\n' "$mark" "$i" "$R"; done | paste -sd,)
  local np=$((K * R))
  local fan=()
  [ -n "${FANOUT:-}" ] && fan=(--fanout "$FANOUT")
  local extra=()
  # shellcheck disable=SC2206
  [ -n "${SIM_ARGS:-}" ] && extra=($SIM_ARGS)
  (cd "$d" && DLAUNCH_SIM=1 MEASURE_EVERY_MS=20 exec "$work/measure" "$bin/dlaunch" --launcher sim -H "$hosts" -n "$np" --spares "$S" "${fan[@]}" \
     --no-output-pty ${extra[@]+"${extra[@]}"} --max-restarts 2 --gpus-per-node 0 --mpi none --agent-timeout 600 "$work/hold" "$d/stamps" >"$d/measure.out") &
  local job=$!
  count() { local n=0; [ -f "$d/stamps" ] && n=$(grep -c "^$1 " "$d/stamps"); echo "${n:-0}"; }
  all_started() { [ "$(count start)" -ge "$np" ] || ! kill -0 "$job" 2>/dev/null; }
  if ! wait_for 900 all_started || [ "$(count start)" -lt "$np" ]; then
    echo "host-loss: sim $kind: $(count start) of $np ranks started: $(tail -3 "$d/measure.err" 2>/dev/null)" >&2
    kill -INT "$job" 2>/dev/null; wait "$job"; return 1
  fi
  # The last host with ranks: a leaf of the launch tree (the roots are the first hosts).
  local victim="${mark}h$((K - 1))" agent launcher
  agent=$(pgrep -f -- "dlaunch-agent .*--sim-host $victim( |\$)" | head -1)
  launcher=$(pgrep -P "$job" -f "$bin/dlaunch" | head -1)
  [ -z "$launcher" ] && launcher=$(pgrep -f -- "$bin/dlaunch --launcher sim -H $mark" | head -1)
  local ranks; ranks=$(pgrep -P "$agent" | paste -sd' ')
  if [ -z "$agent" ] || [ -z "$ranks" ] || pgrep -P "$agent" -f dlaunch-agent >/dev/null; then
    echo "host-loss: sim $kind: no leaf agent with ranks for $victim (agent '$agent', children '$ranks')" >&2
    kill -INT "$job" 2>/dev/null; wait "$job"; return 1
  fi
  local cpu0 fault
  if [ -n "${PERF:-}" ]; then
    # The whole machine's CPU from just before the fault to the job's end,
    # sampled by the clock (a VM may have no PMU): `perf report --sort comm,dso,sym`.
    perf record -e cpu-clock -a -F 499 -o "$PERF.$kind" -- sleep 3600 >"$d/perf.log" 2>&1 & perf_pid=$!
    sleep 1
    kill -0 "$perf_pid" 2>/dev/null || echo "host-loss: perf record did not start ($(tail -1 "$d/perf.log")); as root, or with kernel.perf_event_paranoid at -1" >&2
  fi
  cpu0=$(cpu_ns "$launcher")
  fault=$EPOCHREALTIME
  if [ "$kind" = spare ]; then
    # shellcheck disable=SC2086
    kill -9 "$agent" $ranks
  else
    kill -9 "${ranks%% *}"
  fi
  wait "$job"; local rc=$?
  if [ -n "$perf_pid" ]; then
    kill -INT "$perf_pid" 2>/dev/null; wait "$perf_pid"; perf_pid=""
    [ -s "$PERF.$kind" ] && echo "host-loss: sim $kind: the profile is $PERF.$kind (perf report -i $PERF.$kind --sort comm,dso,sym)" >&2
  fi
  $PY - "$d" "$fault" "$np" "$cpu0" "$rc" "$kind" <<'PY'
import os, sys
d, fault, np, cpu0, rc, kind = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
m = open(os.path.join(d, "measure.out")).read().split()
cpu = float(m[2]) if len(m) >= 3 else float("nan")
terms, again = [], {}
for line in open(os.path.join(d, "stamps")):
    what, rank, attempt, ns = line.split()
    t = int(ns) / 1e9
    if what == "term" and t > fault: terms.append(t)
    if what == "start" and int(attempt) >= 1: again.setdefault(rank, t)
err = open(os.path.join(d, "measure.err")).read()
said = [l for l in err.splitlines() if "running again" in l]
# A next attempt that began before the fault (attempt 0 failed by itself, e.g. an
# agent of a starved test bed given up) measures nothing: the case failed.
early = [t for t in again.values() if t < fault]
ok = rc == 0 and len(again) == np and not early
detect = "%.3f" % (min(terms) - fault) if terms else "-"
running = "%.3f" % (max(again.values()) - fault) if ok else "FAILED"
why = "restarted_before_the_fault:%d_ranks" % len(early) if early else "exit_%d:%d_of_%d_ranks_again" % (rc, len(again), np)
print("%s %s %s %.4f %.4f" % (detect, running, "ok" if ok else "failed:" + why,
                              cpu, cpu - cpu0 / 1e9))
print("said: " + (said[0] if said else "(no membership line)"), file=sys.stderr)
if not ok:
    print("the job's last lines:\n" + "\n".join(err.splitlines()[-6:]), file=sys.stderr)
PY
}

sim_floor() {  # $1 = ranks: fork/exec of that many attempt-1 ranks at once, seconds
  local t0 t1 f="$work/floor-stamps"
  t0=$(now)
  RANK=0 DLAUNCH_RESTART_COUNT=1 "$work/floor" "$1" "$work/hold" "$f" || echo "host-loss: the floor's ranks failed" >&2
  t1=$(now); rm -f "$f"
  awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.3f\n", b - a}'
}

sim_restart_floor() {  # $1 = ranks: SIGTERM, reap and fork/exec again of that many running ranks, seconds
  local f="$work/floor-stamps"
  rm -f "$f"
  "$work/restart_floor" "$1" "$work/hold" "$f" || echo "host-loss: the restart floor's ranks failed" >&2
  rm -f "$f"
}

run_sim() {
  local K=${1:-64} R=${SIM_RANKS:-8} S=${SIM_SPARES:-8}
  [[ $K =~ ^[0-9]+$ && $K -ge 2 ]] || { echo "host-loss: --sim K needs K >= 2 hosts, got '$K'" >&2; exit 2; }
  ulimit -n 65536 2>/dev/null || true
  echo "# host-loss --sim $K: $K hosts x $R ranks + $S spares (--launcher sim, --fanout ${FANOUT:-default}), $RUNS round(s); $(nproc) CPUs, load $(cut -d' ' -f1 /proc/loadavg)"
  local i line plain=() spare=() floors=() starts=()
  for ((i = 1; i <= RUNS; i++)); do
    starts+=("$(for _ in 1 2 3; do sim_floor $((K * R)); done | median)")
    floors+=("$(for _ in 1 2 3; do sim_restart_floor $((K * R)); done | median)")
    # A test bed that takes longer than the heartbeat timeout to start the
    # ranks starves some agents that long: they are given up before the fault.
    if [ "$i" = 1 ] && [[ " ${SIM_ARGS:-} " != *" --heartbeat-timeout "* ]] &&
       awk -v f="${floors[-1]}" 'BEGIN { exit !(f > 10) }'; then
      echo "host-loss: the restart floor here is ${floors[-1]} s, past dlaunch's default --heartbeat-timeout (10 s): agents starved that long are given up before the fault; SIM_ARGS=\"--heartbeat-timeout 60\" gives this test bed room" >&2
    fi
    line=$(sim_job plain "$K" "$R" "$S") || exit 1; plain+=("$line")
    echo "# round $i plain restart: detect_s running_again_s result launcher_cpu_s cpu_after_fault_s = $line"
    line=$(sim_job spare "$K" "$R" "$S") || exit 1; spare+=("$line")
    echo "# round $i spare:         detect_s running_again_s result launcher_cpu_s cpu_after_fault_s = $line"
    echo "# round $i floor_s ${floors[-1]} (the restart: SIGTERM, reap, fork/exec); fork/exec alone ${starts[-1]}"
  done
  col() { local n=$1; shift; printf '%s\n' "$@" | awk -v n="$n" '{print $n}' | grep -v -e - -e FAILED | median; }
  local fl st; fl=$(printf '%s\n' "${floors[@]}" | median); st=$(printf '%s\n' "${starts[@]}" | median)
  local pr sr pc sc sd
  pr=$(col 2 "${plain[@]}"); sr=$(col 2 "${spare[@]}"); sd=$(col 1 "${spare[@]}")
  pc=$(col 5 "${plain[@]}"); sc=$(col 5 "${spare[@]}")
  awk -v pr="$pr" -v sr="$sr" -v fl="$fl" -v st="$st" -v pc="$pc" -v sc="$sc" 'BEGIN {
    printf "# plain restart: running again %s s, launcher CPU from the fault on %s s\n", pr, pc
    printf "# spare: running again %s s = %.2fx the restart floor %s s (target 1.3x; %.2fx fork/exec alone, %s s); launcher CPU from the fault on %s s = %.2fx the plain restart'"'"'s (target 2x)\n", sr, (fl > 0 ? sr / fl : 0), fl, (st > 0 ? sr / st : 0), st, sc, (pc > 0 ? sc / pc : 0) }'
  echo "recovery launcher=dlaunch hosts=$K ranks=$((K * R)) fanout=${FANOUT:-default} mode=spare fault=kill detect_s=$sd running_again_s=$sr launcher_cpu_s=$(col 4 "${spare[@]}") floor_s=$fl"
}

if [ "${1:-}" = --sim ]; then
  run_sim "${2:-64}"
  exit
fi
[ $# -eq 0 ] || { echo "usage: bench/restart/host-loss.sh [--sim [K]]" >&2; exit 2; }

# ---- the namespace cluster -----------------------------------------------------------
LAUNCHERS=${LAUNCHERS:-"dlaunch torchrun"}
CASES=${CASES:-"spare:kill spare:link shrink:kill shrink:link"}
HOLD=${HOLD:-5}
reference=$(cd "$work" && HOSTLOSS_STEPS=20 $PY "$here/ddp_ckpt.py" --reference) || { echo "host-loss: the reference run of ddp_ckpt.py failed (python3-torch installed?)" >&2; exit 1; }

# torchrun, its log lines stamped with their time (the logging module's %(created)f:
# the agent's own clock when it logged), else as it comes.
cat >"$work/torchrun.py" <<'PY'
import logging, runpy, sys
logging.basicConfig(format="%(created).6f %(levelname)s:%(name)s:%(message)s", level=logging.INFO)
sys.argv = ["torchrun"] + sys.argv[1:]
runpy.run_module("torch.distributed.run", run_name="__main__")
PY

job_env() {  # the ranks' settings, the same under both launchers; $1 = the case's directory
  echo "LOGLEVEL=INFO GLOO_SOCKET_IFNAME=eth0 HOSTLOSS_STEPS=20 HOSTLOSS_HOLD_STEP=$HOLD HOSTLOSS_RELEASE=$1/release OMP_NUM_THREADS=1"
}

# One case; prints "detect running cpu cpu_all result" (or FAILED fields) and keeps its files in $d.
cluster_case() {  # $1 = dlaunch|torchrun, $2 = spare|shrink, $3 = kill|link
  local L=$1 mode=$2 fault=$3 nh=4 d="$work/$1-$2-$3-$RANDOM"
  [ "$mode" = spare ] && nh=5
  mkdir -p "$d"
  local up; up=$("$CLUSTER" up --owner $$ --hosts "$nh") || { echo "host-loss: cluster.sh up failed" >&2; return 1; }
  local ID DIR
  ID=$(sed -n 's/^DL_CLUSTER_ID=//p' <<<"$up"); DIR=$(sed -n 's/^DL_CLUSTER_DIR=//p' <<<"$up")
  clusters+=("$ID")
  local envs; envs=$(job_env "$d")
  local world=8 pids=() h
  [ "$mode" = shrink ] && world=6
  if [ "$L" = dlaunch ]; then
    local opts="--spares 1"; [ "$mode" = shrink ] && opts="--nnodes 3:4"
    # shellcheck disable=SC2086
    (cd "$d" && exec "$CLUSTER" exec "$ID" h0 -- "$work/measure" "$bin/dlaunch" --hostfile "$DIR/hostfile" \
       --ssh-config "$DIR/ssh_config" -n 8 $opts --max-restarts 3 env $envs "$work/stamp_exec" "$d/stamps" $PY "$here/ddp_ckpt.py" "$d" >"$d/measure.out") &
    pids+=($!)
  else
    local nn="4:4"; [ "$mode" = shrink ] && nn="3:4"
    tr_start() {  # $1 = host
      mkdir -p "$d/$1"
      # shellcheck disable=SC2086
      (cd "$d/$1" && exec "$CLUSTER" exec "$ID" "$1" -- env $envs "$work/measure" $PY "$work/torchrun.py" \
         --nnodes "$nn" --nproc_per_node 2 --rdzv_backend c10d --rdzv_endpoint h0:29400 --rdzv_id "hl$ID" \
         --max_restarts 3 --log_dir "$d/$1/logs" -r 2 -t 2 --no_python "$work/stamp_exec" "$d/stamps" $PY "$here/ddp_ckpt.py" "$d" >"$d/$1/measure.out") &
      pids+=($!)
    }
    for h in h0 h1 h2 h3; do tr_start "$h"; done
  fi
  started() { [ "$(awk -v w=8 '$1 == "start" && $3 == w' "$d/stamps" 2>/dev/null | wc -l)" -ge 8 ] && [ -f "$d/holding" ]; }
  alive() { local p; for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && return 0; done; return 1; }
  ready() { started || ! alive; }
  if ! wait_for 600 ready || ! started; then
    echo "host-loss: $L $mode $fault: the job did not reach step $HOLD on 8 ranks; see $d" >&2
    tail -5 "$d/measure.err" "$d"/h*/measure.err 2>/dev/null | sed 's/^/  /' >&2
    "$CLUSTER" down "$ID" >/dev/null 2>&1; return 1
  fi
  if [ "$L" = torchrun ] && [ "$mode" = spare ]; then
    # The fifth torchrun comes once round 0 is full (4 of at most 4): it waits for the next round.
    tr_start h4
    waiting() { grep -q "attempts to join the next round" "$d/h4/measure.err" 2>/dev/null; }
    wait_for 300 waiting || { echo "host-loss: the spare torchrun on h4 did not reach the rendezvous" >&2; "$CLUSTER" down "$ID" >/dev/null; return 1; }
    sleep 2  # its first look at the rendezvous state: round 0 full, so it waits
  fi
  local t_fault ns="dl${ID}-h3" victims
  # The fault's time, without a fork ($EPOCHREALTIME): just before kill -9 (a builtin, one
  # call), and just after cluster.sh link returns (the cut is the last thing it does, after
  # reading the cluster's files: under load that took up to a second).
  if [ "$fault" = kill ]; then
    victims=$(ip netns pids "$ns")
    t_fault=$EPOCHREALTIME
    # shellcheck disable=SC2086
    kill -9 $victims
  else
    "$CLUSTER" link "$ID" h3 down
    t_fault=$EPOCHREALTIME
  fi
  touch "$d/release"; echo "$t_fault" >"$d/fault"
  # The survivors (and the spare) end; the lost host's torchrun, cut off, is ended after them.
  local live=("${pids[@]}")
  [ "$L" = torchrun ] && unset 'live[3]'
  done_all() { local p; for p in "${live[@]}"; do kill -0 "$p" 2>/dev/null && return 1; done; return 0; }
  local rc=0
  wait_for 600 done_all || { echo "host-loss: $L $mode $fault: the job did not end within 600 s of the fault; see $d" >&2; rc=1; }
  for p in "${live[@]}"; do wait "$p" || [ "$L" = torchrun ] || rc=$?; done
  "$CLUSTER" down "$ID" >/dev/null 2>&1
  $PY - "$d" "$L" "$t_fault" "$world" "$rc" "$reference" <<'PY'
import glob, os, re, sys
d, L, fault, world, rc, ref = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
again, terms = {}, []
for line in open(os.path.join(d, "stamps")):
    what, rank, w, host, t = line.split()
    t = float(t)
    if t <= fault or host == "h3": continue
    if what == "start" and int(w) == world: again.setdefault(int(rank), t)
    if what == "term": terms.append(t)
def cpu(path):
    try: return float(open(path).read().split()[2])
    except (OSError, IndexError, ValueError): return None
if L == "dlaunch":
    detect = min(terms) - fault if terms else None
    c = cpu(os.path.join(d, "measure.out")); call = c
    said = [l for l in open(os.path.join(d, "measure.err")) if "running again" in l or "cannot restart" in l]
else:
    fails = []
    for h in sorted(glob.glob(os.path.join(d, "h[0-9]"))):
        if h.endswith("h3"): continue
        for l in open(os.path.join(h, "measure.err"), errors="replace"):
            m = re.match(r"(\d+\.\d+) (INFO:.*(Worker group (FAILED|UNHEALTHY)|new nodes from group_rank)|ERROR:.*failed \(exitcode)", l)
            if m and float(m.group(1)) > fault: fails.append(float(m.group(1)))
    fails += terms  # an agent stopping its workers: it decided to restart them
    detect = min(fails) - fault if fails else None
    c = cpu(os.path.join(d, "h0", "measure.out"))
    cs = [cpu(p) for p in glob.glob(os.path.join(d, "h*", "measure.out"))]
    call = sum(x for x in cs if x is not None)
    said = []
try:
    res = open(os.path.join(d, "result")).read().split()
except OSError:
    res = []
if not res: verdict = "no result"
elif res[0] == ref: verdict = "result equal to an uninterrupted run's (%s, %s)" % (res[0], " ".join(res[1:]))
else: verdict = "result %s, uninterrupted %s: DIFFERENT" % (res[0], ref)
ok = len(again) == world
print("%s %s %s %s" % ("%.3f" % detect if detect is not None else "-",
                       "%.3f" % (max(again.values()) - fault) if ok else "FAILED",
                       "%.4f" % c if c is not None else "-", "%.4f" % call))
print("  %s; %d of %d ranks ran again; %s%s" % ("exit ok" if rc == 0 else "exit %d" % rc, len(again), world, verdict,
      "; dlaunch said: " + said[0].strip() if said else ""), file=sys.stderr)
PY
}

echo "# host-loss: namespace cluster (real sshd), 4 hosts x 2 ranks (+1 spare), $RUNS round(s); $(nproc) CPUs, load $(cut -d' ' -f1 /proc/loadavg) at the start"
echo "# job: bench/restart/ddp_ckpt.py, 20 steps, held at step $HOLD for the fault; uninterrupted result $reference"
declare -A res
for ((round = 1; round <= RUNS; round++)); do
  for c in $CASES; do
    mode=${c%%:*}; fault=${c##*:}
    [[ $mode =~ ^(spare|shrink)$ && $fault =~ ^(kill|link)$ ]] || { echo "host-loss: no case '$c' (spare|shrink):(kill|link)" >&2; exit 2; }
    for L in $LAUNCHERS; do
      [[ $L =~ ^(dlaunch|torchrun)$ ]] || { echo "host-loss: no launcher '$L' (dlaunch, torchrun)" >&2; exit 2; }
      { out=$(cluster_case "$L" "$mode" "$fault" 2>"$work/case.err"); } ; cat "$work/case.err" >&2
      [ -n "$out" ] || out="- FAILED - -"
      echo "# round $round $L $mode $fault: detect_s running_again_s launcher_cpu_s all_torchruns_cpu_s = $out"
      res[$L:$c]+="$out"$'\n'
    done
  done
done

col() { printf '%s' "${res[$1]:-}" | awk -v n="$2" 'NF {print $n}' | grep -v -e '^-$' -e FAILED | median; }
echo "# medians; ratio = torchrun / dlaunch (> 1: dlaunch faster or cheaper)"
printf '# %-13s %10s %10s %16s %16s %14s\n' case "dl detect" "tr detect" "dl running_again" "tr running_again" "ratio again"
for c in $CASES; do
  printf '# %-13s %10s %10s %16s %16s %14s\n' "$c" "$(col dlaunch:$c 1)" "$(col torchrun:$c 1)" \
    "$(col dlaunch:$c 2)" "$(col torchrun:$c 2)" \
    "$(awk -v a="$(col dlaunch:$c 2)" -v b="$(col torchrun:$c 2)" 'BEGIN {print (a > 0 && b > 0) ? sprintf("%.1fx", b / a) : "-"}')"
done
for c in $CASES; do
  for L in $LAUNCHERS; do
    mode=${c%%:*}; fault=${c##*:}
    # hosts=4 ranks=8: the job's shape before the fault (spare: + 1 spare host; shrink: 3 x 2 after).
    # floor_s: '-' on the namespace cluster (see the header): the floor is the test bed's.
    echo "recovery launcher=$L hosts=4 ranks=8 mode=$mode fault=$fault detect_s=$(col "$L:$c" 1) running_again_s=$(col "$L:$c" 2) launcher_cpu_s=$(col "$L:$c" 3) floor_s=-"
  done
done
