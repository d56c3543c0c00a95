#include "launcher/fate.h"

#include <signal.h>

#include <cstring>

#include "control/protocol.h"
#include "errors/exit_codes.h"

namespace dl::launcher {

std::string signal_name(int sig) {
  const char* d = ::sigdescr_np(sig);
  return d ? d : "signal " + std::to_string(sig);
}

bool Fate::fail(int code, std::string verdict, bool retryable) {
  if (code_ != 0) return false;
  code_ = code;
  retryable_ = retryable;
  verdict_ = std::move(verdict);
  return true;
}

bool Fate::mark_done(int rank) {
  std::vector<bool>::reference d = done_.at(static_cast<size_t>(rank));
  if (d) return false;
  d = true;
  --remaining_;
  return true;
}

bool Fate::on_exit(const RankExit& e) {
  mark_done(e.rank);
  if (!e.spawn_failed && e.signal == 0 && e.code == 0) return false;  // a clean exit: nothing to say, no words built
  const std::string who = (e.name.empty() ? "rank " + std::to_string(e.rank) : e.name) + " on " + e.host;
  if (e.spawn_failed) return fail(e.code, "cannot start " + who + ": " + e.message);
  if (failed() && !e.by_agent && user_signal_ == 0) {
    if (e.rank == blamed_rank_) return false;  // the verdict's own rank, ending as it said it would
    if (e.signal != 0)
      also_signaled_.push_back(who + " (pid " + std::to_string(e.pid) + ") was killed by signal " +
                               std::to_string(e.signal) + " (" + signal_name(e.signal) + ")");
    else if (e.code != 0)
      also_exited_.push_back(who + " exited with code " + std::to_string(e.code));
    return false;
  }
  const std::string raised = e.error.empty() ? "" : ": " + e.error;
  if (e.signal != 0) {
    // The user's signal, or the kill that a second one sends, ended it.
    if (user_signal_ != 0)
      return fail(exit_codes::kSignalBase + user_signal_,
                  "interrupted by " + std::string("SIG") + ::sigabbrev_np(user_signal_) + "; ranks stopped");
    return blame(e.host, fail(exit_codes::kSignalBase + e.signal,
                              who + " (pid " + std::to_string(e.pid) + ") was killed by signal " +
                                  std::to_string(e.signal) + " (" + signal_name(e.signal) + ")" +
                                  (e.core ? ", core dumped" : "") + raised,
                              true));
  }
  return blame(e.host, fail(e.code, who + " (pid " + std::to_string(e.pid) + ") exited with code " +
                                        std::to_string(e.code) + raised,
                            true));
}

std::string Fate::verdict() const {
  std::vector<const std::string*> also;
  for (const auto& s : also_signaled_) also.push_back(&s);
  for (const auto& s : also_exited_) also.push_back(&s);
  if (also.empty()) return verdict_;
  constexpr size_t kNamed = 3;
  std::string v = verdict_ + "; before dlaunch stopped them, also ";
  for (size_t i = 0; i < also.size() && i < kNamed; ++i) v += (i ? ", " : "") + *also[i];
  if (also.size() > kNamed) v += ", and " + std::to_string(also.size() - kNamed) + " more ranks failed";
  return v;
}

bool Fate::on_host_lost(const std::string& host, const std::string& why, const std::vector<int>& ranks) {
  bool had_unfinished = false;
  for (int r : ranks) had_unfinished = mark_done(r) || had_unfinished;
  if (!had_unfinished) return false;
  return blame(host, fail(exit_codes::kFailure, "lost the agent on " + host + " (" + why + "); its ranks count as failed", true));
}

bool Fate::on_mpi_abort(int rank, const std::string& host, int status, const std::string& text,
                        const std::string& name) {
  std::string v = (name.empty() ? "rank " + std::to_string(rank) : name) + " on " + host +
                  " called MPI_Abort with code " + std::to_string(status);
  std::string line = text.substr(0, text.find('\n'));
  const bool restates = line.find("MPI_Abort") != std::string::npos || line.find("MPI_ABORT") != std::string::npos;
  const bool placeholder = line == "N/A";  // OpenMPI's text when the program gave none
  if (!line.empty() && !restates && !placeholder) {
    constexpr size_t kMax = 200;
    if (line.size() > kMax) line = line.substr(0, kMax) + "...";
    v += ": \"" + line + "\"";
  }
  if (!fail(status != 0 ? status : exit_codes::kFailure, v, true)) return false;
  blamed_rank_ = rank;
  return true;
}

bool Fate::on_fence_timeout(uint64_t id, double seconds, const std::string& missing) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", seconds);
  const std::string name = control::fence_name(id);
  return fail(exit_codes::kFailure, (name.rfind("PMI", 0) == 0 ? name : "MPI " + name) + " did not complete within " + buf +
                                        " s (--fence-timeout): no data from " + missing);
}

bool Fate::on_bad_request(std::string why) { return fail(exit_codes::kUsage, std::move(why)); }

bool Fate::on_mpi_refused(int rank, const std::string& host, const std::string& wire) {
  const std::string how = wire == "PMI" ? "wrote to its PMI_FD" : "connected to its PMIx server";
  const std::string why =
      "per-node mode (--rdzv) serves no MPI: start an MPI program from one dlaunch that starts every host's ranks "
      "(--hostfile, -H, or the Slurm allocation it runs in)";
  if (!fail(exit_codes::kUsage, "rank " + std::to_string(rank) + " on " + host + " called MPI_Init (" + how + "), but " +
                                   why + ", or add --mpi none to run each rank as an MPI singleton"))
    return false;
  blamed_rank_ = rank;
  return true;
}

bool Fate::on_spawn_refused(std::string verdict) { return fail(exit_codes::kFailure, std::move(verdict)); }

bool Fate::on_timeout(double seconds, const std::string& source) {
  final_ = true;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", seconds);
  return fail(exit_codes::kTimeout, "the job ran past " + source + " " + buf + " s; all ranks were stopped");
}

bool Fate::on_peer_failure(int code, const std::string& verdict) {
  // Retryable: a node whose own failure is not (or that was told to stop)
  // abandons the restart, and the others stop then (launcher/node_group.h).
  return fail(code != 0 ? code : exit_codes::kFailure, verdict, true);
}

void Fate::not_ours(const std::vector<int>& ranks) {
  for (int r : ranks) mark_done(r);
}

void Fate::on_signal(int sig) {
  final_ = true;
  if (user_signal_ == 0) user_signal_ = sig;
}

bool Fate::all_done() const { return remaining_ == 0; }

int Fate::remaining() const { return remaining_; }

}  // namespace dl::launcher
