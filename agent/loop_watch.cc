#include "agent/loop_watch.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <ctime>
#include <cstdlib>
#include <vector>

#include "agent/stack_tools.h"
#include "machine/cpus.h"
#include "control/env_names.h"
#include "wire/quiet_thread.h"
#include "wire/socket.h"

extern char** environ;

namespace dl::agent {
namespace {
int64_t ns_of(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}
std::string seconds(int64_t ns) {
  const int64_t ds = ns / 100'000'000;  // tenths
  return std::to_string(ds / 10) + "." + std::to_string(ds % 10) + " s";
}
}  // namespace

std::chrono::milliseconds LoopWatch::threshold_from_env() {
  const char* v = std::getenv(env::kDlAgentStallMs);
  if (v && *v) return std::chrono::milliseconds(std::strtoll(v, nullptr, 10));
  return std::chrono::milliseconds(3000);
}

LoopWatch::LoopWatch(boost::asio::io_context& io, std::string who, std::chrono::milliseconds threshold, int fd)
    : timer_(io), who_(std::move(who)), threshold_(threshold),
      period_(std::max<std::chrono::milliseconds>(threshold / 3, std::chrono::milliseconds(20))), fd_(fd),
      last_turn_ns_(ns_of(Clock::now())) {
  if (threshold_.count() <= 0) return;
  tick();
  thread_ = wire::quiet_thread([this] { watch(); });
}

LoopWatch::~LoopWatch() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  timer_.cancel();
}

void LoopWatch::say(const std::string& text) const { wire::write_all_fd(fd_, text); }

int64_t thread_run_wait_ns() { return machine::runnable_wait_ns("/proc/thread-self/schedstat"); }

void LoopWatch::check_starved() {
  if (threshold_.count() <= 0) return;
  const auto times = machine::sched_times(loop_schedstat_);
  const int64_t wait = times.waiting_ns;
  if (wait < 0) return;
  loop_cpu_ns_ = times.on_cpu_ns;
  const int64_t before = loop_wait_ns_;
  if (before >= 0 && wait - before >= std::chrono::nanoseconds(threshold_).count())
    say(who_ + ": warning: it was runnable but got no CPU for " + seconds(wait - before) +
        " (this host's CPUs were taken: more busy processes than CPUs, or another scheduling group preferred; its "
        "heartbeats and the ranks' output waited meanwhile; give the host fewer busy ranks than CPUs, or raise "
        "--heartbeat-timeout)\n");
  loop_wait_ns_ = wait;
}

void LoopWatch::tick() {
  if (!loop_tid_) {
    // Opened by the loop's thread: thread-self is that thread, for the watch's thread too.
    loop_schedstat_ = machine::ProcFile("/proc/thread-self/schedstat");
    loop_stat_ = machine::ProcFile("/proc/thread-self/stat");
    loop_syscall_ = machine::ProcFile("/proc/thread-self/syscall");
    loop_tid_ = static_cast<int>(::gettid());
  }
  check_starved();
  const int64_t now = ns_of(Clock::now());
  if (const int64_t since = reported_ns_.exchange(0)) {
    say(who_ + ": its event loop is turning again after " + seconds(now - since) + "\n");
  }
  last_turn_ns_ = now;
  timer_.expires_after(period_);
  timer_.async_wait([this](const boost::system::error_code& ec) {
    if (!ec) tick();
  });
}

namespace {
// Whether the thread whose `syscall` file this is, is blocked in
// epoll_wait: an event loop waiting for its events (the file starts with
// the number of the system call it is blocked in, or "running").
bool in_epoll_wait(const machine::ProcFile& syscall) {
  char buf[64];
  const std::string_view text = syscall.read(buf, sizeof buf);
  long nr = -1;
  if (std::from_chars(text.data(), text.data() + text.size(), nr).ec != std::errc()) return false;
#ifdef SYS_epoll_wait
  if (nr == SYS_epoll_wait) return true;
#endif
#ifdef SYS_epoll_pwait2
  if (nr == SYS_epoll_pwait2) return true;
#endif
  return nr == SYS_epoll_pwait;
}
}  // namespace

