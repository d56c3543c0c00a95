// Stage 3's probes of a host (doctor/facts.h): a program that does not
// answer is killed after its bound of its own time, and a program on a host
// whose CPUs are taken is not killed for the time it waited for one.
#include <catch2/catch.hpp>

#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <vector>

#include "doctor/child.h"
#include "doctor/facts.h"
#include "machine/cpus.h"

using namespace dl::doctor;
using namespace std::chrono_literals;

namespace {
// A shell loop that needs about `iterations` steps of CPU, then says so.
std::vector<std::string> busy_then_answer(int iterations) {
  return {"/bin/sh", "-c", "i=0; while [ $i -lt " + std::to_string(iterations) + " ]; do i=$((i+1)); done; echo answered"};
}

// Processes spinning on CPU `cpu` until destroyed (killed and reaped).
struct Hogs {
  std::vector<pid_t> pids;
  Hogs(int n, int cpu) {
    for (int i = 0; i < n; ++i) {
      const pid_t p = ::fork();
      if (p == 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(cpu, &set);
        ::sched_setaffinity(0, sizeof set, &set);
        for (volatile unsigned long x = 0;; x = x + 1) {
        }
      }
      if (p > 0) pids.push_back(p);
    }
  }
  ~Hogs() {
    for (pid_t p : pids) ::kill(p, SIGKILL);
    for (pid_t p : pids) ::waitpid(p, nullptr, 0);
  }
};

// The calling thread on CPU `cpu` alone while it lives (children inherit it).
struct Pinned {
  cpu_set_t before;
  bool ok = false;
  explicit Pinned(int cpu) {
    if (::sched_getaffinity(0, sizeof before, &before) != 0) return;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    ok = ::sched_setaffinity(0, sizeof set, &set) == 0;
  }
  ~Pinned() {
    if (ok) ::sched_setaffinity(0, sizeof before, &before);
  }
};

int first_allowed_cpu() {
  cpu_set_t set;
  if (::sched_getaffinity(0, sizeof set, &set) != 0) return 0;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) return c;
  return 0;
}
}  // namespace

TEST_CASE("facts: a program that does not answer is killed after its bound, and says how long it ran", "[doctor]") {
  int status = 0;
  double waited = 0;
  const auto line = first_output_line({"/bin/sleep", "30"}, &status, &waited, 800ms, 20s);
  CHECK(status == 124);
  CHECK(line.empty());
  CHECK(waited >= 0.79);
  CHECK(waited < 10);  // a sleeping program waits for no CPU: the bound is not moved out
}

TEST_CASE("facts: a program that answers passes, its line and status read", "[doctor]") {
  int status = -1;
  CHECK(first_output_line({"/bin/sh", "-c", "echo dlaunch-agent 1.2.3; exit 3"}, &status) == "dlaunch-agent 1.2.3");
  CHECK(status == 3);
  CHECK(first_output_line(std::vector<std::string>{"/nonexistent/program"}, &status).empty());
  CHECK(status == 127);
}

TEST_CASE("facts: a program starved of CPU past its bound is not killed for the wait, up to the most a starved one gets",
          "[doctor]") {
  if (dl::machine::runnable_wait_ns("/proc/self/schedstat") < 0) {
    WARN("this kernel keeps no scheduler statistics (/proc/PID/schedstat): nothing to check");
    return;
  }
  // Calibrate: a loop that needs about 0.25 s of CPU here.
  int iterations = 20000;
  for (;;) {
    int status = 0;
    double took = 0;
    REQUIRE(first_output_line(busy_then_answer(iterations), &status, &took) == "answered");
    if (took >= 0.25 || iterations > 50'000'000) break;
    iterations *= 2;
  }
  const int cpu = first_allowed_cpu();
  Pinned pin(cpu);
  REQUIRE(pin.ok);
  Hogs hogs(5, cpu);  // 6 busy processes on one CPU: the loop gets a sixth of it
  int status = 0;
  double waited = 0;
  const auto line = first_output_line(busy_then_answer(iterations), &status, &waited, 1200ms, 60s);
  INFO("ran " << waited << " s, status " << status);
  CHECK(waited > 1.2);  // starved past the bound, or this case proves nothing
  CHECK(line == "answered");
  CHECK(status == 0);

  SECTION("starved for longer than the most a starved program gets: killed then") {
    const auto cut = first_output_line(busy_then_answer(iterations * 8), &status, &waited, 300ms, 900ms);
    CHECK(status == 124);
    CHECK(cut.empty());
    CHECK(waited >= 0.89);
    CHECK(waited < 10);
  }
}

TEST_CASE("facts: a failed job's why is dlaunch's own verdict, not the stack or traceback before it", "[doctor]") {
  const std::string out =
      "[3] Traceback (most recent call last):\n"
      "dlaunch-agent on node0007: its threads were at:\n"
      "#2  0x0000558b10974e2a dl::agent::LoopWatch::watch()\n"
      "dlaunch: node0007 lost (no heartbeat for 10 s)\n"
      "#3  0x0000558b10974e2b start_thread\n"
      "dlaunch: job failed: 1 host lost, no restart asked\n";
  CHECK(verdict_lines(out, 2) == "dlaunch: node0007 lost (no heartbeat for 10 s) dlaunch: job failed: 1 host lost, no restart asked");
  CHECK(verdict_lines(out, 1) == "dlaunch: job failed: 1 host lost, no restart asked");
  // No verdict of dlaunch's (a job that died before it said one): its last lines.
  CHECK(verdict_lines("one\ntwo\nthree\n", 2) == "two three");
  CHECK(verdict_lines("", 2).empty());
}
