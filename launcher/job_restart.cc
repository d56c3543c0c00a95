// The Job's restarts (--max-restarts): a failed attempt whose every rank
// ended is launched again on the same agents. The decisions are
// launcher/attempts.h's; the phases launcher/job_phase.h's (tearing down ->
// restarting -> launched); docs/failures.md says what the user sees.
#include "launcher/job.h"

#include <algorithm>

#include "control/tree_words.h"
#include "errors/error.h"

#include "launcher/output/output_sink.h"
#include "launcher/seats.h"
#include "launcher/stacks/stack_report.h"
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
  end_mpi_attempt();
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
  if (!below_min_.empty()) return restart_failed(below_min_);
  const std::string restart = "restart " + std::to_string(attempts_.next()) + ": ";
  // The teardown asked every agent for its answer (msg::Kill::ready_for):
  // usually all came with the last exits, and the restart goes on at once.
  const std::vector<int> waiting = attempts_.waiting();
  if (waiting.empty()) {
    log(restart + "every agent was ready as its ranks ended");
    return all_ready();
  }
  // Those whose last exit came just now have their answers on the way:
  // the Restart below is one they ignore (Agent::get_ready).
  const std::string who = waiting.size() == own.size() ? "every agent"
                          : waiting.size() == 1       ? "1 agent"
                                                      : std::to_string(waiting.size()) + " agents";
  log(restart + "waiting for " + who + " to be ready");
  if (waiting.size() == own.size()) server_->broadcast(msg::Restart{attempts_.next()});
  else
    for (int k : waiting)
      if (!attempts_.anew(k)) server_->send(k, msg::Restart{attempts_.next()});
  for (int k : anew) {
    log("starting a new agent on " + nodes_.at(static_cast<size_t>(k)).host + " for the restart");
    start_again(k);
  }
  arm_restart_timer(!anew.empty());
}

// Agents answer as soon as their last rank was reported (it already was:
// we saw every exit); the bound is for an agent that hangs without
// closing, or one started anew that does not connect (a level of the launch
// tree after the other).
void Job::arm_restart_timer(bool new_agents) {
  double wait_s = opts_.heartbeat_timeout_s;
  if (new_agents) wait_s = std::max(wait_s, opts_.agent_timeout_s + opts_.ssh_timeout_s * tree_.depth());
  restart_timer_.expires_after(std::chrono::milliseconds(static_cast<long>(wait_s * 1000)));
  restart_timer_.async_wait([this, wait_s](boost::system::error_code ec) {
    if (ec || !phase_.is(Phase::kRestarting)) return;
    std::string hosts;
    for (int n : attempts_.waiting()) hosts += (hosts.empty() ? "" : ", ") + nodes_.at(static_cast<size_t>(n)).host;
    restart_failed("no word from the agent on " + hosts + " within " + std::to_string(static_cast<int>(wait_s)) +
                   " s");
  });
}

// A host lost while the restart waits for the agents is handled as one lost
// while the ranks ran: its seat goes to a free spare, or the world shrinks
// (--min-hosts); the hosts beneath it in the launch tree, whose agents end
// with its, keep their seats and get new agents (the first in its place),
// and the restart waits for them too. A host whose seat nothing can take
// ends the job. (A relay that holds no seat, lost: only the hosts beneath it.)
void Job::lost_while_restarting(Node& n, const std::string& why) {
  // Their old agents' ends are reported after this one's (on_closed: stale
  // then); an agent still being started beneath it has no one to start it.
  std::vector<int> below;
  for (int b : tree_.beneath(n.index)) {
    Node& d = nodes_.at(static_cast<size_t>(b));
    if (d.lost || (d.state != NodeState::kUp && d.state != NodeState::kStarting)) continue;
    d.state = NodeState::kGone, d.why_gone = control::lost_with_relay(n.host, why);
    below.push_back(b);
  }
  bool spare = false;
  for (const auto& x : nodes_) spare = spare || (x.ours() && x.seat < 0 && !x.lost && x.state == NodeState::kUp);
  const std::string fail = "lost the agent on " + n.host + " (" + why + ") while the restart waited for the agents";
  if (n.seat >= 0 && !spare && opts_.min_hosts == 0)
    return restart_failed(fail + (plan_.spares.empty() ? "; nothing can take its seat (see --spares and --min-hosts)"
                                                       : "; no spare is left to take its seat (--min-hosts lets the "
                                                         "job go on with fewer hosts)"));
  std::vector<int> anew;
  const std::string moved = move_to_spares(anew, true);
  if (!below_min_.empty()) return restart_failed(below_min_);
  for (int k : anew)  // more seats lost at once than spares for them
    if (std::find(below.begin(), below.end(), k) == below.end()) return restart_failed(fail);
  if (moved.empty() && anew.empty()) return restart_failed(fail);
  if (!moved.empty()) {
    attempts_.changed(moved);
    if (change_) change_->line += "; " + moved;
    else change_ = Change{moved, std::chrono::steady_clock::now(), 0};
  }
  // Node rank 0's seat may have moved (or the world been numbered again):
  // MASTER_PORT is the port its host now offers.
  attempts_.port_from(seats_.at(0));
  const bool none_left = attempts_.forget(n.index);
  for (int k : anew) nodes_.at(static_cast<size_t>(k)).state = NodeState::kStarting, attempts_.wait_anew(k);
  for (int k : anew) {
    log("starting a new agent on " + nodes_.at(static_cast<size_t>(k)).host + " for the restart");
    start_again(k);
  }
  if (!anew.empty()) return arm_restart_timer(true);
  if (none_left) all_ready();
}

