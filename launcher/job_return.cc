// A lost host comes back (--return-cooldown): the Job's side of
// launcher/cooldown.h. A host the job stopped using waits out its cooldown
// (Node::Back::kCooling), gets a new agent started by dlaunch itself, as a
// spare's is, never by an agent of the launch tree (kStarting), and that
// agent passes the health gate a spare passes at the start (kChecking):
// then the host is a free spare, used by the next loss. Each failed try is
// one more loss, so the cooldown doubles. All of it runs beside the job:
// the ranks of the attempt that runs are not touched, and nothing waits for
// a host on its way back.
#include <algorithm>

#include "control/protocol.h"
#include "launcher/job.h"
#include "launcher/launch_plan.h"

namespace dl::launcher {

namespace msg = control::msg;

namespace {
std::string whole_seconds(double s) { return std::to_string(static_cast<long>(s)) + " s"; }
}  // namespace

void Job::arm_return(Node& n, double s, std::function<void(Node&)> then) {
  if (!n.back_timer) n.back_timer = std::make_shared<asio::steady_timer>(io_);
  n.back_timer->expires_after(secs(s));
  n.back_timer->async_wait([this, node = n.index, then = std::move(then)](boost::system::error_code ec) {
    if (!ec && !phase_.ending()) then(nodes_.at(static_cast<size_t>(node)));
  });
}

void Job::schedule_return(Node& n) {
  if (!cooldown_.enabled() || n.back != Node::Back::kNo || phase_.ending() || !n.ours()) return;
  if (opts_.launcher == remote::StartMethod::kSlurm) {  // docs/slurm.md: one srun step holds every agent
    if (!no_return_said_)
      write_fully(2, "dlaunch: --return-cooldown: " + n.host + " cannot come back under --launcher slurm: srun "
                     "started every agent in one step and starts none again; hosts the job stops using stay out\n");
    no_return_said_ = true;
    return;
  }
  n.back = Node::Back::kCooling;
  n.cooldown_s = cooldown_.lost(n.host);
  log(n.host + " may come back as a spare after a " + cooldown_text(n.cooldown_s) + " cooldown");
  arm_return(n, n.cooldown_s, [this](Node& x) { try_return(x.index); });
}

// The cooldown is over: a new agent there, unless the old one is still
// connected (sent away, and not gone yet) or the job has not launched: then
// once more after the same cooldown.
void Job::try_return(int node) {
  Node& n = nodes_.at(static_cast<size_t>(node));
  if (n.back != Node::Back::kCooling) return;
  if (tree_.has_children(n.index)) {  // its agent stays to relay for the hosts beneath it
    log(n.host + " relays for the launch tree and does not come back as a spare");
    n.back = Node::Back::kNo;
    return;
  }
  if (!phase_.launched() || n.state == NodeState::kUp)
    return arm_return(n, n.cooldown_s, [this](Node& x) { try_return(x.index); });
  if (tree_.parent(n.index) >= 0) {  // started by dlaunch, beside the roots, as a spare is
    tree_.rehome(n.index);
    set_routes();
  }
  n.back = Node::Back::kStarting;
  n.state = NodeState::kStarting;
  n.health = Node::Health::kUnknown;
  const double wait_s = opts_.agent_timeout_s + opts_.ssh_timeout_s;
  log("starting a new agent on " + n.host + " after its " + cooldown_text(n.cooldown_s) + " cooldown");
  arm_return(n, wait_s, [wait_s, this](Node& x) {
    if (x.back == Node::Back::kStarting)
      return_failed(x, "its agent did not connect within " + whole_seconds(wait_s) + " (--agent-timeout + --ssh-timeout)");
  });
  starter_->start(agent_spec(n));
}

// Its new agent said hello: the health gate, as for a spare at the start
// (the hello's own checks, the ranks' programs, the GPUs a seat needs,
// --health-check), bounded here as the agent bounds the check's command.
std::string Job::hello_returned(Node& n, const msg::Hello& m) {
  if (phase_.ending()) return "agent claims node " + std::to_string(m.node) + ", but the job is ending";
  greeted(n, m);
  n.back = Node::Back::kChecking;
  n.why_gone.clear();
  log("new agent on " + n.host + " connected (pid " + std::to_string(m.pid) + "); it is at the health gate");
  const double wait_s = opts_.health_timeout_s + opts_.agent_timeout_s;
  arm_return(n, wait_s, [wait_s, this](Node& x) {
    if (x.back == Node::Back::kChecking)
      return_failed(x, "no answer to the health check within " + whole_seconds(wait_s));
  });
  size_t widest = 0;  // a spare may take any seat
  for (const auto& x : nodes_)
    if (x.ours() && x.seat >= 0) widest = std::max(widest, x.ranks.size());
  if (const std::string why = gpus_short(n, widest, most_gpus()); !why.empty()) {
    return_failed(n, "failed the health check: " + why);
    return "";
  }
  check_health(n, m);
  if (n.back == Node::Back::kChecking && n.health == Node::Health::kPassed) back_as_spare(n);
  return "";
}

// Passed: a free spare, holding no ranks. Its agent gets what a spare's got
// at the launch (heartbeats only), and a restart under way as the others did.
void Job::back_as_spare(Node& n) {
  if (n.back_timer) n.back_timer->cancel();
  n.back = Node::Back::kNo;
  n.lost = false, n.seat = -1, n.ranks.clear();
  n.health = Node::Health::kPassed;
  server_->send(n.index, standby_launch());
  // Its connection is watched from now on, as the others' are (watching them afresh too).
  server_->start_heartbeats(std::chrono::milliseconds(heartbeat_interval_ms(opts_.heartbeat_timeout_s)),
                            secs(opts_.heartbeat_timeout_s));
  if (phase_.is(Phase::kRestarting)) server_->send(n.index, msg::Restart{attempts_.next()});
  size_t spares = 0;
  for (const auto& x : nodes_) spares += x.ours() && x.seat < 0 && !x.lost ? 1 : 0;
  const std::string line = back_line(n.host, n.cooldown_s, spares);
  write_fully(2, "dlaunch: " + line + "\n");
  note_change("returned", n.host, "passed the health gate after its " + cooldown_text(n.cooldown_s) + " cooldown", {}, "");
  if (phase_.is(Phase::kRestarting)) attempts_.changed(line);
  else attempts_.changed_during(line);
}

// A try that failed is one more loss: the host waits a doubled cooldown. An
// agent that connected is sent away (its connection's end then says nothing).
void Job::return_failed(Node& n, const std::string& why) {
  if (n.state == NodeState::kUp) server_->send(n.index, msg::Bye{});
  if (n.state == NodeState::kStarting) n.state = NodeState::kStartFailed;
  n.health = Node::Health::kFailed;
  n.back = Node::Back::kCooling;
  n.cooldown_s = cooldown_.lost(n.host);
  write_fully(2, "dlaunch: " + not_back_line(n.host, why, n.cooldown_s) + "\n");
  arm_return(n, n.cooldown_s, [this](Node& x) { try_return(x.index); });
}

}  // namespace dl::launcher
