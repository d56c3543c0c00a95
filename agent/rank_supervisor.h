#pragma once
// The agent's ranks: spawns them, streams their output, feeds their stdin,
// reaps them, signals them, and reports each end once, after the last of its
// output. It knows nothing of sockets: what it has to say goes out through
// its hooks, and it pauses output reads while the link is congested.
//
// Threading: everything on the io_context's thread, but spawn_all's clones
// (its own threads, handed back to the io_context's).
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
  // ranks, no more than the CPUs), none of them this one: each clone holds
  // its thread until the child has exec'd (CLONE_VFORK), and a host whose
  // CPUs are taken holds it for seconds, so the loop's heartbeats, and the
  // frames it relays for the agents beneath, would wait as long. The
  // threads start each rank as soon as it is prepared, while this thread
  // prepares the next ones, then returns to its loop; once every rank is
  // started they are adopted on this thread and `started` runs there
  // (docs/design.md, "Ranks are started from several threads"). Fewer
  // ranks, or no thread to be had, start here before this returns, and
  // `started` runs before it does. Until `started` has run, spawning() is
  // true and ended children are reaped no more (a rank not adopted yet
  // would be taken for another child). A rank that cannot be started is
  // refused (code 1, why). An exception of `prepare` stops the preparing and
  // is rethrown once the batch is adopted (here) or handed off; what was
  // prepared is started and supervised all the same.
  using Prepared = std::optional<std::pair<int, SpawnSpec>>;
  void spawn_all(size_t n, const std::function<Prepared(size_t)>& prepare, std::function<void()> started = {});
  // A batch of spawn_all is being started off this thread: its ranks are not
  // supervised yet.
  bool spawning() const { return spawning_; }
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
  // Sends `sig` to every running rank's process group, and to each rank of a
  // batch being started (spawning()) as it is adopted.
  void signal_all(int sig);
  // SIGTERM now, SIGKILL after `grace`.
  void teardown(std::chrono::milliseconds grace);
  // SIGKILL to every rank's group, reported or not (stragglers included),
  // and to a batch's being started as they are adopted (as signal_all).
  void kill_all();
  // The link drained: resume the output reads it paused.
  void resume_output();
  // --max-restarts: every rank was reported; forget them so that the next
  // launch starts afresh (the same rank numbers). REQUIRES all_reported().
  void forget_reported();
  bool all_reported() const;  // (false while spawning)
  // Every rank spawned, by rank: its pid and whether it still runs.
  std::vector<StackTarget> targets() const;
  bool any_running() const;

 private:
  struct Rank;
  struct Batch;
  // Every rank of a spawn_all batch started: each adopted (or refused), the
  // children that ended meanwhile reaped, `started` run, `prepare`'s
  // exception left to the caller.
  void adopt_batch(Batch& b, const std::function<void()>& started);
  // Takes a started rank under supervision and reports it started.
  void adopt(int rank, Spawned sp);
  void read_output(Rank& r, int stream);
  // The stream's descriptor, registered or not; -1 once it ended.
  static int stream_fd(Rank& r, int stream);
  void drain_output(Rank& r, int stream);
  void end_output(Rank& r, int stream);
  void write_stdin(Rank& r);
  void reap();  // on SIGCHLD: reap_children() (after the batch, while spawning), then wait again
  void reap_children();
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
  bool spawning_ = false;      // a spawn_all batch is being started off this thread
  bool reap_pending_ = false;  // a SIGCHLD came meanwhile
  uint64_t signals_on_adopt_ = 0;  // bit s: signal_all(s) or kill_all() came meanwhile; each rank gets them as it is adopted
};

}  // namespace dl::agent
