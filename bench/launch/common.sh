# Sourced by bench/launch/run.sh and cpu.sh: their arguments, the dlaunch to
# measure, a scratch dir removed on exit, and the fork/exec floor built there.
here=$(cd "$(dirname "$0")" && pwd)
bin=${DLAUNCH_BIN:-$here/../../build/bin}
ns=("${@:-1 4 16 64}"); ns=(${ns[*]})
runs=${RUNS:-20}
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
cc -O2 -o "$work/floor" "$here/floor.c"
