#include "agent/rank_process.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
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
  make_pipe(out);
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
  return {pid, out[0], err[0], in[1]};
}

}  // namespace dl::agent
