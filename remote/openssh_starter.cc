#include "remote/openssh_starter.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <sstream>

#include <boost/asio.hpp>

#include "errors/error.h"
#include "remote/local_starter.h"
#include "remote/ssh/quote.h"
#include "remote/start_gate.h"

namespace dl::remote {

namespace asio = boost::asio;

namespace {

// Runs on the host under sh, whatever the login shell: $1 the control
// address ("" = the client side of $SSH_CONNECTION), $2 the control port,
// then the agent's argv. One line: csh cannot quote a newline.
constexpr const char* kRemoteScript =
    "s=${SSH_CONNECTION:-}; c=$1; p=$2; shift 2; a=${s%% *}; r=${s#* * }; r=${r%% *}; "
    "[ -n \"$c\" ] || c=$a; "
    "[ -n \"$c\" ] || { echo 'SSH_CONNECTION is not set on this host, so the address of the launcher is "
    "unknown: pass --control-addr' >&2; exit 2; }; "
    "echo \"dlaunch-ssh $a $r\"; case $c in *:*) c=\"[$c]\";; esac; exec \"$@\" --connect \"$c:$p\"";

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

// The last non-empty line of `s` (ssh says what went wrong last).
std::string last_line(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  auto nl = s.rfind('\n');
  return nl == std::string::npos ? s : s.substr(nl + 1);
}

bool on_path(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path ? path : "/usr/bin:/bin");
  for (std::string d; std::getline(dirs, d, ':');)
    if (!d.empty() && ::access((d + "/" + program).c_str(), X_OK) == 0) return true;
  return false;
}

}  // namespace

std::string openssh_name(const AgentStartSpec& spec) {
  std::string s = spec.user.empty() ? "" : spec.user + "@";
  s += spec.host.find(':') != std::string::npos ? "[" + spec.host + "]" : spec.host;
  if (spec.port) s += ":" + std::to_string(spec.port);
  return s;
}

std::vector<std::string> openssh_argv(const StarterOptions& o, const AgentStartSpec& spec, const std::string& agent) {
  const long secs = std::max(1L, static_cast<long>(std::ceil(o.ssh_timeout.count() / 1000.0)));
  // --launcher-exec names another ssh (with its first arguments).
  std::vector<std::string> v = o.launcher_exec.empty() ? std::vector<std::string>{"ssh"} : o.launcher_exec;
  v.insert(v.end(), {"-T", "-o", "BatchMode=yes", "-o", "ConnectTimeout=" + std::to_string(secs), "-o",
                     "RemoteCommand=none"});
  if (!o.ssh_config.empty()) v.insert(v.end(), {"-F", o.ssh_config});
  if (o.ssh_accept_new) v.insert(v.end(), {"-o", "StrictHostKeyChecking=accept-new"});
  if (!spec.user.empty()) v.insert(v.end(), {"-l", spec.user});
  if (spec.port) v.insert(v.end(), {"-p", std::to_string(spec.port)});
  v.insert(v.end(), {"--", spec.host});
  control::AgentArgs a = spec.args;
  std::vector<std::string> words{"sh", "-c", kRemoteScript, "dlaunch-ssh", spec.control_addr, spec.control_port, agent};
  const auto args = control::to_argv(a);
  // --connect is the script's to add: its address is known only there.
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--connect") ++i;
    else words.push_back(args[i]);
  }
  v.push_back(ssh::join_quoted(words));
  return v;
}

bool parse_ssh_connection(const std::string& line, std::string* client, std::string* server) {
  std::istringstream in(line);
  std::string tag;
  if (!(in >> tag) || tag != kSshConnectionTag) return false;
  in >> *client >> *server;
  return true;
}

std::string openssh_failure(const std::string& name, int status, const std::string& err, const std::string& agent) {
  const std::string said = last_line(err);
  if (status == 127)
    return name + ": dlaunch-agent was not found (" + agent +
           "); install dlaunch at the same path there or pass --prefix DIR" + (said.empty() ? "" : " (" + said + ")");
  if (status != 255)
    return name + ": dlaunch-agent exited with status " + std::to_string(status) + (said.empty() ? "" : " (" + said + ")");
  std::string hint;
  if (err.find("Host key verification failed") != std::string::npos ||
      err.find("No ED25519 host key is known") != std::string::npos || err.find("host key") != std::string::npos)
    hint = ": check the host's key fingerprint, then add it with `ssh-keyscan -H HOST >> ~/.ssh/known_hosts`, or run "
           "with --ssh-accept-new (a changed key is always refused)";
  else if (err.find("Connection refused") != std::string::npos)
    hint = ": is sshd running there, and on this port?";
  else if (err.find("timed out") != std::string::npos || err.find("No route to host") != std::string::npos)
    hint = ": unreachable (host down, wrong address, or a firewall?)";
  else if (err.find("Permission denied") != std::string::npos)
    hint = ": authentication failed; `ssh " + name + " true` must work without a password (BatchMode)";
  return name + ": ssh failed (exit 255): " + (said.empty() ? "no message" : said) + hint;
}

