// --launcher slurm (slurm_starter.h): one srun step for the remote agents.
#include "remote/slurm_starter.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio.hpp>
#include <array>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <set>
#include <sstream>

#include "errors/error.h"
#include "hostfiles/hostlist.h"
#include "wire/host.h"

namespace dl::remote {

namespace asio = boost::asio;
using std::chrono::milliseconds;

std::vector<std::string> srun_argv(const std::vector<std::string>& exec, const std::vector<std::string>& hosts,
                                   const std::vector<std::string>& agent_argv, bool hosts_may_go) {
  std::vector<std::string> v = exec.empty() ? std::vector<std::string>{"srun"} : exec;
  std::string list;
  for (const auto& h : hosts) list += (list.empty() ? "" : ",") + h;
  const std::string k = std::to_string(hosts.size());
  // --overlap: the step shares the CPUs the ranks' own steps (or none) use;
  // --cpu-bind=none: the agent and its ranks are not pinned to the step's one
  // CPU (--bind-to does the pinning); --mpi=none: no PMI of srun's in the
  // ranks' environment beside the agent's PMIx server. An agent that ends
  // ends the step (its others end their ranks): the job is over then,
  // unless it goes on without a lost host (--spares, --min-hosts), when the
  // others and their node's failures must not end it (--no-kill; the
  // allocation needs it too: salloc --no-kill).
  v.insert(v.end(), {"--nodes=" + k, "--ntasks=" + k, "--ntasks-per-node=1", "--nodelist=" + list, "--overlap",
                     hosts_may_go ? "--kill-on-bad-exit=0" : "--kill-on-bad-exit=1"});
  if (hosts_may_go) v.push_back("--no-kill");
  v.insert(v.end(), {"--cpu-bind=none", "--mpi=none", "--input=all"});
  v.insert(v.end(), agent_argv.begin(), agent_argv.end());
  return v;
}

namespace {
bool name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.'; }

// Whether `line` holds `host` as a whole word.
bool names_host(const std::string& line, const std::string& host) {
  for (size_t p = line.find(host); p != std::string::npos; p = line.find(host, p + 1)) {
    const bool left = p == 0 || !name_char(line[p - 1]);
    const size_t e = p + host.size();
    // A trailing '.' ends a sentence, not the name.
    const bool right = e == line.size() || !name_char(line[e]) || (line[e] == '.' && (e + 1 == line.size() || !name_char(line[e + 1])));
    if (left && right) return true;
  }
  return false;
}
}  // namespace

std::map<std::string, std::string> srun_errors_by_host(const std::vector<std::string>& lines,
                                                       const std::vector<std::string>& hosts) {
  std::map<std::string, std::string> out;
  for (const auto& raw : lines) {
    // slurmstepd names its node as "slurmstepd-n3: error: execve(): ...".
    std::string line = raw;
    if (line.rfind("slurmstepd-", 0) == 0) line[10] = ' ';
    // srun folds hosts into ranges ("srun: error: h[2-4]: tasks 1-3: ..."): unfold them.
    std::set<std::string> ranged;
    std::istringstream words(line);
    for (std::string w; words >> w;) {
      while (!w.empty() && (w.back() == ':' || w.back() == ',' || w.back() == '.')) w.pop_back();
      if (w.find('[') == std::string::npos) continue;
      try {
        for (auto& h : hostfiles::expand_hostlist(w)) ranged.insert(h);
      } catch (const Error&) {
      }
    }
    for (const auto& h : hosts)
      if (ranged.count(h) || names_host(line, h)) {
        auto& text = out[h];
        text += (text.empty() ? "" : "; ") + raw;
      }
  }
  return out;
}

std::string srun_wait_reason(const std::string& line) {
  for (const char* k : {"step creation temporarily disabled, retrying", "step creation still disabled, retrying"}) {
    const auto at = line.find(k);
    if (at == std::string::npos) continue;
    const auto open = line.find('(', at), close = line.rfind(')');
    if (open != std::string::npos && close != std::string::npos && close > open) return line.substr(open + 1, close - open - 1);
    return "step creation temporarily disabled";
  }
  if (line.find("and being configured, please wait") != std::string::npos) return "being configured";
  if (line.find("Requested nodes are busy") != std::string::npos) return "Requested nodes are busy";
  return "";
}

std::string srun_waiting_message(const std::string& srun_line, const std::string& job_id) {
  const std::string job = job_id.empty() ? "JOBID" : job_id;
  const std::string what =
      "another step of the allocation holds its resources (`squeue -s -j " + job +
      "` lists the steps; dlaunch's step asks for --overlap, so on Slurm >= 22.05 that takes a step run with "
      "--exclusive), a prolog is still configuring the nodes, or nodes are still completing an earlier step; wait "
      "for or cancel that step (scancel " + job + ".STEP), or raise --agent-timeout to wait longer";
  if (!srun_line.empty()) return "srun is waiting for resources to start the agents' step (" + srun_line + "): " + what;
  // Slurm 22.05's srun waits without a word: say what is likely, and the other case.
  return "no agent of the srun step connected and srun said nothing: it is likely still waiting to create the step, "
         "if " + what + "; if `squeue -s -j " + job + "` shows the step running, the agents cannot reach this "
         "launcher instead (pass --control-addr)";
}

namespace {

// The address `host` resolves to here (for MASTER_ADDR), or the name itself.
std::string resolved(const std::string& host) {
  addrinfo hints{}, *res = nullptr;
  hints.ai_socktype = SOCK_STREAM;
  if (::getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0 || !res) return host;
  char buf[INET6_ADDRSTRLEN] = {};
  const bool ok = ::getnameinfo(res->ai_addr, res->ai_addrlen, buf, sizeof buf, nullptr, 0, NI_NUMERICHOST) == 0;
  ::freeaddrinfo(res);
  return ok ? buf : host;
}

class SlurmStarter : public AgentStarter {
 public:
  SlurmStarter(asio::io_context& io, StarterOptions o, Events ev)
      : io_(io), o_(o), ev_(ev), local_(make_process_starter(io, o, ev)), err_(io), poll_(io) {}
  ~SlurmStarter() override { stop(0); }