int64_t LoopWatch::starved_ns(int64_t stalled) const {
  const int64_t wait0 = loop_wait_ns_, cpu0 = loop_cpu_ns_;
  if (!loop_tid_ || wait0 < 0 || cpu0 < 0) return -1;
  const auto now = machine::sched_times(loop_schedstat_);
  if (now.waiting_ns < 0) return -1;
  // The kernel adds a wait once it ends: a wait that goes on now is the
  // stall less its time on a CPU, while the thread is runnable.
  const int64_t counted = now.waiting_ns - wait0, on_cpu = now.on_cpu_ns - cpu0;
  if (2 * counted >= stalled) return counted;
  if (machine::task_state(loop_stat_) == 'R' && 2 * on_cpu < stalled) return stalled - on_cpu;
  return -1;
}

// The watch's thread wakes when the loop's last turn would become a stall
// (`threshold` after it), not at every period: a loop that keeps turning
// costs it one wake per threshold or so.
LoopWatch::Clock::time_point LoopWatch::next_look(Clock::time_point now) const {
  const auto due = Clock::time_point(std::chrono::nanoseconds(last_turn_ns_.load())) + threshold_;
  return due > now ? due : now + period_;  // a stall said already: a period on, until the loop turns
}

void LoopWatch::watch() {
  std::unique_lock<std::mutex> lock(mu_);
  for (auto planned = next_look(Clock::now()); !cv_.wait_until(lock, planned, [this] { return stop_; });
       planned = next_look(Clock::now())) {
    const auto now = Clock::now();
    const int64_t turn = last_turn_ns_;
    // The whole process was held (stopped, starved): not the loop's doing.
    if (now - planned > threshold_ / 2) continue;
    if (ns_of(now) - turn < std::chrono::nanoseconds(threshold_).count() || reported_ns_ == turn) continue;
    reported_ns_ = turn;
    lock.unlock();
    const int64_t stalled = ns_of(now) - turn;
    if (const int64_t starved = starved_ns(stalled); starved >= 0) {
      say(who_ + ": warning: its event loop has not turned for " + seconds(stalled) + ", " + seconds(starved) +
          " of it runnable and waiting for a CPU (this host's CPUs are taken: its heartbeats and the ranks' output to the "
          "launcher wait meanwhile; its stacks are not read, which would take more of them)\n");
      lock.lock();
      continue;
    }
    if (const char* what = waiting_.load()) {
      say(who_ + ": warning: its event loop has not turned for " + seconds(stalled) + " while it waits for " + what +
          " (its heartbeats and the ranks' output to the launcher wait meanwhile; its stacks are not read: they "
          "would show only that wait)\n");
      lock.lock();
      continue;
    }
    // A loop blocked in epoll_wait past its own timer is not held by a
    // handler of ours: its wake came late (the host's CPUs or its hypervisor
    // held it). Its stacks would show only that wait, and on a host starved
    // that way a debugger per agent takes more of what it lacks.
    if (loop_tid_ && in_epoll_wait(loop_syscall_)) {
      say(who_ + ": warning: its event loop has not turned for " + seconds(stalled) +
          " though it is waiting for events (in epoll_wait), its timer due long ago: its wake came late, this host's "
          "CPUs are taken (its heartbeats and the ranks' output to the launcher wait meanwhile; its stacks are not read: "
          "they would show only that wait)\n");
      lock.lock();
      continue;
    }
    // The line first, the stacks once read (a second or so): should the loop
    // turn meanwhile, its "turning again" still comes after this line.
    say(who_ + ": warning: its event loop has not turned for " + seconds(stalled) +
        " (its heartbeats and the ranks' output to the launcher wait meanwhile)\n");
    std::string stacks = read_own_stacks(::getpid(), std::chrono::milliseconds(10000));
    if (!stacks.empty() && stacks.back() != '\n') stacks += '\n';
    say(stacks.empty() ? who_ + ": no eu-stack or gdb here to say where its threads were\n"
                       : who_ + ": its threads were at:\n" + stacks);
    lock.lock();
  }
}

