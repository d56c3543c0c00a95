#!/usr/bin/env bash
# bench/soak: N real launches of mixed sizes (local 1..64 ranks; --launcher
# sim 2..32 hosts x 1..4 ranks, flat or --fanout 4), some with a rank that
# fails on purpose, each checked (exit code, verdict, every line whole and
# in order), each under a watchdog (past --bound it is a hang, its replay
# command printed), nothing left (processes, /tmp, /dev/shm). See
# docs/benchmarks.md, "Soak". Root gives each launch a private /tmp and /dev/shm.
#
#   bench/soak/run.sh                        # 10,000 launches, seed 1
#   bench/soak/run.sh --launches 500 --seed 7
#   bench/soak/run.sh --replay 7:123         # launch 123 of seed 7 alone
#   DLAUNCH_BIN=other/bin bench/soak/run.sh  # another build's binaries
# Last line: soak launches=N hangs=H wrong=W leftovers=L seed=S
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
exec python3 "$here/soak.py" "$@"