  void start(const AgentStartSpec& spec) override {
    if (names_.size() <= static_cast<size_t>(spec.node)) names_.resize(static_cast<size_t>(spec.node) + 1, "-");
    names_[static_cast<size_t>(spec.node)] = spec.host;
    if (spec.local) return local_->start(spec);
    // A restart's new agent (a lost host, no spare for it): the step that
    // started the agents cannot take another task. Said at once, not at
    // the restart's timeout.
    if (!argv_.empty())
      return asio::post(io_, [ev = ev_, spec] {
        ev.failed(spec.node, spec.host + ": its agent cannot be started again under --launcher slurm (one srun step "
                                         "started every agent, once); --spares K holds hosts back to take a lost "
                                         "host's place");
      });
    // Every start() of the job comes before its io_context runs: one srun
    // for them all, once they are known.
    if (remote_.empty()) asio::post(io_, [this] { launch(); });
    remote_.push_back(spec);
  }

  void connected(int node) override {
    local_->connected(node);
    connected_.insert(node);
  }

  // srun still runs and not one remote agent connected: its step has not
  // started (an agent that started but cannot connect is the agent timeout's
  // plain case, with others of its step connected or srun's complaints).
  std::string waiting_for(int node) const override {
    if (stopped_ || srun_.pid <= 0 || peek_agent_exit(srun_) || connected_.count(node)) return "";
    bool remote = false;
    for (const auto& s : remote_) {
      if (connected_.count(s.node)) return "";
      remote = remote || s.node == node;
    }
    if (!remote) return "";
    if (wait_line_.empty()) {
      // Anything srun said about a host means its step exists.
      for (const auto& l : lines_)
        if (l.rfind("srun: ", 0) != 0 || l.find("error") != std::string::npos) return "";
    }
    const char* id = std::getenv("SLURM_JOB_ID");
    return srun_waiting_message(wait_line_, id ? id : "");
  }

