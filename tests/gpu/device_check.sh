#!/bin/bash
# What only a host with an NVIDIA GPU can check, in one run (a few minutes):
# dlaunch's GPU detection and binding as torch sees it (set_device(LOCAL_RANK),
# --gpu-bind isolate, CUDA_VISIBLE_DEVICES preset by a scheduler, by index and
# by UUID, more ranks than GPUs), torch's NCCL backend under dlaunch,
# dlaunch's own NCCL backend (test_collectives [nccl], `dlaunch bench
# --device cuda`) side by side with torch's NCCL, and `dlaunch doctor` on it.
#
#   tests/gpu/device_check.sh [BIN_DIR [LIB_DIR]]
#
# BIN_DIR holds dlaunch, dlaunch-agent, dlaunch-nccl-check and test_collectives
# (default build/bin), LIB_DIR libdlcoll.so.0 (default build/lib). python3
# must have torch with CUDA. Logs and a summary go to $OUT (default
# /tmp/dlaunch-gpu-check): `log`, `ratio.txt` (dlaunch bench against torch's
# NCCL) and `steps.tar.gz` (each step's whole output). ONLY=REGEX runs only
# the steps whose names match (dry_run, torch_nccl, bench_all_reduce, ...).
# Exit 0 when every check passed. On a host with several GPUs the same
# steps run one rank per GPU (NGPU), so NCCL then crosses GPUs.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BIN=$(cd "${1:-$ROOT/build/bin}" && pwd)
LIB=$(cd "${2:-$ROOT/build/lib}" && pwd)
OUT=${OUT:-/tmp/dlaunch-gpu-check}
STEPS=$(mktemp -d /tmp/dlaunch-gpu-steps.XXXXXX)  # each step's whole output; $OUT/steps.tar.gz
mkdir -p "$OUT"
trap '(cd "$STEPS" && tar -czf "$OUT/steps.tar.gz" -- *) 2>/dev/null; rm -rf "$STEPS"' EXIT
export PATH="$BIN:$PATH"
cd "$ROOT"
exec > >(tee "$OUT/log") 2>&1
T0=$(date +%s.%N)
failed=()
say() { printf '%s\n' "$*"; }
el() { awk -v a="$(date +%s.%N)" -v b="$T0" 'BEGIN { printf "%6.1fs", a - b }'; }

# run NAME TIMEOUT CMD...: the command's output in $STEPS/NAME.txt and $last,
# rc in $rc. With ONLY=REGEX, steps whose name does not match are skipped
# (and so are their expects).
skip=0
run() {
  local name=$1 t=$2; shift 2
  skip=0
  if [ -n "${ONLY:-}" ] && ! [[ $name =~ $ONLY ]]; then skip=1; return; fi
  say "=== [$(el)] $name: $*"
  timeout -k 5 "$t" "$@" > "$STEPS/$name.txt" 2>&1
  rc=$?
  last=$(cat "$STEPS/$name.txt")
  sed 's/^/    /' "$STEPS/$name.txt" | tail -n 60
  say "    (rc=$rc)"
}
expect() {  # expect NAME CONDITION-DESCRIPTION TEST...
  local name=$1 what=$2; shift 2
  [ $skip = 1 ] && return
  if "$@"; then say "  PASS $name: $what"; else say "  FAIL $name: $what"; failed+=("$name"); fi
}
has() { grep -Eq -- "$1" <<< "$last"; }
count() { grep -Ec -- "$1" <<< "$last"; }
leftovers() { pgrep -af 'gpu_torch.py|gpu_hang.py|gpu_restart.py|torch_nccl_bench.py|dlaunch-agent|dlaunch bench' | grep -v pgrep || true; }

