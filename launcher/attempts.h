#pragma once
// --max-restarts: the job's attempts. A failed attempt whose failure a new
// attempt may cure (Fate::retryable: a rank's exit code or signal,
// MPI_Abort, a lost host) is torn down as any failure is, and, while
// restarts are left, the same ranks are launched again on the same agents
// (no new ssh) with a fresh MASTER_PORT and the restart count in their
// environment. Ctrl-C, SIGTERM, --timeout, a rank that could not be started
// and a failure before the launch end the job. The design and what the job's
// store keeps across attempts: docs/failures.md.
//
// Pure state and wording, unit-tested (tests/launcher/attempts_test.cc); the
// Job (launcher/job_restart.cc) does the sending.
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "launcher/fate.h"
#include "launcher/membership.h"

namespace dl::launcher {

// Keys of the job's store under this prefix survive a restart; every other
// key is removed before the next attempt starts.
inline constexpr const char* kStoreKeepPrefix = "keep/";

class Attempts {
 public:
  explicit Attempts(int max_restarts) : max_(max_restarts) {}

  // The current attempt's restart count: 0 for the first attempt.
  int restarts() const { return restart_; }
  int max_restarts() const { return max_; }
  // Whether the attempt that ended with `fate` is to be retried.
  bool retry(const Fate& fate) const { return fate.retryable() && restart_ < max_ && refused_.empty(); }
  // The job cannot be restarted although its failure could be: `why` ends
  // the final line ("the agent on node2 is gone").
  void refuse(std::string why) { refused_ = std::move(why); }

  // Prepares the next attempt (numbered next()): from now on ready()
  // collects `nodes`' answers; those of `anew` (among them) get a new agent,
  // whose hello is their answer.
  // `port_node` (node rank 0's, which hosts rank 0) offers the next
  // MASTER_PORT; -1: the lowest of `nodes`.
  void begin_restart(std::vector<int> nodes, std::vector<int> anew = {}, int port_node = -1);
  // Node rank 0's seat moved during the restart (its host lost after the
  // restart began): `node` holds it now and offers MASTER_PORT, with the
  // port it said is free (now, or in its answer to come).
  void port_from(int node) { port_node_ = node; }
  // `node` will not answer (a spare lost during the restart): returns true
  // when that leaves no node to wait for.
  bool forget(int node) { return waiting_.erase(node) > 0 && waiting_.empty(); }
  // `node` gets a new agent after the restart began (its agent was lost
  // with one above it in the launch tree): its hello is its answer, also
  // when its old agent had answered.
  void wait_anew(int node) { waiting_.insert(node), anew_.insert(node), ports_.erase(node); }
  // --spares: the failed attempt's host (Fate::failed_host). True when the
  // attempt before it failed on the same host too ("" never counts): a
  // host that fails again and again is swapped out while a spare is free.
  bool failed_again(const std::string& host) {
    const bool again = !host.empty() && host == last_failed_host_;
    last_failed_host_ = host;
    return again;
  }
  // Whether `node`'s agent is being started anew for the prepared attempt.
  bool anew(int node) const { return anew_.count(node) > 0; }
  // The restart count of the attempt begin_restart() prepares.
  int next() const { return restart_ + 1; }
  // The prepared attempt is being launched: it is the current one now.
  void relaunched() { ++restart_, restarting_ = false, early_.clear(); }
  // Node `node` said it is ready for attempt `attempt` (next()) with `free_port` free there.
  // Returns true when that was the last node the restart waited for. An
  // answer for another attempt, or from a node not waited for, is ignored.
  // Before begin_restart (the teardown asked for the answers with its Kill,
  // msg::Kill::ready_for), an answer for next() is kept, and begin_restart
  // counts it unless the node gets a new agent: false then.
  bool ready(int node, int attempt, int free_port);
  // The next attempt's MASTER_PORT: the port node rank 0's host offered
  // (it hosts rank 0); 0 if it has not answered. REQUIRES ready() returned true.
  int master_port() const;
  // The nodes that have not answered yet (for a timeout's message).
  std::vector<int> waiting() const { return {waiting_.begin(), waiting_.end()}; }

  // --spares: a membership change made for the prepared attempt ("node3
  // lost (...); its ranks 6-7 moved to spare node5"); the final line lists
  // every one.
  void changed(std::string line) { changes_.push_back("before " + attempt_name(restart_ + 2) + ": " + std::move(line)); }
  // One made before the first attempt (the health gate), or while the
  // current one runs (a spare lost).
  void changed_before_start(std::string line) { changes_.push_back("before " + attempt_name(1) + ": " + std::move(line)); }
  void changed_during(std::string line) { changes_.push_back("during " + attempt_name(restart_ + 1) + ": " + std::move(line)); }
  // The number of the attempt a change made now is for: the one being
  // prepared while restarting, else the current one.
  int changing_attempt(bool restarting) const { return restart_ + (restarting ? 2 : 1); }
  // Each change, structured (for --report-json), in the order made.
  void record(MembershipChange c) { membership_.push_back(std::move(c)); }
  const std::vector<MembershipChange>& membership() const { return membership_; }
  // "attempt 2 of 4" (or "" without --max-restarts: the lines stay as they were).
  std::string name() const;
  // The line for a failed attempt that is being retried.
  std::string restarting_line(const std::string& verdict) const;
  // The job's last line: the final verdict, prefixed with the attempt when
  // there were restarts to give; says why it was not restarted. "" when the
  // job succeeded on its first attempt, or, without restarts, when the
  // verdict is already on stderr (Fate::said). A restart that began (its
  // restarting_line was printed, with the verdict) and failed gives the
  // reason alone: the verdict is said once. Then, if the job's hosts
  // changed, one line that lists every change.
  std::string final_line(const Fate& fate) const;

 private:
  int max_ = 0, restart_ = 0;
  std::set<int> waiting_, anew_;
  int port_node_ = -1;
  std::map<int, int> ports_;  // by node: the free port in its answer
  std::map<int, int> early_;  // by node: the free port in an answer that came before begin_restart
  std::string attempt_name(int n) const;
  std::string verdict_line(const Fate& fate) const;
  std::string refused_, last_failed_host_;
  std::vector<std::string> changes_;
  std::vector<MembershipChange> membership_;
  bool restarting_ = false;  // begin_restart() was called for next()
};

}  // namespace dl::launcher
