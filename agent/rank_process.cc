#include "agent/rank_process.h"

#include <fcntl.h>
#include <linux/close_range.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "errors/error.h"
#include "wire/socket.h"

namespace dl::agent {

static Resolved check_file(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return {"", 127, path + ": " + std::strerror(errno)};
  if (S_ISDIR(st.st_mode)) return {"", 126, path + ": is a directory"};
  if (::access(path.c_str(), X_OK) != 0) return {"", 126, path + ": " + std::strerror(errno)};
  return {path, 0, ""};
}

Resolved resolve_program(const std::string& argv0, const std::string& path_var, const std::string& dir) {
  if (argv0.empty()) return {"", 127, "empty program name"};
  // Checked where the exec will find it; the path handed back is the one the
  // exec uses after its chdir to `dir` (joined, it would be wrong there when
  // `dir` is itself relative).
  auto check = [&dir](const std::string& path) {
    if (dir.empty() || path.front() == '/') return check_file(path);
    Resolved r = check_file(dir + (dir.back() == '/' ? "" : "/") + path);
    if (r.code == 0) r.path = path;
    return r;
  };
  if (argv0.find('/') != std::string::npos) return check(argv0);
  Resolved not_exec;
  size_t start = 0;
  while (start <= path_var.size()) {
    size_t end = path_var.find(':', start);
    if (end == std::string::npos) end = path_var.size();
    std::string dir = path_var.substr(start, end - start);
    std::string candidate = (dir.empty() ? "." : dir) + "/" + argv0;
    Resolved r = check(candidate);
    if (r.code == 0) return r;
    if (r.code == 126 && not_exec.message.empty()) not_exec = r;
    start = end + 1;
  }
  if (!not_exec.message.empty()) return not_exec;
  return {"", 127, argv0 + ": command not found in PATH"};
}

namespace {
// The raw modes every new pty gets, read from the first one: a new pty
// starts with the driver's default modes, so the rest need only the set.
thread_local std::optional<termios> t_raw;

// The slave of an unlocked master: by TIOCGPTPEER (Linux 4.13+, no path
// lookup), else by its name in /dev/pts. -1 with errno on failure.
int open_slave(int master) {
#ifdef TIOCGPTPEER
  const int fd = ::ioctl(master, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (fd >= 0 || (errno != EINVAL && errno != ENOTTY)) return fd;
#endif
  char name[128];
  if (::grantpt(master) != 0 || ::ptsname_r(master, name, sizeof name) != 0) return -1;
  return ::open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
}
}  // namespace

void reserve_fd_table(int fds) {
  static int reserved = 0;  // the most an earlier call asked for
  if (fds <= reserved) return;
  reserved = fds;
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0) return;
  const long top = std::min<long>(fds, rl.rlim_cur == RLIM_INFINITY ? fds : static_cast<long>(rl.rlim_cur)) - 1;
  if (top < 3) return;
  const int probe = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (probe < 0) return;
  // The lowest free descriptor at or above `top`: `top` itself, unless taken.
  const int high = ::fcntl(probe, F_DUPFD_CLOEXEC, static_cast<int>(top));
  if (high >= 0) ::close(high);
  ::close(probe);
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
  if (::unlockpt(p.master) != 0) fail("unlocking a pseudo-terminal");
  p.slave = open_slave(p.master);
  if (p.slave < 0) fail("opening a pseudo-terminal's slave");
  // Raw: the bytes the rank writes arrive unchanged (no "\n" -> "\r\n", no
  // echo, no line editing), as they would through a pipe.
  if (!t_raw) {
    termios t{};
    if (::tcgetattr(p.slave, &t) != 0) fail("reading a pseudo-terminal's modes");
    ::cfmakeraw(&t);
    t_raw = t;
  }
  if (::tcsetattr(p.slave, TCSANOW, &*t_raw) != 0) fail("setting a pseudo-terminal raw");
  // A size of 0x0 makes some programs (progress bars, column layouts) divide
  // by zero or print nothing; 80x24 is what a terminal reports by default.
  winsize ws{};
  ws.ws_row = 24, ws.ws_col = 80;
  ::ioctl(p.slave, TIOCSWINSZ, &ws);
  return p;
}

sigset_t non_default_signals() {
  sigset_t set;
  sigemptyset(&set);
  // The kernel's own summary, in one read: SigIgn and SigCgt of
  // /proc/self/status, bit N-1 for signal N (asking each signal's
  // disposition was NSIG-1 system calls on every launch's path).
  char buf[4096];
  ssize_t n = -1;
  if (const int fd = ::open("/proc/self/status", O_RDONLY | O_CLOEXEC); fd >= 0) {
    n = ::read(fd, buf, sizeof buf - 1);
    ::close(fd);
  }
  uint64_t mask = 0;
  int found = 0;
  if (n > 0) {
    buf[n] = '\0';
    for (const char* name : {"\nSigIgn:", "\nSigCgt:"})
      if (const char* at = std::strstr(buf, name)) {
        mask |= std::strtoull(at + std::strlen(name), nullptr, 16);
        ++found;
      }
  }
  if (found == 2) {
    for (int sig = 1; sig < NSIG && sig <= 64; ++sig)
      if ((mask >> (sig - 1)) & 1) sigaddset(&set, sig);
    return set;
  }
  for (int sig = 1; sig < NSIG; ++sig) {
    struct sigaction old {};
    if (::sigaction(sig, nullptr, &old) == 0 && old.sa_handler != SIG_DFL) sigaddset(&set, sig);
  }
  return set;
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

// /dev/null for the ranks' stdin, opened once per agent (close-on-exec; the
// child's dup2 to fd 0 clears that on its copy).
int dev_null() {
  static const int fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw_errno("opening /dev/null");
  return fd;
}

// What the child reads from the agent's memory, which it shares until exec.
struct ChildArgs {
  const SpawnSpec* s;
  char** argv;
  char** envp;
  int in, out, err;
  int inherit;    // becomes the rank's kRankInheritedFd; -1: none
  int share_end;  // > 0: the child starts in the agent's descriptor table (CLONE_FILES)
                  // and keeps a private copy of only the descriptors below this
  bool close_rest;  // close_range is there: the child closes every other descriptor
  pid_t agent;
  const cpu_set_t* cpus;
};

// Whether close_range(2) is there (Linux 5.9+, with CLOSE_RANGE_UNSHARE):
// asked once with a range it refuses (EINVAL) without touching anything.
bool have_close_range() {
  static const bool yes = ::close_range(4, 3, 0) != 0 && errno == EINVAL;
  return yes;
}

// A spawning thread's four low descriptors (docs/design.md, "A rank's
// descriptor table holds its own descriptors only"): the rank's stdin,
// stdout, stderr and PMI socket are put there (dup3) just before its clone,
// so that the child can unshare the agent's table keeping only the
// descriptors below them, instead of copying every rank's pipes and closing
// them again at exec (a cost that grew with the square of the ranks). Between
// clones they hold /dev/null. Taken from reserve_spawn_slots' pool at the
// thread's first spawn; nullptr (the clone copies the table, as fork does)
// when none was reserved.
struct SpawnSlots {
  int fd[4];
  int end;  // one past the highest
};
thread_local std::optional<SpawnSlots> t_slots;
// Sets reserved by reserve_spawn_slots, for threads yet to take one.
std::mutex g_pool_mu;
std::vector<SpawnSlots> g_pool;

std::optional<SpawnSlots> new_slots() {
  SpawnSlots sl{{-1, -1, -1, -1}, 0};
  bool ok = true;
  for (int& fd : sl.fd) {
    fd = ::fcntl(dev_null(), F_DUPFD_CLOEXEC, 3);
    ok = ok && fd >= 0;
    sl.end = std::max(sl.end, fd + 1);
  }
  if (ok) return sl;
  for (int fd : sl.fd)
    if (fd >= 0) ::close(fd);
  return std::nullopt;
}

SpawnSlots* spawn_slots() {
  if (!t_slots) {
    std::lock_guard<std::mutex> lock(g_pool_mu);
    if (g_pool.empty()) return nullptr;
    t_slots = g_pool.back(), g_pool.pop_back();
  }
  return &*t_slots;
}

void say(const char* m) { (void)!::write(2, m, std::strlen(m)); }

// Runs in the child between clone and exec, on its own stack but in the
// agent's memory: async-signal-safe calls only, and no write to memory but
// its own stack. Every signal is blocked on entry (spawn_rank blocked them
// before the clone), so no handler of the agent can run here; the
// dispositions are reset before the mask is cleared.
int child(void* p) {
  const ChildArgs& a = *static_cast<const ChildArgs*>(p);
  const SpawnSpec& s = *a.s;
  // First, while the agent's other threads may still open and close
  // descriptors in the table this child shares: a table of its own, holding
  // the agent's stdio and the spawn slots only (the kernel copies nothing
  // above share_end).
  if (a.share_end > 0 && ::close_range(static_cast<unsigned>(a.share_end), ~0U, CLOSE_RANGE_UNSHARE) != 0) {
    say("dlaunch-agent: cannot give the rank a descriptor table of its own (close_range)\n");
    ::_exit(126);
  }
  ::setpgid(0, 0);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != a.agent) ::_exit(137);  // the agent died before prctl took effect
  for (int sig = 1; sig < NSIG; ++sig)
    if (s.reset_signals == nullptr || sigismember(s.reset_signals, sig) == 1) ::signal(sig, SIG_DFL);
  // Under Yama's ptrace_scope 1 only a process's ancestors may attach: this
  // lets the agent's own children (eu-stack, gdb: agent/stack_dump.h) read
  // the rank's stacks too. Without Yama it fails harmlessly (EINVAL).
  ::prctl(PR_SET_PTRACER, a.agent, 0, 0, 0);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::dup2(a.in, 0);
  ::dup2(a.out, 1);
  ::dup2(a.err, 2);
  int first_free = 3;
  if (a.inherit >= 0) {  // its PMI socket, as PMI_FD=3 (dup2 clears close-on-exec; onto itself it would not)
    if (a.inherit == kRankInheritedFd) ::fcntl(a.inherit, F_SETFD, 0);
    else ::dup2(a.inherit, kRankInheritedFd);
    first_free = kRankInheritedFd + 1;
  }
  // Nothing else of the agent's reaches the rank, not even a descriptor the
  // agent inherited without close-on-exec.
  if (a.close_rest) ::close_range(static_cast<unsigned>(first_free), ~0U, 0);
  if (a.cpus && ::sched_setaffinity(0, sizeof *a.cpus, a.cpus) != 0) {
    const char* why = std::strerror(errno);
    say("dlaunch-agent: cannot bind the rank to its CPUs (--bind-to): ");
    say(why);
    say("; run with --bind-to none, or free those CPUs (taskset, cgroup cpuset)\n");
    ::_exit(126);
  }
  if (!s.wdir.empty() && ::chdir(s.wdir.c_str()) != 0) {  // (the agent checked it: this is a race)
    const char* why = std::strerror(errno);
    say("dlaunch-agent: cannot change to the working directory ");
    say(s.wdir.c_str());
    say(": ");
    say(why);
    say("\n");
    ::_exit(126);
  }
  wire::restore_descriptor_limit();  // the agent's raised one is not the rank's
  ::execve(s.exe.c_str(), a.argv, a.envp);
  const int e = errno;
  say("dlaunch-agent: exec failed: ");
  say(std::strerror(e));
  say("\n");
  ::_exit(e == ENOENT ? 127 : 126);
}

// The child's stack: used by one child at a time, since the agent's thread
// is suspended until that child has exec'd or exited (CLONE_VFORK).
constexpr size_t kChildStack = 256 * 1024;
thread_local std::unique_ptr<char[]> t_stack;
}  // namespace

