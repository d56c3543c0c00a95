#pragma once
// LoopWatch: says when the agent's event loop is held up, and where.
//
// Everything an agent does for the launcher (heartbeats, forwarded output,
// fences) runs on one asio loop; a loop held up for the launcher's heartbeat
// timeout looks, from the launcher, like a lost host. A timer on the loop
// marks a turn every third of `threshold`; a thread of its own checks the
// mark when the last one would be `threshold` old (so a loop that keeps
// turning wakes the thread about once a threshold). When the loop has
// not turned for `threshold`, the thread writes to stderr, at once and with
// plain write(2) (the loop's own stderr writes may be what blocks), a line
// saying so and, where eu-stack or gdb is installed, every thread's stack of
// this process; when the loop turns again it says for how long it was held.
// A stop of the whole process (SIGSTOP, Ctrl-Z) or a starved machine holds
// the watching thread too: a watch that itself woke late says nothing.
// Starved is told apart by the kernel's count of the time the loop's thread
// was runnable but not run (/proc/thread-self/schedstat): when the loop
// turns after it waited `threshold` or more for a CPU, it says so, and for
// how long, since a lost heartbeat is then the host's CPUs' doing. A stall
// seen while the loop's thread spent most of it waiting for a CPU is said as
// such, without the stacks: they would show a thread ready to run, and
// reading them (a debugger per agent) takes more of the CPUs it lacks.
// So is a stall while the loop's thread waits, by design, on processes it
// started (LoopWatch::Waiting: the clone of a rank returns once the rank has
// exec'd, and a starved or slow exec holds the loop): its stacks would show
// only that wait. So is a stall while the loop's thread is blocked in
// epoll_wait, its timer due long ago: the loop waits for events, as it
// should, and was woken late (a host, or a hypervisor, whose CPUs are
// taken). On a test bed of 1,024 agents on 2 CPUs, a restart's stalled
// agents each ran a debugger, a tenth of the CPU of the restart; on a slower
// one, 165 debuggers of loops idle in epoll_wait ran during a launch. The
// loop thread's /proc files are opened once and read with one pread each
// (machine/proc_file.h): on that test bed, a watch that opened and parsed
// them through streams at every look, four times a threshold, was most of
// what a restart cost over its floor (docs/failures.md, "What the watch costs").
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "machine/proc_file.h"

namespace dl::agent {

class LoopWatch {
 public:
  // Starts watching `io` (its timer runs on it). `who` starts each line
  // ("dlaunch-agent on h1"). Write to `fd` (stderr by default).
  LoopWatch(boost::asio::io_context& io, std::string who, std::chrono::milliseconds threshold, int fd = 2);
  ~LoopWatch();
  LoopWatch(const LoopWatch&) = delete;
  LoopWatch& operator=(const LoopWatch&) = delete;

  // The threshold from $DLAUNCH_AGENT_STALL_MS (0 turns the watch off), else 3 s.
  static std::chrono::milliseconds threshold_from_env();

  // While one lives, the loop's thread is waiting on something it started
  // and cannot be sped by looking: `what` completes the stall's line ("while
  // it waits for ..."). For the process's one loop; nested ones restore.
  class Waiting {
   public:
    explicit Waiting(const char* what) : before_(waiting_.exchange(what)) {}
    ~Waiting() { waiting_.store(before_); }
    Waiting(const Waiting&) = delete;
    Waiting& operator=(const Waiting&) = delete;

   private:
    const char* before_;
  };

  // On the loop's thread: says, once, if it waited `threshold` or more for a
  // CPU since the loop last turned (as the next turn would): for a caller
  // about to leave, such as an agent whose launcher gave it up meanwhile.
  void check_starved();

 private:
  using Clock = std::chrono::steady_clock;
  void tick();
  void watch();
  Clock::time_point next_look(Clock::time_point now) const;
  void say(const std::string& text) const;
  // Of a stall of `stalled` ns so far, how long the loop's thread has been
  // waiting for a CPU, when that is most of it; -1 when it is not (or unknown).
  int64_t starved_ns(int64_t stalled) const;

  boost::asio::steady_timer timer_;
  std::string who_;
  std::chrono::milliseconds threshold_, period_;
  int fd_;
  std::atomic<int64_t> last_turn_ns_;  // Clock's ns at the loop's last turn
  std::atomic<int64_t> reported_ns_{0};  // the turn a stall was reported after (0: none)
  std::atomic<int64_t> loop_wait_ns_{-1};  // the loop thread's run-queue wait at its last turn (-1: unknown)
  std::atomic<int64_t> loop_cpu_ns_{-1};   // its time on a CPU then
  std::atomic<int> loop_tid_{0};  // the loop's thread, once it turned (its files below are open then)
  // The loop thread's schedstat, stat and syscall files, opened at its first
  // turn and read again at each look (machine/proc_file.h).
  machine::ProcFile loop_schedstat_, loop_stat_, loop_syscall_;
  static inline std::atomic<const char*> waiting_{nullptr};  // Waiting's `what`, while one lives
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

// How long the calling thread has been runnable but not running, in all
// (ns; the kernel's scheduler statistics), or -1 where the kernel keeps none.
int64_t thread_run_wait_ns();

// Every thread's stack of process `pid` by eu-stack or gdb (the first found
// on PATH), at most `timeout`; "" when neither is installed or it failed.
std::string read_own_stacks(pid_t pid, std::chrono::milliseconds timeout);

}  // namespace dl::agent
