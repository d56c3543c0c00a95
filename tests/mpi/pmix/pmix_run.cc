// dl_pmix_run: a one-host stand-in for dlaunch-agent, to test the PMIx server
// before the agent uses it. It starts a PmixServer for N local ranks,
// fork/execs N copies of a program with rank_env() plus dlaunch's identity
// variables, completes fences itself (one host: the local blob is everything),
// and exits with the first failing rank's code (128+signal for signals).
//
//   dl_pmix_run [-v] [--timeout S] N program [args...]
//
// Two fake hosts in one process are not possible: libpmix is a process
// singleton, so cross-host fences are tested through the real agents.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "mpi/pmix/pmix_server.h"
#include "errors/error.h"

extern char** environ;
namespace pm = dl::mpi::pmix;

namespace {

// Tasks posted from libpmix's thread, run on the main loop; a pipe wakes it.
struct TaskQueue {
  std::mutex mu;
  std::deque<std::function<void()>> tasks;
  int wake[2] = {-1, -1};
  void post(std::function<void()> t) {
    { std::lock_guard<std::mutex> lock(mu); tasks.push_back(std::move(t)); }
    char c = 1;
    (void)!::write(wake[1], &c, 1);
  }
  void run_all() {
    char buf[64];
    while (::read(wake[0], buf, sizeof buf) > 0) {}
    std::deque<std::function<void()>> now;
    { std::lock_guard<std::mutex> lock(mu); now.swap(tasks); }
    for (auto& t : now) t();
  }
};

struct Options {
  bool verbose = false;
  int timeout_s = 120;
  int n = 0;
  std::vector<std::string> argv;
};

Options parse(int argc, char** argv) {
  Options o;
  int i = 1;
  for (; i < argc && argv[i][0] == '-'; ++i) {
    if (!std::strcmp(argv[i], "-v")) o.verbose = true;
    else if (!std::strcmp(argv[i], "--timeout") && i + 1 < argc) o.timeout_s = std::atoi(argv[++i]);
    else throw dl::UsageError(std::string("unknown option ") + argv[i]);
  }
  if (i + 1 >= argc) throw dl::UsageError("usage: dl_pmix_run [-v] [--timeout S] N program [args...]");
  o.n = std::atoi(argv[i++]);
  if (o.n <= 0) throw dl::UsageError("N must be a positive number of ranks");
  for (; i < argc; ++i) o.argv.push_back(argv[i]);
  return o;
}

// The rank's environment: ours without inherited PMIx variables, plus extra.
std::vector<std::string> rank_environment(const std::vector<std::pair<std::string, std::string>>& extra) {
  std::map<std::string, std::string> env;
  for (char** p = environ; *p; ++p) {
    const char* eq = std::strchr(*p, '=');
    if (!eq || std::strncmp(*p, "PMIX_", 5) == 0) continue;
    env[std::string(*p, static_cast<size_t>(eq - *p))] = eq + 1;
  }
  for (auto& [k, v] : extra) env[k] = v;
  std::vector<std::string> out;
  for (auto& [k, v] : env) out.push_back(k + "=" + v);
  return out;
}

pid_t spawn(const std::vector<std::string>& argv, const std::vector<std::string>& env) {
  std::vector<char*> a, e;
  for (auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
  for (auto& s : env) e.push_back(const_cast<char*>(s.c_str()));
  a.push_back(nullptr);
  e.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) dl::throw_errno("fork");
  if (pid == 0) {
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::execvpe(a[0], a.data(), e.data());
    std::fprintf(stderr, "dl_pmix_run: cannot exec %s: %s\n", a[0], std::strerror(errno));
    ::_exit(127);
  }
  ::setpgid(pid, pid);
  return pid;
}

int exit_code(int status) {
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int run(const Options& o) {
  char tmpl[] = "/tmp/dl_pmix_run.XXXXXX";
  if (!::mkdtemp(tmpl)) dl::throw_errno("mkdtemp");
  const std::string tmpdir = tmpl;
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);

  dl::mpi::JobMap map;
  map.nspace = "dlaunch." + std::to_string(::getpid());
  map.world_size = o.n;
  map.node_hosts = {host};
  map.node_ranks = {{}};
  for (int r = 0; r < o.n; ++r) map.node_ranks[0].push_back(r);
  map.tmpdir = tmpdir;

  TaskQueue q;
  if (::pipe2(q.wake, O_NONBLOCK | O_CLOEXEC) != 0) dl::throw_errno("pipe");
  std::unique_ptr<pm::PmixServer> server;
  int first_failure = 0;
  std::string failure_line;
  std::map<pid_t, int> running;  // pid -> rank
  auto kill_all = [&](int sig) { for (auto& [pid, r] : running) ::kill(-pid, sig); };
  auto fail = [&](int code, const std::string& line) {
    if (first_failure != 0) return;
    first_failure = code == 0 ? 1 : code;
    failure_line = line;
    kill_all(SIGTERM);
  };

  namespace msg = dl::control::msg;
  dl::mpi::MpiHooks hooks;
  hooks.post = [&q](std::function<void()> t) { q.post(std::move(t)); };
  hooks.fence = [&](uint64_t id, std::string blob) {
    if (o.verbose) std::fprintf(stderr, "dl_pmix_run: fence %llu with %zu bytes\n", (unsigned long long)id, blob.size());
    server->fence_done(id, blob);
  };
  // One host, no launcher: MPI_Abort ends the run; what would wait for a
  // launcher (spawn, lookup, connect across hosts) fails at once.
  hooks.send = [&](dl::control::MpiUp m) {
    const std::string no = "dl_pmix_run serves one host";
    if (auto* a = std::get_if<msg::MpiAbort>(&m))
      fail(a->status, "rank " + std::to_string(a->rank) + " on " + host + " aborted with status " +
                          std::to_string(a->status) + " (" + a->message + ")");
    else if (auto* s = std::get_if<msg::SpawnRequest>(&m))
      server->receive(msg::SpawnReply{s->id, std::nullopt, no});
    else if (auto* l = std::get_if<msg::MpiLookup>(&m))
      server->receive(msg::MpiLookupReply{l->id, {}, no});
    else if (auto* c = std::get_if<msg::MpiConnect>(&m))
      server->receive(msg::MpiConnectDone{c->id, std::nullopt, no});
  };
  if (o.verbose) hooks.trace = [](int r, const char* event) { std::fprintf(stderr, "dl_pmix_run: rank %d %s\n", r, event); };
  server = pm::PmixServer::start(map, hooks);

  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  ::sigprocmask(SIG_BLOCK, &chld, nullptr);
  int sfd = ::signalfd(-1, &chld, SFD_NONBLOCK | SFD_CLOEXEC);
  for (int r = 0; r < o.n; ++r) {
    auto extra = server->rank_env(r);
    extra.push_back({"RANK", std::to_string(r)});
    extra.push_back({"WORLD_SIZE", std::to_string(o.n)});
    extra.push_back({"LOCAL_RANK", std::to_string(r)});
    extra.push_back({"LOCAL_WORLD_SIZE", std::to_string(o.n)});
    running[spawn(o.argv, rank_environment(extra))] = r;
  }

  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(o.timeout_s);
  auto kill_deadline = std::chrono::steady_clock::time_point::max();
  while (!running.empty()) {
    pollfd fds[2] = {{q.wake[0], POLLIN, 0}, {sfd, POLLIN, 0}};
    ::poll(fds, 2, 100);
    q.run_all();
    signalfd_siginfo si;
    while (::read(sfd, &si, sizeof si) > 0) {}
    int status = 0;
    pid_t pid;
    while ((pid = ::waitpid(-1, &status, WNOHANG)) > 0) {
      auto it = running.find(pid);
      if (it == running.end()) continue;
      int rank = it->second;
      running.erase(it);
      ::kill(-pid, SIGKILL);  // anything the rank left in its group
      if (exit_code(status) != 0)
        fail(exit_code(status), "rank " + std::to_string(rank) + " on " + host + " (pid " +
                                    std::to_string(pid) + ") exited with code " +
                                    std::to_string(exit_code(status)));
    }
    auto now = std::chrono::steady_clock::now();
    if (first_failure && kill_deadline == std::chrono::steady_clock::time_point::max())
      kill_deadline = now + std::chrono::seconds(3);
    if (now > kill_deadline) kill_all(SIGKILL);
    if (now > deadline && !first_failure) {
      std::string ranks;
      for (auto& [p, r] : running) ranks += " " + std::to_string(r);
      fail(124, "timed out after " + std::to_string(o.timeout_s) + " s waiting for ranks" + ranks);
    }
  }
  server->stop();
  std::filesystem::remove_all(tmpdir);
  if (first_failure) std::fprintf(stderr, "dl_pmix_run: %s\n", failure_line.c_str());
  return first_failure;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(parse(argc, argv));
  } catch (const dl::Error& e) {
    std::fprintf(stderr, "dl_pmix_run: error: %s\n", e.what());
    return dl::exit_code_for(e.kind());
  }
}
