#!/usr/bin/env bash
# Installs what dlaunch needs on Debian 12, idempotently.
#   scripts/install-deps.sh           build and test dependencies (all)
#   scripts/install-deps.sh --build   only what building needs (the demo)
set -euo pipefail
build=(build-essential cmake ninja-build ccache pkg-config git
       libboost-dev libboost-program-options-dev libboost-system-dev
       libssh-dev nlohmann-json3-dev libpmix-dev
       nettle-dev)  # SHA-256 and HMAC (wire/sha256.h); the .deb then depends on libnettle8
test=(catch2 libssl-dev openssh-server openssh-client iproute2 procps psmisc iputils-ping
      openmpi-bin libopenmpi-dev python3-mpi4py mpich libmpich-dev libpmi2-0-dev pdsh nftables iptables
      python3-torch python3-numpy hyperfine gdb elfutils
      slurm-wlm munge  # tests/slurm: a real Slurm cluster in the namespaces (PMIx plugin in slurm-wlm-basic-plugins)
      pandoc man-db dpkg-dev  # tests/install: the .deb, its man page (docs/install.md)
      libhwloc-dev)  # bench/libs: the libraries measured against our own code
pkgs=("${build[@]}")
[ "${1:-}" = "--build" ] || pkgs+=("${test[@]}")

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then echo "install-deps: everything is installed"; exit 0; fi
sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo"
echo "install-deps: installing ${missing[*]}"
$sudo apt-get update -q
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
