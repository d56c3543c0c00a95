#include "launcher/options/local_limits.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "agent/rank_process.h"
#include "errors/error.h"

namespace dl::launcher {
namespace {

// The launcher's own descriptors besides its output files: agent
// connections, the store, the event loop.
constexpr long kLauncherOwnFds = 64;
// Threads of the launcher and the local agent (event loops, spawn helpers,
// the PMIx server): room kept beside one task per rank.
constexpr long kJobOwnTasks = 32;

std::string limit_text(rlim_t v) { return v == RLIM_INFINITY ? "unlimited" : std::to_string(v); }

std::string fd_problem(const std::string& who, long need, const std::string& why, rlim_t have) {
  if (have == RLIM_INFINITY || need <= static_cast<long>(have)) return "";
  return who + " needs " + std::to_string(need) + " file descriptors (" + why + "), and RLIMIT_NOFILE lets a process "
         "of this user open " + limit_text(have) + "; raise the hard limit (ulimit -Hn, limits.conf nofile) or run " +
         "fewer ranks on this host";
}

// A small /proc file's text ("" when it cannot be read).
std::string read_small(const char* path) {
  char buf[4096];
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  const ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
}

// The number after `key` in a /proc/PID/status text, or -1.
long status_field(const std::string& status, const char* key) {
  const size_t at = status.find(key);
  return at == std::string::npos ? -1 : std::strtol(status.c_str() + at + std::strlen(key), nullptr, 10);
}

// The tasks (threads) whose real uid is `uid`, as RLIMIT_NPROC counts them.
long count_user_tasks(uid_t uid) {
  DIR* proc = ::opendir("/proc");
  if (!proc) return 0;
  long tasks = 0;
  while (const dirent* e = ::readdir(proc)) {
    if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
    const std::string status = read_small(("/proc/" + std::string(e->d_name) + "/status").c_str());
    if (status_field(status, "\nUid:") == static_cast<long>(uid))
      tasks += std::max(1L, status_field(status, "\nThreads:"));
  }
  ::closedir(proc);
  return tasks;
}

}  // namespace

std::string limits_problem(const LocalJob& job, const HostLimits& limits) {
  const std::string ranks = std::to_string(job.local_ranks) + " ranks on this host";
  const long agent_fds = job.local_ranks * agent::kFdsPerRunningRank + agent::kAgentOwnFds;
  const std::string agent_why = std::to_string(agent::kFdsPerRunningRank) + " per rank and " +
                                std::to_string(agent::kAgentOwnFds) + " of its own";
  if (auto p = fd_problem("the agent of the " + ranks, agent_fds, agent_why, limits.nofile); !p.empty()) return p;
  const std::string launcher_why = "2 per rank and " + std::to_string(kLauncherOwnFds) + " of its own";
  if (auto p = fd_problem("the launcher, writing the output files of " + std::to_string(job.world) + " ranks",
                          2 * job.world + kLauncherOwnFds, launcher_why, limits.nofile);
      job.output_files && !p.empty())
    return p;
  const long tasks = job.local_ranks + kJobOwnTasks;
  if (limits.nproc != RLIM_INFINITY && limits.user_tasks + tasks > static_cast<long>(limits.nproc))
    return "the " + ranks + " need " + std::to_string(tasks) + " processes (one per rank and " +
           std::to_string(kJobOwnTasks) + " for dlaunch), this user runs " + std::to_string(limits.user_tasks) +
           " already, and RLIMIT_NPROC allows " + limit_text(limits.nproc) +
           "; raise it (ulimit -u, limits.conf nproc) or run fewer ranks on this host";
  if (limits.threads_max > 0 && limits.system_tasks + tasks > limits.threads_max)
    return "the " + ranks + " need " + std::to_string(tasks) + " processes, " + std::to_string(limits.system_tasks) +
           " run on this host already, and kernel.threads-max allows " + std::to_string(limits.threads_max) +
           "; run fewer ranks on this host";
  return "";
}

void check_local_limits(const LocalJob& job) {
  HostLimits l;
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) == 0) l.nofile = rl.rlim_cur;
  // /proc/loadavg's 4th field is "running/total" tasks of the whole system.
  const std::string load = read_small("/proc/loadavg");
  if (const size_t slash = load.find('/'); slash != std::string::npos)
    l.system_tasks = std::strtol(load.c_str() + slash + 1, nullptr, 10);
  l.threads_max = std::strtol(read_small("/proc/sys/kernel/threads-max").c_str(), nullptr, 10);
  // Root is not bound by RLIMIT_NPROC. Counting this user's tasks reads every
  // /proc/PID/status: done only when all of the system's tasks could be too many.
  const long tasks = job.local_ranks + kJobOwnTasks;
  if (::getuid() != 0 && ::getrlimit(RLIMIT_NPROC, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
      l.system_tasks + tasks > static_cast<long>(rl.rlim_cur)) {
    l.nproc = rl.rlim_cur;
    l.user_tasks = count_user_tasks(::getuid());
  }
  if (auto problem = limits_problem(job, l); !problem.empty()) throw UsageError(problem);
}

}  // namespace dl::launcher