  void stop(int ms) override {
    if (stopped_) return;
    stopped_ = true;
    local_->stop(ms);
    boost::system::error_code ec;
    poll_.cancel();
    err_.close(ec);
    if (srun_.pid <= 0) return;
    // EOF on srun's stdin reaches every agent: each leaves (killing its
    // ranks). Then srun ends; if it does not, SIGTERM makes it cancel the
    // step, and SIGKILL ends srun itself.
    if (srun_.stdin_fd >= 0) ::close(srun_.stdin_fd), srun_.stdin_fd = -1;
    if (!wait_exit(ms)) {
      ::kill(srun_.pid, SIGTERM);
      wait_exit(3000);
    }
    reap_local_agent(srun_, 0);
  }

 private:
  bool wait_exit(int ms) {
    for (int waited = 0; waited <= ms; waited += 10) {
      if (peek_agent_exit(srun_)) return true;
      ::usleep(10000);
    }
    return false;
  }

  void launch() {
    if (stopped_) return;
    std::vector<std::string> hosts;
    for (const auto& s : remote_) hosts.push_back(s.host);
    const AgentStartSpec& first = remote_.front();
    std::string back = first.control_addr;
    for (size_t i = 0; i < hosts.size() && back.empty(); ++i) back = wire::address_toward(hosts[i]);
    if (back.empty())
      return fail_all("no address of this machine routes to " + hosts.front() +
                      " (it does not resolve here); pass --control-addr ADDR");
    for (const auto& s : remote_) ev_.reached(s.node, resolved(s.host), back);
    control::AgentArgs a = first.args;
    a.connect_host = back;
    a.connect_port = static_cast<uint16_t>(std::stoi(first.control_port));
    // Every node's name at its index, this host's too: an agent's index in
    // the list is its node number.
    a.node_names = names_;
    std::vector<std::string> agent{agent_path(o_.prefix, true)};
    for (auto& x : control::to_argv(a)) agent.push_back(std::move(x));
    argv_ = srun_argv(o_.launcher_exec, hosts, agent, o_.hosts_may_go);
    int pipe_fds[2];
    if (::pipe2(pipe_fds, O_CLOEXEC) != 0) return fail_all(std::string("cannot make a pipe for srun: ") + std::strerror(errno));
    try {
      srun_ = start_local_agent(argv_[0], {argv_.begin() + 1, argv_.end()}, first.token, pipe_fds[1]);
    } catch (const Error&) {
      ::close(pipe_fds[0]), ::close(pipe_fds[1]);
      return fail_all("cannot run '" + argv_[0] + "' to start the agents (not on PATH, or not executable); "
                      "install Slurm's client here, name it with --launcher-exec PATH, or use --launcher libssh");
    }
    ::close(pipe_fds[1]);
    err_.assign(pipe_fds[0]);
    read_stderr();
  }

  void read_stderr() {
    err_.async_read_some(asio::buffer(buf_), [this](boost::system::error_code ec, size_t n) {
      if (stopped_) return;
      pending_.append(buf_.data(), n);
      for (size_t nl; (nl = pending_.find('\n')) != std::string::npos; pending_.erase(0, nl + 1)) line(pending_.substr(0, nl));
      if (!ec) return read_stderr();
      if (!pending_.empty()) line(pending_), pending_.clear();
      wait_for_srun(0);
    });
  }

