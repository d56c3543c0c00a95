#include "remote/agent_starter.h"

#include <fcntl.h>
#include <ifaddrs.h>
#include <limits.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <set>
#include <thread>

#include "errors/error.h"

namespace dl::remote {

namespace {
// The directory of this dlaunch binary, "" when /proc/self/exe is unreadable.
std::string own_dir() {
  char self[PATH_MAX] = {};
  ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return "";
  std::string dir(self, static_cast<size_t>(n));
  dir.resize(dir.rfind('/'));
  return dir;
}

}  // namespace

// Writes `bytes` to a pipe whose reader may be gone: false (EPIPE) instead of
// SIGPIPE. SIGPIPE is blocked on this thread for the write (a pipe has no
// MSG_NOSIGNAL); one the write raised is pending on this thread and is
// consumed before the old mask returns, so it is never delivered.
bool write_without_sigpipe(int fd, const std::string& bytes) {
  sigset_t pipe_only, old, pending;
  sigemptyset(&pipe_only);
  sigaddset(&pipe_only, SIGPIPE);
  ::pthread_sigmask(SIG_BLOCK, &pipe_only, &old);
  sigpending(&pending);
  const bool was_pending = sigismember(&pending, SIGPIPE) == 1;
  size_t done = 0;
  int err = 0;
  while (done < bytes.size()) {
    ssize_t k = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (k > 0) done += static_cast<size_t>(k);
    else if (errno != EINTR) { err = errno; break; }
  }
  if (err == EPIPE && !was_pending) {
    const timespec now{};
    while (::sigtimedwait(&pipe_only, nullptr, &now) < 0 && errno == EINTR) {}
  }
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return err == 0;
}

std::string agent_path(const std::string& prefix, bool for_remote) {
  if (!prefix.empty()) return prefix + "/bin/dlaunch-agent";
  const std::string dir = own_dir();
  if (!dir.empty()) {
    std::string beside = dir + "/dlaunch-agent";
    if (::access(beside.c_str(), X_OK) == 0) return beside;
  }
  return "dlaunch-agent";
}

std::string local_agent_exec_error(const std::string& path, int err) {
  const char* env_path = std::getenv("PATH");
  const std::string dir = own_dir();
  const std::string beside = (dir.empty() ? std::string("(unknown dir)") : dir) + "/dlaunch-agent";
  const std::string fix = "; install dlaunch-agent beside dlaunch (`cmake --install` puts both in DIR/bin) "
                          "or put the directory holding it on PATH";
  if (path.find('/') == std::string::npos && err == ENOENT)
    return "dlaunch-agent was not found: not beside dlaunch (" + beside + ") nor on PATH (" +
           (env_path ? env_path : "unset") + ")" + fix;
  const std::string where = path.find('/') == std::string::npos ? path + ", found on PATH" : path;
  return "dlaunch-agent cannot be executed (" + where + "): " + std::strerror(err) + fix;
}

std::string local_agent_exit_error(const std::string& path, int wait_status) {
  if (WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 127) return local_agent_exec_error(path, ENOENT);
  std::string how = WIFSIGNALED(wait_status)
                        ? "was killed by signal " + std::to_string(WTERMSIG(wait_status)) + " (" +
                              ::strsignal(WTERMSIG(wait_status)) + ")"
                        : "exited with status " + std::to_string(WEXITSTATUS(wait_status));
  return "dlaunch-agent (" + path + ") " + how +
         " before it connected (its own message, if any, is above); run it by hand to see why";
}

LocalAgent spawn_local_agent(const std::string& path, const std::vector<std::string>& args, const std::string& token,
                             int stderr_fd, int stdout_fd, int* exec_status_fd, int control_fd) {
  int in[2], exec_status[2];
  if (::pipe2(in, O_CLOEXEC) != 0) throw_errno("creating the agent's stdin pipe");
  // Closed by a successful exec (O_CLOEXEC), or carrying exec's errno.
  if (::pipe2(exec_status, O_CLOEXEC) != 0) {
    const int e = errno;
    ::close(in[0]), ::close(in[1]);
    throw_errno("creating the agent's exec status pipe", e);
  }
  // The token waits in the pipe (its buffer holds far more) while we still
  // hold the read end: no SIGPIPE, whatever the child does.
  (void)write_without_sigpipe(in[1], token + "\n");
  std::vector<std::string> argv_s{path};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& s : argv_s) argv.push_back(s.data());
  argv.push_back(nullptr);
  const pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) {
    const int e = errno;
    for (int fd : {in[0], in[1], exec_status[0], exec_status[1]}) ::close(fd);
    throw_errno("fork", e);
  }
  if (pid == 0) {
    ::setpgid(0, 0);
    // SIGTERM, not SIGKILL: the agent catches it and SIGKILLs its ranks'
    // process groups first (a rank's own children have no PDEATHSIG).
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(1);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::dup2(in[0], 0);
    if (stderr_fd >= 0) ::dup2(stderr_fd, 2);
    if (stdout_fd >= 0) ::dup2(stdout_fd, 1);
    int status_fd = exec_status[1];  // kept clear of the control socket's number
    if (control_fd >= 0 && status_fd == kAgentControlFd) status_fd = ::fcntl(status_fd, F_DUPFD_CLOEXEC, kAgentControlFd + 1);
    // dup2 clears close-on-exec on the copy; a socket already at that number keeps its flag.
    if (control_fd == kAgentControlFd) ::fcntl(control_fd, F_SETFD, 0);
    else if (control_fd >= 0) ::dup2(control_fd, kAgentControlFd);
    if (path.find('/') != std::string::npos) ::execv(path.c_str(), argv.data());
    else ::execvp(path.c_str(), argv.data());
    const int e = errno;
    (void)!::write(status_fd, &e, sizeof e);
    ::_exit(127);
  }
  ::setpgid(pid, pid);
  ::close(in[0]);
  ::close(exec_status[1]);
  *exec_status_fd = exec_status[0];
  return {pid, in[1]};
}

