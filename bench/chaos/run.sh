#!/usr/bin/env bash
# bench/chaos: the chaos run (docs/failures.md, "The chaos run"). Brings up
# a namespace cluster (tests/cluster), runs N real multi-host jobs (a shell
# job with numbered lines, the same with --max-restarts 1, the same through a
# launch tree (--fanout 2: depth 3 at --hosts 8), OpenMPI and MPICH jobs,
# per-node --rdzv jobs; with --host-loss, jobs with a spare host (--spares 1)
# and with a world that may shrink (--nnodes MIN:K) that lose whole hosts),
# each with one fault chosen from the seed, and checks each job's exit code,
# verdict, time to end, leftovers and output. Needs root.
#
#   bench/chaos/run.sh --faults 200 --seed 7             # 4 hosts x 2 ranks
#   bench/chaos/run.sh --faults 40 --seed 7 --hosts 8
#   bench/chaos/run.sh --replay 7:31                     # case 31 of seed 7 alone
#   bench/chaos/run.sh ... --heartbeat-timeout 10        # the default (the run's is 3)
#   bench/chaos/run.sh ... --torch                       # half the shell jobs become gloo torch jobs
#   bench/chaos/run.sh --faults 1000 --seed 2027 --host-loss   # a third of the cases lose hosts (spare, elastic)
#   bench/chaos/run.sh --faults 20 --seed 7 --kind spare       # only the seed's spare jobs (implies --host-loss)
#   bench/chaos/run.sh --faults 30 --seed 7 --hosts 8 --kind tree   # only the seed's launch-tree jobs
#   bench/chaos/run.sh --faults 6 --seed 7 --hosts 8 --fault partition-half   # only the seed's half partitions
#   bench/chaos/run.sh --faults 100 --seed 7 --hosts 8 --list       # print the cases, run none
#   BUILD=build-rel bench/chaos/run.sh ...               # another build dir (default: build)
#   bench/chaos/run.sh --faults 500 --seed 2027 --host-loss --from 500   # cases 500-999: a long run in parts
#   bench/chaos/run.sh ... --pause-while /tmp/quiet      # between cases, wait while /tmp/quiet exists
#   DLAUNCH_TEST_BIN_DIR=/tmp/snap/bin bench/chaos/run.sh ...   # the jobs run a copy of build/bin (and
#                                                        # its ../share) taken before, not the build's
# The last line: chaos faults=N jobs=J correct=C wrong_verdict=W hung=H leftovers=L lost_output=O seed=S
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
build=${BUILD:-$src/build}
if [ ! -x "$build/bin/dlaunch-chaos" ]; then
  echo "bench/chaos: $build/bin/dlaunch-chaos is not built: cmake --build $build --target dlaunch-chaos" \
       "(the chaos test folder must be configured: DLAUNCH_TEST_FOLDERS all, or one with chaos)" >&2
  exit 2
fi
exec "$build/bin/dlaunch-chaos" "$@"
