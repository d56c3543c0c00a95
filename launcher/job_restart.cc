// The Job's restarts (--max-restarts): a failed attempt whose every rank
// ended is launched again on the same agents. The decisions are
// launcher/attempts.h's; the phases launcher/job_phase.h's (tearing down ->
// restarting -> launched); docs/failures.md says what the user sees.
#include "launcher/job.h"

#include <algorithm>

#include "launcher/output_sink.h"
#include "launcher/seats.h"
#include "launcher/torch_store.h"
#include "rendezvous/tcp_store_server.h"

namespace dl::launcher {

namespace msg = control::msg;

bool Job::restartable() {
  if (!peers_->can_restart()) {
    attempts_.refuse("this node cannot meet the others for a restart");
    return false;
  }
  return true;
}

// All ranks of the failed attempt ended: say so, and ask every agent to get
// ready for the next one. A restart keeps the placement, so a host whose
// agent was lost gets a new agent (ssh again, for that host only); one that
// cannot be reached ends the job (restart_failed).
void Job::restart() {
  write_fully(2, attempts_.restarting_line(fate_.verdict()) + "\n");
  phase_.to(Phase::kRestarting);
  kill_timer_.cancel();
  std::vector<int> own, anew;
  if (const std::string moved = move_to_spares(anew); !moved.empty()) {
    attempts_.changed(moved);
    change_ = Change{moved, loss_known_.time_since_epoch().count() ? loss_known_ : std::chrono::steady_clock::now(), 0};
  }
  for (auto& n : nodes_) {
    if (!n.ours() || n.lost) continue;
    own.push_back(n.index);
  }
  for (int k : anew) nodes_.at(static_cast<size_t>(k)).state = NodeState::kStarting;
  attempts_.begin_restart(own, anew, seats_.at(0));
  log("restart " + std::to_string(attempts_.next()) + ": waiting for every agent to be ready");
  server_->broadcast(msg::Restart{attempts_.next()});
  for (int k : anew) {
    log("starting a new agent on " + nodes_.at(static_cast<size_t>(k)).host + " for the restart");
    start_again(k);
  }
  // Agents answer as soon as their last rank was reported (it already was:
  // we saw every exit); the bound is for an agent that hangs without
  // closing, or one started anew that does not connect.
  double wait_s = opts_.heartbeat_timeout_s;
  if (!anew.empty()) wait_s = std::max(wait_s, opts_.agent_timeout_s + opts_.ssh_timeout_s * tree_.depth());
  restart_timer_.expires_after(std::chrono::milliseconds(static_cast<long>(wait_s * 1000)));
  restart_timer_.async_wait([this, wait_s](boost::system::error_code ec) {
    if (ec || !phase_.is(Phase::kRestarting)) return;
    std::string hosts;
    for (int n : attempts_.waiting()) hosts += (hosts.empty() ? "" : ", ") + nodes_.at(static_cast<size_t>(n)).host;
    restart_failed("no word from the agent on " + hosts + " within " + std::to_string(static_cast<int>(wait_s)) +
                   " s");
  });
}

// --spares: each seat whose host is gone (its agent lost) goes to a free
// spare, which is up and holds no ranks: the same node rank, ranks, local
// ranks and GPU binding there (launcher/seats.h). So does the seat of a
// host whose ranks failed this attempt and the one before (a bad GPU):
// that host's agent is sent away. A gone host without a spare for it gets
// a new agent (`anew`), as without --spares.
std::string Job::move_to_spares(std::vector<int>& anew) {
  std::vector<int> gone, spares;
  for (const auto& n : nodes_) {
    if (!n.ours() || n.lost) continue;
    if (n.seat >= 0 && n.state != NodeState::kUp) gone.push_back(n.index);
    if (n.seat < 0 && n.state == NodeState::kUp) spares.push_back(n.index);
  }
  int flaky = -1;
  if (attempts_.failed_again(fate_.failed_host()) && spares.size() > gone.size())
    for (const auto& n : nodes_)
      if (n.seat >= 0 && n.state == NodeState::kUp && n.host == fate_.failed_host()) flaky = n.index;
  if (flaky >= 0) gone.push_back(flaky);
  const auto moves = fill_from_spares(seats_, gone, spares);
  std::string lines;
  for (const auto& mv : moves) {
    Node& from = nodes_.at(static_cast<size_t>(mv.from));
    Node& to = nodes_.at(static_cast<size_t>(mv.to));
    to.seat = mv.seat, from.seat = -1, from.lost = true;
    to.ranks = std::move(from.ranks), from.ranks.clear();
    for (int r : to.ranks) sink_->move_rank(r, to.host);
    const std::string why = mv.from == flaky ? "its ranks failed in two attempts in a row; swapped out" : from.why_gone;
    if (mv.from == flaky) server_->send(from.index, msg::Bye{});
    lines += (lines.empty() ? "" : "; ") + moved_line(from.host, why, to.ranks, to.host);
    log("node rank " + std::to_string(mv.seat) + " moves from " + from.host + " to spare " + to.host);
  }
  if (!moves.empty()) lines += spares_left(spares.size());
  for (int g : gone)
    if (nodes_.at(static_cast<size_t>(g)).seat >= 0 && g != flaky) anew.push_back(g);
  if (torch_store_ && !moves.empty()) torch_store_->rename_nodes(seat_hosts());
  return lines;
}

// Every rank of the attempt that follows a membership change has started:
// the change, said once, with the time it took.
void Job::on_started() {
  if (!change_ || ++change_->started < static_cast<int>(plan_.ranks.size())) return;
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - change_->known).count();
  char took[32];
  std::snprintf(took, sizeof took, "%.1f", s);
  write_fully(2, "dlaunch: " + attempts_.name() + ": " + change_->line + "; " + std::to_string(plan_.ranks.size()) +
                     " ranks running again " + took + " s after the loss was known\n");
  change_.reset();
}

