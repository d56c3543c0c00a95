#!/usr/bin/env bash
# A test cluster made of network namespaces, each host with its own sshd.
# See docs/testing-cluster.md. Needs root (ip netns, sshd).
#
#   cluster.sh up --owner PID [--hosts K]     -> prints DL_CLUSTER_ID=.. and DL_CLUSTER_DIR=..
#                                              PID's end takes the cluster down (at the next up or reap)
#   cluster.sh down ID                         idempotent; safe after a partial up
#   cluster.sh exec ID HOST -- CMD...          run CMD inside HOST's namespace (hostname HOST)
#   cluster.sh status [ID]                     list clusters, or one cluster's hosts
#   cluster.sh reap                            down every cluster whose owner process is gone
# Fault hooks:
#   cluster.sh stop-sshd ID HOST | start-sshd ID HOST
#   cluster.sh link ID HOST down|up            the host's cable (switch-side veth)
#   cluster.sh block ID FROM TO PORT|any [drop|reject] | unblock ID TO
#   cluster.sh partition ID HOST...            drop TCP both ways between HOSTs and every other host
#                                              (they still reach each other); unblock ID H of every host lifts it
#   cluster.sh slow ID HOST DELAY [RATE]       tc netem on HOST's egress (50ms 10mbit); DELAY 0: rate only
#   cluster.sh unslow ID HOST
#   cluster.sh setenv ID HOST NAME=VALUE...    sshd SetEnv for HOST's sessions (e.g. PATH)
#
# Exit codes: 0 ok, 1 failure, 2 usage, 3 not permitted (not root / no netns), 4 tool missing.
set -uo pipefail

ROOT="${DL_CLUSTER_ROOT:-/tmp/dlaunch-clusters}"
MAX_ID=14336   # 56 * 256 subnets: 10.200.0.0/24 .. 10.255.255.0/24
SSHD=/usr/sbin/sshd

die() { local code=$1; shift; echo "cluster.sh: $*" >&2; exit "$code"; }
usage() { sed -n '5,19s/^#//p' "$0" >&2; exit 2; }

require_root() {
  [ "$(id -u)" = 0 ] || die 3 "needs root (uid is $(id -u)): network namespaces and sshd on port 22 need CAP_SYS_ADMIN and CAP_NET_ADMIN; run the cluster tests as root (CI does)"
  for t in ip ssh-keygen unshare "$SSHD"; do
    command -v "$t" >/dev/null 2>&1 || die 4 "missing tool '$t': install iproute2, openssh-server, openssh-client, util-linux (scripts/install-deps.sh)"
  done
}
probe_netns() {
  local probe="dlprobe$$" err
  if ! err=$(ip netns add "$probe" 2>&1); then
    die 3 "'ip netns add' is not permitted here: $err (a container needs --privileged or CAP_SYS_ADMIN+CAP_NET_ADMIN)"
  fi
  ip netns del "$probe" 2>/dev/null
}

# Loads DIR/cluster.env of cluster $1 into ID, HOSTS, NET, OWNER, OWNER_START.
load() {
  DIR="$ROOT/$1"
  [ -f "$DIR/cluster.env" ] || die 1 "no cluster '$1' (no $DIR/cluster.env); 'cluster.sh status' lists clusters"
  # shellcheck disable=SC1091
  . "$DIR/cluster.env"
}
ns_of() { echo "dl${ID}-$1"; }            # host name (h0..) -> namespace
sw_ns() { echo "dl${ID}-sw"; }
addr_of() { echo "${NET}.$(( ${1#h} + 1 ))"; }
check_host() {
  [[ "$1" =~ ^h[0-9]+$ ]] && [ "${1#h}" -lt "$HOSTS" ] || die 2 "no host '$1' in cluster $ID (hosts are h0..h$((HOSTS-1)))"
}
start_time() { awk '{print $22}' "/proc/$1/stat" 2>/dev/null; }

