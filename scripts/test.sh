#!/usr/bin/env bash
# Builds dlaunch and runs every test: unit, integration, and the multi-host
# tests on network namespaces (those need root; CI runs as root).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
cd build
ctest -j "${DLAUNCH_JOBS:-2}" --output-on-failure --timeout 600