int read_exec_status(int exec_status_fd) {
  pollfd p{exec_status_fd, POLLIN, 0};
  if (::poll(&p, 1, 0) <= 0) return -1;
  int exec_errno = 0;
  ssize_t got;
  while ((got = ::read(exec_status_fd, &exec_errno, sizeof exec_errno)) < 0 && errno == EINTR) {}
  return got == static_cast<ssize_t>(sizeof exec_errno) ? exec_errno : 0;
}

LocalAgent start_local_agent(const std::string& path, const std::vector<std::string>& args, const std::string& token,
                             int stderr_fd, int stdout_fd, int control_fd) {
  int exec_status = -1;
  LocalAgent a = spawn_local_agent(path, args, token, stderr_fd, stdout_fd, &exec_status, control_fd);
  int exec_errno = 0;
  ssize_t got;
  while ((got = ::read(exec_status, &exec_errno, sizeof exec_errno)) < 0 && errno == EINTR) {}
  ::close(exec_status);
  if (got == static_cast<ssize_t>(sizeof exec_errno)) {
    ::close(a.stdin_fd);
    int st;
    while (::waitpid(a.pid, &st, 0) < 0 && errno == EINTR) {}
    throw RemoteError(local_agent_exec_error(path, exec_errno));
  }
  return a;
}

int open_agent_pidfd(const LocalAgent& a) {
  if (a.pid <= 0) return -1;
  return static_cast<int>(::syscall(SYS_pidfd_open, a.pid, 0));
}

std::optional<int> peek_agent_exit(const LocalAgent& a) {
  if (a.pid <= 0) return std::nullopt;
  siginfo_t info{};
  if (::waitid(P_PID, static_cast<id_t>(a.pid), &info, WEXITED | WNOHANG | WNOWAIT) != 0 || info.si_pid == 0)
    return std::nullopt;
  if (info.si_code == CLD_EXITED) return (info.si_status & 0xff) << 8;  // as W_EXITCODE(status, 0)
  return info.si_status & 0x7f;                                           // as W_EXITCODE(0, signal)
}

void reap_local_agent(LocalAgent& a, int ms) {
  if (a.pid <= 0) return;
  if (a.stdin_fd >= 0) ::close(a.stdin_fd), a.stdin_fd = -1;
  // Woken the moment it exits (its pidfd turns readable), not at the next
  // 5 ms tick: the agent usually exits right after the launcher's last read.
  int waited = 0;
  if (const int fd = open_agent_pidfd(a); fd >= 0) {
    pollfd p{fd, POLLIN, 0};
    while (::poll(&p, 1, ms) < 0 && errno == EINTR) {}
    ::close(fd);
    waited = ms;  // it has exited, or the wait is over
  }
  for (;; waited += 5) {
    int st;
    pid_t r = ::waitpid(a.pid, &st, WNOHANG);
    if (r == a.pid || (r < 0 && errno == ECHILD)) break;
    if (waited >= ms) {
      ::kill(-a.pid, SIGKILL);
      ::kill(a.pid, SIGKILL);
      ::waitpid(a.pid, &st, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  a.pid = -1;
}

}  // namespace dl::remote
