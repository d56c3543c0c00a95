#!/usr/bin/env bash
# bench/libs: what each library dlaunch could use instead of its own code
# would cost (docs/design.md, "Libraries and what we write by hand"):
#   JSON      wire/record.cc's lexer vs nlohmann::json's SAX parser into the
#             same fields() mapping (json_bench), per message and ratio;
#   topology  machine/cpus.cc's sysfs reads vs hwloc's topology load
#             (topo_bench), in process and as a fresh process (topo_once_*);
#   HMAC      dlaunch's (wire/sha256.cc over nettle) vs OpenSSL's libcrypto
#             (hmac_bench), and a fresh process computing one (hmac_once_*:
#             ours, nettle static, libcrypto);
# then `dlaunch -n 1 /bin/true` end to end, the run-to-run noise a start-up
# difference must beat. Ratios are library / ours (above 1: ours is faster).
# On a shared machine trust the CPU columns (json_bench and hmac_bench time
# CPU only); wall times of fresh processes there move by milliseconds, and
# `perf stat -r 200 -e task-clock build/bin/hmac_once_ours` (and the others)
# gives their CPU instead.
#   bench/libs/run.sh                 (build first: scripts/build.sh)
#   DLAUNCH_BIN=build/bin RUNS=200    binaries to measure, hyperfine runs
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=${DLAUNCH_BIN:-$here/../../build/bin}
runs=${RUNS:-200}
command -v hyperfine >/dev/null || { echo "bench/libs needs hyperfine (apt-get install hyperfine)"; exit 1; }
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT

# The mean and standard deviation, in ms, of `runs` starts of a command.
startup() {  # name command...
  local name=$1; shift
  hyperfine -N -w 20 -r "$runs" --export-json "$work/$name.json" "$(printf '%q ' "$@")" </dev/null >/dev/null 2>&1
  python3 -c "import json,sys; d=json.load(open(sys.argv[1]))['results'][0]; print('%s %.3f %.3f %.3f' % (sys.argv[2], d['mean']*1e3, d['stddev']*1e3, d['median']*1e3))" \
    "$work/$name.json" "$name" | tee -a "$work/startup"
}
ratio() {  # name-of-library name-of-ours
  awk -v a="$1" -v b="$2" '$1==a{x=$4} $1==b{y=$4} END{if (x && y) printf "%s / %s (medians): %.3f\n", a, b, x/y}' "$work/startup"
}

echo "# bench/libs on $(hostname), $(nproc) CPUs, load $(cut -d' ' -f1 /proc/loadavg), $(date -u +%F)"
echo "## JSON: control messages and a store record"
"$bin/json_bench"
echo "## topology"
[ -x "$bin/topo_bench" ] && "$bin/topo_bench" || echo "# topo_bench not built (no hwloc)"
echo "## HMAC-SHA256"
[ -x "$bin/hmac_bench" ] && "$bin/hmac_bench" || echo "# hmac_bench not built (no OpenSSL)"

echo "## start-up: a fresh process, ms (mean stddev median), $runs runs each"
for p in topo_once_sysfs topo_once_hwloc hmac_once_ours hmac_once_nettle_static hmac_once_openssl; do
  [ -x "$bin/$p" ] && startup "$p" "$bin/$p"
done
ratio topo_once_hwloc topo_once_sysfs
ratio hmac_once_nettle_static hmac_once_ours
ratio hmac_once_openssl hmac_once_ours
if [ -x "$bin/hmac_once_ours" ]; then
  echo "# the loader's own count for ours, nettle linked shared (LD_DEBUG=statistics):"
  LD_DEBUG=statistics "$bin/hmac_once_ours" 2>&1 | grep -E "total startup time|relocations|objects" | sed 's/^ *[0-9]*: */#   /'
fi
echo "## dlaunch -n 1 /bin/true end to end (the noise a start-up difference must beat)"
if [ -x "$bin/dlaunch" ]; then startup dlaunch-n1 "$bin/dlaunch" -n 1 /bin/true; else echo "# $bin/dlaunch not built"; fi