# ---- the cluster's CPU group ---------------------------------------------------
# Every process of the cluster (each host's sshd and what it starts, and what
# 'exec' runs) shares one CPU cgroup, as a job's processes on a real host share
# one session or one Slurm cgroup. Without it each ssh login is an autogroup of
# its own (kernel.sched_autogroup_enabled), the 4 hosts of a test are 4+ groups
# on this machine's 2 CPUs, and under spinning MPI ranks the kernel left whole
# groups runnable but unrun for 10 s: an agent missed its heartbeats, a host's
# ranks missed a 4 s fence (docs/testing-cluster.md, "One CPU group per
# cluster"). A machine without a cpu controller gets no group: nothing fails.
cgroup_paths() {  # $1 = id: where its group is, or would be (v1 and v2)
  echo "/sys/fs/cgroup/cpu/dlaunch-cluster-$1"
  echo "/sys/fs/cgroup/dlaunch-cluster-$1"
}
make_cgroup() {  # prints the group's directory, or nothing
  local d
  if [ -f /sys/fs/cgroup/cpu/cgroup.procs ]; then
    d="/sys/fs/cgroup/cpu/dlaunch-cluster-$ID"
  elif grep -qw cpu /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null; then
    d="/sys/fs/cgroup/dlaunch-cluster-$ID"
  else
    return 0
  fi
  # One left by a cluster of this id whose 'down' never ran is taken over.
  { mkdir "$d" 2>/dev/null || [ -d "$d" ]; } && echo "$d"
}
join_cgroup() {  # $1 = pid; CGROUP from cluster.env
  [ -n "${CGROUP:-}" ] && echo "$1" >"$CGROUP/cgroup.procs" 2>/dev/null
  return 0
}
remove_cgroup() {  # $1 = id; after its processes were killed
  local d
  for d in $(cgroup_paths "$1"); do
    [ -d "$d" ] || continue
    for _ in $(seq 40); do rmdir "$d" 2>/dev/null && break; sleep 0.05; done
  done
}

# ---- up ----------------------------------------------------------------------
alloc_id() {
  mkdir -p "$ROOT"
  local n tries=0
  while [ $tries -lt 200 ]; do
    n=$(( (RANDOM * 32768 + RANDOM) % MAX_ID )); tries=$((tries + 1))
    ip netns list 2>/dev/null | grep -q "^dl${n}-" && continue   # a stale, unreaped cluster
    mkdir "$ROOT/$n" 2>/dev/null && { echo "$n"; return 0; }     # atomic: the collision check
  done
  die 1 "could not find a free cluster id in $ROOT after 200 tries; run 'cluster.sh reap'"
}

write_host_files() {  # $1 = host name
  local h=$1 hd="$DIR/$1" a; a=$(addr_of "$1")
  mkdir -p "$hd"
  ssh-keygen -q -t ed25519 -N '' -C "$h@dlcluster$ID" -f "$hd/ssh_host_ed25519_key" || return 1
  cat >"$hd/sshd_config" <<EOF
# sshd of host $h in dlaunch test cluster $ID (generated by cluster.sh)
Port 22
ListenAddress $a
HostKey $hd/ssh_host_ed25519_key
PidFile $hd/sshd.pid
AuthorizedKeysFile $DIR/authorized_keys
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
UseDNS no
PrintMotd no
MaxStartups 100:30:200
MaxSessions 100
LogLevel VERBOSE
Include $hd/sshd_extra.conf
EOF
  : >"$hd/sshd_extra.conf"
  mkdir -p "/etc/netns/$(ns_of "$h")"
  cp "$DIR/hosts" "/etc/netns/$(ns_of "$h")/hosts"
}

