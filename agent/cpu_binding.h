#pragma once
// CPU binding (--bind-to): which CPUs each local rank may run on.
//
// The agent reports its host's usable cores and NUMA nodes in its hello
// (read from sysfs, limited to the agent's own affinity mask, so a cgroup or
// a taskset around the agent is respected); the launcher plans every rank's
// CPU list with hostfiles::plan_cpus; the agent applies it between fork and exec.
// This file is the agent's half, reading the host; the policy is
// hostfiles/binding.h, next to placement.
#include <string>
#include <vector>

#include "hostfiles/binding.h"

namespace dl::agent {

using hostfiles::CpuTopology;

// Reads /sys (or `sysfs_root`, for tests) for the CPUs in `allowed`.
CpuTopology read_cpu_topology(const std::vector<int>& allowed, const std::string& sysfs_root = "/sys");
// The calling process's affinity mask as a sorted CPU list.
std::vector<int> own_allowed_cpus();

}  // namespace dl::agent