// --spares: each seat whose host is gone (its agent lost) goes to a free
// spare, which is up and holds no ranks: the same node rank, ranks, local
// ranks and GPU binding there (launcher/seats.h). So does the seat of a
// host whose ranks failed this attempt and the one before (a bad GPU):
// that host's agent is sent away. A gone host without a spare for it gets
// a new agent (`anew`), as without --spares.
// `again`: a second change in the same restart (lost_while_restarting): the
// failed attempt's host was counted already.
std::string Job::move_to_spares(std::vector<int>& anew, bool again) {
  std::vector<int> gone, spares, beneath;  // beneath: gone with the agent above them in the launch tree
  for (const auto& n : nodes_) {
    if (!n.ours() || n.lost) continue;
    if (again && n.state == NodeState::kStarting && attempts_.anew(n.index)) continue;  // on its way already
    if (n.seat >= 0 && n.state != NodeState::kUp) (lost_with_relay(n) ? beneath : gone).push_back(n.index);
    if (n.seat < 0 && n.state == NodeState::kUp) spares.push_back(n.index);
  }
  // An agent that starts others is not swapped for its ranks' failures: its
  // bye would end its subtree's agents too.
  int flaky = -1;
  if (!again && attempts_.failed_again(fate_.failed_host()) && spares.size() > gone.size())
    for (const auto& n : nodes_)
      if (n.seat >= 0 && n.state == NodeState::kUp && n.host == fate_.failed_host() && !tree_.has_children(n.index))
        flaky = n.index;
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
    note_change("moved", from.host, why, to.ranks, to.host);
    log("node rank " + std::to_string(mv.seat) + " moves from " + from.host + " to spare " + to.host);
  }
  for (const auto& mv : moves) {
    const Node& n = nodes_.at(static_cast<size_t>(mv.from));
    lost_hosts_.push_back(n.host + (n.why_gone.empty() || mv.from == flaky ? "" : " (" + n.why_gone + ")"));
  }
  for (const auto& mv : moves) schedule_return(nodes_.at(static_cast<size_t>(mv.from)));
  std::vector<int> unfilled;
  for (int g : gone)
    if (nodes_.at(static_cast<size_t>(g)).seat >= 0 && g != flaky) unfilled.push_back(g);
  if (opts_.min_hosts > 0 && !unfilled.empty()) {
    if (!moves.empty()) lines += spares_left(spares.size());
    for (int g : unfilled) {
      const Node& n = nodes_.at(static_cast<size_t>(g));
      lost_hosts_.push_back(n.host + (n.why_gone.empty() ? "" : " (" + n.why_gone + ")"));
    }
    const size_t remain = seats_.size() - unfilled.size();
    if (remain < static_cast<size_t>(opts_.min_hosts)) {
      std::string names;
      for (const auto& h : lost_hosts_) names += (names.empty() ? "" : ", ") + h;
      below_min_ = std::to_string(remain) + " of " + std::to_string(seats_.size()) + " hosts would remain, below " +
                   "--min-hosts " + std::to_string(opts_.min_hosts) + "; hosts lost: " + names;
      return lines;
    }
    try {
      lines += (lines.empty() ? "" : "; ") + shrink(unfilled);
    } catch (const Error& e) {  // the hosts that remain cannot take the ranks as -n and --map-by place them
      below_min_ = std::string("the hosts that remain cannot take the job: ") + e.what();
    }
  } else {
    anew = unfilled;  // the same host again, as without --spares
    for (int g : anew) {
      const Node& n = nodes_.at(static_cast<size_t>(g));
      note_change("new_agent", n.host, n.why_gone, n.ranks, "");
    }
    // Said beside the spares' moves (a host lost with none left for it);
    // without spares a restart's new agents are said as they always were.
    if (!moves.empty() && anew.empty()) lines += spares_left(spares.size());
    if (!plan_.spares.empty())
      for (int g : anew) {
        const Node& n = nodes_.at(static_cast<size_t>(g));
        lines += (lines.empty() ? "" : "; ") + moved_line(n.host, n.why_gone, n.ranks, "");
      }
    if (opts_.min_hosts > 0 && !again && anew.empty())
      if (const std::string grew = grow(); !grew.empty()) lines += (lines.empty() ? "" : "; ") + grew;
  }
  // A host out of the job whose agent stayed to relay (it failed the health
  // gate) and is gone now: the hosts beneath it take its place as a lost one's.
  std::vector<int> above = gone;
  for (const auto& n : nodes_)
    if (n.ours() && n.lost && n.state != NodeState::kUp && tree_.has_children(n.index)) above.push_back(n.index);
  const std::string rehomed = new_agents_beneath(above, beneath);
  if (!rehomed.empty() && (!lines.empty() || !plan_.spares.empty())) lines += (lines.empty() ? "" : "; ") + rehomed;
  anew.insert(anew.end(), beneath.begin(), beneath.end());
  if (torch_store_ && !lines.empty()) torch_store_->rename_nodes(seat_hosts());
  return lines;
}