  // One line srun (or an agent, through it) wrote to stderr.
  void line(const std::string& text) {
    std::vector<std::string> hosts;
    for (const auto& s : remote_) hosts.push_back(s.host);
    const auto by_host = srun_errors_by_host({text}, hosts);
    const AgentStartSpec* about = nullptr;
    for (const auto& s : remote_)
      if (by_host.count(s.host)) about = &s;
    bool all = true;
    for (const auto& s : remote_) all = all && connected_.count(s.node);
    const bool before = about ? !connected_.count(about->node) : !all;
    if (before && !srun_wait_reason(text).empty()) {
      // Said once, at once: the job hangs until srun gets its resources.
      if (wait_line_.empty() && ev_.notice)
        ev_.notice(text + " -- the agents start when the allocation has resources free for their step "
                          "(see docs/slurm.md, 'When srun waits'), or the job ends at --agent-timeout");
      wait_line_ = text;
    }
    if (before) {
      // Kept for the failure message of the node(s) it concerns.
      lines_.push_back(text);
      if (lines_.size() > 40) lines_.pop_front();
      return;
    }
    ev_.agent_stderr(about ? about->node : remote_.front().node, text + "\n");
  }

  // srun closed its stderr: once it has exited, every agent that had not
  // connected failed, each with what srun said about its host.
  void wait_for_srun(int waited_ms) {
    const auto status = peek_agent_exit(srun_);
    if (!status && waited_ms < 5000) {
      poll_.expires_after(milliseconds(10));
      poll_.async_wait([this, waited_ms](boost::system::error_code ec) { if (!ec && !stopped_) wait_for_srun(waited_ms + 10); });
      return;
    }
    std::string how = !status ? "closed its output"
                      : WIFSIGNALED(*status) ? "was killed by signal " + std::to_string(WTERMSIG(*status))
                                             : "exited with status " + std::to_string(WEXITSTATUS(*status));
    std::vector<std::string> hosts;
    for (const auto& s : remote_) hosts.push_back(s.host);
    const std::vector<std::string> lines(lines_.begin(), lines_.end());
    const auto by_host = srun_errors_by_host(lines, hosts);
    std::string general;
    for (const auto& l : lines)
      if (srun_errors_by_host({l}, hosts).empty()) general += (general.empty() ? "" : "; ") + l;
    for (const auto& s : remote_) {
      if (connected_.count(s.node)) continue;
      auto it = by_host.find(s.host);
      std::string why = s.host + ": srun " + how + " before its agent connected";
      if (it != by_host.end()) why += " (" + it->second + ")";
      if (it != by_host.end() && it->second.find("execve()") != std::string::npos)
        why += "; install dlaunch-agent at the same path there (" + agent_path(o_.prefix, true) + ") or pass --prefix DIR";
      else if (!general.empty()) why += " (" + general + ")";
      else why += " (run '" + argv_[0] + " --overlap -N1 -w " + s.host + " hostname' to see why)";
      ev_.failed(s.node, why);
    }
  }

  void fail_all(const std::string& why) {
    for (const auto& s : remote_) ev_.failed(s.node, s.host + ": " + why);
  }

  asio::io_context& io_;
  StarterOptions o_;
  Events ev_;
  std::unique_ptr<AgentStarter> local_;  // this host's agent, by fork/exec
  std::vector<AgentStartSpec> remote_;   // in node order
  std::vector<std::string> names_;       // every started node's host, by node index
  std::set<int> connected_;
  std::vector<std::string> argv_;
  LocalAgent srun_;                      // srun itself; its stdin reaches every agent
  asio::posix::stream_descriptor err_;   // srun's stderr (and the agents')
  asio::steady_timer poll_;
  std::array<char, 4096> buf_{};
  std::string pending_;
  std::deque<std::string> lines_;        // stderr lines from before the agents they concern connected
  std::string wait_line_;                // srun's last "step creation temporarily disabled" line
  bool stopped_ = false;
};

}  // namespace

std::unique_ptr<AgentStarter> make_slurm_starter(asio::io_context& io, StarterOptions o, AgentStarter::Events ev) {
  return std::make_unique<SlurmStarter>(io, std::move(o), std::move(ev));
}

}  // namespace dl::remote
