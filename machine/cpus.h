#pragma once
// Which CPUs this host has: packages, cores and their hardware threads, NUMA
// nodes, limited to the CPUs a process may use (its affinity mask, so a
// cgroup or a taskset around it is respected).
//
// The agent reports them in its hello; the launcher plans every rank's CPU
// list from them (hostfiles::plan_cpus, the policy, next to placement) and
// reads them itself for --dry-run and --map-by ppr:N:socket; the agent
// applies the plan between fork and exec.
#include <string>
#include <vector>

#include "hostfiles/binding.h"

namespace dl::machine {

using hostfiles::CpuTopology;

// Reads /sys (or `sysfs_root`, for tests) for the CPUs in `allowed`.
CpuTopology read_cpu_topology(const std::vector<int>& allowed, const std::string& sysfs_root = "/sys");
// The calling process's affinity mask as a sorted CPU list.
std::vector<int> own_allowed_cpus();

}  // namespace dl::machine
