#pragma once
// CPU and GPU binding policy: which CPUs and GPUs each local rank of a host
// gets. Planned by the launcher from what each agent reported (its cores,
// NUMA nodes and GPU ids), next to placement because it is placement within
// a host; applied by the agent (agent/cpu_binding.h reads the host,
// agent/rank_process.cc pins the rank between fork and exec). Pure.
#include <optional>
#include <string>
#include <vector>

namespace dl::hostfiles {

struct CpuTopology {
  // Physical cores in (package, core id) order, each the usable hardware
  // threads (logical CPU numbers) of that core.
  std::vector<std::vector<int>> cores;
  // NUMA nodes, each its usable CPUs; empty nodes are left out.
  std::vector<std::vector<int>> numa;
};

// "0-3,8,10-11" <-> {0,1,2,3,8,10,11}. parse throws std::invalid_argument.
std::vector<int> parse_cpu_list(const std::string& text);
std::string format_cpu_list(const std::vector<int>& cpus);

// Every local rank's CPUs under `policy`:
//   "none": empty lists (no binding);
//   "core": local rank L gets cores [L*c, L*c + c) with all their hardware
//           threads (c = cpus_per_rank); fails when the host has fewer than
//           local_world * c cores;
//   "numa": local ranks are spread over the NUMA nodes in blocks (ranks
//           0..k-1 on node 0, ...), so neighbouring local ranks, which get
//           neighbouring GPUs, share a node; each gets the whole node.
// Throws std::runtime_error with a message naming `host` and the fix.
std::vector<std::vector<int>> plan_cpus(const std::string& policy, const CpuTopology& topo, int local_world,
                                        int cpus_per_rank, const std::string& host);

// CUDA_VISIBLE_DEVICES for one rank: `per_rank` consecutive GPUs starting at
// local_rank * per_rank, wrapping round the host's GPUs (round-robin when
// ranks outnumber GPUs). nullopt when the host has no GPUs.
std::optional<std::string> bind_gpus(const std::vector<std::string>& gpus, int local_rank, int per_rank);

}  // namespace dl::hostfiles
