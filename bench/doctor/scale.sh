#!/usr/bin/env bash
# dlaunch doctor at scale, on the test bed: K simulated hosts (--launcher
# sim, DLAUNCH_SIM=1: one real doctor's peer per host, all on this machine,
# each at a loopback address of its own), started through the launch tree
# (--fanout, FANOUT=32 by default). Prints one line per mode:
#
#   doctor hosts=K mode=quick|full wall_s=X doctor_cpu_s=C doctor_conns=N link_tests=T found=F
#
# wall_s: the doctor's run, start to exit; doctor_cpu_s: the doctor process's
# own CPU (its threads', its peers' not counted; bench/launch-tree/measure.c);
# doctor_conns: the most sockets it held at once (its links to the peers it
# started itself: the launch tree's roots); link_tests: pairs measured in
# stage 5, retests included; found: each failing line's check and hosts
# (check:hosts, comma-separated), or none.
#
#   bench/doctor/scale.sh 64
#   bench/doctor/scale.sh 1024 --plant bad-path     # one host's PATH differs
#   bench/doctor/scale.sh 1024 --plant slow-link    # one host's link at 20 Mbit/s
#
# MODES="quick full" by default (MODES=quick: the per-host checks only).
# DOCTOR_ARGS="--link-parallel 0": more options for every doctor run (the anchor's too).
#
# The run is in a network namespace of its own (unshare -n: its own lo), so
# the planted slow link (htb on that lo, matching the host's address) slows
# nothing else on the machine. Needs root.
#
# The anchor (ANCHOR="64 250" by default; ANCHOR= skips it): on the
# namespace cluster (tests/cluster/cluster.sh, real sshd per host) of each
# size, pdsh (-f 32, ssh) running the same per-host checks on every host
# (the doctor's peer answering a facts request, and the clock) with dshbak
# -c grouping the answers, against `dlaunch doctor --quick` and the full
# doctor (--fanout 32) with one host's link planted slow (20 Mbit/s;
# ANCHOR_FULL=0 leaves the full doctor out):
#
#   anchor hosts=N pdsh_wall_s=X quick_wall_s=Y full_wall_s=Z full_found=F planted=H
#
# and a floor line: K dlaunch and K dlaunch-agent started at once (what
# every simulated host's peer costs this machine before the doctor does
# anything), with the load average:
#
#   floor hosts=K floor_s=X load=L cores=C
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
bin=$(cd "${DLAUNCH_BIN:-$root/build/bin}" && pwd)
K=${1:-}; shift || true
plant=""
while [ $# -gt 0 ]; do
  case $1 in
    --plant) plant=${2:-}; shift 2 || true ;;
    *) echo "usage: bench/doctor/scale.sh K [--plant bad-path|slow-link]" >&2; exit 2 ;;
  esac
done
[[ $K =~ ^[0-9]+$ && $K -ge 2 && $K -le 9999 ]] || { echo "bench: K is a number of hosts from 2 to 9999" >&2; exit 2; }
case $plant in ""|bad-path|slow-link) ;; *) echo "bench: --plant takes bad-path or slow-link, got '$plant'" >&2; exit 2 ;; esac
[ -x "$bin/dlaunch" ] || { echo "bench: no $bin/dlaunch: build dlaunch first (or set DLAUNCH_BIN)" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "bench: needs root (a network namespace of its own, tc)" >&2; exit 2; }
F=${FANOUT:-32}
work=$(mktemp -d /tmp/dlaunch-doctor-scale.XXXXXX); trap 'rm -rf "$work"' EXIT
cc -O2 -o "$work/measure" "$root/bench/launch-tree/measure.c"
cc -O2 -o "$work/floor" "$root/bench/launch/floor.c"
ulimit -n 65536 2>/dev/null || true

name() { printf 'node%04d' "$(($1 + 1))"; }
# The loopback address of simulated node $1 (remote/sim_starter.h: 127.0.0.2 up).
sim_addr() { local a=$(( (127 << 24) + 2 + $1 )); echo "127.$(( a >> 16 & 255 )).$(( a >> 8 & 255 )).$(( a & 255 ))"; }
hosts=$(for ((i = 0; i < K; i++)); do name "$i"; echo; done | paste -sd,)
bad=$((K * 2 / 3))   # the planted host

# `found=` of the doctor's output in $1: each ✗ line's check and the hosts it names.
found_of() {
  local f
  f=$(grep '^✗ ' "$1" | sed -E 's/^✗ ([a-z_]+): ([0-9]+ hosts \(([^)]*)\)|([^ :]+)).*/\1:\3\4/' | paste -sd, || true)
  echo "${f:-none}"
}

# One doctor run in the namespace: mode $1 (quick|full); the line on stdout.
run_mode() {
  local mode=$1 args=() m start done cpu conns tests
  [ "$mode" = quick ] && args+=(--quick)
  # shellcheck disable=SC2206
  [ -n "${DOCTOR_ARGS:-}" ] && args+=($DOCTOR_ARGS)
  local env=(DLAUNCH_SIM=1)
  [ "$plant" = bad-path ] && env+=("DLAUNCH_SIM_HOST_ENV=$(name $bad):PATH=/opt/dl-bench/bin:$PATH")
  m=$(env "${env[@]}" "$work/measure" sh -c 'exec "$0" "$@" >"'"$work"'/out" 2>"'"$work"'/err"' \
        "$bin/dlaunch" doctor --launcher sim --fanout "$F" -H "$hosts" --link-factor 5 --link-seconds 0.1 "${args[@]}") || true
  read -r start done cpu conns <<<"$m"
  tests=$(sed -n 's/^links: \([0-9]*\) pairs in .*), \([0-9]*\) retests.*/\1 \2/p' "$work/out" | awk '{print $1 + $2}')
  echo "doctor hosts=$K mode=$mode wall_s=$done doctor_cpu_s=$cpu doctor_conns=$conns link_tests=${tests:-0} found=$(found_of "$work/out")"
  [ -z "${KEEP_OUTPUT:-}" ] || cp "$work/out" "$KEEP_OUTPUT.$mode" || true
}

