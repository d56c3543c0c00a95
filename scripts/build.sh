#!/usr/bin/env bash
# Configures and builds dlaunch into ./build (Release with debug info, ccache, -j2).
set -euo pipefail
cd "$(dirname "$0")/.."
[ -f build/build.ninja ] || cmake -S . -B build -G Ninja "$@"
cmake --build build -j "${DLAUNCH_JOBS:-2}"