Spawned spawn_rank(const SpawnSpec& s) {
  // Once this returns the child has its copy of inherit_fd (or there is no
  // child): the agent's goes, so that the next ranks' clones do not copy it.
  struct CloseInherited {
    int fd;
    ~CloseInherited() {
      if (fd >= 0) ::close(fd);
    }
  } close_inherited{s.inherit_fd};
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
  else in[0] = dev_null();
  auto argv = c_strings(s.argv);
  auto envp = c_strings(s.env);
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  for (int c : s.cpus)
    if (c >= 0 && c < CPU_SETSIZE) CPU_SET(c, &cpus);
  // (have_close_range is asked here, never first in the child: its static's
  // guard is the agent's memory.)
  ChildArgs args{&s,     argv.data(), envp.data(), in[0], out[1], err[1], s.inherit_fd, 0, have_close_range(),
                 ::getpid(), s.cpus.empty() ? nullptr : &cpus};
  SpawnSlots* slots = spawn_slots();
  // The slots this rank fills (its PMI socket's only with one) go back to
  // /dev/null after the clone, so that the agent holds no reference to the
  // rank's ends (its stdout's EOF depends on it).
  struct ClearSlots {
    SpawnSlots* sl;
    int used;
    ~ClearSlots() {
      for (int i = 0; sl && i < used; ++i) ::dup3(dev_null(), sl->fd[i], O_CLOEXEC);
    }
  } clear_slots{slots, s.inherit_fd >= 0 ? 4 : 3};
  if (slots) {
    const int mine[4] = {in[0], out[1], err[1], s.inherit_fd};
    bool ok = true;
    for (int i = 0; i < clear_slots.used && ok; ++i) ok = ::dup3(mine[i], slots->fd[i], O_CLOEXEC) >= 0;
    if (ok) {
      args.in = slots->fd[0], args.out = slots->fd[1], args.err = slots->fd[2];
      if (s.inherit_fd >= 0) args.inherit = slots->fd[3];
      args.share_end = slots->end;
    }
  }
  // Not make_unique, which zeroes it: 64 pages faulted in for the few the child uses.
  if (!t_stack) t_stack.reset(new char[kChildStack]);
  // 16-byte aligned top of the stack, which grows down.
  void* top = reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(t_stack.get() + kChildStack) & ~uintptr_t{15});
  sigset_t all, old;
  sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &old);
  const pid_t pid = ::clone(child, top, CLONE_VM | CLONE_VFORK | SIGCHLD | (args.share_end > 0 ? CLONE_FILES : 0), &args);
  const int clone_errno = errno;
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (pid < 0) {
    for (int fd : {out[0], out[1], err[0], err[1], in[1]})
      if (fd >= 0) ::close(fd);
    if (s.want_stdin) ::close(in[0]);
    throw_errno("starting a rank (clone)", clone_errno);
  }
  // The child has exec'd (or exited) by now, a process-group leader already:
  // a signal sent to its group from here on reaches it.
  ::close(out[1]);
  ::close(err[1]);
  if (s.want_stdin) ::close(in[0]);
  Spawned sp;
  sp.pid = pid, sp.out_fd = out[0], sp.err_fd = err[0], sp.in_fd = in[1];
  sp.out_is_pty = out_pty;
  sp.pty_error = std::move(pty_error);
  return sp;
}

void reserve_spawn_slots(int threads) {
  static int reserved = 0;  // sets handed out or in the pool: the agent's threads live as long as it
  std::lock_guard<std::mutex> lock(g_pool_mu);
  if (reserved >= threads || !have_close_range()) return;
  for (; reserved < threads; ++reserved)
    if (auto sl = new_slots()) g_pool.push_back(*sl);
    else return;
}

}  // namespace dl::agent