inside() {
  ip link set lo up
  if [ "$plant" = slow-link ]; then
    local a; a=$(sim_addr $bad)
    tc qdisc add dev lo root handle 1: htb default 10
    tc class add dev lo parent 1: classid 1:10 htb rate 100gbit
    tc class add dev lo parent 1: classid 1:20 htb rate 20mbit
    tc filter add dev lo protocol ip parent 1: prio 1 u32 match ip src "$a"/32 flowid 1:20
    tc filter add dev lo protocol ip parent 1: prio 1 u32 match ip dst "$a"/32 flowid 1:20
  fi
  for m in $MODES; do run_mode "$m"; done
}

export -f inside run_mode found_of name sim_addr
MODES=${MODES:-quick full}
export K F plant bad hosts work bin MODES
unshare -n bash -c inside

# The floor: what every simulated host's peer costs this machine before the
# doctor does anything, K dlaunch and K dlaunch-agent (--version) started at once.
t0=$(date +%s%N)
"$work/floor" "$K" "$bin/dlaunch" --version >/dev/null & a=$!
"$work/floor" "$K" "$bin/dlaunch-agent" --version >/dev/null & b=$!
wait "$a" "$b"
t1=$(date +%s%N)
echo "floor hosts=$K floor_s=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.3f", (b - a) / 1e9}') load=$(cut -d' ' -f1 /proc/loadavg) cores=$(nproc)"

# ---- the anchor: pdsh and the doctor on the namespace cluster ----------------
anchor() {
  local n=$1 out id dir
  out=$("$root/tests/cluster/cluster.sh" up --hosts "$n" --owner $$) || { echo "bench: no namespace cluster of $n hosts" >&2; return; }
  id=$(sed -n 's/^DL_CLUSTER_ID=//p' <<<"$out"); dir=$(sed -n 's/^DL_CLUSTER_DIR=//p' <<<"$out")
  inh0() { "$root/tests/cluster/cluster.sh" exec "$id" h0 -- sh -c "$1"; }
  local path; path=$(inh0 "ssh -F $dir/ssh_config h0 'printf %s \"\$PATH\"'")
  for ((i = 0; i < n; i++)); do echo "h$i"; done >"$dir/names"
  # The same per-host checks the doctor's peers run: a facts request to the
  # peer (dlaunch there, its agent, PATH, LD_LIBRARY_PATH, GPUs, /tmp), and the clock.
  local req='{"op":"facts","vars":["PATH","LD_LIBRARY_PATH"],"program":"","agent":"'"$bin"'/dlaunch-agent","nccl_helper":""}'
  # The host-varying facts left out, so that dshbak -c groups the hosts that agree.
  cat >"$dir/check.sh" <<CHECK
printf 'pdsh-token\\n%s\\n' '$req' | $bin/dlaunch doctor --peer | sed -E 's/"hostname":"[^"]*",//; s/"mem_available_bytes":[0-9]*,//; s/"tmp_free_bytes":[0-9]*,//'
date +%s
CHECK
  local t0 t1 pdsh_s quick_s full_s
  t0=$(date +%s.%N)
  inh0 "PDSH_SSH_ARGS_APPEND='-F $dir/ssh_config' pdsh -R ssh -f 32 -w ^$dir/names sh $dir/check.sh 2>&1 | dshbak -c >$dir/pdsh.out" || true
  t1=$(date +%s.%N); pdsh_s=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.2f", b - a}')
  local doctor="PATH='$path' $bin/dlaunch doctor --hostfile $dir/hostfile --ssh-config $dir/ssh_config --fanout 32 --link-factor 5 ${DOCTOR_ARGS:-}"
  t0=$(date +%s.%N); inh0 "$doctor --quick >$dir/quick.out 2>&1" || true; t1=$(date +%s.%N)
  quick_s=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.2f", b - a}')
  local slow=$((n / 2))
  "$root/tests/cluster/cluster.sh" slow "$id" "h$slow" 0 20mbit >/dev/null
  full_s=-; : >"$dir/full.out"
  if [ "${ANCHOR_FULL:-1}" = 1 ]; then
    t0=$(date +%s.%N); inh0 "$doctor >$dir/full.out 2>&1" || true; t1=$(date +%s.%N)
    full_s=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.2f", b - a}')
  fi
  local answered; answered=$(grep -c '"version"' "$dir/pdsh.out" || true)
  echo "anchor hosts=$n pdsh_wall_s=$pdsh_s pdsh_groups=$answered quick_wall_s=$quick_s full_wall_s=$full_s full_found=$(found_of "$dir/full.out") planted=$(sed -n "$((slow + 1))p" "$dir/hostfile" | cut -d' ' -f1)"
  [ -z "${KEEP_OUTPUT:-}" ] || cp "$dir/pdsh.out" "$dir/quick.out" "$dir/full.out" "$(dirname "$KEEP_OUTPUT")/" 2>/dev/null || true
  "$root/tests/cluster/cluster.sh" down "$id" >/dev/null 2>&1 || true
}
for n in ${ANCHOR-64 250}; do anchor "$n"; done
