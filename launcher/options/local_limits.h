#pragma once
// What a job's ranks on this host take from the kernel's limits, checked
// before anything starts, so that a job too large for them is refused with
// exit 2 instead of failing half started: descriptors per process
// (RLIMIT_NOFILE: the agent holds some for each of its ranks, the launcher
// two per rank with output files), processes per user (RLIMIT_NPROC, which
// counts threads: each rank is one, besides what the user already runs) and
// threads on the system (kernel.threads-max).
#include <sys/resource.h>

#include <string>

namespace dl::launcher {

struct LocalJob {
  long local_ranks = 0;       // the ranks this host runs
  long world = 0;             // the job's ranks
  bool output_files = false;  // --output-filename or --log-dir: the launcher holds two files per rank
};

struct HostLimits {
  rlim_t nofile = RLIM_INFINITY;  // soft RLIMIT_NOFILE
  rlim_t nproc = RLIM_INFINITY;   // soft RLIMIT_NPROC; infinite for root, which it does not bind
  long user_tasks = 0;            // this user's processes and threads running now
  long threads_max = 0;           // kernel.threads-max; 0 = unknown
  long system_tasks = 0;          // every user's processes and threads running now
};

// Why `job` does not fit `limits`, naming the limit, the number needed and
// what to do; "" when it fits. Pure.
std::string limits_problem(const LocalJob& job, const HostLimits& limits);

// Reads this host's limits (counting this user's tasks in /proc only when
// RLIMIT_NPROC could bind) and throws UsageError with limits_problem's
// message when `job` does not fit them.
void check_local_limits(const LocalJob& job);

}  // namespace dl::launcher
