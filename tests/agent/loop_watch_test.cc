// LoopWatch (agent/loop_watch.h): a handler that holds the loop up is
// reported while it does, with the stacks, and again when the loop turns;
// a process stopped as a whole is not reported; a loop starved of CPU says
// for how long it got none.
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include <boost/asio.hpp>
#include <catch2/catch.hpp>

#include "agent/loop_watch.h"
#include "agent/stack_tools.h"

using namespace std::chrono_literals;

namespace {
std::string drain(int fd) {
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  return out;
}

// Pins the calling process to CPU 0.
bool pin_to_cpu0() {
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(0, &one);
  return ::sched_setaffinity(0, sizeof one, &one) == 0;
}

// A child spinning for `d` on CPU 0 at real-time priority: every ordinary
// thread there is runnable but not run meanwhile. Exits 3 where real-time
// scheduling is not allowed (root or CAP_SYS_NICE).
pid_t fork_rt_spinner_on_cpu0(std::chrono::milliseconds d) {
  const pid_t hog = ::fork();
  if (hog == 0) {
    sched_param p{};
    p.sched_priority = 10;
    if (!pin_to_cpu0() || ::sched_setscheduler(0, SCHED_FIFO, &p) != 0) ::_exit(3);
    const auto until = std::chrono::steady_clock::now() + d;
    while (std::chrono::steady_clock::now() < until) {
    }
    ::_exit(0);
  }
  return hog;
}

// A child running an idle loop under a 300 ms watch for 2.5 s, writing to
// fds[1] (closed here); on CPU 0 alone with `on_cpu0` (exit 3 if it cannot).
pid_t fork_watched_loop(int fds[2], bool on_cpu0) {
  const pid_t child = ::fork();
  if (child == 0) {
    ::close(fds[0]);
    if (on_cpu0 && !pin_to_cpu0()) ::_exit(3);
    boost::asio::io_context io;
    dl::agent::LoopWatch w(io, "dlaunch-agent on testhost", 300ms, fds[1]);
    boost::asio::steady_timer end(io);
    end.expires_after(2500ms);
    end.async_wait([&](auto) { io.stop(); });
    io.run();
    ::_exit(0);
  }
  ::close(fds[1]);
  return child;
}

// Not inlined: its name is what the stacks must show.
__attribute__((noinline)) void dlaunch_test_hold_the_loop(std::chrono::milliseconds d) {
  std::this_thread::sleep_for(d);
  asm volatile("" ::: "memory");
}
}  // namespace

TEST_CASE("loop watch: a handler holding the loop up is reported with the stacks, then its end", "[agent]") {
  int fds[2];
  REQUIRE(::pipe2(fds, O_NONBLOCK | O_CLOEXEC) == 0);
  boost::asio::io_context io;
  {
    dl::agent::LoopWatch w(io, "dlaunch-agent on testhost", 300ms, fds[1]);
    boost::asio::steady_timer t(io);
    t.expires_after(200ms);
    t.async_wait([](auto) { dlaunch_test_hold_the_loop(2500ms); });
    boost::asio::steady_timer end(io);
    end.expires_after(4500ms);  // the watch's word of the end has 2 s to come, on a loaded machine
    end.async_wait([&](auto) { io.stop(); });
    io.run();
  }
  ::close(fds[1]);
  const std::string out = drain(fds[0]);
  ::close(fds[0]);
  INFO(out);
  CHECK(out.find("dlaunch-agent on testhost: warning: its event loop has not turned for ") != std::string::npos);
  // 2.5 s held: said as 2.x s, or 3.x s when the watch's thread was late.
  CHECK((out.find("dlaunch-agent on testhost: its event loop is turning again after 2.") != std::string::npos ||
         out.find("dlaunch-agent on testhost: its event loop is turning again after 3.") != std::string::npos));
  const char* path = std::getenv("PATH");
  if (dl::agent::find_stack_tool(path ? path : "").name.empty()) {
    WARN("no eu-stack or gdb: the stacks part is not checked");
    CHECK(out.find("no eu-stack or gdb here to say where its threads were") != std::string::npos);
  } else {
    CHECK(out.find("dlaunch-agent on testhost: its threads were at:\n") != std::string::npos);
    CHECK(out.find("dlaunch_test_hold_the_loop") != std::string::npos);
  }
  // One report per stall.
  size_t n = 0;
  for (size_t at = out.find("has not turned"); at != std::string::npos; at = out.find("has not turned", at + 1)) ++n;
  CHECK(n == 1);
}