bool Job::lost_with_relay(const Node& n) const {
  for (int p = tree_.parent(n.index); p >= 0; p = tree_.parent(p))
    if (nodes_.at(static_cast<size_t>(p)).state != NodeState::kUp) return true;
  return false;
}

// The hosts `beneath` lost only with an agent above them in the launch tree
// (`gone`) keep their seats and get new agents. Where the lost agent's host
// left the job (its seat went to a spare, or the world shrank without it),
// the first host beneath it takes its place in the tree and starts the
// rest; where it gets a new agent itself, that one starts them again.
// Returns the line that names them ("" for none).
std::string Job::new_agents_beneath(const std::vector<int>& gone, const std::vector<int>& beneath) {
  std::string lines;
  bool moved = false;
  for (int g : gone) {
    std::string names;
    int count = 0;
    for (int b : tree_.beneath(g))
      if (std::find(beneath.begin(), beneath.end(), b) != beneath.end())
        names += (names.empty() ? "" : ", ") + nodes_.at(static_cast<size_t>(b)).host, ++count;
    if (count == 0) continue;
    const Node& lost = nodes_.at(static_cast<size_t>(g));
    lines += std::string(lines.empty() ? "" : "; ") + (count == 1 ? "the host" : "the " + std::to_string(count) + " hosts") +
             " beneath " + lost.host + " in the launch tree (" + names + ") " + (count == 1 ? "gets a new agent" : "get new agents");
    if (!lost.lost) continue;  // it gets a new agent, which starts them again
    const int head = tree_.rehome(g);
    moved = true;
    const int up = tree_.parent(head);
    lines += std::string(", started by ") + (up < 0 ? "dlaunch" : nodes_.at(static_cast<size_t>(up)).host) +
             (count == 1 ? "" : " and " + nodes_.at(static_cast<size_t>(head)).host);
    log("launch tree: " + nodes_.at(static_cast<size_t>(head)).host + " takes the place of " + lost.host);
  }
  // Each host's new agent, and which agent starts it ("dlaunch" for a root).
  for (int b : beneath) {
    const Node& n = nodes_.at(static_cast<size_t>(b));
    const int up = tree_.parent(b);
    note_change("new_agent", n.host, n.why_gone, n.ranks, up < 0 ? "dlaunch" : nodes_.at(static_cast<size_t>(up)).host);
  }
  if (moved) set_routes();
  return lines;
}

// --min-hosts: the seats of `dropped` (gone, with no spare for them) leave
// the job; the world is placed again on the hosts that remain, as -n,
// --map-by and --npernode placed it first: WORLD_SIZE shrinks by their
// ranks, RANK and NODE_RANK are contiguous again.
std::string Job::shrink(const std::vector<int>& dropped) {
  std::vector<int> keep;
  std::vector<int> gone_ranks;
  int np = 0;
  for (int seat : seats_) {
    const Node& n = nodes_.at(static_cast<size_t>(seat));
    if (std::find(dropped.begin(), dropped.end(), seat) != dropped.end()) {
      gone_ranks.insert(gone_ranks.end(), n.ranks.begin(), n.ranks.end());
      continue;
    }
    keep.push_back(seat);
    np += static_cast<int>(n.ranks.size());
  }
  std::vector<std::vector<int>> held;  // each dropped host's ranks, before the world is numbered again
  for (int d : dropped) held.push_back(nodes_.at(static_cast<size_t>(d)).ranks);
  place_world(keep, np);  // (throws before it changes anything)
  std::string names;
  for (size_t k = 0; k < dropped.size(); ++k) {
    Node& n = nodes_.at(static_cast<size_t>(dropped[k]));
    names += (names.empty() ? "" : ", ") + n.host + " lost" + (n.why_gone.empty() ? "" : " (" + n.why_gone + ")");
    note_change("shrunk", n.host, n.why_gone, held[k], "");
    shrunk_ranks_.push_back(static_cast<int>(held[k].size()));
    n.seat = -1, n.lost = true;
    schedule_return(n);
  }
  return names + "; no spare for " + (dropped.size() > 1 ? "their ranks " : gone_ranks.size() == 1 ? "its rank " : "its ranks ") +
         rank_ranges(gone_ranks) + ": the job goes on with " + std::to_string(keep.size()) + " hosts and " +
         std::to_string(np) + " ranks (--min-hosts " + std::to_string(opts_.min_hosts) + ")";
}

