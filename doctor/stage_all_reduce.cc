// Stage 6: a real dlaunch job over the hosts that passed, one rank each,
// running `dlaunch bench` (the collectives runtime's all_reduce, every
// element checked) and reporting its bus bandwidth. It goes through the same
// launcher, agents, store and collectives a user's job does.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "doctor/analysis.h"
#include "doctor/doctor.h"
#include "errors/error.h"

namespace dl::doctor {

namespace {
using Clock = std::chrono::steady_clock;

struct ChildResult {
  int status = -1;
  std::string out, err;
};

// Runs argv with stdout and stderr captured; SIGKILLs its process group after
// `timeout` (status 124 then).
ChildResult run_child(const std::vector<std::string>& argv, Millis timeout) {
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) throw_errno("creating pipes for the all_reduce job");
  const pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) throw_errno("fork");
  if (pid == 0) {
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(1);
    int devnull = ::open("/dev/null", O_RDONLY);
    ::dup2(devnull, 0);
    ::dup2(out[1], 1);
    ::dup2(err[1], 2);
    std::vector<char*> a;
    for (const auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
    a.push_back(nullptr);
    ::execv(a[0], a.data());
    ::_exit(127);
  }
  ::close(out[1]);
  ::close(err[1]);
  ChildResult r;
  const auto end = Clock::now() + timeout;
  bool killed = false;
  pollfd p[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
  for (int open = 2; open > 0;) {
    if (!killed && Clock::now() > end) ::kill(-pid, SIGKILL), killed = true;
    if (::poll(p, 2, 100) <= 0) continue;
    for (int i = 0; i < 2; ++i) {
      if (p[i].fd < 0 || !(p[i].revents & (POLLIN | POLLHUP))) continue;
      char b[8192];
      ssize_t n = ::read(p[i].fd, b, sizeof b);
      if (n > 0) (i ? r.err : r.out).append(b, static_cast<size_t>(n));
      else ::close(p[i].fd), p[i].fd = -1, --open;
    }
  }
  int st = 0;
  ::waitpid(pid, &st, 0);
  r.status = killed ? 124 : WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return r;
}

std::string last_lines(const std::string& s, int n) {
  size_t pos = s.size();
  while (pos > 0 && (s[pos - 1] == '\n')) --pos;
  size_t start = pos;
  for (int k = 0; k < n && start > 0; ++k) start = s.rfind('\n', start - 1) == std::string::npos ? 0 : s.rfind('\n', start - 1);
  std::string t = s.substr(start, pos - start);
  while (!t.empty() && t.front() == '\n') t.erase(0, 1);
  for (auto& c : t)
    if (c == '\n') c = ' ';
  return t;
}
}  // namespace

void Doctor::stage_all_reduce() {
  const std::vector<int> hosts = alive();
  if (hosts.size() < 2) return;
  progress("all_reduce over " + std::to_string(hosts.size()) + " hosts");
  const char* tmp = std::getenv("TMPDIR");
  std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/dlaunch-doctor-XXXXXX";
  if (!::mkdtemp(tmpl.data())) throw_errno("creating a temporary directory in " + tmpl.substr(0, tmpl.rfind('/')));
  const std::string dir = tmpl, hostfile = dir + "/hosts";
  {
    std::ofstream f(hostfile);
    for (int h : hosts) f << hostfiles::describe(entries_[static_cast<size_t>(h)]) << " slots=1\n";
  }
  std::vector<std::string> argv{self_exe_, "--hostfile", hostfile, "-n", std::to_string(hosts.size()), "--timeout", "120",
                                "--ssh-timeout", std::to_string(o_.ssh_timeout_s)};
  if (!o_.ssh_config.empty()) argv.insert(argv.end(), {"--ssh-config", o_.ssh_config});
  if (!o_.prefix.empty()) argv.insert(argv.end(), {"--prefix", o_.prefix});
  if (o_.ssh_accept_new) argv.push_back("--ssh-accept-new");
  argv.insert(argv.end(), {remote_exe_, "bench", "-b", "4M", "-e", "4M", "-n", "5", "-w", "2", "--json"});
  ChildResult r = run_child(argv, Millis(150000));
  std::filesystem::remove_all(dir);
  nlohmann::json j;
  if (auto brace = r.out.find('{'); brace != std::string::npos) j = nlohmann::json::parse(r.out.substr(brace), nullptr, false);
  const bool parsed = j.is_object() && j.contains("rows") && !j["rows"].empty();
  std::string all;
  for (int h : hosts) all += (all.empty() ? "" : ", ") + name(h);
  if (r.status == 0 && parsed && j.value("wrong", 1) == 0) {
    const double busbw = j["rows"][0]["out_of_place"].value("busbw", 0.0) * 1e9;
    for (int h : hosts) report_->set(h, Check::kAllReduce, Mark::kOk, human_rate(busbw));
    report_->note("all_reduce", "4 MB float32 sum over " + std::to_string(hosts.size()) + " hosts, busbw " + human_rate(busbw) +
                                    ", every element right");
    report_->note("busbw_Bps", busbw);
    return;
  }
  std::string what = "a " + std::to_string(hosts.size()) + "-host job (" + all + ") running `dlaunch bench` ";
  if (r.status == 124) what += "did not finish within 150 s";
  else if (parsed && j.value("wrong", 0) > 0) what += "got " + std::to_string(j.value("wrong", 0)) + " wrong elements in all_reduce";
  else what += "failed with status " + std::to_string(r.status) + ": " + last_lines(r.err.empty() ? r.out : r.err, 2);
  for (int h : hosts) report_->set(h, Check::kAllReduce, Mark::kFail);
  report_->add({Mark::kFail, Check::kAllReduce, {}, what, "run it by hand to see every rank's output: dlaunch --hostfile H -n " +
                                                          std::to_string(hosts.size()) + " dlaunch bench -b 4M -e 4M"});
}

}  // namespace dl::doctor
