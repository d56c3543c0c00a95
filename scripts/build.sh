#!/usr/bin/env bash
# Configures and builds dlaunch into ./build (Release with debug info, ccache, -j2).
set -euo pipefail
cd "$(dirname "$0")/.."
# Configure every time (a second when nothing changed): a build dir made by
# the demo command, before the test dependencies were installed, then finds
# mpicc and the rest.
if [ -f build/build.ninja ]; then cmake -S . -B build "$@" >/dev/null; else cmake -S . -B build -G Ninja "$@"; fi
cmake --build build -j "${DLAUNCH_JOBS:-2}"
