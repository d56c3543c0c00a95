#pragma once
// The local agent, forked from dlaunch before its event loop and threads
// exist, waiting there for its command line: started, it runs the agent's
// main in that process, with no exec of dlaunch-agent (ld.so, relocations,
// page faults and static set-up of a second program: 0.5-1 ms on the path
// of every local job's start). docs/design.md, "The local agent is a real
// process, forked from dlaunch before its event loop". Remote hosts, and a local agent started again
// (--max-restarts after it was lost), still run dlaunch-agent.
#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "remote/agent_starter.h"

namespace dl::remote {

// Why a forked agent ended before it connected, and what to do: its own
// words are above; DLAUNCH_LOCAL_AGENT=exec runs dlaunch-agent instead.
std::string forked_agent_exit_error(int wait_status);

// The agent's main as dlaunch-agent runs it (agent/agent_main.h), linked into
// this program; dlaunch's main sets it, with its own argv, whose memory the
// forked agent rewrites to "dlaunch-agent ARGS" (what ps and pgrep -f show;
// cut to the length dlaunch's command line had). Without it no agent is
// forked early.
using AgentMain = int (*)(int argc, char** argv);
// What the agent can set up while it waits for its command line, for a
// launch of about `ranks` ranks (agent_get_ready, agent/agent_main.h).
using AgentGetReady = void (*)(int ranks);
void set_in_process_agent(AgentMain main, char** own_argv = nullptr, AgentGetReady get_ready = nullptr);

// What dlaunch knows of the local agent's launch when it forks it.
struct AgentHint {
  int ranks = 0;  // the local node's ranks
};

class EarlyAgent {
 public:
  // Forks one now, or returns null: no agent main was set, the environment
  // says DLAUNCH_LOCAL_AGENT=exec, this process already runs a second thread
  // (its child could inherit a lock held by it), or the fork failed. Flushes
  // stdio first, so that nothing buffered is written twice.
  // While it waits it gets ready for `hint`'s launch (its spawn threads).
  static std::unique_ptr<EarlyAgent> fork_now(const AgentHint& hint = {});
  // One never started is told to leave (its command pipe's EOF) and reaped.
  ~EarlyAgent();
  EarlyAgent(const EarlyAgent&) = delete;
  EarlyAgent& operator=(const EarlyAgent&) = delete;

  // Starts it as `dlaunch-agent ARGS`, `token` the first line of its stdin,
  // as start_local_agent would have; ARGS must name its control socket
  // (--control-fd kAgentControlFd), whose other end goes to *control_fd (the
  // caller's to close). Once only. A child that died meanwhile is seen as an
  // agent that exited before it connected (no SIGPIPE here).
  LocalAgent start(const std::vector<std::string>& args, const std::string& token, int* control_fd);
  pid_t pid() const { return pid_; }

 private:
  EarlyAgent() = default;
  pid_t pid_ = -1;
  int go_ = -1;       // the command line is written here
  int stdin_ = -1;    // its stdin's write end (the token, then EOF when dlaunch is gone)
  int control_ = -1;  // the launcher's end of its control socketpair
  bool started_ = false;
};

}  // namespace dl::remote