TEST_CASE("loop watch: a stall while the loop waits on what it started is said as that wait, without the stacks",
          "[agent]") {
  int fds[2];
  REQUIRE(::pipe2(fds, O_NONBLOCK | O_CLOEXEC) == 0);
  boost::asio::io_context io;
  {
    dl::agent::LoopWatch w(io, "dlaunch-agent on testhost", 300ms, fds[1]);
    boost::asio::steady_timer t(io);
    t.expires_after(200ms);
    t.async_wait([](auto) {
      const dl::agent::LoopWatch::Waiting outer("this host's ranks to start");
      { const dl::agent::LoopWatch::Waiting inner("something else"); }  // ended: the outer one is back
      dlaunch_test_hold_the_loop(1500ms);
    });
    // Held again, no longer waiting on anything: the stacks are read again.
    boost::asio::steady_timer t2(io);
    t2.expires_after(2500ms);
    t2.async_wait([](auto) { dlaunch_test_hold_the_loop(1000ms); });
    boost::asio::steady_timer end(io);
    end.expires_after(5500ms);
    end.async_wait([&](auto) { io.stop(); });
    io.run();
  }
  ::close(fds[1]);
  const std::string out = drain(fds[0]);
  ::close(fds[0]);
  INFO(out);
  const size_t waited = out.find(" while it waits for this host's ranks to start (");
  REQUIRE(waited != std::string::npos);
  CHECK(out.find("its stacks are not read: they would show only that wait") != std::string::npos);
  CHECK(out.find("something else") == std::string::npos);
  // The first stall read no stacks; the second, with nothing waited on, did.
  const size_t second = out.find("has not turned", waited);
  REQUIRE(second != std::string::npos);
  const size_t stacks = std::min(out.find("its threads were at:"), out.find("no eu-stack or gdb here"));
  REQUIRE(stacks != std::string::npos);
  CHECK(stacks > second);
}

TEST_CASE("loop watch: a loop that keeps turning, and a process stopped as a whole, say nothing", "[agent]") {
  int fds[2];
  REQUIRE(::pipe2(fds, O_CLOEXEC) == 0);
  const pid_t child = fork_watched_loop(fds, false);
  std::this_thread::sleep_for(500ms);
  ::kill(child, SIGSTOP);  // as Ctrl-Z does: every thread at once
  std::this_thread::sleep_for(1200ms);
  ::kill(child, SIGCONT);
  int st = 0;
  REQUIRE(::waitpid(child, &st, 0) == child);
  CHECK((WIFEXITED(st) && WEXITSTATUS(st) == 0));
  const std::string out = drain(fds[0]);
  ::close(fds[0]);
  CHECK(out == "");
}

