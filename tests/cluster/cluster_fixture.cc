#include "tests/cluster/cluster_fixture.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <sstream>
#include <stdexcept>

namespace dl::cluster {

namespace {
using Clock = std::chrono::steady_clock;

int decode_status(int st) {
  if (WIFEXITED(st)) return WEXITSTATUS(st);
  if (WIFSIGNALED(st)) return 128 + WTERMSIG(st);
  return -1;
}

// The value of `key=` in cluster.sh up's output, or "".
std::string field(const std::string& text, const std::string& key) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (line.rfind(key + "=", 0) == 0) return line.substr(key.size() + 1);
  return "";
}
}  // namespace

RunResult run_argv(const std::vector<std::string>& argv, std::chrono::milliseconds timeout) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return {-1, std::string("pipe: ") + strerror(errno)};
  pid_t pid = fork();
  if (pid < 0) return {-1, std::string("fork: ") + strerror(errno)};
  if (pid == 0) {
    setpgid(0, 0);
    dup2(fds[1], 1);
    dup2(fds[1], 2);
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    dprintf(2, "cannot run %s: %s\n", args[0], strerror(errno));
    _exit(127);
  }
  close(fds[1]);
  fcntl(fds[0], F_SETFL, O_NONBLOCK);
  RunResult r;
  auto deadline = Clock::now() + timeout;
  char buf[4096];
  bool timed_out = false;
  for (int st;;) {
    pollfd p{fds[0], POLLIN, 0};
    poll(&p, 1, 20);
    for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) r.output.append(buf, static_cast<size_t>(n));
    // Stop when the child ended, even if a daemon it started still holds the pipe.
    if (waitpid(pid, &st, WNOHANG) == pid) {
      r.status = timed_out ? 124 : decode_status(st);
      break;
    }
    if (!timed_out && Clock::now() > deadline) {
      kill(-pid, SIGKILL);
      timed_out = true;
      r.output += "\n[run_argv: killed after " + std::to_string(timeout.count()) + " ms]\n";
    }
  }
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) r.output.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  return r;
}

std::string Cluster::script_path() { return DLAUNCH_SOURCE_DIR "/tests/cluster/cluster.sh"; }

Cluster::Cluster(int hosts) : hosts_(hosts), owner_pid_(getpid()) {
  RunResult r = run_argv({script_path(), "up", "--hosts", std::to_string(hosts), "--owner",
                          std::to_string(owner_pid_)},
                         std::chrono::seconds(120));
  id_ = field(r.output, "DL_CLUSTER_ID");
  dir_ = field(r.output, "DL_CLUSTER_DIR");
  if (r.status != 0 || id_.empty() || dir_.empty())
    throw std::runtime_error("test cluster could not be built (cluster.sh up exited " +
                             std::to_string(r.status) + "): " + r.output);
  int n = std::stoi(id_);
  net_ = "10." + std::to_string(200 + n / 256) + "." + std::to_string(n % 256) + ".";
}

Cluster::~Cluster() {
  if (getpid() != owner_pid_) return;  // a forked child must not tear down its parent's cluster
  run_argv({script_path(), "down", id_}, std::chrono::seconds(60));
}

std::string Cluster::address(int i) const { return net_ + std::to_string(i + 1); }

std::vector<std::string> Cluster::hosts() const {
  std::vector<std::string> out;
  for (int i = 0; i < hosts_; ++i) out.push_back(host(i));
  return out;
}

std::vector<std::string> Cluster::addresses() const {
  std::vector<std::string> out;
  for (int i = 0; i < hosts_; ++i) out.push_back(address(i));
  return out;
}

RunResult Cluster::run_in(const std::string& host, const std::string& shell_cmd,
                          std::chrono::milliseconds timeout) const {
  return run_argv({script_path(), "exec", id_, host, "--", "sh", "-c", shell_cmd}, timeout);
}

RunResult Cluster::script(const std::vector<std::string>& args) const {
  std::vector<std::string> argv{script_path()};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_argv(argv, std::chrono::seconds(60));
}

std::vector<int> Cluster::pids_in(const std::string& host) const {
  RunResult r = run_argv({"ip", "netns", "pids", netns(host)});
  std::vector<int> pids;
  std::istringstream in(r.output);
  for (int p; in >> p;) pids.push_back(p);
  return pids;
}

InNamespace::InNamespace(const Cluster& cluster, const std::string& host) {
  original_ = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
  std::string path = "/run/netns/" + cluster.netns(host);
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (original_ < 0 || fd < 0 || setns(fd, CLONE_NEWNET) != 0) {
    std::string err = strerror(errno);
    if (fd >= 0) close(fd);
    if (original_ >= 0) close(original_);
    throw std::runtime_error("cannot enter network namespace " + path + ": " + err);
  }
  close(fd);
}

InNamespace::~InNamespace() {
  setns(original_, CLONE_NEWNET);
  close(original_);
}

}  // namespace dl::cluster
