#pragma once
// --launcher ssh: remote agents started by the system's OpenSSH client, so
// everything a site configured for `ssh` applies (ProxyJump, GSSAPI,
// ControlMaster, certificates, hostbased, Match blocks). The factory,
// make_openssh_starter, is declared in agent_starter.h beside the libssh one;
// this header holds the pure parts it is built from, for tests.
//
// One `ssh` child per remote host, in its own process group, dying with
// dlaunch (PR_SET_PDEATHSIG): its stdin carries the job token and stays open
// for the job's life (the agent reads EOF as "launcher gone"), its stdout's
// first line says which addresses the connection used, its stderr explains a
// failure. No thread: the io_context watches the pipes and a pidfd.
#include <string>
#include <vector>

#include "remote/agent_starter.h"

namespace dl::remote {

// The first line a started remote command prints: "dlaunch-ssh CLIENT SERVER",
// the two addresses of $SSH_CONNECTION.
inline constexpr const char* kSshConnectionTag = "dlaunch-ssh";

// `ssh` and its arguments for `spec`: -T, BatchMode=yes (never a prompt),
// ConnectTimeout from --ssh-timeout, -F with --ssh-config,
// StrictHostKeyChecking=accept-new with --ssh-accept-new, -l and -p from the
// hostfile, `--` before the host, then the remote command: a POSIX sh
// script (every word through ssh::shell_quote) that prints the connection
// line and execs `agent` with --connect to `spec.control_addr`, or else to
// the address the host sees this launcher at (the client side of
// $SSH_CONNECTION). The token is never in it.
std::vector<std::string> openssh_argv(const StarterOptions& o, const AgentStartSpec& spec, const std::string& agent);

// "user@host:port" with the parts the hostfile gave.
std::string openssh_name(const AgentStartSpec& spec);

// Parses the connection line ("dlaunch-ssh 10.0.0.1 10.0.0.2"): false when
// `line` is not one.
bool parse_ssh_connection(const std::string& line, std::string* client, std::string* server);

// One line for an `ssh` that ended before its agent connected, from its
// exit status and stderr: 255 is ssh's own failure (with a hint for a host
// key, a refused or timed-out connection), 127 the agent not found there.
std::string openssh_failure(const std::string& name, int status, const std::string& err, const std::string& agent);

}  // namespace dl::remote