namespace {
// Async-signal-safe sleep of `ms`.
void nap_ms(long ms) {
  timespec t{ms / 1000, (ms % 1000) * 1000000};
  while (::nanosleep(&t, &t) != 0 && errno == EINTR) {
  }
}

long elapsed_ms(const timespec& since) {
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  return (now.tv_sec - since.tv_sec) * 1000 + (now.tv_nsec - since.tv_nsec) / 1000000;
}

// The sentinel, in the child of fork(): starts the tool as its own child
// with `out_fd` as its stdout and stderr, kills it when it overruns
// `timeout_ms`, and then continues `target`, however the tool ended. A tracer killed while attached
// can leave its tracee stopped as a whole (the attach's SIGSTOP delivered
// once it is detached), and a process stopped as a whole, the watch's own
// thread with it, cannot continue itself: someone outside must. Only
// async-signal-safe calls (the parent has other threads).
[[noreturn]] void run_sentinel(const char* path, char* const* argv, int out_fd, pid_t target, long timeout_ms) {
  // It holds nothing of the agent's (its connections, its ranks' pipes): an
  // agent that dies is seen gone at once, not once its sentinel ends.
  if (out_fd != 3) ::dup2(out_fd, 3), out_fd = 3;
  ::close_range(4, ~0U, 0);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
  struct sigaction dfl{};
  dfl.sa_handler = SIG_DFL;
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGCHLD, SIGPIPE}) ::sigaction(sig, &dfl, nullptr);
  // The tool starts with no signal blocked: the watch's thread blocks them
  // all (wire/quiet_thread.h), and a debugger that never sees its SIGCHLD
  // waits forever.
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  timespec start{};
  ::clock_gettime(CLOCK_MONOTONIC, &start);
  const pid_t tool = ::fork();
  if (tool == 0) {
    const int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    ::dup2(out_fd, 1), ::dup2(out_fd, 2);
    if (null_fd >= 0) ::dup2(null_fd, 0);
    ::execve(path, argv, environ);
    ::_exit(127);
  }
  ::close(out_fd);
  if (tool < 0) ::_exit(1);
  bool overran = false;
  while (::waitpid(tool, nullptr, WNOHANG) == 0) {
    if (elapsed_ms(start) >= timeout_ms) {
      ::kill(tool, SIGKILL);
      ::waitpid(tool, nullptr, 0);
      overran = true;
      break;
    }
    nap_ms(10);
  }
  // However the tool ended (a tool killed by someone else leaves the same
  // stop): a SIGCONT to a process that runs changes nothing.
  ::kill(target, SIGCONT);
  ::_exit(overran ? 2 : 0);
}
}  // namespace

std::string read_own_stacks(pid_t pid, std::chrono::milliseconds timeout) {
  const char* path = std::getenv("PATH");
  const StackTool tool = find_stack_tool(path ? path : "/usr/bin:/bin");
  if (tool.name.empty()) return "";
  std::vector<std::string> args = tool_argv(tool, pid);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return "";
  // Everything the sentinel needs is made before the fork: after it, the
  // child may not allocate.
  const pid_t sentinel = ::fork();
  if (sentinel == 0) {
    ::close(fds[0]);
    run_sentinel(tool.path.c_str(), argv.data(), fds[1], pid, static_cast<long>(timeout.count()));
  }
  // Yama's ptrace_scope 1 lets a process trace only its descendants: let the
  // sentinel's child, the tool, trace us (it needs a few ms to exec before
  // it attaches).
  if (sentinel > 0 && pid == ::getpid()) ::prctl(PR_SET_PTRACER, static_cast<unsigned long>(sentinel), 0, 0, 0);
  ::close(fds[1]);
  std::string out;
  if (sentinel > 0) {
    // The sentinel ends the tool at `timeout`; reading stops a little later
    // at most, should the sentinel itself be starved.
    const auto deadline = std::chrono::steady_clock::now() + timeout + std::chrono::seconds(2);
    char buf[4096];
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) break;
      pollfd p{fds[0], POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
      const ssize_t n = ::read(fds[0], buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      out.append(buf, static_cast<size_t>(n));
    }
    // The agent's own reaping (waitpid(-1) once the loop turns) may take the
    // sentinel first, and its pid with it: no blocking wait on that pid, a
    // second of polling, then the loop's reaping.
    for (int i = 0; i < 100 && ::waitpid(sentinel, nullptr, WNOHANG) == 0; ++i) ::usleep(10000);
    if (pid == ::getpid()) ::prctl(PR_SET_PTRACER, 0UL, 0, 0, 0);
  }
  ::close(fds[0]);
  return out;
}

}  // namespace dl::agent
