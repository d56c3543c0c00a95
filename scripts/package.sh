#!/usr/bin/env bash
# Builds the dlaunch .deb from a build dir (default ./build, configured and
# built as needed) and prints its path:
#   scripts/package.sh [BUILD_DIR]    -> BUILD_DIR/packages/dlaunch_<version>_<arch>.deb
#   $(command -v sudo) apt install ./build/packages/dlaunch_*.deb   (sudo where there is one)
# Needs pandoc (the man page) and dpkg-dev (dpkg-shlibdeps): scripts/install-deps.sh.
# DLAUNCH_JOBS sets the parallel build jobs (default: this machine's cores).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
for tool in pandoc dpkg-shlibdeps cpack; do
  command -v "$tool" >/dev/null || { echo "package.sh: $tool is missing; run scripts/install-deps.sh" >&2; exit 1; }
done
if [ -f "$build/CMakeCache.txt" ]; then
  cmake -S . -B "$build" >/dev/null
else
  cmake -S . -B "$build" -G Ninja -DDLAUNCH_TESTS=OFF
fi
# What the package holds, and nothing else (no test binaries).
cmake --build "$build" -j "${DLAUNCH_JOBS:-$(nproc)}" --target dlaunch dlaunch-agent dlaunch-hello dlcoll \
  dlaunch-man dlaunch-completion $(grep -q '^dlaunch-nccl-check:' <(cmake --build "$build" --target help) && echo dlaunch-nccl-check)
rm -f "$build"/packages/dlaunch_*.deb
(cd "$build" && cpack -G DEB --config CPackConfig.cmake >/dev/null)
ls "$build"/packages/dlaunch_*.deb
