#!/usr/bin/env bash
# Builds dlaunch and runs its tests.
#   scripts/test.sh           everything, then every test: unit, integration, and
#                             the multi-host tests on network namespaces (those
#                             need root; CI runs as root). The README's test
#                             command, and what .ci/run runs.
#   scripts/test.sh --quick   only the unit test binaries (target unit_tests), then
#                             their cases (ctest label "unit"); seconds when little
#                             changed. More arguments go to ctest (-R REGEX, -V, ...).
# DLAUNCH_JOBS sets the parallel jobs of the build and of the tests.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--quick" ]; then
  shift
  # Configure as scripts/build.sh does (a second when nothing changed), so a
  # build dir made by the demo command gets its tests.
  if [ -f build/build.ninja ]; then
    cmake -S . -B build -DDLAUNCH_TESTS=ON >/dev/null
  else
    cmake -S . -B build -G Ninja -DDLAUNCH_TESTS=ON >/dev/null
  fi
  cmake --build build -j "${DLAUNCH_JOBS:-$(nproc)}" --target unit_tests
  cd build
  exec ctest -L '^unit$' -j "${DLAUNCH_JOBS:-$(nproc)}" --output-on-failure --timeout 120 "$@"
fi
scripts/build.sh
cd build
ctest -j "${DLAUNCH_JOBS:-2}" --output-on-failure --timeout 600
