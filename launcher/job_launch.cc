// The Job's launch: once every agent of ours said hello, the launch
// messages are planned (launcher/launch_plan.h, pure) from what the agents
// reported and sent, one per node; then dlaunch's stdin is forwarded.
#include <unistd.h>

#include "launcher/dry_run.h"
#include "launcher/job.h"
#include "launcher/output/stdin_forwarder.h"
#include "launcher/torch_store.h"
#include "rendezvous/bootstrap.h"
#include "rendezvous/tcp_store_server.h"

namespace dl::launcher {

namespace msg = control::msg;
using std::chrono::milliseconds;

PlanInput Job::plan_input() const {
  PlanInput in;
  in.placement = &plan_;
  in.opts = &opts_;
  for (int seat : seats_) {  // by node rank: the node that holds each
    const Node& n = nodes_.at(static_cast<size_t>(seat));
    in.nodes.push_back({n.host, n.local, !n.ours(), n.ranks, n.hello, n.reach_addr});
  }
  in.job_id = job_id_;
  in.token = token_;
  in.control_host = control_host_;
  in.store_port = store_ ? store_->port() : 0;
  in.torch_store_port = torch_store_ ? torch_store_->port() : 0;
  if (const PeerIdentity* id = peers_->identity())
    in.shared = SharedIdentity{id->master_addr, id->store_addr, id->master_port, id->torch_store};
  char cwd[4096] = {};
  in.wdir = opts_.wdir.empty() ? (::getcwd(cwd, sizeof cwd) ? cwd : "") : opts_.wdir;
  in.launcher_env = rdzv::process_environment();
  in.exports = resolve_exports(opts_.exports, in.launcher_env);
  in.restart_count = attempts_.restarts();
  in.master_port = opts_.master_port;  // torchrun's --master-port: rank 0's port under --torch-store rank0
  in.output_terminal = ::isatty(1) == 1 && opts_.output_dir.empty();
  return in;
}

void Job::launch_all() {
  if (!phase_.is(Phase::kStarting)) return;
  if (short_of_gpus()) return;  // its seat moved to a spare (launching again from there), or the job ended
  // With --launcher ssh a host's address (and ours as it reached us) comes
  // from the SSH_CONNECTION line its ssh prints before the agent starts; the
  // agent's own TCP connection can say hello first, and MASTER_ADDR and the
  // store's address were then "". That connection's ends say the same.
  for (auto& n : nodes_) {
    if (n.local || !n.ours() || !n.reach_addr.empty()) continue;
    const auto ends = server_->addresses(n.index);
    n.reach_addr = ends.remote_address;
    if (control_host_.empty()) control_host_ = ends.local_address;
  }
  const PlanInput in = plan_input();
  LaunchPlan plan = plan_launch(in);
  if (plan.refusal == LaunchPlan::Refusal::kNoPmix) {
    write_fully(2, "dlaunch: error: " + plan.why + "\n");
    fate_.on_host_lost(plan.hosts, "no PMIx server (--mpi pmix)", seated(0).ranks);
    return teardown(0);
  }
  if (plan.refusal == LaunchPlan::Refusal::kBadRequest) {
    fate_.on_bad_request(plan.why);
    return teardown(0);
  }
  if (plan.mpi && plan.serve == control::MpiServe::kRefuse && in.restart_count == 0)
    log("MPI is not served (per-node mode); a rank that calls MPI_Init ends the job");
  mpi_ = plan.mpi;
  start_mpi_attempt();
  phase_.to(Phase::kLaunched);
  progress_.stop();
  agent_timer_.cancel();
  if (opts_.report_bindings) {
    std::vector<std::string> hosts;
    for (int seat : seats_) hosts.push_back(nodes_.at(static_cast<size_t>(seat)).host);
    write_fully(2, binding_report(plan, hosts, opts_));
  }
  server_->start_heartbeats(milliseconds(heartbeat_interval_ms(opts_.heartbeat_timeout_s)), secs(opts_.heartbeat_timeout_s));
  write_fully(2, plan.warnings);
  // Said where someone watches (a terminal, or -v), so that a job that went
  // well still says nothing to the logs and scripts reading dlaunch's stderr.
  if (!plan.notice.empty() && (opts_.verbose || ::isatty(2) == 1)) write_fully(2, plan.notice);
  // The MPI job's map, once to every agent, ahead of the launches that leave it out.
  if (plan.mpi_map) server_->broadcast(*plan.mpi_map);
  // What every launch shares, once to every agent, ahead of the launches that leave it out.
  server_->broadcast(plan.shared);
  bool warned = false;
  for (size_t seat = 0; seat < seats_.size(); ++seat) {
    auto& m = plan.launches[seat];
    if (!m) continue;
    if (!warned)
      write_fully(2, inherited_identity_warning(*m, in.launcher_env, chosen_env(in), plan.shared.env)), warned = true;
    server_->send(seats_[seat], *m);
  }
  // Spares, and a host that failed the health gate but relays for the hosts beneath it.
  for (const auto& n : nodes_)
    if (n.seat < 0 && (!n.lost || tree_.has_children(n.index)) && n.state == NodeState::kUp)
      server_->send(n.index, standby_launch());
  start_stdin_reader();
}

// No ranks: the agent starts its heartbeats and waits (a restart's Ready
// comes at once, since it has nothing to wait for).
msg::Launch Job::standby_launch() const {
  msg::Launch m;
  m.hb_ms = heartbeat_interval_ms(opts_.heartbeat_timeout_s);
  m.hb_timeout_ms = static_cast<int>(opts_.heartbeat_timeout_s * 1000);
  m.stdout_pty = opts_.output_pty;
  return m;
}

void Job::start_stdin_reader() {
  const int target = opts_.stdin_rank;
  if (target == kNoStdin || !may_read_stdin()) return;
  if (target >= static_cast<int>(plan_.ranks.size())) return;
  const int node = seats_.at(static_cast<size_t>(plan_.ranks[static_cast<size_t>(target)].node));
  if (!nodes_.at(static_cast<size_t>(node)).ours()) return;
  forward_stdin(
      io_, [this, node, target](std::string data) { server_->send(node, control::data_frame(target, control::kStdin, data)); },
      [this, node, target] { server_->send(node, msg::StdinEof{target}); });
}

}  // namespace dl::launcher