TEST_CASE("loop watch: a loop starved of CPU says for how long it got none", "[agent]") {
  if (dl::agent::thread_run_wait_ns() < 0) {
    WARN("this kernel keeps no scheduler statistics (/proc/thread-self/schedstat): nothing to check");
    return;
  }
  int fds[2];
  REQUIRE(::pipe2(fds, O_CLOEXEC) == 0);
  // The watched loop, on CPU 0.
  const pid_t loop = fork_watched_loop(fds, true);
  std::this_thread::sleep_for(500ms);
  // A real-time spinner on CPU 0 for 0.8 s: every ordinary thread there is
  // runnable but not run (the kernel's real-time throttling leaves them 5%).
  const pid_t hog = fork_rt_spinner_on_cpu0(800ms);
  int hog_st = 0, loop_st = 0;
  REQUIRE(::waitpid(hog, &hog_st, 0) == hog);
  REQUIRE(::waitpid(loop, &loop_st, 0) == loop);
  const std::string out = drain(fds[0]);
  ::close(fds[0]);
  REQUIRE((WIFEXITED(loop_st) && WEXITSTATUS(loop_st) == 0));
  if (WIFEXITED(hog_st) && WEXITSTATUS(hog_st) == 3) {
    WARN("no real-time scheduling here (root or CAP_SYS_NICE): the starvation is not checked");
    return;
  }
  INFO(out);
  const std::string line = "dlaunch-agent on testhost: warning: it was runnable but got no CPU for ";
  const auto at = out.find(line);
  REQUIRE(at != std::string::npos);
  // "0.7 s" or so: at least the threshold, at most the spinner's 0.8 s.
  const double secs = std::stod(out.substr(at + line.size()));
  CHECK(secs >= 0.3);
  CHECK(secs <= 0.9);
  CHECK(out.find("its heartbeats and the ranks' output waited meanwhile; give the host fewer busy ranks than CPUs, "
                 "or raise --heartbeat-timeout)\n",
                 at) != std::string::npos);
}

TEST_CASE("loop watch: a stall of a loop starved of CPU, seen by a watch that is not, is said as such, without the stacks",
          "[agent]") {
  if (dl::agent::thread_run_wait_ns() < 0) {
    WARN("this kernel keeps no scheduler statistics (/proc/thread-self/schedstat): nothing to check");
    return;
  }
  cpu_set_t mine;
  REQUIRE(::sched_getaffinity(0, sizeof mine, &mine) == 0);
  if (CPU_COUNT(&mine) < 2 || !CPU_ISSET(0, &mine)) {
    WARN("fewer than 2 CPUs here, or not CPU 0: a watch that is not starved beside a loop that is cannot be set up");
    return;
  }
  // The watch may itself be held (the other CPU busy with other tests):
  // then it rightly says nothing. Up to 3 tries for one stall seen.
  std::string out;
  bool seen = false;
  for (int attempt = 0; attempt < 3 && !seen; ++attempt) {
    int fds[2];
    REQUIRE(::pipe2(fds, O_CLOEXEC) == 0);
    const pid_t loop = ::fork();
    if (loop == 0) {
      ::close(fds[0]);
      boost::asio::io_context io;
      // The watch's thread starts unpinned; then the loop's (this) thread
      // alone goes to CPU 0, where the spinner takes it.
      dl::agent::LoopWatch w(io, "dlaunch-agent on testhost", 300ms, fds[1]);
      if (!pin_to_cpu0()) ::_exit(3);
      boost::asio::steady_timer end(io);
      end.expires_after(2500ms);
      end.async_wait([&](auto) { io.stop(); });
      io.run();
      ::_exit(0);
    }
    ::close(fds[1]);
    std::this_thread::sleep_for(500ms);
    const pid_t hog = fork_rt_spinner_on_cpu0(900ms);
    int hog_st = 0, loop_st = 0;
    REQUIRE(::waitpid(hog, &hog_st, 0) == hog);
    REQUIRE(::waitpid(loop, &loop_st, 0) == loop);
    out = drain(fds[0]);
    ::close(fds[0]);
    REQUIRE((WIFEXITED(loop_st) && WEXITSTATUS(loop_st) == 0));
    if (WIFEXITED(hog_st) && WEXITSTATUS(hog_st) == 3) {
      WARN("no real-time scheduling here (root or CAP_SYS_NICE): the starvation is not checked");
      return;
    }
    INFO("try " << attempt << ":\n" << out);
    // Never the stacks, nor the line that comes before them.
    CHECK(out.find("its threads were at") == std::string::npos);
    CHECK(out.find("no eu-stack or gdb here") == std::string::npos);
    CHECK(out.find("(its heartbeats and the ranks' output to the launcher wait meanwhile)") == std::string::npos);
    seen = out.find("dlaunch-agent on testhost: warning: its event loop has not turned for ") != std::string::npos;
  }
  INFO(out);
  REQUIRE(seen);
  const std::string line = "dlaunch-agent on testhost: warning: its event loop has not turned for ";
  const auto at = out.find(line);
  CHECK(out.find(" of it runnable and waiting for a CPU (this host's CPUs are taken: its heartbeats and the ranks' output to "
                 "the launcher wait meanwhile; its stacks are not read, which would take more of them)\n",
                 at) != std::string::npos);
  // And when it turns again: how long it got no CPU, and that it turns.
  CHECK(out.find("dlaunch-agent on testhost: warning: it was runnable but got no CPU for ", at) != std::string::npos);
  CHECK(out.find("dlaunch-agent on testhost: its event loop is turning again after ", at) != std::string::npos);
}

