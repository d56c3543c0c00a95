#pragma once
// Starting agents: the local host's by fork/exec, remote hosts' over ssh.
// Both hand the token to the agent on its stdin, never on a command line.
#include <sys/types.h>

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "control/agent_args.h"

namespace dl::remote {

// Path of dlaunch-agent: DIR/bin/dlaunch-agent under `prefix` when given;
// else beside this dlaunch binary when it is there; else "dlaunch-agent"
// (found through PATH on the host).
std::string agent_path(const std::string& prefix, bool for_remote);

struct LocalAgent {
  pid_t pid = -1;
  int stdin_fd = -1;  // write end; closing it tells the agent we are gone
};

// Forks and execs the agent in its own process group (a terminal's Ctrl-C
// reaches only dlaunch, which forwards it), dying with dlaunch
// (PR_SET_PDEATHSIG), and writes the token line to its stdin. That write
// never raises SIGPIPE, even when the agent is already gone.
// Throws RemoteError when `path` cannot be executed, with the message of
// local_agent_exec_error (the child is reaped, nothing is left).
// `stderr_fd` >= 0 becomes the child's stderr, `stdout_fd` >= 0 its stdout
// (the caller keeps and closes its copies); -1 leaves dlaunch's. The ssh
// starter runs `ssh` through this, the slurm starter srun.
// `control_fd` >= 0 is inherited by the child as fd kAgentControlFd (the
// caller keeps and closes its copy).
LocalAgent start_local_agent(const std::string& path, const std::vector<std::string>& args, const std::string& token,
                             int stderr_fd = -1, int stdout_fd = -1, int control_fd = -1);
// Writes `bytes` to a pipe whose reader may be gone: false (EPIPE) instead of
// SIGPIPE, on this thread and every other.
bool write_without_sigpipe(int fd, const std::string& bytes);
// Where a local agent finds its end of the control socketpair (--control-fd).
constexpr int kAgentControlFd = 3;

// start_local_agent without the wait for the exec: returns as soon as the
// child is forked, the token already in its stdin pipe (written before the
// fork, so no SIGPIPE is possible). `*exec_status_fd` (close-on-exec, owned
// by the caller) turns readable when the exec is done: EOF if it succeeded,
// else exec's errno (read_exec_status). The caller must not block on it: a
// launcher's loop that waited for each child's exec stalled ~80 ms per ssh
// child under load (10 s over 128 hosts, issue 16), answering no agent.
LocalAgent spawn_local_agent(const std::string& path, const std::vector<std::string>& args, const std::string& token,
                             int stderr_fd, int stdout_fd, int* exec_status_fd, int control_fd = -1);

// Reads `exec_status_fd` of spawn_local_agent without blocking: the exec's
// errno if it failed, 0 if it succeeded, -1 if the child has not exec'd yet.
int read_exec_status(int exec_status_fd);

// Why the local agent `path` (as agent_path returned it) could not be
// executed (errno `err` of exec): the path tried, where dlaunch looked for it
// (beside its own binary, then PATH) and what to do.
std::string local_agent_exec_error(const std::string& path, int err);

// Why the local agent exited before it connected, from its wait status
// (waitpid's), naming `path`; a 127 reads as local_agent_exec_error(ENOENT).
std::string local_agent_exit_error(const std::string& path, int wait_status);

// A pidfd for the agent (readable once it exits), or -1 where the kernel has
// none (before Linux 5.3). The caller owns it.
int open_agent_pidfd(const LocalAgent& a);

// The agent's wait status once it has exited, without reaping it (so
// reap_local_agent still finds it); nullopt while it runs.
std::optional<int> peek_agent_exit(const LocalAgent& a);

// Waits up to `ms` for the agent to exit, then SIGKILLs and reaps it.
void reap_local_agent(LocalAgent& a, int ms);

// Whether to draw the `agents 12/64 connected` line: only on a terminal,
// and only when there are more than a handful of hosts to wait for.
inline bool show_start_progress(int hosts, bool stderr_is_tty) { return stderr_is_tty && hosts > 4; }

// ---- one interface for starting a job's agents ------------------------------

// What it takes to start node `node`'s agent.
struct AgentStartSpec {
  int node = 0;
  std::string host, user;  // as the hostfile names it; user "" = the default
  uint16_t port = 0;       // ssh port, 0 = the default
  bool local = false;      // this machine: fork/exec, no ssh
  control::AgentArgs args; // --connect is filled in by the starter for remote hosts
  std::string control_port;   // the launcher's control port
  std::string control_addr;   // --control-addr, "" = the address the ssh session left from
  std::string token;          // the job token: written to the agent's stdin, never on its command line
};

// Starts agents and watches them until they connect. The Job talks to this
// interface only, so its tests can put a fake in its place
// (tests/launcher/job_test.cc) and other start methods can be added beside
// the local-and-ssh one. Events are posted to the io_context's thread.
class AgentStarter {
 public:
  struct Events {
    // The agent could not be started, or exited before it connected.
    std::function<void(int node, std::string why)> failed;
    // Remote: ssh reached the host; `reach` is its address as seen from
    // here, `back` the address it reaches this launcher at.
    std::function<void(int node, std::string reach, std::string back)> reached;
    // The agent's own stderr after it connected (remote agents).
    std::function<void(int node, std::string text)> agent_stderr;
    // A line for the user while agents are awaited (srun waiting for
    // resources); may be empty (then nothing is said).
    std::function<void(std::string text)> notice;
    // A local agent's control connection: the launcher's end of a socketpair
    // whose other end the agent inherited (--control-fd), authenticated by
    // construction; called during start(), the receiver owns `fd`. Unset: the
    // local agent connects to the control port and runs the token handshake
    // as a remote one does.
    std::function<void(int node, int fd)> local_control;
  };
  virtual ~AgentStarter() = default;
  // May be called again for a node whose agent was lost (a restart): the
  // earlier start's watch then ends without reporting.
  virtual void start(const AgentStartSpec& spec) = 0;
  // The agent of `node` said hello: from now on its exit is the control
  // connection's business, and its stderr is forwarded.
  virtual void connected(int node) = 0;
  // Stops watching (joins helper threads); then waits up to `ms` for local
  // agents to exit before killing them. Idempotent.
  virtual void stop(int ms) = 0;
  // Why `node`'s agent has not connected yet, as far as the start method
  // knows ("" = it does not know): the agent timeout's message carries it.
  virtual std::string waiting_for(int /*node*/) const { return ""; }
  // False when `spec`'s agent will not use the control port (the local agent
  // on its inherited socketpair): the launcher then starts it before it
  // opens its servers, so the agent's exec overlaps that work.
  virtual bool needs_control_port(const AgentStartSpec& /*spec*/) const { return true; }
};

class EarlyAgent;  // remote/early_agent.h

struct StarterOptions {
  int ssh_parallel = 32;  // hosts in their ssh handshake at once (--ssh-parallel)
  std::chrono::milliseconds ssh_timeout{30000};
  std::string ssh_config, prefix;
  bool ssh_accept_new = false;
  // --launcher-exec: the program (and its first arguments) that starts
  // agents in place of the method's own (srun, ssh); empty = the method's.
  std::vector<std::string> launcher_exec;
  // The local agent forked before the event loop (remote/early_agent.h), for
  // the local node's first start; null: dlaunch-agent is exec'd.
  std::shared_ptr<EarlyAgent> early_agent;
  // The job goes on without a host it loses (--spares, --min-hosts): a
  // start method that starts agents together must not end the others when
  // one ends (srun without --kill-on-bad-exit, and --no-kill).
  bool hosts_may_go = false;
};

// Local agents by fork/exec, remote ones over libssh, every ssh session
// driven by the io_context's thread (no thread per host), the token on each
// agent's stdin (--launcher libssh).
std::unique_ptr<AgentStarter> make_process_starter(boost::asio::io_context& io, StarterOptions o,
                                                   AgentStarter::Events ev);

// Local agents by fork/exec, remote ones through the system's OpenSSH client
// (`ssh`, so ProxyJump, GSSAPI, ControlMaster, certificates and all of
// ssh_config apply), one child process per remote host watched by the
// io_context, the token on each agent's stdin (--launcher ssh;
// openssh_starter.h).
std::unique_ptr<AgentStarter> make_openssh_starter(boost::asio::io_context& io, StarterOptions o,
                                                   AgentStarter::Events ev);

}  // namespace dl::remote
