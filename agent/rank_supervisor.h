#pragma once
// The agent's ranks: spawns them, streams their output, feeds their stdin,
// reaps them, signals them, and reports each end once, after the last of its
// output. It knows nothing of sockets: what it has to say goes out through
// its hooks, and it pauses output reads while the link is congested.
//
// Threading: everything on the io_context's thread.
#include <array>
#include <boost/asio.hpp>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/rank_process.h"
#include "agent/stack_dump.h"
#include "control/messages.h"
#include "control/protocol.h"

namespace dl::agent {

class RankSupervisor {
 public:
  struct Hooks {
    std::function<void(std::string frame)> send;  // a frame for the launcher
    std::function<bool()> congested;              // output reads pause while true
    std::function<void()> reported;               // a rank's end was reported
    // Optional: adds what the supervisor cannot know to an exit report
    // before it goes (the agent puts torch's recorded error there).
    std::function<void(control::msg::Exited&)> annotate_exit;
    // Optional: a child that is no rank was reaped (the stack tools).
    std::function<void(pid_t)> other_child;
  };
  RankSupervisor(boost::asio::io_context& io, Hooks hooks);
  ~RankSupervisor();

  // Forks and execs `rank` (spec.exe resolved) and reports it started.
  void spawn(int rank, const SpawnSpec& spec);
  // spawn() for `n` ranks at once, reported in order. `prepare(i)`, called
  // on this thread for i = 0 .. n-1 in turn, gives the i-th rank and its
  // spec, or nullopt for a rank it refused itself. From 8 ranks on a machine
  // with 2 or more CPUs the clones are made from up to 4 threads (one per 4
  // ranks, no more than the CPUs): each clone holds its thread until the
  // child has exec'd (CLONE_VFORK), so from one thread the ranks started
  // strictly in turn while the other cores sat idle. The helpers start each
  // rank as soon as it is prepared, while this thread prepares the next
  // ones and then joins them (docs/design.md, "Ranks are started from
  // several threads"). A rank that cannot be started is refused (code 1, why).
  using Prepared = std::optional<std::pair<int, SpawnSpec>>;
  void spawn_all(size_t n, const std::function<Prepared(size_t)>& prepare);
  // Before a launch of about `n` ranks arrives (a forked local agent waiting
  // for its command line, remote/early_agent.h): the descriptor table, spawn
  // slots and helper threads spawn_all would set up then, set up now. A
  // helper started by spawn_all waited for a CPU while this thread prepared
  // ranks (docs/benchmarks.md, "Measurements behind the design").
  static void get_ready_for(size_t n);
  // `rank` could not be started: reported as spawn_failed with `code`.
  void refuse(int rank, int code, const std::string& message);
  void stdin_data(int rank, std::string_view bytes);
  void stdin_eof(int rank);
  // Sends `sig` to every running rank's process group.
  void signal_all(int sig);
  // SIGTERM now, SIGKILL after `grace`.
  void teardown(std::chrono::milliseconds grace);
  // SIGKILL to every rank's group, reported or not (stragglers included).
  void kill_all();
  // The link drained: resume the output reads it paused.
  void resume_output();
  // --max-restarts: every rank was reported; forget them so that the next
  // launch starts afresh (the same rank numbers). REQUIRES all_reported().
  void forget_reported();
  bool all_reported() const;
  // Every rank spawned, by rank: its pid and whether it still runs.
  std::vector<StackTarget> targets() const;
  bool any_running() const;

 private:
  struct Rank;
  // Takes a started rank under supervision and reports it started.
  void adopt(int rank, Spawned sp);
  void read_output(Rank& r, int stream);
  // The stream's descriptor, registered or not; -1 once it ended.
  static int stream_fd(Rank& r, int stream);
  void drain_output(Rank& r, int stream);
  void end_output(Rank& r, int stream);
  void write_stdin(Rank& r);
  void reap();
  void arm_drain(Rank& r);
  void maybe_report(Rank& r);
  // Clean exits wait for the host's other ranks (at most kCleanExitHold),
  // then go as one exited_clean (control/messages.h); a failure's report
  // sends them first.
  void send_clean_exits();

  boost::asio::io_context& io_;
  Hooks hooks_;
  std::map<int, std::unique_ptr<Rank>> ranks_;  // by global rank
  // Ranks of earlier attempts: closed, kept until the supervisor goes, for
  // the cancelled handlers that may still name them.
  std::vector<std::unique_ptr<Rank>> retired_;
  std::vector<std::pair<Rank*, int>> paused_;   // output reads waiting for the link to drain
  std::array<char, 65536> read_buf_;             // every rank's output is read into this (drain_output)
  boost::asio::signal_set sigchld_;
  boost::asio::steady_timer kill_timer_;
  std::vector<Rank*> clean_;               // ended cleanly, not reported yet
  boost::asio::steady_timer clean_timer_;  // sends clean_
};

}  // namespace dl::agent
