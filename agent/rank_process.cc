#include "agent/rank_process.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "errors/error.h"

namespace dl::agent {

static Resolved check_file(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return {"", 127, path + ": " + std::strerror(errno)};
  if (S_ISDIR(st.st_mode)) return {"", 126, path + ": is a directory"};
  if (::access(path.c_str(), X_OK) != 0) return {"", 126, path + ": " + std::strerror(errno)};
  return {path, 0, ""};
}

Resolved resolve_program(const std::string& argv0, const std::string& path_var) {
  if (argv0.empty()) return {"", 127, "empty program name"};
  if (argv0.find('/') != std::string::npos) return check_file(argv0);
  Resolved not_exec;
  size_t start = 0;
  while (start <= path_var.size()) {
    size_t end = path_var.find(':', start);
    if (end == std::string::npos) end = path_var.size();
    std::string dir = path_var.substr(start, end - start);
    std::string candidate = (dir.empty() ? "." : dir) + "/" + argv0;
    Resolved r = check_file(candidate);
    if (r.code == 0) return r;
    if (r.code == 126 && not_exec.message.empty()) not_exec = r;
    start = end + 1;
  }
  if (!not_exec.message.empty()) return not_exec;
  return {"", 127, argv0 + ": command not found in PATH"};
}

PtyPair open_output_pty() {
  PtyPair p;
  // O_NOCTTY: the agent may be a session leader without a terminal, and
  // opening a tty would then make it the agent's controlling terminal.
  p.master = ::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (p.master < 0) throw_errno("opening a pseudo-terminal (posix_openpt)");
  auto fail = [&p](const char* what) {
    const int e = errno;
    ::close(p.master);
    if (p.slave >= 0) ::close(p.slave);
    throw_errno(what, e);
  };
  char name[128];
  if (::grantpt(p.master) != 0 || ::unlockpt(p.master) != 0) fail("unlocking a pseudo-terminal");
  if (::ptsname_r(p.master, name, sizeof name) != 0) fail("naming a pseudo-terminal (ptsname)");
  p.slave = ::open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (p.slave < 0) fail("opening a pseudo-terminal's slave");
  // Raw: the bytes the rank writes arrive unchanged (no "\n" -> "\r\n", no
  // echo, no line editing), as they would through a pipe.
  termios t{};
  if (::tcgetattr(p.slave, &t) != 0) fail("reading a pseudo-terminal's modes");
  ::cfmakeraw(&t);
  if (::tcsetattr(p.slave, TCSANOW, &t) != 0) fail("setting a pseudo-terminal raw");
  // A size of 0x0 makes some programs (progress bars, column layouts) divide
  // by zero or print nothing; 80x24 is what a terminal reports by default.
  winsize ws{};
  ws.ws_row = 24, ws.ws_col = 80;
  ::ioctl(p.slave, TIOCSWINSZ, &ws);
  return p;
}

namespace {
std::vector<char*> c_strings(const std::vector<std::string>& v) {
  std::vector<char*> out;
  out.reserve(v.size() + 1);
  for (const auto& s : v) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

void make_pipe(int fds[2]) {
  if (::pipe2(fds, O_CLOEXEC) != 0) throw_errno("creating a pipe for a rank");
}

// Runs in the child between fork and exec: async-signal-safe calls only.
[[noreturn]] void child(const SpawnSpec& s, char** argv, char** envp, int in, int out, int err, pid_t agent,
                        const cpu_set_t* cpus) {
  ::setpgid(0, 0);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != agent) ::_exit(137);  // the agent died before prctl took effect
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  for (int sig = 1; sig < NSIG; ++sig) ::signal(sig, SIG_DFL);
  ::dup2(in, 0);
  ::dup2(out, 1);
  ::dup2(err, 2);
  if (s.inherit_fd >= 3) ::fcntl(s.inherit_fd, F_SETFD, 0);
  if (cpus && ::sched_setaffinity(0, sizeof *cpus, cpus) != 0) {
    const char* why = std::strerror(errno);
    const char* m = "dlaunch-agent: cannot bind the rank to its CPUs (--bind-to): ";
    (void)!::write(2, m, std::strlen(m));
    (void)!::write(2, why, std::strlen(why));
    const char* fix = "; run with --bind-to none, or free those CPUs (taskset, cgroup cpuset)\n";
    (void)!::write(2, fix, std::strlen(fix));
    ::_exit(126);
  }
  if (!s.wdir.empty() && ::chdir(s.wdir.c_str()) != 0) {
    const char* m = "dlaunch-agent: cannot change to the working directory\n";
    (void)!::write(2, m, std::strlen(m));
    ::_exit(126);
  }
  ::execve(s.exe.c_str(), argv, envp);
  int e = errno;
  const char* m = "dlaunch-agent: exec failed: ";
  (void)!::write(2, m, std::strlen(m));
  (void)!::write(2, std::strerror(e), std::strlen(std::strerror(e)));
  (void)!::write(2, "\n", 1);
  ::_exit(e == ENOENT ? 127 : 126);
}
}  // namespace

Spawned spawn_rank(const SpawnSpec& s) {
  int out[2], err[2], in[2] = {-1, -1};
  bool out_pty = false;
  std::string pty_error;
  if (s.stdout_pty) {
    try {
      PtyPair p = open_output_pty();
      out[0] = p.master, out[1] = p.slave, out_pty = true;
    } catch (const Error& e) {
      pty_error = e.what();
    }
  }
  if (!out_pty) make_pipe(out);
  make_pipe(err);
  if (s.want_stdin) make_pipe(in);
  else if ((in[0] = ::open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0) throw_errno("opening /dev/null");
  auto argv = c_strings(s.argv);
  auto envp = c_strings(s.env);
  const pid_t agent = ::getpid();
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  for (int c : s.cpus)
    if (c >= 0 && c < CPU_SETSIZE) CPU_SET(c, &cpus);
  pid_t pid = ::fork();
  if (pid < 0) throw_errno("fork");
  if (pid == 0) child(s, argv.data(), envp.data(), in[0], out[1], err[1], agent, s.cpus.empty() ? nullptr : &cpus);
  // Also set the group from the parent, so a signal sent right after
  // fork returns reaches the group (no race with the child's setpgid).
  ::setpgid(pid, pid);
  ::close(out[1]);
  ::close(err[1]);
  ::close(in[0]);
  ::fcntl(out[0], F_SETFL, O_NONBLOCK);
  ::fcntl(err[0], F_SETFL, O_NONBLOCK);
  if (in[1] >= 0) ::fcntl(in[1], F_SETFL, O_NONBLOCK);
  Spawned sp;
  sp.pid = pid, sp.out_fd = out[0], sp.err_fd = err[0], sp.in_fd = in[1];
  sp.out_is_pty = out_pty;
  sp.pty_error = std::move(pty_error);
  return sp;
}

}  // namespace dl::agent
