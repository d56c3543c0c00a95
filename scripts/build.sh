#!/usr/bin/env bash
# Configures and builds dlaunch into ./build (Release with debug info, ccache).
#   scripts/build.sh          everything: dlaunch, its libraries, benchmarks and every test binary
#   scripts/build.sh --demo   only what the README's demo runs (dlaunch, dlaunch-agent, dlaunch-hello),
#                             without the tests, so it needs only `install-deps.sh --build`
# DLAUNCH_JOBS sets the parallel jobs (default: this machine's cores); other
# arguments go to cmake's configure step (-DDLAUNCH_NCCL=OFF, ...).
set -euo pipefail
cd "$(dirname "$0")/.."
tests=ON
targets=()
if [ "${1:-}" = "--demo" ]; then
  shift
  tests=OFF
  targets=(--target dlaunch dlaunch-agent dlaunch-hello)
fi
# Configure every time (a second when nothing changed): a build dir made by
# the demo command, before the test dependencies were installed, then finds
# mpicc, Catch2 and the rest, and builds the tests.
if [ -f build/build.ninja ]; then
  cmake -S . -B build -DDLAUNCH_TESTS=$tests "$@" >/dev/null
else
  cmake -S . -B build -G Ninja -DDLAUNCH_TESTS=$tests "$@"
fi
cmake --build build -j "${DLAUNCH_JOBS:-$(nproc)}" "${targets[@]}"
