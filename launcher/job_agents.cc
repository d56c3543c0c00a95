// The Job's agents: making the starter, starting one agent per node of
// ours, and what a start that failed, or an agent that never connected,
// means for the job. A node's state (Job::NodeState) moves from kStarting to
// kUp on its hello (job.cc), or to kStartFailed here.
#include <unistd.h>

#include "launcher/job.h"
#include "remote/start_method.h"

namespace dl::launcher {

using std::chrono::milliseconds;

void Job::make_starter() {
  remote::AgentStarter::Events ev;
  ev.failed = [this](int node, std::string why) { node_failed_to_start(node, why); };
  ev.reached = [this](int node, std::string reach, std::string back) {
    nodes_.at(static_cast<size_t>(node)).reach_addr = reach;
    if (control_host_.empty()) control_host_ = back;
  };
  ev.agent_stderr = [this](int node, std::string text) {
    write_fully(2, "dlaunch: [agent@" + nodes_.at(static_cast<size_t>(node)).host + "] " + text);
  };
  ev.notice = [](std::string text) {
    if (!text.empty()) write_fully(2, "dlaunch: " + text + "\n");
  };
  ev.local_control = [this](int, int fd) { server_->adopt(fd); };
  if (make_starter_) {
    starter_ = make_starter_(io_, std::move(ev));
  } else {
    remote::StarterOptions so;
    so.ssh_timeout = secs(opts_.ssh_timeout_s);
    so.ssh_config = opts_.ssh_config;
    so.ssh_accept_new = opts_.ssh_accept_new;
    so.prefix = opts_.prefix;
    so.ssh_parallel = opts_.ssh_parallel;
    so.launcher_exec = remote::split_launcher_exec(opts_.launcher_exec);
    so.early_agent = std::move(early_agent_);
    starter_ = remote::make_agent_starter(opts_.launcher, io_, std::move(so), std::move(ev));
  }
}

void Job::start_agents(bool with_port) {
  for (auto& n : nodes_) {
    if (n.state != NodeState::kStarting) continue;
    if (n.local) n.reach_addr = "127.0.0.1";
    const auto spec = agent_spec(n);
    if (starter_->needs_control_port(spec) == with_port) starter_->start(spec);
  }
}

AgentStartSpec Job::agent_spec(const Node& n) const {
  const auto& entry = plan_.nodes[static_cast<size_t>(n.index)];
  remote::AgentStartSpec spec;
  spec.node = n.index;
  spec.host = n.host, spec.user = entry.user, spec.port = entry.port;
  spec.local = n.local;
  spec.control_port = std::to_string(control_port_);
  spec.control_addr = opts_.control_addr;
  spec.token = token_;
  spec.args.node = n.index;
  spec.args.gpus_per_node = opts_.gpus_per_node;
  spec.args.detect_gpus = opts_.gpu_bind_mode != hostfiles::GpuBind::kNone;
  spec.args.cpu_topology = pins_cpus(opts_);
  // No PMIx server warming up beside ranks that will not use it.
  spec.args.prepare_pmix =
      !(opts_.mpi == MpiMode::kNone || opts_.mpi == MpiMode::kPmi || opts_.max_restarts > 0 || (n.local && per_node()));
  return spec;
}

void Job::node_failed_to_start(int node, const std::string& why) {
  Node& n = nodes_.at(static_cast<size_t>(node));
  // Once the agents were told to leave (aborting, closing), an agent's exit
  // is expected, not a start failure: every host had connected or failed by then.
  // An agent that connected ran: its connection reports (on_closed).
  if (n.state != NodeState::kStarting || phase_.ending()) return;
  if (phase_.is(Phase::kRestarting)) {
    if (attempts_.anew(node)) restart_failed(why);  // (else an old agent's watch, too late to matter)
    return;
  }
  n.state = NodeState::kStartFailed;
  start_failures_.push_back(n.host);
  progress_.print_over("dlaunch: error: " + why + "\n");
  const bool lost = fate_.on_host_lost(n.host, "its agent could not be started", n.ranks);
  if (phase_.launched()) {
    if (lost) teardown(0);
    return;
  }
  // Before launch: wait until every host has connected or failed, so each
  // failing host gets its own line (the agent timer bounds the wait).
  if (phase_.is(Phase::kStarting) && all_agents_settled()) teardown(0);
}

// True when every node's agent has connected or failed to start.
bool Job::all_agents_settled() const {
  for (auto& n : nodes_)
    if (n.state == NodeState::kStarting) return false;
  return true;
}

// No hello within --agent-timeout: the silent hosts' own ranks fail (not
// node 0's: in per-node mode node 0 may be another node's, already counted
// done, and the job would pass).
void Job::on_agent_timeout() {
  if (!phase_.is(Phase::kStarting)) return;
  std::string missing, known;  // known: why, if the start method can tell (srun waiting for resources)
  std::vector<int> ranks;
  for (auto& n : nodes_)
    if (n.state == NodeState::kStarting) {
      missing += (missing.empty() ? "" : ", ") + n.host;
      ranks.insert(ranks.end(), n.ranks.begin(), n.ranks.end());
      if (known.empty()) known = starter_->waiting_for(n.index);
    }
  fate_.on_host_lost(missing, "its agent did not connect within " + std::to_string(static_cast<int>(opts_.agent_timeout_s)) +
                                  " s (see --agent-timeout)" + (known.empty() ? "" : ": " + known), ranks);
  teardown(0);
}

}  // namespace dl::launcher
