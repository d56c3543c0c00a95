#!/usr/bin/env bash
# dlaunch doctor on namespace clusters (tests/cluster/cluster.sh) of growing
# size: run time of --quick (stages 1-3) and of the full doctor (1-6), and
# the cost of the link matrix (stage 5), whose pairs run in parallel rounds.
#
#   bench/doctor/run.sh [BUILD_DIR] [HOSTS...]     (default: build, hosts 2 4 8)
#   REPS=5 bench/doctor/run.sh build-doctor 4 8
#
# Anchors, measured in the same run on the same cluster:
#   ssh loop   `ssh hN true` to every host one after the other, what a
#              hand-written pre-flight script does (quick/ssh = the doctor's
#              stages 1-3 against that)
#   one-by-one the sum of the pairs' own link-test times: what testing the
#              pairs one after another would cost (rounds/one-by-one < 1 is
#              the saving of the rounds)
# Prints medians over REPS runs. Needs root, python3.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
BUILD=${1:-build}; shift || true
[ -d "$BUILD" ] || BUILD="$ROOT/$BUILD"
BUILD=$(cd "$BUILD" && pwd)
SIZES=${*:-2 4 8}
REPS=${REPS:-3}
CLUSTER="$ROOT/tests/cluster/cluster.sh"
DLAUNCH="$BUILD/bin/dlaunch"
[ -x "$DLAUNCH" ] || { echo "run.sh: no $DLAUNCH; build first" >&2; exit 2; }

median() { python3 -c 'import sys,statistics; v=[float(x) for x in sys.argv[1:]]; print("%.2f" % statistics.median(v))' "$@"; }
now() { date +%s.%N; }

echo "# dlaunch doctor, $REPS runs per size, medians; load: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores"
printf '%6s %6s %7s %10s %10s %10s %10s %11s %8s %10s\n' hosts pairs rounds "ssh-loop" quick full "links" "one-by-one" "rnd/seq" "quick/ssh"
printf '%6s %6s %7s %10s %10s %10s %10s %11s %8s %10s\n' "" "" "" "(s)" "(s)" "(s)" "(s)" "(s)" "" ""
for n in $SIZES; do
  out=$("$CLUSTER" up --hosts "$n" --owner $$)
  id=$(sed -n 's/^DL_CLUSTER_ID=//p' <<<"$out"); dir=$(sed -n 's/^DL_CLUSTER_DIR=//p' <<<"$out")
  trap '"$CLUSTER" down "$id" >/dev/null 2>&1' EXIT
  inh0() { "$CLUSTER" exec "$id" h0 -- sh -c "$1"; }
  path=$(inh0 "ssh -F $dir/ssh_config h0 'printf %s \"\$PATH\"'")
  doctor="PATH='$path' $DLAUNCH doctor --hostfile $dir/hostfile --ssh-config $dir/ssh_config"
  hosts=""; for ((i = 0; i < n; i++)); do hosts="$hosts h$i"; done
  sl=(); qu=(); fu=(); li=(); seq=(); rounds=0
  for ((r = 0; r < REPS; r++)); do
    t0=$(now); inh0 "for h in $hosts; do ssh -F $dir/ssh_config \$h true; done"; t1=$(now)
    sl+=("$(python3 -c "print($t1 - $t0)")")
    t0=$(now); inh0 "$doctor --quick >/dev/null </dev/null" || true; t1=$(now)
    qu+=("$(python3 -c "print($t1 - $t0)")")
    t0=$(now); json=$(inh0 "$doctor --json </dev/null" || true); t1=$(now)
    fu+=("$(python3 -c "print($t1 - $t0)")")
    read -r l s rounds < <(python3 -c '
import json,sys
d=json.loads(sys.stdin.read())
n=d["notes"]
print(n["stage_seconds"].get("links",0), sum(p["seconds"] for p in n.get("links",[])), n.get("link_rounds",0))' <<<"$json")
    li+=("$l"); seq+=("$s")
    healthy=$(python3 -c 'import json,sys; print(json.loads(sys.stdin.read())["healthy"])' <<<"$json")
    [ "$healthy" = True ] || echo "# warning: run $r on $n hosts was not healthy: $(python3 -c 'import json,sys; print([p["what"] for p in json.loads(sys.stdin.read())["problems"]])' <<<"$json")" >&2
  done
  "$CLUSTER" down "$id" >/dev/null; trap - EXIT
  msl=$(median "${sl[@]}"); mq=$(median "${qu[@]}"); mf=$(median "${fu[@]}"); ml=$(median "${li[@]}"); ms=$(median "${seq[@]}")
  printf '%6d %6d %7d %10s %10s %10s %10s %11s %8s %10s\n' "$n" $((n * (n - 1) / 2)) "$rounds" "$msl" "$mq" "$mf" "$ml" "$ms" \
    "$(python3 -c "print('%.2f' % ($ml / $ms if $ms else 0))")" "$(python3 -c "print('%.2f' % ($mq / $msl))")"
done
