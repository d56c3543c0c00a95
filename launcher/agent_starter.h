#pragma once
// Starting agents: the local host's by fork/exec, remote hosts' over ssh.
// Both hand the token to the agent on its stdin, never on a command line.
#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

namespace dl::launcher {

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
LocalAgent start_local_agent(const std::string& path, const std::vector<std::string>& args, const std::string& token);

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

// True when `host` names this machine: localhost, a loopback address, this
// machine's host name, or one of its interface addresses.
bool is_local_host(const std::string& host);

}  // namespace dl::launcher