// A stack tool that overruns is killed; one killed while attached can leave
// its tracee stopped as a whole, and a stopped process cannot continue
// itself. Here the "tool" (an eu-stack of its own on PATH) stops the
// process it was asked about and never ends, as a starved eu-stack killed
// mid-attach leaves it: read_own_stacks still returns, the process runs on,
// and the tool is gone.
TEST_CASE("loop watch: a stack tool that overran and left the agent stopped is killed and the agent continued",
          "[agent]") {
  char dir[] = "/tmp/dl_stacktool.XXXXXX";
  REQUIRE(::mkdtemp(dir) != nullptr);
  const std::string tool = std::string(dir) + "/eu-stack", pidfile = std::string(dir) + "/tool.pid";
  {
    FILE* f = std::fopen(tool.c_str(), "w");
    REQUIRE(f);
    std::fprintf(f, "#!/bin/sh\necho $$ > %s\nfor a; do pid=$a; done\nkill -STOP $pid\nexec /bin/sleep 100\n", pidfile.c_str());
    std::fclose(f);
    ::chmod(tool.c_str(), 0755);
  }
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  const pid_t child = ::fork();
  if (child == 0) {
    ::close(fds[0]);
    ::setenv("PATH", dir, 1);
    const auto t0 = std::chrono::steady_clock::now();
    dl::agent::read_own_stacks(::getpid(), 500ms);
    const long ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
    const std::string line = "returned after " + std::to_string(ms) + " ms\n";
    (void)::write(fds[1], line.data(), line.size());
    ::_exit(0);
  }
  ::close(fds[1]);
  int status = -1;
  bool ended = false;
  for (int i = 0; i < 150 && !ended; ++i) {
    ended = ::waitpid(child, &status, WNOHANG) == child;
    if (!ended) std::this_thread::sleep_for(100ms);
  }
  if (!ended) ::kill(child, SIGCONT), ::kill(child, SIGKILL), ::waitpid(child, &status, 0);
  const std::string said = drain(fds[0]);
  ::close(fds[0]);
  CHECK(ended);  // without the sentinel's SIGCONT it stays stopped for good
  CHECK(WIFEXITED(status));
  CHECK_THAT(said, Catch::Contains("returned after"));
  // The tool was killed, not left behind.
  FILE* f = std::fopen(pidfile.c_str(), "r");
  REQUIRE(f);
  int tool_pid = 0;
  CHECK(std::fscanf(f, "%d", &tool_pid) == 1);
  std::fclose(f);
  REQUIRE(tool_pid > 0);
  std::this_thread::sleep_for(200ms);
  CHECK(::kill(tool_pid, 0) != 0);
  ::unlink(pidfile.c_str());
  ::unlink(tool.c_str());
  ::rmdir(dir);
}
