#pragma once
// CPU binding (--bind-to): which CPUs each local rank may run on.
//
// The agent reports its host's usable cores and NUMA nodes in its hello
// (read from sysfs, limited to the agent's own affinity mask, so a cgroup or
// a taskset around the agent is respected); the launcher plans every rank's
// CPU list with plan_cpus; the agent applies it between fork and exec.
#include <string>
#include <vector>

namespace dl::agent {

struct CpuTopology {
  // Physical cores in (package, core id) order, each the usable hardware
  // threads (logical CPU numbers) of that core.
  std::vector<std::vector<int>> cores;
  // NUMA nodes, each its usable CPUs; empty nodes are left out.
  std::vector<std::vector<int>> numa;
};

// Reads /sys (or `sysfs_root`, for tests) for the CPUs in `allowed`.
CpuTopology read_cpu_topology(const std::vector<int>& allowed, const std::string& sysfs_root = "/sys");
// The calling process's affinity mask as a sorted CPU list.
std::vector<int> own_allowed_cpus();

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

}  // namespace dl::agent
