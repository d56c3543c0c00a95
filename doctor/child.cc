#include "doctor/child.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>

#include "errors/error.h"
#include "errors/temp_dirs.h"

namespace dl::doctor {

namespace {
using Clock = std::chrono::steady_clock;
}  // namespace

ChildResult run_child(const std::vector<std::string>& argv, Millis timeout, const std::string& what) {
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) throw_errno("creating pipes for " + what);
  const pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) throw_errno("starting " + what);
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

TempDir::TempDir() {
  reap_stale_temp_dirs(temp_base());
  std::string tmpl = temp_base() + "/" + temp_dir_prefix("doctor") + "XXXXXX";
  if (!::mkdtemp(tmpl.data())) throw_errno("creating a temporary directory in " + tmpl.substr(0, tmpl.rfind('/')));
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

}  // namespace dl::doctor
