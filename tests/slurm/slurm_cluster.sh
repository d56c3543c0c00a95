#!/usr/bin/env bash
# A real Slurm cluster on the namespace test cluster (tests/cluster/cluster.sh):
# h0 is the login node and runs slurmctld; h1..hK-1 are compute nodes, one
# slurmd each; one munged (in h0) serves all of them on a unix socket in the
# cluster directory. Nothing touches /etc: clients find the cluster through
# SLURM_CONF. See docs/testing-cluster.md, "Slurm".
#
#   slurm_cluster.sh up ID [CPUS]   start munge and Slurm on cluster ID (CPUS per node, default 2);
#                                   prints SLURM_CONF=...; returns once every node is idle
#   slurm_cluster.sh down ID        stop them (cluster.sh down also kills them with the namespaces)
#   slurm_cluster.sh kill-node ID HOST   unplug HOST's cable, then SIGKILL every process in it, slurmd
#                                   included (a node that dies)
#
# Facts that matter (each cost a failed start to learn):
#  - slurmd -N hN in hN's own UTS namespace: task hostnames equal NodeNames
#  - munged's socket directory must be 0755; slurm.conf AuthInfo=socket=..
#  - proctrack/linuxproc and task/none need no cgroups, but slurmd 22.05
#    loads a cgroup plugin anyway: cgroup/v1 on an empty tmpfs at
#    /sys/fs/cgroup (ip netns exec's /sys has none; "autodetect" fails on this
#    hybrid host)
#  - SlurmdSpoolDir and TmpFS per node (%n): PMIx's per-node app dir lives
#    in TmpFS, and a shared one fails with "File exists" on the second node
#  - select/cons_tres with an exclusive partition: salloc -N4 gets every CPU
set -uo pipefail

ROOT="${DL_CLUSTER_ROOT:-/tmp/dlaunch-clusters}"
die() { local code=$1; shift; echo "slurm_cluster.sh: $*" >&2; exit "$code"; }
usage() { sed -n '7,12s/^#//p' "$0" >&2; exit 2; }

load() {
  DIR="$ROOT/$1"
  [ -f "$DIR/cluster.env" ] || die 1 "no cluster '$1' (no $DIR/cluster.env); bring one up with cluster.sh up"
  # shellcheck disable=SC1091
  . "$DIR/cluster.env"
  S="$DIR/slurm"
}
ns_of() { echo "dl${ID}-$1"; }
addr_of() { echo "${NET}.$(( ${1#h} + 1 ))"; }
# Runs a command in host $1's namespace with its hostname (own UTS namespace).
# In the cluster's CPU group (cluster.sh, "the cluster's CPU group"), as its sshds are.
in_host() {
  local h=$1; shift
  ( [ -n "${CGROUP:-}" ] && echo "$BASHPID" >"$CGROUP/cgroup.procs" 2>/dev/null
    exec ip netns exec "$(ns_of "$h")" unshare --uts sh -c 'hostname "$0" && exec "$@"' "$h" "$@" )
}

write_conf() {  # $1 = CPUs per node
  local cpus=$1 i h nodes=""
  mkdir -p "$S/munge" "$S/ctld" "$S/log"
  chmod 0755 "$S/munge"
  dd if=/dev/urandom of="$S/munge/munge.key" bs=1024 count=1 status=none
  chmod 0600 "$S/munge/munge.key"
  for ((i = 1; i < HOSTS; i++)); do
    mkdir -p "$S/spool/h$i" "$S/tmp/h$i"
    nodes="${nodes}NodeName=h$i NodeAddr=$(addr_of "h$i") CPUs=$cpus State=UNKNOWN
"
  done
  cat >"$S/slurm.conf" <<EOF
# Slurm of dlaunch test cluster $ID (tests/slurm/slurm_cluster.sh)
ClusterName=dl$ID
SlurmctldHost=h0($(addr_of h0))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$S/munge/munge.socket
CredType=cred/munge
StateSaveLocation=$S/ctld
SlurmdSpoolDir=$S/spool/%n
TmpFS=$S/tmp/%n
SlurmctldPidFile=$S/slurmctld.pid
SlurmdPidFile=$S/spool/%n/slurmd.pid
SlurmctldLogFile=$S/log/slurmctld.log
SlurmdLogFile=$S/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/builtin
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
SlurmdParameters=config_overrides
ReturnToService=2
InactiveLimit=0
KillWait=2
MinJobAge=2
MessageTimeout=5
SlurmdTimeout=10
SlurmctldTimeout=10
TCPTimeout=2
$nodes
PartitionName=all Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=EXCLUSIVE
EOF
  printf 'CgroupPlugin=cgroup/v1\nCgroupAutomount=no\n' >"$S/cgroup.conf"
}