start_sshd() {  # $1 = host name; returns when port 22 accepts connections
  local h=$1 hd="$DIR/$1" a ns; a=$(addr_of "$h"); ns=$(ns_of "$h")
  mkdir -p /run/sshd   # sshd's privilege-separation directory
  rm -f "$hd/sshd.pid"
  # Own UTS namespace (hostname = host name) and mount namespace, where root's
  # ~/.bashrc is masked: bash sources it even for `ssh host cmd`, and a
  # developer's dotfiles must neither slow nor change the cluster (DL_CLUSTER_KEEP_BASHRC=1 keeps it).
  local mask=""
  [ -f /root/.bashrc ] && [ -z "${DL_CLUSTER_KEEP_BASHRC:-}" ] && mask=/root/.bashrc
  echo "# empty: cluster.sh masks root's ~/.bashrc for the cluster's sshds" >"$DIR/bashrc"
  ( join_cgroup "$BASHPID"; exec ip netns exec "$ns" unshare --uts --mount sh -c \
      '[ -z "$5" ] || mount --bind "$6" "$5" || exit 1; hostname "$1" && exec "$2" -f "$3" -E "$4"' \
      sh "$h" "$SSHD" "$hd/sshd_config" "$hd/sshd.log" "$mask" "$DIR/bashrc" ) || return 1
  for _ in $(seq 100); do
    if [ -s "$hd/sshd.pid" ] && ip netns exec "$ns" bash -c "exec 3<>/dev/tcp/$a/22" 2>/dev/null; then
      return 0
    fi
    sleep 0.05
  done
  echo "cluster.sh: sshd of $h did not start; see $hd/sshd.log" >&2; return 1
}

build_network() {
  local sw; sw=$(sw_ns)
  ip netns add "$sw" || return 1
  ip -n "$sw" link set lo up
  ip -n "$sw" link add br0 type bridge || return 1
  ip -n "$sw" link set br0 up
  local i ns
  for ((i = 0; i < HOSTS; i++)); do
    ns=$(ns_of "h$i")
    ip netns add "$ns" || return 1
    ip -n "$ns" link set lo up
    # Both ends are created directly in their namespaces: the root namespace sees nothing.
    ip link add eth0 netns "$ns" type veth peer name "h$i" netns "$sw" || return 1
    ip -n "$sw" link set "h$i" master br0 up
    ip -n "$ns" addr add "$(addr_of "h$i")/24" dev eth0
    ip -n "$ns" link set eth0 up
  done
}

write_cluster_files() {
  local i h a hostkeys=""
  ssh-keygen -q -t ed25519 -N '' -C "client@dlcluster$ID" -f "$DIR/id_ed25519" || return 1
  cp "$DIR/id_ed25519.pub" "$DIR/authorized_keys"
  { echo "127.0.0.1 localhost"; echo "::1 localhost"
    for ((i = 0; i < HOSTS; i++)); do echo "$(addr_of "h$i") h$i"; done; } >"$DIR/hosts"
  { echo "# ssh client config of dlaunch test cluster $ID: ssh -F $DIR/ssh_config h1"
    for ((i = 0; i < HOSTS; i++)); do printf 'Host h%d\n  HostName %s\n' "$i" "$(addr_of "h$i")"; done
    cat <<EOF
Host *
  User root
  IdentityFile $DIR/id_ed25519
  IdentitiesOnly yes
  UserKnownHostsFile $DIR/known_hosts
  GlobalKnownHostsFile /dev/null
  StrictHostKeyChecking yes
  BatchMode yes
  ConnectTimeout 5
  LogLevel ERROR
EOF
  } >"$DIR/ssh_config"
  : >"$DIR/known_hosts"
  for ((i = 0; i < HOSTS; i++)); do
    h="h$i"; a=$(addr_of "$h")
    write_host_files "$h" || return 1
    echo "$h,$a $(cut -d' ' -f1,2 "$DIR/$h/ssh_host_ed25519_key.pub")" >>"$DIR/known_hosts"
  done
  for ((i = 0; i < HOSTS; i++)); do echo "$(addr_of "h$i") slots=2"; done >"$DIR/hostfile"
}

# The kernel's ARP table is one for every network namespace: its limits
# (net.ipv4.neigh.default.gc_thresh2 and 3: 512 and 1,024 by default) count
# all namespaces' entries together, where real hosts each have a table of
# their own. A cluster of n hosts that all reach each other needs up to n*n;
# past the limit the kernel refuses new entries ("neighbor table overflow!"
# in dmesg) and first connections time out: at 250 hosts the doctor's
# network stage failed for nearly every host. Raised for big clusters, never
# lowered (other clusters may be up).
room_for_neighbours() {
  local n=$1 k cur want
  [ "$n" -ge 32 ] || return 0
  for k in 3 2; do
    want=$(( k == 3 ? n * n + 1024 : (n * n + 1024) / 2 ))
    cur=$(sysctl -n "net.ipv4.neigh.default.gc_thresh$k" 2>/dev/null) || return 0
    [ "$cur" -ge "$want" ] || sysctl -qw "net.ipv4.neigh.default.gc_thresh$k=$want" || true
  done
}

