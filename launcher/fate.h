#pragma once
// The job's fate: which rank failed first, what to say, which code to exit
// with. Pure state, fed by the control server, unit-tested without processes.
//
// Rules: all ranks exit 0 -> 0. Otherwise the first failure decides: its
// exit code, or 128+signal; never an OR of codes. Failures that follow a
// teardown (our own SIGTERM/SIGKILL) do not count. Ranks that failed by
// themselves after the first failure reached us (a survivor's error can
// arrive before the killed rank's signal does) are named after the verdict,
// signal deaths first, since those are usually the cause.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace dl::launcher {

struct RankExit {
  int rank = -1;
  std::string host;
  int pid = 0;
  int code = 0;         // exit code when signal == 0
  int signal = 0;       // terminating signal, or 0
  bool core = false;
  bool spawn_failed = false;
  std::string message;  // why a spawn failed
  // The agent had sent the rank a signal (a teardown or a forwarded one)
  // before it ended: its end is a consequence, not a failure of its own.
  bool by_agent = true;
  // The exception torch's @record wrote for this rank (msg::Exited::error),
  // "" = none: the verdict carries it, so the cause is on the one line.
  std::string error;
  // How verdicts name it; "" = "rank N" (spawned ranks: launcher/mpi/spawn_answer.h).
  std::string name;
};

class Fate {
 public:
  explicit Fate(int world_size) : done_(static_cast<size_t>(world_size), false), remaining_(world_size) {}

  // Records a rank's end. Returns true when it is the job's first failure,
  // i.e. the caller must tear the job down now.
  bool on_exit(const RankExit& e);
  // The agent on `host` is gone; its unfinished `ranks` count as failed.
  bool on_host_lost(const std::string& host, const std::string& why, const std::vector<int>& ranks);
  // `rank` on `host` called MPI_Abort(status): the job ends with status
  // (1 when status is 0, so that the abort still reads as a failure).
  // `text` is the program's own message (PMI2_Abort's msg): the verdict
  // quotes its first line unless it only restates the call, as MPICH's
  // "application called MPI_Abort(...)" does. `name`: how to call the rank
  // ("" = "rank N"; spawned ranks: launcher/mpi/spawn_answer.h).
  bool on_mpi_abort(int rank, const std::string& host, int status, const std::string& text = {},
                    const std::string& name = {});
  // An MPI fence across hosts did not complete; `missing` names the hosts
  // and ranks that did not arrive.
  bool on_fence_timeout(uint64_t id, double seconds, const std::string& missing);
  // Per-node mode: another node's job failed with `code` and `verdict`.
  bool on_peer_failure(int code, const std::string& verdict);
  // Per-node mode: these ranks belong to other nodes; they count as done.
  void not_ours(const std::vector<int>& ranks);
  // `rank` on `host` started MPI's wire-up over `wire` ("PMIx" or "PMI"),
  // which no agent serves: in per-node mode, whose nodes meet at a store and
  // run no MPI fences between them: usage, 2, never retried. Never a
  // singleton that believes it is the whole job.
  bool on_mpi_refused(int rank, const std::string& host, const std::string& wire);
  // A request no host can satisfy (--bind-to core on too few cores): usage, 2.
  bool on_bad_request(std::string why);
  // A rank's MPI_Comm_spawn was refused (launcher/mpi/spawn_answer.h): the job
  // fails with code 1 and `verdict`, since the rank cannot go on as it meant to.
  bool on_spawn_refused(std::string verdict);
  // MPI_Comm_spawn started `count` more ranks (ids after the last one):
  // the job is done when they are too.
  void add_ranks(int count) {
    done_.resize(done_.size() + static_cast<size_t>(count), false);
    remaining_ += count;
  }
  // Whether rank `rank` ended (or counts as ended).
  bool done(int rank) const { return rank >= 0 && static_cast<size_t>(rank) < done_.size() && done_[static_cast<size_t>(rank)]; }
  // --timeout fired.
  // `source` names what set the bound (--timeout, MPIEXEC_TIMEOUT).
  bool on_timeout(double seconds, const std::string& source = "--timeout");
  // Replaces the verdict of a failure already recorded (several hosts that
  // failed to start are named together); the exit code stays.
  void restate(std::string verdict) {
    if (failed()) verdict_ = std::move(verdict), said_ = false;
  }
  // The verdict's failure is already on stderr in full (an agent that could
  // not be started: "dlaunch: error: node3: connection refused ..."), so a
  // job without restarts ends without saying it again.
  void mark_said() { said_ = failed(); }
  bool said() const { return said_ && also_signaled_.empty() && also_exited_.empty(); }
  // dlaunch itself got `sig` (forwarded to the ranks).
  void on_signal(int sig);

  bool failed() const { return code_ != 0; }
  // --max-restarts: the failure is one a new attempt may cure: a rank's own
  // exit code or signal, MPI_Abort, a lost host, another node's failure
  // (per-node mode: that node abandons the restart if its failure was not
  // one a restart cures). Never a rank that could not
  // be started, a bad request, and never once
  // --timeout fired or dlaunch got SIGINT/SIGTERM/SIGHUP (even after the
  // first failure): those end the job.
  bool retryable() const { return failed() && retryable_ && !final_; }
  // dlaunch was told to stop: a signal (SIGINT, SIGTERM, SIGHUP) or --timeout.
  bool stopped() const { return final_; }
  bool all_done() const;
  int remaining() const;
  int exit_code() const { return code_; }
  // The one line that says why the job failed; "" on success.
  std::string verdict() const;
  // The host of the failure that decided the verdict, when it was a rank's
  // own exit or signal or a lost host ("" otherwise): --spares swaps out a
  // host that fails attempt after attempt.
  const std::string& failed_host() const { return failed_host_; }

 private:
  bool fail(int code, std::string verdict, bool retryable = false);
  bool blame(const std::string& host, bool first) {
    if (first) failed_host_ = host;
    return first;
  }
  // Marks `rank` ended; false if it already was.
  bool mark_done(int rank);
  std::vector<bool> done_;
  int remaining_ = 0;  // ranks not done: all_done() after each of 8,192 exits is not a scan of 8,192
  int code_ = 0;
  int user_signal_ = 0;
  bool retryable_ = false, final_ = false, said_ = false;
  std::string verdict_;
  std::vector<std::string> also_signaled_, also_exited_;  // failed by themselves later
  std::string failed_host_;
  int blamed_rank_ = -1;  // the rank a verdict of MPI_Abort or a refused MPI_Init names: never "also" named
};

// "Segmentation fault" for 11, etc.
std::string signal_name(int sig);

}  // namespace dl::launcher