say "=== the machine"
env | grep -E '^(PMIX|PMI|OMPI|NCCL|CUDA|SLURM|LD_LIBRARY)' | sort
nvidia-smi -L
nvidia-smi --query-gpu=name,pci.bus_id,uuid,driver_version,memory.total --format=csv
ls /proc/driver/nvidia/gpus 2>&1
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "devices", torch.cuda.device_count(), "nccl", torch.cuda.nccl.version())'
# The NCCL and CUDA runtime a job's environment offers (torch's wheels carry
# both); dlaunch loads them from LD_LIBRARY_PATH as the docs tell users to.
libs=$(python3 - <<'PY'
import importlib.util, os
dirs = []
for mod in ("nvidia.nccl", "nvidia.cu13", "nvidia.cuda_runtime"):
    try:
        spec = importlib.util.find_spec(mod)
    except Exception:
        spec = None
    for loc in (spec.submodule_search_locations or []) if spec else []:
        d = os.path.join(loc, "lib")
        if os.path.isdir(d):
            dirs.append(d)
print(":".join(dirs))
PY
)
say "torch's NVIDIA library dirs: $libs"
ls /usr/local/cuda/lib64/libnccl.so* /usr/local/cuda/lib64/libcudart.so* 2>&1 | head
export LD_LIBRARY_PATH="$LIB${libs:+:$libs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
UUID=$(nvidia-smi --query-gpu=uuid --format=csv,noheader | head -1)
NGPU=$(nvidia-smi -L | grep -c '^GPU')
say "GPUs: $NGPU; first UUID $UUID"

run dry_run 30 dlaunch -n "$NGPU" --dry-run true
expect dry_run "every rank gets its own GPU" has "^0 +localhost +0 +0 +0 +0 +0"

run too_many 30 dlaunch -n $((NGPU + 1)) --gpu-bind isolate true
expect too_many "refused before start, exit 2, saying how many GPUs" \
  eval '[ $rc = 2 ] && has "has $NGPU GPUs?, but its $((NGPU + 1)) ranks"'

run torch_nccl 180 dlaunch -n "$NGPU" --report-bindings python3 tests/gpu/gpu_torch.py --backend nccl
expect torch_nccl "set_device(LOCAL_RANK) + nccl on every rank" eval '[ $rc = 0 ] && [ $(count " OK$") = $NGPU ]'

run torch_isolate 180 dlaunch -n "$NGPU" --gpu-bind isolate --report-bindings python3 tests/gpu/gpu_torch.py --device default
expect torch_isolate "--gpu-bind isolate: cuda:0 is the rank's GPU" eval '[ $rc = 0 ] && [ $(count " OK$") = $NGPU ]'

run preset_index 180 env CUDA_VISIBLE_DEVICES=0 dlaunch -n 1 --report-bindings python3 tests/gpu/gpu_torch.py
expect preset_index "CUDA_VISIBLE_DEVICES=0 from the scheduler is kept" eval '[ $rc = 0 ] && has "visible=0 .* OK$"'

run preset_uuid 180 env CUDA_VISIBLE_DEVICES="$UUID" dlaunch -n 1 --report-bindings python3 tests/gpu/gpu_torch.py
expect preset_uuid "CUDA_VISIBLE_DEVICES=GPU-uuid from the scheduler works" eval '[ $rc = 0 ] && has " OK$"'

run shared_gloo 180 dlaunch -n $((NGPU * 2)) --oversubscribe-gpus --report-bindings python3 tests/gpu/gpu_torch.py --backend gloo --device dlaunch_gpus
expect shared_gloo "2 ranks per GPU (gloo on CUDA tensors, device from DLAUNCH_GPUS)" eval '[ $rc = 0 ] && [ $(count " OK$") = $((NGPU * 2)) ]'

# NCCL refuses two ranks of one communicator on one GPU: the job must end,
# saying which rank failed, and leave nothing behind.
run shared_nccl 120 dlaunch -n $((NGPU * 2)) --oversubscribe-gpus python3 tests/gpu/gpu_torch.py --backend nccl --device dlaunch_gpus
expect shared_nccl "ends (no hang) and names a failing rank, or runs" eval '[ $rc != 124 ] && { [ $rc = 0 ] || has "dlaunch: rank [0-9]+ .*exited with code"; }'
sleep 1
left=$(leftovers); expect shared_nccl_clean "no rank or agent left" test -z "$left"; [ -n "$left" ] && say "$left"

run test_collectives_nccl 180 "$BIN/test_collectives" "[nccl]" --success
expect test_collectives_nccl "NCCL backend test ran (not skipped) and passed" eval '[ $rc = 0 ] && ! has SKIPPED'