# The owner is named, never guessed: cluster.sh's own parent may be a
# subshell or a runner's one-command shell that exits at once, and its
# cluster would then be reaped mid-test by anyone's next 'up'.
cmd_up() {
  local hosts=4 owner=""
  while [ $# -gt 0 ]; do
    case $1 in
      --hosts) hosts=${2:-}; shift 2 ;;
      --owner) owner=${2:-}; shift 2 ;;
      *) usage ;;
    esac
  done
  [ -n "$owner" ] || die 2 "up needs --owner PID: the process that uses the cluster; once it is gone, any later 'up' or 'reap' takes the cluster down. From a shell or a script: --owner \$\$ (eval \"\$(cluster.sh up --owner \$\$)\"); for a cluster that must outlive every process (commands run one shell each): --owner 1, then 'cluster.sh down ID' when done"
  [[ "$owner" =~ ^[0-9]+$ ]] || die 2 "--owner takes a process id, got '$owner'"
  [[ "$hosts" =~ ^[0-9]+$ ]] && [ "$hosts" -ge 1 ] && [ "$hosts" -le 250 ] || die 2 "--hosts must be 1..250, got '$hosts'"
  require_root; probe_netns
  [ -d "/proc/$owner" ] || die 2 "--owner $owner is not a running process"
  cmd_reap >/dev/null 2>&1
  room_for_neighbours "$hosts"
  ID=$(alloc_id) || exit 1
  DIR="$ROOT/$ID"; HOSTS=$hosts
  NET="10.$((200 + ID / 256)).$((ID % 256))"
  CGROUP=$(make_cgroup)
  cat >"$DIR/cluster.env" <<EOF
ID=$ID
HOSTS=$HOSTS
NET=$NET
CGROUP=$CGROUP
OWNER=$owner
OWNER_START=$(start_time "$owner")
EOF
  local i
  if ! build_network || ! write_cluster_files; then
    echo "cluster.sh: up failed for cluster $ID; tearing it down" >&2
    cmd_down "$ID" >/dev/null; exit 1
  fi
  for ((i = 0; i < HOSTS; i++)); do
    start_sshd "h$i" || { cmd_down "$ID" >/dev/null; exit 1; }
  done
  echo "DL_CLUSTER_ID=$ID"
  echo "DL_CLUSTER_DIR=$DIR"
}

# ---- down / reap ---------------------------------------------------------------
kill_ns_procs() {  # $1 = namespace; TERM, then KILL what is left
  local ns=$1 pids sig
  for sig in TERM KILL; do
    pids=$(ip netns pids "$ns" 2>/dev/null) || return 0
    [ -z "$pids" ] && return 0
    # shellcheck disable=SC2086
    kill -"$sig" $pids 2>/dev/null
    for _ in $(seq 20); do
      [ -z "$(ip netns pids "$ns" 2>/dev/null)" ] && return 0
      sleep 0.05
    done
  done
}

