#!/usr/bin/env bash
# bench/store-scale: N real store clients (about 1,000 per process, over
# epoll) through a connect storm, one barrier of all N and one all-gather of
# 64-byte values, against dlaunch's store at N, its clients connecting
# directly (mode=dlaunch) and through per-host aggregation (mode=hosts: N/8
# simulated hosts, each a store door and forwarder in the client processes,
# one connection each to the server), and side by side with torch
# 1.13's TCPStore server at 1,024 and 4,096 clients (its barrier and
# all-gather made as torch makes them: add + wait, and one get per rank).
# Each configuration runs once (its barrier_s: the median of 5 barriers);
# then the floor (barrier_floor.c: the same N clients passing a barrier of
# one byte each way over plain TCP, no store). The last lines printed are
# one per configuration, and the floor's:
#   store-scale clients=N mode=M connect_s=X barrier_s=Y allgather_s=Z failed=F server_conns=C
#   barrier-floor clients=N barrier_s=X
#   bench/store-scale/run.sh N           (build store_scale first: cmake --build build --target store_scale)
#   DLAUNCH_BUILD=build                  the build directory (default: build)
#   STORE_SCALE_TIMEOUT=60               seconds per client per phase (connect, barrier, all-gather)
#   STORE_SCALE_TORCH="1024 4096"        torch's client counts ("" for none)
#   STORE_SCALE_MODES="dlaunch hosts"    dlaunch's modes at N
#   STORE_SCALE_GATHER=0                 connect and barrier only (allgather_s=0.000)
# docs/benchmarks.md, "Store at scale", says what each column measures.
set -euo pipefail
n=${1:?usage: bench/store-scale/run.sh N}
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=${DLAUNCH_BUILD:-$root/build}/bin/store_scale
[ -x "$bin" ] || { echo "no $bin: cmake --build build --target store_scale" >&2; exit 1; }
timeout_s=${STORE_SCALE_TIMEOUT:-60}
python=/usr/bin/python3
torch_ns=${STORE_SCALE_TORCH-1024 4096}
modes=${STORE_SCALE_MODES-dlaunch hosts}
gather=""
[ "${STORE_SCALE_GATHER:-1}" = 0 ] && gather=--no-gather
if ! "$python" -c 'import torch.distributed' 2>/dev/null; then
  echo "store-scale: no torch for $python (apt-get install python3-torch): torch rows skipped" >&2
  torch_ns=""
fi

lines=()
run() {  # mode clients
  local out
  echo "store-scale: $1 at $2 clients (load $(cut -d' ' -f1 /proc/loadavg))" >&2
  # A client that never gets through shows in failed=; the whole run is
  # bounded too, for a server that hangs.
  if out=$(timeout $((8 * timeout_s + 60)) "$bin" --clients "$2" --mode "$1" --timeout-s "$timeout_s" --barriers 5 \
      --python "$python" $gather); then
    lines+=("$out")
  else
    lines+=("store-scale clients=$2 mode=$1 FAILED (exit $?)")
  fi
}

for c in $torch_ns; do
  run dlaunch "$c"
  run hosts "$c"
  run torch "$c"
done
case " $torch_ns " in *" $n "*) ;; *) for m in $modes; do run "$m" "$n"; done ;; esac
work=$(mktemp -d /tmp/dlaunch-store-scale.XXXXXX); trap 'rm -rf "$work"' EXIT
cc -O2 -o "$work/barrier_floor" "$root/bench/store-scale/barrier_floor.c"
echo "store-scale: the barrier floor at $n clients (load $(cut -d' ' -f1 /proc/loadavg))" >&2
lines+=("$(timeout $((4 * timeout_s + 60)) "$work/barrier_floor" "$n" 1000 5 || echo "barrier-floor clients=$n FAILED")")
printf '%s\n' "${lines[@]}"