namespace {

class OpensshStarter : public AgentStarter {
 public:
  OpensshStarter(asio::io_context& io, StarterOptions o, Events ev)
      : io_(io), o_(std::move(o)), ev_(std::move(ev)), gate_(o_.ssh_parallel), have_ssh_(!o_.launcher_exec.empty() || on_path("ssh")) {}
  ~OpensshStarter() override { stop(0); }

  void start(const AgentStartSpec& spec) override {
    auto& c = children_[spec.node];
    // Started again (--max-restarts after its agent was lost): the last
    // ssh is kept (its handlers may still run) but stops watching and
    // reporting; stop() reaps it with the others.
    if (c) retire(std::move(c));
    c = std::make_unique<Child>(io_);
    c->node = spec.node;
    c->name = openssh_name(spec);
    c->control_addr = spec.control_addr;
    gate_.enter(spec.node, [this, spec] { spawn(spec); });
  }

  void connected(int node) override {
    if (auto it = children_.find(node); it != children_.end()) {
      it->second->connected = true;
      forward_stderr(*it->second);
    }
  }

  void stop(int ms) override {
    if (stopped_) return;
    stopped_ = true;
    gate_.clear();
    for (auto& [node, c] : children_) {
      unwatch(*c);
      // EOF to every agent at once, then the waits.
      if (c->proc.stdin_fd >= 0) ::close(c->proc.stdin_fd), c->proc.stdin_fd = -1;
    }
    for (auto& c : retired_) reap_local_agent(c->proc, 0);
    for (auto& [node, c] : children_) reap_local_agent(c->proc, ms);
  }

 private:
  struct Child {
    explicit Child(asio::io_context& io) : out(io), err(io), exit(io) {}
    int node = 0;
    std::string name, control_addr, out_text, err_text, ssh;
    LocalAgent proc;
    int exec_fd = -1;  // spawn_local_agent's exec status, until the exec is known to be done
    asio::posix::stream_descriptor out, err, exit;  // stdout, stderr, pidfd
    std::array<char, 4096> out_buf{}, err_buf{};
    size_t forwarded = 0;
    bool reached = false, connected = false, ended = false;
  };

  // Whether `c` is its node's ssh (not one retired by a restart). Events
  // are posted: by the time one runs, its node may have been started again.
  bool current(const Child* c) const {
    auto it = children_.find(c->node);
    return !stopped_ && it != children_.end() && it->second.get() == c;
  }

  void unwatch(Child& c) {
    boost::system::error_code ec;
    c.out.close(ec), c.err.close(ec), c.exit.close(ec);
    if (c.exec_fd >= 0) ::close(c.exec_fd), c.exec_fd = -1;
  }

  void retire(std::unique_ptr<Child> c) {
    unwatch(*c);
    c->ended = true;
    if (!c->reached) gate_.leave(c->node);
    retired_.push_back(std::move(c));
  }

  void fail(Child& c, std::string why) {
    gate_.leave(c.node);
    asio::post(io_, [this, c = &c, why = std::move(why)] {
      if (current(c)) ev_.failed(c->node, why);
    });
  }

  void spawn(const AgentStartSpec& spec) {
    Child& c = *children_[spec.node];
    if (!have_ssh_)
      return fail(c, c.name + ": the ssh client is not on PATH: install OpenSSH's client (openssh-client), or use "
                              "--launcher libssh");
    const std::string agent = agent_path(o_.prefix, true);
    int out[2], err[2];
    if (::pipe2(out, O_CLOEXEC) != 0) return fail(c, c.name + ": cannot create a pipe for ssh");
    if (::pipe2(err, O_CLOEXEC) != 0) {
      ::close(out[0]), ::close(out[1]);
      return fail(c, c.name + ": cannot create a pipe for ssh");
    }
    auto argv = openssh_argv(o_, spec, agent);
    const std::vector<std::string> args(argv.begin() + 1, argv.end());
    // Not start_local_agent: it waits for the exec, and under load that
    // wait (~80 ms a child at load 16) added up to seconds in which this
    // loop answered no agent's handshake. An exec that failed shows as the
    // child's exit (exited() reads the status then).
    c.ssh = argv[0];
    try {
      c.proc = spawn_local_agent(argv[0], args, spec.token, err[1], out[1], &c.exec_fd);
    } catch (const Error& e) {
      ::close(out[0]), ::close(err[0]), ::close(out[1]), ::close(err[1]);
      return fail(c, c.name + ": cannot run " + c.ssh + ": " + e.what());
    }
    ::close(out[1]), ::close(err[1]);
    for (int fd : {out[0], err[0]}) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
    c.out.assign(out[0]);
    c.err.assign(err[0]);
    read_out(c);
    read_err(c);
    const int pidfd = open_agent_pidfd(c.proc);
    if (pidfd < 0) return;  // Linux < 5.3: the agent timer bounds the wait
    c.exit.assign(pidfd);
    c.exit.async_wait(asio::posix::stream_descriptor::wait_read, [this, &c](boost::system::error_code ec) {
      if (!ec && !stopped_) exited(c);
    });
  }

