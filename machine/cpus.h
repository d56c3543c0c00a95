#pragma once
// Which CPUs this host has: packages, cores and their hardware threads, NUMA
// nodes, limited to the CPUs a process may use (its affinity mask, so a
// cgroup or a taskset around it is respected).
//
// The agent reports them in its hello; the launcher plans every rank's CPU
// list from them (hostfiles::plan_cpus, the policy, next to placement) and
// reads them itself for --dry-run and --map-by ppr:N:socket; the agent
// applies the plan between fork and exec.
#include <cstdint>
#include <string>
#include <vector>

#include "hostfiles/binding.h"
#include "machine/proc_file.h"

namespace dl::machine {

using hostfiles::CpuTopology;

// Reads /sys (or `sysfs_root`, for tests) for the CPUs in `allowed`.
CpuTopology read_cpu_topology(const std::vector<int>& allowed, const std::string& sysfs_root = "/sys");
// The calling process's affinity mask as a sorted CPU list.
std::vector<int> own_allowed_cpus();

// A thread's time on a CPU and its time runnable but waiting for one, in
// all (ns), from the kernel's scheduler statistics at `schedstat`
// (/proc/thread-self/schedstat; /proc/PID/schedstat for a process's main
// thread, /proc/self/task/TID/schedstat); -1 each where there are none.
// The kernel adds a wait when it ends (the thread gets its CPU): a thread
// that has not run at all since it became runnable shows none of it yet.
// They tell a starved host (more busy processes than CPUs) from a hung program.
struct SchedTimes {
  int64_t on_cpu_ns = -1, waiting_ns = -1;
};
SchedTimes sched_times(const std::string& schedstat);
// The same, from a schedstat file kept open: one pread(2) each time.
SchedTimes sched_times(const ProcFile& schedstat);
// The wait alone (sched_times(schedstat).waiting_ns).
int64_t runnable_wait_ns(const std::string& schedstat);
// A thread's state letter from its `stat` file (/proc/self/task/TID/stat):
// 'R' running or runnable, 'S' sleeping, 'D' in the kernel, ...; 0 when unread.
char task_state(const std::string& stat);
char task_state(const ProcFile& stat);

}  // namespace dl::machine