cmd_up() {
  [ $# -ge 1 ] || usage
  load "$1"
  local cpus=${2:-2} i
  [ "$HOSTS" -ge 2 ] || die 2 "a Slurm cluster needs h0 (login, slurmctld) and at least one compute node: up --hosts 2 or more"
  for t in munged slurmctld slurmd srun; do
    command -v "$t" >/dev/null 2>&1 || die 4 "missing tool '$t': install munge and slurm-wlm (scripts/install-deps.sh)"
  done
  write_conf "$cpus"
  in_host h0 munged --force --socket="$S/munge/munge.socket" --key-file="$S/munge/munge.key" \
    --pid-file="$S/munge/munged.pid" --log-file="$S/log/munged.log" --seed-file="$S/munge/munge.seed" \
    || die 1 "munged did not start; see $S/log/munged.log"
  export SLURM_CONF="$S/slurm.conf"
  in_host h0 slurmctld -i -f "$S/slurm.conf" || die 1 "slurmctld did not start; see $S/log/slurmctld.log"
  for ((i = 1; i < HOSTS; i++)); do
    in_host "h$i" sh -c 'mount -t tmpfs dl-cgroup /sys/fs/cgroup && exec "$@"' sh \
      slurmd -f "$S/slurm.conf" -N "h$i" || die 1 "slurmd of h$i did not start; see $S/log/slurmd-h$i.log"
  done
  # Ready when every node is idle (sinfo asks slurmctld from h0).
  for _ in $(seq 300); do
    local states
    states=$(in_host h0 sinfo -h -N -o '%t' 2>/dev/null | sort -u | tr '\n' ' ')
    [ "$states" = "idle " ] && { echo "SLURM_CONF=$S/slurm.conf"; return 0; }
    sleep 0.1
  done
  die 1 "the Slurm nodes did not become idle in 30 s (sinfo says: $(in_host h0 sinfo -h -N -o '%N %t %E' 2>&1 | tr '\n' ';')); see $S/log/"
}

cmd_down() {
  [ $# -eq 1 ] || usage
  load "$1"
  local f
  for f in "$S"/spool/h*/slurmd.pid "$S/slurmctld.pid" "$S/munge/munged.pid"; do
    [ -s "$f" ] && kill -TERM "$(cat "$f")" 2>/dev/null
  done
  return 0
}

cmd_kill_node() {
  [ $# -eq 2 ] || usage
  load "$1"
  local pids
  # The cable first, as a power cut: no FIN or RST from the dying processes reaches anyone.
  ip -n "dl${ID}-sw" link set "$2" down
  pids=$(ip netns pids "$(ns_of "$2")" 2>/dev/null)
  # shellcheck disable=SC2086
  [ -n "$pids" ] && kill -KILL $pids 2>/dev/null
  return 0
}

[ "$(id -u)" = 0 ] || die 3 "needs root (network namespaces, slurmd)"
sub=${1:-}; [ $# -gt 0 ] && shift
case $sub in
  up) cmd_up "$@" ;;
  down) cmd_down "$@" ;;
  kill-node) cmd_kill_node "$@" ;;
  *) usage ;;
esac
