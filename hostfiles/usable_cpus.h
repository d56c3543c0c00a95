#pragma once
// The CPUs this process may use: its affinity mask (taskset, a cpuset),
// lowered by the CPU quota of its cgroup (cgroup v2 cpu.max, on its own
// cgroup and on each one above it: a container's limit is often set on a
// parent), the quota rounded up, at least 1. With no hostfile, -H or
// scheduler allocation these are localhost's slots (docs/hostfiles.md):
// the room MPI_Comm_spawn has beside the job's ranks, as mpirun counts it.
#include <string>
#include <string_view>

namespace dl::hostfiles {

// The CPUs one cpu.max line allows: "150000 100000" (a quota of 1.5 CPUs)
// -> 2, "50000 100000" -> 1; 0 for "max ..." (no quota) and for text that is
// not "QUOTA PERIOD" in positive integers.
int cpus_of_cpu_max(std::string_view text);

// The CPUs a process with `affinity` CPUs in its mask may use when its
// cgroup is the one `proc_cgroup` names (the text of /proc/self/cgroup; its
// "0::/path" line) under cgroup v2 mounted at `cgroup_root`: the smallest
// quota of that cgroup and those above it, never more than `affinity`, at
// least 1. Files that are missing or unreadable (cgroup v1, no cpu
// controller) limit nothing.
int usable_cpus(int affinity, std::string_view proc_cgroup, const std::string& cgroup_root);

// The same for this process: sched_getaffinity, /proc/self/cgroup and /sys/fs/cgroup.
int usable_cpus();

}  // namespace dl::hostfiles
