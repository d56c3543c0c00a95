#include "doctor/peer_start.h"

#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <sstream>

#include "errors/error.h"
#include "remote/ssh/fan_out.h"
#include "remote/ssh/quote.h"

extern char** environ;

namespace dl::doctor {

namespace {
std::vector<std::string> own_environment() {
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) env.emplace_back(*e);
  return env;
}

// `program` found on PATH (execve searches nothing), or "" when it is not there.
std::string on_path(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path ? path : "/usr/bin:/bin");
  for (std::string d; std::getline(dirs, d, ':');)
    if (!d.empty() && ::access((d + "/" + program).c_str(), X_OK) == 0) return d + "/" + program;
  return "";
}

std::string peer_command(const StartHow& how) { return ssh::join_quoted({how.exe, "doctor", "--peer"}); }

std::vector<StartedPeer> start_libssh(const std::vector<TreeNode>& nodes, const StartHow& how, const std::string& token) {
  std::vector<ssh::Target> targets;
  for (const auto& n : nodes) targets.push_back({n.host, n.user, n.port});
  ssh::Options so;
  so.connect_timeout = Millis(how.ssh_timeout_ms);
  so.config_file = how.ssh_config;
  so.accept_new = how.ssh_accept_new;
  const std::string command = peer_command(how);
  auto started = ssh::start_all(targets, std::vector<std::string>(targets.size(), command), token + "\n", so,
                                std::max(1, how.ssh_parallel));
  std::vector<StartedPeer> out(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (!started[i].error.empty()) out[i].error = started[i].error;
    else out[i].link = adopt_remote_peer(std::move(started[i]), nodes[i].name, command);
  }
  return out;
}

std::vector<std::string> openssh_argv(const std::string& ssh, const TreeNode& n, const StartHow& how) {
  const long secs = std::max(1L, static_cast<long>(std::ceil(how.ssh_timeout_ms / 1000.0)));
  std::vector<std::string> v{ssh, "-T", "-o", "BatchMode=yes", "-o", "ConnectTimeout=" + std::to_string(secs), "-o",
                             "RemoteCommand=none"};
  if (!how.ssh_config.empty()) v.insert(v.end(), {"-F", how.ssh_config});
  if (how.ssh_accept_new) v.insert(v.end(), {"-o", "StrictHostKeyChecking=accept-new"});
  if (!n.user.empty()) v.insert(v.end(), {"-l", n.user});
  if (n.port) v.insert(v.end(), {"-p", std::to_string(n.port)});
  v.insert(v.end(), {"--", n.host, peer_command(how)});
  return v;
}

std::vector<StartedPeer> start_processes(const std::vector<TreeNode>& nodes, const StartHow& how, const std::string& token) {
  std::vector<StartedPeer> out(nodes.size());
  const auto env = own_environment();
  const std::string ssh = how.method == "ssh" ? on_path("ssh") : "";
  for (size_t i = 0; i < nodes.size(); ++i) {
    const TreeNode& n = nodes[i];
    try {
      if (how.method == "ssh") {
        if (ssh.empty()) throw RemoteError(n.name + ": --launcher ssh runs the OpenSSH client, but there is no `ssh` on PATH");
        out[i].link = start_process_peer(openssh_argv(ssh, n, how), env, token, n.name, true);
      } else {
        out[i].link = start_process_peer({how.exe, "doctor", "--peer"}, env, token, n.name, false);
      }
    } catch (const std::exception& ex) {
      out[i].error = ex.what();
    }
  }
  return out;
}
}  // namespace

std::vector<StartedPeer> start_peers(const std::vector<TreeNode>& nodes, const StartHow& how, const std::string& token) {
  if (nodes.empty()) return {};
  if (how.method == "libssh") return start_libssh(nodes, how, token);
  if (how.method == "ssh" || how.method == "sim" || how.method == "local") return start_processes(nodes, how, token);
  throw UsageError("the doctor starts its peers with --launcher libssh, ssh or sim, not '" + how.method + "'");
}

}  // namespace dl::doctor
