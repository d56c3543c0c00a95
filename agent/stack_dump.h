#pragma once
// The agent's side of "where is everything stuck" (docs/hangs.md): a stack
// of each of this host's ranks, on the launcher's dump_stacks request.
//
// Python ranks dump their own threads: each rank's PYTHONPATH starts with the
// directory of dlaunch's sitecustomize.py (installed once, agent/python_dir.h)
// that registers the interpreter's fault handler (faulthandler.register, all
// threads) on SIGQUIT, writing to a file of the job's PythonDir, and then runs
// the sitecustomize it shadows. A rank is taken for Python only while it holds that file open
// (seen in /proc/PID/fd), so SIGQUIT never reaches a program that would die
// of it. Every other rank is read from outside with eu-stack or, failing
// that, gdb -batch, found in the agent's PATH; a host with neither says so.
//
// Every collection is bounded: what has not answered by the deadline is
// reported as such, its tool killed, and the rank sent SIGCONT in case a
// killed tracer left it stopped.
//
// Threading: everything on the io_context's thread.
#include <sys/types.h>

#include <boost/asio.hpp>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "agent/python_dir.h"
#include "agent/rank_contributor.h"
#include "agent/stack_tools.h"
#include "control/messages.h"

namespace dl::agent {

// What the stack collection needs to know of a rank.
struct StackTarget {
  int rank = 0;
  pid_t pid = -1;
  bool running = false;  // false: it has ended; reported without a stack
};

class StackDumper final : public RankContributor {
 public:
  // Dumps go to `dir` (made by the hook of the first Python rank). Without an
  // installed hook, makes `dir` and writes the hook there; without a
  // writable temp dir Python ranks are then read as native ones.
  StackDumper(boost::asio::io_context& io, PythonDir& dir);
  StackDumper(const StackDumper&) = delete;
  StackDumper& operator=(const StackDumper&) = delete;
  ~StackDumper() override;

  // A contributor (agent/rank_contributor.h): puts the hook's directory
  // first in the rank's PYTHONPATH (the one it has so far) and names the
  // job's directory (PythonDir::kEnvVar); nothing without a directory.
  TaskEnv task_env(int rank, const RankEnvSoFar& so_far) override;
  // Collects a stack of each target within `timeout` and calls `done` once
  // with one entry per target, in order. One collection at a time: a second
  // request while one runs waits for it.
  void collect(std::vector<StackTarget> targets, std::chrono::milliseconds timeout,
               std::function<void(std::vector<control::msg::RankStack>)> done);
  // A child that is no rank was reaped (RankSupervisor's hook): if it was
  // one of our tools, it is not killed later.
  void child_reaped(pid_t pid);
  // Kills running tools (idempotent); the PythonDir's owner removes the dumps.
  void remove();

 private:
  struct Collection;
  struct ToolRun;
  void start_next();
  void start_python(Collection& c, size_t i);
  void poll_python(Collection& c, size_t i);
  void start_tool(Collection& c, size_t i);
  void read_tool(Collection& c, ToolRun& t);
  void finish_entry(Collection& c, size_t i);
  void finish(Collection& c);
  bool holds_dump_file(pid_t pid) const;
  std::string dump_file(pid_t pid) const;

  boost::asio::io_context& io_;
  std::string dir_;       // the job's PythonDir: the dumps; "" = no Python hook
  std::string hook_dir_;  // where sitecustomize.py is
  std::vector<std::shared_ptr<Collection>> queue_;  // front() runs; handlers hold theirs
  std::map<pid_t, std::shared_ptr<ToolRun>> tools_; // tool processes not yet reaped
};

}  // namespace dl::agent
