#pragma once
// CPU and GPU binding policy: which CPUs and GPUs each local rank of a host
// gets. Planned by the launcher from what each agent reported (its cores,
// NUMA nodes and GPU ids), next to placement because it is placement within
// a host; applied by the agent (machine/cpus.h and machine/gpus.h read the
// host, agent/rank_process.cc pins the rank between fork and exec). Pure.
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace dl::hostfiles {

struct CpuTopology {
  // Physical cores in (package, core id) order, each the usable hardware
  // threads (logical CPU numbers) of that core.
  std::vector<std::vector<int>> cores;
  // NUMA nodes, each its usable CPUs; empty nodes are left out.
  std::vector<std::vector<int>> numa;
  // The kernel's node id of each entry of `numa` (parallel; -1 unknown), the
  // ids GPUs are reported by; empty when unknown.
  std::vector<int> numa_ids = {};
  // Sockets (physical packages) in id order, each its usable CPUs; empty
  // when unknown.
  std::vector<std::vector<int>> packages = {};
};

// --bind-to and --gpu-bind, typed once where the command line is parsed.
enum class CpuBind { kNone, kCore, kHwthread, kSocket, kNuma };
enum class GpuBind { kVisible, kIsolate, kNone };
// The option's words and what each means, in the order the help names them:
// the launcher parses and completes --bind-to and --gpu-bind from these.
const std::vector<std::pair<std::string, CpuBind>>& cpu_bind_words();
const std::vector<std::pair<std::string, GpuBind>>& gpu_bind_words();
// The option value that names each ("core", "isolate"), for messages.
const char* to_string(CpuBind policy);
const char* to_string(GpuBind mode);

// "0,1,GPU-ab" <-> {"0","1","GPU-ab"}: the form of device lists in the
// visibility variables and DLAUNCH_GPUS (empty entries are dropped).
std::vector<std::string> split_id_list(const std::string& s);
std::string join_id_list(const std::vector<std::string>& ids);

// "0-3,8,10-11" <-> {0,1,2,3,8,10,11}. parse throws std::invalid_argument.
std::vector<int> parse_cpu_list(const std::string& text);
std::string format_cpu_list(const std::vector<int>& cpus);

// Every local rank's CPUs under `policy`:
//   none: empty lists (no binding);
//   core: local rank L gets cores [L*c, L*c + c) with all their hardware
//           threads (c = cpus_per_rank); fails when the host has fewer than
//           local_world * c cores;
//   hwthread: local rank L gets hardware threads [L*c, L*c + c), counted
//           core by core (both threads of core 0, then core 1's, ...);
//           fails when the host has fewer than local_world * c threads;
//   socket: the local ranks are spread over the sockets in blocks (ranks
//           0..k-1 on socket 0, ...), each rank all its socket's CPUs;
//   numa: each local rank gets a whole NUMA node: the node of its GPU,
//           when `gpu_numa` (by local rank, the node id of the rank's first
//           GPU, -1 unknown) names a node of topo.numa_ids that has usable
//           CPUs, as the PCI device sits on one socket and memory traffic to
//           it should not cross to the other; else the ranks are spread over
//           the nodes in blocks (ranks 0..k-1 on node 0, ...), the best guess
//           without the GPU's node, since neighbouring ranks get neighbouring GPUs.
// Throws std::runtime_error with a message naming `host` and the fix.
std::vector<std::vector<int>> plan_cpus(CpuBind policy, const CpuTopology& topo, int local_world,
                                        int cpus_per_rank, const std::string& host,
                                        const std::vector<int>& gpu_numa = {});

// ---- GPUs ------------------------------------------------------------------
// Each vendor's visibility variable and its order are machine/gpu_vendor.h's;
// here a host's GPUs are ids, whoever made them.

// Every rank's devices as indices into what it sees ("0,1"): the variable
// value alone cannot say which of the visible devices are the rank's own.
inline constexpr const char* kDlaunchGpus = "DLAUNCH_GPUS";

// One rank's GPUs.
struct GpuAssignment {
  std::string visible;                // the visibility variable's value
  std::string devices;                // DLAUNCH_GPUS: its own devices as indices of `visible`
  std::vector<std::string> physical;  // its own devices as the host names them
  std::vector<int> positions;         // the same as positions in the host's list (`gpus` of plan_gpus)
};

// Every local rank's GPUs on one host under `mode` (--gpu-bind):
//   visible: every rank sees all of `gpus` in the host's order and owns
//              indices L*K .. L*K+K-1 of them (K = per_rank), so `cuda:LOCAL_RANK`
//              names its device (as under torchrun);
//   isolate: every rank sees only its own K GPUs (`cuda:0` is its device);
//   none:    nothing (the caller leaves the variables alone).
// A host without GPUs gets nothing in any mode. More local_world * K than
// the host has GPUs, under "isolate", throws std::runtime_error naming
// `host`, the counts and the fixes, unless `oversubscribe`; under "visible"
// (which isolates nothing: a CPU job such as gloo runs as under torchrun)
// and with `oversubscribe` the ranks share them round-robin, and no rank
// gets more GPUs than the host has.
std::vector<GpuAssignment> plan_gpus(GpuBind mode, const std::vector<std::string>& gpus, int local_world,
                                     int per_rank, bool oversubscribe, const std::string& host);

// The warning line for "visible" ranks that share a host's GPUs without
// `oversubscribe`, or "" when they fit. `flag` is how the user set the
// ranks per host (--nproc-per-node, --npernode, -n), named in the fix.
std::string gpu_sharing_warning(GpuBind mode, int gpus, int local_world, int per_rank, bool oversubscribe,
                                const std::string& host, const std::string& flag);

}  // namespace dl::hostfiles