for op in all_reduce all_gather broadcast reduce_scatter all_to_all reduce; do
  run "bench_$op" 180 dlaunch -n "$NGPU" dlaunch bench --device cuda --op "$op" -b 8 -e 64M -f 8 -n 10 -w 3
  expect "bench_$op" "every element right on device buffers" eval '[ $rc = 0 ] && has "Out of bounds values : 0 OK" && has "CUDA device buffers through NCCL"'
done

SIZES=8,1024,65536,1048576,16777216,268435456
run bench_json 240 dlaunch -n "$NGPU" dlaunch bench --device cuda --op all_reduce -b 8 -e 256M -f 8 -n 20 -w 5 --json
run torch_anchor 240 dlaunch -n "$NGPU" python3 bench/collectives/torch_nccl_bench.py "$(python3 -c 'print(",".join(str(8*8**k) for k in range(9)))')" 20 5
if [ -s "$STEPS/bench_json.txt" ] && [ -s "$STEPS/torch_anchor.txt" ]; then
cp "$STEPS/bench_json.txt" "$STEPS/dlaunch_ar.json"
grep '^{' "$STEPS/torch_anchor.txt" > "$STEPS/torch_ar.jsonl"
python3 - "$STEPS/dlaunch_ar.json" "$STEPS/torch_ar.jsonl" <<'PY' | tee "$OUT/ratio.txt"
import json, sys
text = open(sys.argv[1]).read()
d = json.loads(text[text.index("{"):text.rindex("}") + 1])
t = {r["size"]: r["time_us"] for r in map(json.loads, open(sys.argv[2]))}
print("all_reduce float32 on %d rank(s), %s" % (d["ranks"], d["library"]))
print("%12s %14s %14s %14s %8s" % ("bytes", "dlaunch oop us", "dlaunch ip us", "torch ip us", "torch/dl"))
for r in d["rows"]:
    s = r["size"]; ip = r["in_place"]["time_us"]
    tt = t.get(s)
    print("%12d %14.2f %14.2f %14s %8s" % (s, r["out_of_place"]["time_us"], ip, "%.2f" % tt if tt else "-",
                                           "%.2f" % (tt / ip) if tt else "-"))
PY
fi

run doctor 180 dlaunch doctor -H localhost --program "$(command -v python3)"
expect doctor "doctor passes on the GPU host and runs its NCCL stage" eval '[ $rc = 0 ] && has "nccl: .*(busbw|GB/s|every element)"'
# The doctor's GPU list is the launch's (machine/gpus.h): every GPU of
# /proc/driver/nvidia/gpus by its PCI device, with nvidia-smi's driver version joined to each.
run doctor_gpus 120 dlaunch doctor -H localhost --quick --json
expect doctor_gpus "the doctor lists the $NGPU GPUs a launch binds, each with its PCI device and nvidia-smi's driver" \
  eval '[ "$(count "\"pci_bus_id\": \"[0-9a-f]{4}:")" = "$NGPU" ] && [ "$(count "\"driver\": \"[0-9]")" = "$NGPU" ]'

# torchrun's spellings on a GPU host: one rank per GPU the agent detects.
run nproc_gpu 180 dlaunch --nproc_per_node gpu --report-bindings python3 tests/gpu/gpu_torch.py
expect nproc_gpu "--nproc_per_node gpu starts one rank per GPU" eval '[ $rc = 0 ] && [ $(count " OK$") = $NGPU ]'
run nproc_auto 180 dlaunch --nproc_per_node auto python3 tests/gpu/gpu_torch.py
expect nproc_auto "--nproc_per_node auto is the GPUs here" eval '[ $rc = 0 ] && [ $(count " OK$") = $NGPU ]'
# The per-node (torchrun --nnodes 2) shape: two "nodes" on this host, each
# with --nproc_per_node gpu, each binding this host's GPUs (gloo: they share).
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
pn() { DLAUNCH_TOKEN=gpu-check-token-0123456789abcdef dlaunch --nnodes 2 --node_rank "$1" --master_addr 127.0.0.1 \
         --master_port "$PORT" --nproc_per_node gpu python3 tests/gpu/gpu_torch.py --backend gloo; }
