#include "machine/run_child.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <climits>

#include "errors/error.h"

extern char** environ;

namespace dl::machine {

ChildResult run_child(const std::vector<std::string>& argv, std::chrono::milliseconds timeout, const std::string& what,
                      const std::vector<std::string>& extra_env) {
  using Clock = std::chrono::steady_clock;
  // Everything the child needs, built before fork(): another thread may hold
  // the allocator's lock at that moment, and the child has only this thread.
  std::vector<char*> args;
  for (const auto& s : argv) args.push_back(const_cast<char*>(s.c_str()));
  args.push_back(nullptr);
  std::vector<char*> env;
  for (char** e = environ; e && *e; ++e) env.push_back(*e);
  for (const auto& s : extra_env) env.push_back(const_cast<char*>(s.c_str()));
  env.push_back(nullptr);
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0) throw_errno("creating pipes for " + what);
  if (::pipe2(err, O_CLOEXEC) != 0) {
    ::close(out[0]), ::close(out[1]);
    throw_errno("creating pipes for " + what);
  }
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    for (int fd : {out[0], out[1], err[0], err[1]}) ::close(fd);
    throw_errno("starting " + what);
  }
  if (pid == 0) {
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(1);
    const int devnull = ::open("/dev/null", O_RDONLY);
    ::dup2(devnull, 0);
    ::dup2(out[1], 1);
    ::dup2(err[1], 2);
    ::execve(args[0], args.data(), env.data());
    ::_exit(127);
  }
  ::setpgid(pid, pid);  // (the child does it too: whichever runs first)
  ::close(out[1]);
  ::close(err[1]);
  ChildResult r;
  const auto end = Clock::now() + timeout;
  bool killed = false;
  pollfd p[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
  for (int open = 2; open > 0;) {
    if (!killed && Clock::now() >= end) ::kill(-pid, SIGKILL), killed = true;
    // Woken by output, by the pipes' close or at the deadline, not by a
    // timer: a doctor's job over a thousand simulated hosts runs for
    // minutes, and a tick each 100 ms was a tenth of the doctor's CPU.
    const long left = killed ? -1 : std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now()).count() + 1;
    if (::poll(p, 2, static_cast<int>(std::min<long>(left, INT_MAX))) <= 0) continue;
    for (int i = 0; i < 2; ++i) {
      if (p[i].fd < 0 || !(p[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char b[8192];
      const ssize_t n = ::read(p[i].fd, b, sizeof b);
      std::string& into = i ? r.err : r.out;
      if (n > 0) into.append(b, std::min(static_cast<size_t>(n), kMaxCaptured - std::min(kMaxCaptured, into.size())));
      else ::close(p[i].fd), p[i].fd = -1, --open;
    }
  }
  int st = 0;
  while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  r.status = killed ? 124 : WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return r;
}

}  // namespace dl::machine