// An agent started anew for the restart connected: its hello is its `ready`.
std::string Job::hello_again(Node& n, const msg::Hello& m) {
  if (!phase_.is(Phase::kRestarting) || !attempts_.anew(n.index))
    return "agent claims node " + std::to_string(m.node) + ", which already has one";
  greeted(n, m);
  log("new agent on " + n.host + " connected (pid " + std::to_string(m.pid) + ")");
  if (attempts_.ready(n.index, attempts_.next(), m.free_port)) all_ready();
  return "";
}

void Job::on_ready(int node, const msg::Ready& r) {
  if (!phase_.is(Phase::kRestarting)) return;  // a stale answer: the job moved on
  if (attempts_.ready(node, r.attempt, r.free_port)) all_ready();
}

// Every agent of ours is ready. The peers agree on the next MASTER_PORT:
// without any (hostfile mode), node 0's port at once; in per-node mode every
// node restarts together, through the store (NodeGroup::restart): once all
// are ready, node 0's port; a node that will not restart stops the others.
void Job::all_ready() {
  restart_timer_.cancel();  // (the group's wait has a bound of its own)
  const double wait_s = opts_.kill_grace_s + opts_.heartbeat_timeout_s + 10;
  if (per_node()) log("restart " + std::to_string(attempts_.next()) + ": waiting for the other nodes at the store");
  peers_->restart(attempts_.restarts(), attempts_.master_port(), wait_s, [this](int port, std::string why) {
    asio::post(io_, [this, port, why] {
      if (!phase_.is(Phase::kRestarting)) return;
      if (!why.empty()) return restart_failed(why);
      relaunch(port);
    });
  });
}

// The next attempt: a fresh fate, the store emptied but for the keys kept
// across attempts, a new MASTER_PORT, the same ranks on the same agents.
void Job::relaunch(int master_port) {
  restart_timer_.cancel();
  fate_ = Fate(static_cast<int>(plan_.ranks.size()));
  for (const auto& n : nodes_)
    if (!n.ours()) fate_.not_ours(n.ranks);
  signals_seen_ = 0;
  peer_failed_ = published_ = false;
  attempts_.relaunched();
  sink_->next_attempt(attempts_.restarts());
  peers_->next_attempt(attempts_.restarts());
  if (store_) store_->erase_all_but(kStoreKeepPrefix);
  if (torch_store_) torch_store_->clear();  // torch's keys of the last attempt (its own prefix aside)
  PlanInput in = plan_input();
  in.master_port = opts_.master_port > 0 ? opts_.master_port : master_port;
  if (in.shared) in.shared->master_port = master_port;
  LaunchPlan plan = plan_launch(in);
  if (plan.refusal != LaunchPlan::Refusal::kNone) return restart_failed(plan.why);
  phase_.to(Phase::kLaunched);
  // Again, for the connections of agents started anew.
  server_->start_heartbeats(std::chrono::milliseconds(heartbeat_interval_ms(opts_.heartbeat_timeout_s)),
                            std::chrono::milliseconds(static_cast<long>(opts_.heartbeat_timeout_s * 1000)));
  log(attempts_.name() + ": launching again, MASTER_PORT " + std::to_string(master_port));
  if (plan.mpi_map) server_->broadcast(*plan.mpi_map);
  server_->broadcast(plan.shared);
  for (size_t seat = 0; seat < seats_.size(); ++seat) {
    auto& m = plan.launches[seat];
    if (!m) continue;
    // dlaunch's stdin went to the first attempt (its reader may be at EOF):
    // later attempts read /dev/null rather than wait for input that never comes.
    for (auto& r : m->ranks) r.stdin_open = false;
    server_->send(seats_[seat], *m);
  }
}

// The restart cannot go on: the failed attempt's verdict ends the job.
void Job::restart_failed(const std::string& why) {
  attempts_.refuse(why);
  peers_->abandon(attempts_.restarts(), why);
  if (phase_.is(Phase::kRestarting)) finish();
}

}  // namespace dl::launcher