cmd_down() {
  [ $# -eq 1 ] || usage
  [[ "$1" =~ ^[0-9]+$ ]] || die 2 "cluster id must be a number, got '$1'"
  require_root
  ID=$1; DIR="$ROOT/$ID"
  local f ns
  for f in "$DIR"/h*/sshd.pid; do
    [ -s "$f" ] && kill -TERM "$(cat "$f")" 2>/dev/null
  done
  # Every namespace of this id, including ones a partial 'up' left without a cluster.env.
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^dl${ID}-"); do
    kill_ns_procs "$ns"
    ip netns del "$ns" 2>/dev/null
    rm -rf "/etc/netns/$ns"
  done
  remove_cgroup "$ID"
  rm -rf "$DIR"
  echo "cluster $ID is down"
}

cmd_reap() {
  [ -d "$ROOT" ] || return 0
  local d id
  for d in "$ROOT"/*/; do
    [ -d "$d" ] || continue
    id=$(basename "$d")
    [ -f "$d/cluster.env" ] || { [ -n "$(find "$d" -maxdepth 0 -mmin +1)" ] && cmd_down "$id"; continue; }
    ( . "$d/cluster.env"
      if ! kill -0 "$OWNER" 2>/dev/null || [ "$(start_time "$OWNER")" != "$OWNER_START" ]; then exit 0; fi
      exit 1 ) && cmd_down "$id"
  done
}

# ---- exec / status -----------------------------------------------------------------
cmd_exec() {
  [ $# -ge 4 ] && [ "$3" = "--" ] || usage
  load "$1"; check_host "$2"
  local h=$2; shift 3
  join_cgroup $$
  exec ip netns exec "$(ns_of "$h")" unshare --uts sh -c 'hostname "$0" && exec "$@"' "$h" "$@"
}

cmd_status() {
  if [ $# -eq 0 ]; then
    [ -d "$ROOT" ] || return 0
    for d in "$ROOT"/*/; do [ -f "$d/cluster.env" ] && (. "$d/cluster.env"; echo "cluster $ID: $HOSTS hosts on $NET.0/24, owner pid $OWNER, dir $d"); done
    return 0
  fi
  load "$1"
  echo "cluster $ID: $HOSTS hosts on $NET.0/24, dir $DIR, ssh -F $DIR/ssh_config hN"
  local i h pid state
  for ((i = 0; i < HOSTS; i++)); do
    h="h$i"; state="sshd down"
    pid=$(cat "$DIR/$h/sshd.pid" 2>/dev/null) && kill -0 "$pid" 2>/dev/null && state="sshd pid $pid"
    echo "$h $(addr_of "$h") $(ns_of "$h") $state"
  done
}

# ---- fault hooks -------------------------------------------------------------------
cmd_stop_sshd() {
  load "$1"; check_host "$2"
  local pid; pid=$(cat "$DIR/$2/sshd.pid" 2>/dev/null) || return 0
  kill -TERM "$pid" 2>/dev/null
  for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.02; done
  rm -f "$DIR/$2/sshd.pid"
}
cmd_start_sshd() { load "$1"; check_host "$2"; start_sshd "$2"; }
cmd_link() {
  load "$1"; check_host "$2"
  [[ "${3:-}" =~ ^(up|down)$ ]] || usage
  ip -n "$(sw_ns)" link set "$2" "$3"
}
cmd_block() {
  [ $# -ge 4 ] || usage
  load "$1"; check_host "$2"; check_host "$3"
  local verdict=${5:-drop} ns; ns=$(ns_of "$3")
  command -v nft >/dev/null || die 4 "missing tool 'nft': install nftables"
  [[ "$verdict" =~ ^(drop|reject)$ ]] || usage
  [ "$verdict" = reject ] && verdict="reject with tcp reset"
  ip netns exec "$ns" nft add table inet dlfault
  ip netns exec "$ns" nft add chain inet dlfault input '{ type filter hook input priority 0; }'
  local match="tcp dport $4"
  [ "$4" = any ] && match="meta l4proto tcp"  # every TCP port: a partition between the two hosts
  # shellcheck disable=SC2086
  ip netns exec "$ns" nft add rule inet dlfault input ip saddr "$(addr_of "$2")" $match $verdict
}
# One nft ruleset per host, written in one go: both sides of the cut drop
# the other side's TCP at the same moment (a half of a rack losing its uplink).
cmd_partition() {
  [ $# -ge 2 ] || usage
  load "$1"; shift
  command -v nft >/dev/null || die 4 "missing tool 'nft': install nftables"
  local h i j cut=" " ours theirs
  for h in "$@"; do check_host "$h"; cut+="$h "; done
  for ((i = 0; i < HOSTS; i++)); do
    theirs=""
    for ((j = 0; j < HOSTS; j++)); do
      ours=no; [[ "$cut" == *" h$i "* ]] && ours=yes
      [[ "$cut" == *" h$j "* ]] && [ $ours = no ] && theirs+="${theirs:+, }$(addr_of "h$j")"
      [[ "$cut" != *" h$j "* ]] && [ $ours = yes ] && theirs+="${theirs:+, }$(addr_of "h$j")"
    done
    [ -n "$theirs" ] || continue
    printf 'add table inet dlfault\nadd chain inet dlfault input { type filter hook input priority 0; }\nadd rule inet dlfault input ip saddr { %s } meta l4proto tcp drop\n' "$theirs" |
      ip netns exec "$(ns_of "h$i")" nft -f - || die 1 "nft in h$i failed"
  done
}
cmd_unblock() { load "$1"; check_host "$2"; ip netns exec "$(ns_of "$2")" nft delete table inet dlfault 2>/dev/null; return 0; }
cmd_slow() {  # DELAY "0" means rate only (tbf, works without the netem module)
  [ $# -ge 3 ] || usage
  load "$1"; check_host "$2"
  local ns; ns=$(ns_of "$2")
  if [ "$3" = 0 ]; then
    [ -n "${4:-}" ] || die 2 "slow with DELAY 0 needs a RATE (e.g. 10mbit)"
    tc -n "$ns" qdisc replace dev eth0 root tbf rate "$4" burst 32kbit latency 400ms
    return
  fi
  local args=(delay "$3"); [ -n "${4:-}" ] && args+=(rate "$4")
  local err
  err=$(tc -n "$ns" qdisc replace dev eth0 root netem "${args[@]}" 2>&1) && return 0
  case $err in
    *"kind is unknown"*) die 4 "tc netem is not available in this kernel (CONFIG_NET_SCH_NETEM / module sch_netem); only 'slow ID HOST 0 RATE' (tbf) works here" ;;
    *) die 1 "tc netem on $2 failed: $err" ;;
  esac
}
cmd_unslow() { load "$1"; check_host "$2"; tc -n "$(ns_of "$2")" qdisc del dev eth0 root 2>/dev/null; return 0; }
cmd_setenv() {
  [ $# -ge 3 ] || usage
  load "$1"; check_host "$2"
  local h=$2; shift 2
  local kv line=""
  for kv in "$@"; do
    [[ "$kv" =~ ^[A-Za-z_][A-Za-z0-9_]*=[^\"]*$ ]] || die 2 "setenv wants NAME=VALUE without double quotes, got '$kv'"
    line="$line \"$kv\""
  done
  # sshd uses its first SetEnv line only: every variable goes on that one line.
  local conf="$DIR/$h/sshd_extra.conf" before
  before=$(sed -n 's/^SetEnv//p' "$conf")
  { grep -v '^SetEnv' "$conf" || true; echo "SetEnv$before$line"; } >"$conf.new" && mv "$conf.new" "$conf"
  # sshd re-reads its configuration on SIGHUP (it re-executes itself).
  local pid; pid=$(cat "$DIR/$h/sshd.pid" 2>/dev/null) || die 1 "sshd of $h is not running"
  kill -HUP "$pid"
  for _ in $(seq 100); do
    ip netns exec "$(ns_of "$h")" bash -c "exec 3<>/dev/tcp/$(addr_of "$h")/22" 2>/dev/null && return 0
    sleep 0.05
  done
  die 1 "sshd of $h did not come back after SIGHUP; see $DIR/$h/sshd.log"
}

main() {
  local sub=${1:-}; [ $# -gt 0 ] && shift
  case $sub in
    up) cmd_up "$@" ;;
    down) cmd_down "$@" ;;
    reap) require_root; cmd_reap ;;
    exec) require_root; cmd_exec "$@" ;;
    status) cmd_status "$@" ;;
    stop-sshd) require_root; cmd_stop_sshd "$@" ;;
    start-sshd) require_root; cmd_start_sshd "$@" ;;
    link) require_root; cmd_link "$@" ;;
    block) require_root; cmd_block "$@" ;;
    unblock) require_root; cmd_unblock "$@" ;;
    partition) require_root; cmd_partition "$@" ;;
    slow) require_root; cmd_slow "$@" ;;
    unslow) require_root; cmd_unslow "$@" ;;
    setenv) require_root; cmd_setenv "$@" ;;
    *) usage ;;
  esac
}
main "$@"