// The world placed again on `seats` (node rank by node rank) as -n, --map-by
// and --npernode placed it first, `np` ranks: each node's ranks, the output's
// hosts and the plan. Throws dl::Error, changing nothing, when the hosts
// cannot take them.
void Job::place_world(const std::vector<int>& seats, int np) {
  std::vector<hostfiles::HostEntry> entries;
  for (int seat : seats) entries.push_back(nodes_.at(static_cast<size_t>(seat)).entry);
  hostfiles::PlacementOptions po;
  po.np = np, po.map_by = opts_.map_by, po.per_node = opts_.per_node, po.oversubscribe = opts_.oversubscribe;
  hostfiles::Placement p = hostfiles::place(entries, po);
  for (auto& n : nodes_) n.ranks.clear();
  seats_ = seats;
  for (size_t s = 0; s < seats_.size(); ++s) nodes_.at(static_cast<size_t>(seats_[s])).seat = static_cast<int>(s);
  for (const auto& r : p.ranks) {
    Node& n = nodes_.at(static_cast<size_t>(seats_.at(static_cast<size_t>(r.node))));
    n.ranks.push_back(r.rank);
    sink_->move_rank(r.rank, n.host);
  }
  p.spares = std::move(plan_.spares);
  plan_ = std::move(p);  // (in place: the torch store reads it)
  log("the world is placed again on " + std::to_string(seats_.size()) + " hosts, " + std::to_string(np) + " ranks");
}

// A world that shrank takes free spares back into seats, up to the seats it
// started with: each new seat, the last, holds as many ranks as the last seat
// that left (-n grows by them), and the world is placed again (place_world),
// so RANK and NODE_RANK stay contiguous and the seats already there keep
// their node ranks.
std::string Job::grow() {
  std::vector<int> joining;
  for (const auto& n : nodes_)
    if (seats_.size() + joining.size() < first_seats_ && joining.size() < shrunk_ranks_.size() && n.ours() &&
        n.seat < 0 && !n.lost && n.state == NodeState::kUp && n.health == Node::Health::kPassed)
      joining.push_back(n.index);
  if (joining.empty()) return "";
  std::vector<int> seats = seats_;
  int np = 0;
  for (int seat : seats_) np += static_cast<int>(nodes_.at(static_cast<size_t>(seat)).ranks.size());
  for (size_t j = 0; j < joining.size(); ++j) seats.push_back(joining[j]), np += shrunk_ranks_.at(shrunk_ranks_.size() - 1 - j);
  try {
    place_world(seats, np);
  } catch (const Error& e) {  // the spares cannot take those ranks: the world stays as it is
    log(std::string("the world does not grow: ") + e.what());
    return "";
  }
  shrunk_ranks_.resize(shrunk_ranks_.size() - joining.size());
  std::string names;
  std::vector<int> theirs;
  for (int j : joining) {
    const Node& n = nodes_.at(static_cast<size_t>(j));
    names += (names.empty() ? "spare " : ", spare ") + n.host;
    theirs.insert(theirs.end(), n.ranks.begin(), n.ranks.end());
    note_change("grew", n.host, "", n.ranks, "");
  }
  std::sort(theirs.begin(), theirs.end());
  return names + (joining.size() > 1 ? " join" : " joins") + " with " + (theirs.size() == 1 ? "rank " : "ranks ") +
         rank_ranges(theirs) + ": the job grows to " + std::to_string(seats_.size()) + " hosts and " +
         std::to_string(np) + " ranks";
}

// Every rank of the attempt that follows a membership change has started:
// the change, said once, with the time it took.
void Job::on_started(int count) {
  if (!change_ || (change_->started += count) < static_cast<int>(plan_.ranks.size())) return;
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
  if (!m.unhealthy.empty()) {
    restart_failed(n.host + " failed the health check: " + m.unhealthy);
    return "";
  }
  if (attempts_.ready(n.index, attempts_.next(), m.free_port)) all_ready();
  return "";
}

void Job::on_ready(int node, const msg::Ready& r) {
  // One that came with the teardown's exits is kept for the restart to come.
  if (phase_.is(Phase::kTearingDown)) return (void)attempts_.ready(node, r.attempt, r.free_port);
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
  start_mpi_attempt();
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