run per_node_gpu 180 bash -c "$(declare -f pn); PORT=$PORT; pn 1 & pn 0; r0=\$?; wait \$!; r1=\$?; echo nodes \$r0 \$r1; [ \$r0 = 0 ] && [ \$r1 = 0 ]"
expect per_node_gpu "2 nodes x --nproc_per_node gpu meet and run" eval '[ $rc = 0 ] && [ $(count " OK$") = $((NGPU * 2)) ]'
# CPUs by the GPU's NUMA node (the driver's numa_node; -1 on a VM without NUMA).
say "GPU NUMA node: $(cat /sys/bus/pci/devices/*/numa_node 2>/dev/null | sort | uniq -c | tr '\n' ' ')"
run numa_bind 180 dlaunch -n "$NGPU" --bind-to numa --report-bindings python3 tests/gpu/gpu_torch.py
expect numa_bind "--bind-to numa on a real GPU host: runs, or refuses saying why" \
  eval '{ [ $rc = 0 ] && [ $(count " OK$") = $NGPU ]; } || { [ $rc = 2 ] && has "numa"; }'

# A hang on GPUs: the report names the odd rank out, then the job ends (124).
run hang_report 120 dlaunch -n 2 --oversubscribe-gpus --timeout 25 python3 tests/gpu/gpu_hang.py
expect hang_report "--timeout groups the stacks: the sleeper alone, the other in all_reduce" \
  eval '[ $rc = 124 ] && has "rank 1 on [^:]*: .*load_batch" && has "rank 0 on [^:]*: .*all_reduce"'

# A restart on a GPU node: each attempt takes 60% (one rank) or 2 x 40%
# (two ranks sharing the GPU) of its memory, so the second attempt only runs
# if every process of the first is gone and its memory freed.
run restart_nccl 180 dlaunch -n 1 --max-restarts 2 python3 tests/gpu/gpu_restart.py --backend nccl --fraction 0.6
expect restart_nccl "rank 0 fails once, the restart gets the GPU's memory back and succeeds" \
  eval '[ $rc = 0 ] && has "attempt=0 failing on purpose" && has "RESTART rank=0 attempt=1 held_gb=.* OK"'
run restart_shared 180 dlaunch -n 2 --oversubscribe-gpus --max-restarts 2 python3 tests/gpu/gpu_restart.py --backend gloo --fraction 0.4
expect restart_shared "two ranks on one GPU, restarted: both get their memory back" \
  eval '[ $rc = 0 ] && [ $(count "attempt=1 held_gb=.* OK") = 2 ]'

# NCCL not on the loader's path (the machine's /usr/local/cuda has none): a
# clear refusal naming the variable; then the same library by its file.
nccl_file=$(IFS=:; for d in $libs; do [ -e "$d/libnccl.so.2" ] && echo "$d/libnccl.so.2" && break; done)
run nccl_missing 60 env LD_LIBRARY_PATH="$LIB" dlaunch -n 1 dlaunch bench --device cuda -e 1M
expect nccl_missing "no libnccl: exit 2 naming DLAUNCH_NCCL_LIBRARY, or found elsewhere" \
  eval '{ [ $rc = 2 ] && has "libnccl.so.2 cannot be loaded.*DLAUNCH_NCCL_LIBRARY"; } || { [ $rc = 0 ] && has "0 OK"; }'
run nccl_by_file 60 env LD_LIBRARY_PATH="$LIB" DLAUNCH_NCCL_LIBRARY="$nccl_file" dlaunch -n 1 dlaunch bench --device cuda -e 1M
expect nccl_by_file "DLAUNCH_NCCL_LIBRARY=$nccl_file is used" eval '[ $rc = 0 ] && has "through NCCL .*\($nccl_file\)"'
# Two ranks of dlaunch's NCCL communicator on one GPU: NCCL refuses; the job
# ends naming NCCL's error and the rank.
run bench_shared_gpu 90 dlaunch -n 2 --oversubscribe-gpus dlaunch bench --device cuda -e 1M
expect bench_shared_gpu "ends with NCCL's refusal, no hang" eval '[ $rc != 124 ] && [ $rc != 0 ] && has "nccl: ncclCommInitRank failed on rank [01]"'

sleep 1
left=$(leftovers); expect clean "no rank or agent left at the end" test -z "$left"; [ -n "$left" ] && say "$left"
say "=== [$(el)] done: ${#failed[@]} failed${failed:+: ${failed[*]}}"
[ ${#failed[@]} = 0 ]