  void read_out(Child& c) {
    c.out.async_read_some(asio::buffer(c.out_buf), [this, &c](boost::system::error_code ec, size_t n) {
      if (ec || stopped_) return;
      if (!c.reached) {
        c.out_text.append(c.out_buf.data(), n);
        if (c.out_text.find('\n') != std::string::npos) on_connection_line(c, first_line(c.out_text));
      }
      read_out(c);  // the agent's own stdout is read and dropped, as over libssh
    });
  }

  void on_connection_line(Child& c, const std::string& line) {
    c.reached = true;
    c.out_text.clear();
    if (c.exec_fd >= 0) ::close(c.exec_fd), c.exec_fd = -1;  // ssh runs: its exec is long done
    gate_.leave(c.node);
    std::string client, server;
    if (!parse_ssh_connection(line, &client, &server)) return;
    const std::string back = c.control_addr.empty() ? client : c.control_addr;
    asio::post(io_, [this, c = &c, server, back] {
      if (current(c)) ev_.reached(c->node, server, back);
    });
  }

  void read_err(Child& c) {
    c.err.async_read_some(asio::buffer(c.err_buf), [this, &c](boost::system::error_code ec, size_t n) {
      if (ec || stopped_) return;
      c.err_text.append(c.err_buf.data(), n);
      forward_stderr(c);
      read_err(c);
    });
  }

  // After the agent connected its stderr is its own complaints, tagged with
  // its host by the Job; before, it is kept to explain a failure.
  void forward_stderr(Child& c) {
    if (!c.connected || c.err_text.size() <= c.forwarded) return;
    std::string tail = c.err_text.substr(c.forwarded);
    c.forwarded = c.err_text.size();
    asio::post(io_, [this, c = &c, tail = std::move(tail)] {
      if (current(c)) ev_.agent_stderr(c->node, tail);
    });
  }

  // ssh ended. Its stderr is all in the pipe by now (it wrote before it
  // exited): take it without waiting, then say why.
  void exited(Child& c) {
    if (c.ended) return;
    c.ended = true;
    for (int fd = c.err.native_handle();;) {
      ssize_t n = ::read(fd, c.err_buf.data(), c.err_buf.size());
      if (n <= 0) break;
      c.err_text.append(c.err_buf.data(), static_cast<size_t>(n));
    }
    if (c.exec_fd >= 0) {
      const int e = read_exec_status(c.exec_fd);
      ::close(c.exec_fd), c.exec_fd = -1;
      if (e > 0)
        return fail(c, c.name + ": cannot run " + c.ssh + ": " + std::strerror(e) +
                           "; install OpenSSH's client (openssh-client), name it with --launcher-exec, or use "
                           "--launcher libssh");
    }
    const auto status = peek_agent_exit(c.proc);
    if (c.connected || !status) return gate_.leave(c.node);  // its connection reports
    const int code = WIFEXITED(*status) ? WEXITSTATUS(*status) : 128 + WTERMSIG(*status);
    fail(c, openssh_failure(c.name, code, c.err_text.substr(std::min(c.forwarded, c.err_text.size())),
                            agent_path(o_.prefix, true)));
  }

  asio::io_context& io_;
  StarterOptions o_;
  Events ev_;
  StartGate gate_;
  bool have_ssh_;
  bool stopped_ = false;
  std::map<int, std::unique_ptr<Child>> children_;
  std::vector<std::unique_ptr<Child>> retired_;  // ssh children of nodes started again
};

}  // namespace

std::unique_ptr<AgentStarter> make_openssh_starter(asio::io_context& io, StarterOptions o, AgentStarter::Events ev) {
  auto local = make_local_starter(io, ev, std::move(o.early_agent));
  return make_split_starter(std::move(local), std::make_unique<OpensshStarter>(io, std::move(o), std::move(ev)));
}

}  // namespace dl::remote
