// The Job's agents: making the starter, starting one agent per node of
// ours, and what a start that failed, or an agent that never connected,
// means for the job. A node's state (Job::NodeState) moves from kStarting to
// kUp on its hello (job.cc), or to kStartFailed here.
#include <unistd.h>

#include <filesystem>

#include "control/tree_words.h"
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
    so.hosts_may_go = !plan_.spares.empty() || opts_.min_hosts > 0;
    starter_ = remote::make_agent_starter(opts_.launcher, io_, std::move(so), std::move(ev));
  }
}

// The tree's shape, from the nodes this launcher would start itself over
// ssh or the test bed (the local one is forked; srun starts all at once).
// Spares are never in it: this launcher starts them itself, beside the
// roots, so a lost host never takes a spare with it and a lost spare takes
// no host (docs/failures.md, "Spares").
void Job::plan_tree() {
  if (!remote::starts_tree(opts_.launcher)) return;
  std::vector<int> starts;
  for (auto& n : nodes_)
    if (n.ours() && !n.local && n.seat >= 0) starts.push_back(n.index);
  tree_ = LaunchTree(starts, nodes_.size(), opts_.fanout);
  if (tree_.flat()) return;
  set_routes();
  log("launch tree: " + std::to_string(starts.size()) + " hosts, fanout " + std::to_string(opts_.fanout) + ", depth " +
      std::to_string(tree_.depth()) + (plan_.spares.empty() ? "" : ", the spares started by dlaunch"));
}

void Job::set_routes() {
  std::vector<std::string> hosts;
  for (auto& n : nodes_) hosts.push_back(n.host);
  server_->set_routes(tree_.roots_by_node(), std::move(hosts));
}

namespace {
// `path` from this process's working directory (as it is if that fails).
std::string absolute_path(const std::string& path) {
  std::error_code ec;
  auto p = std::filesystem::absolute(path, ec);
  return ec ? path : p.lexically_normal().string();
}
}  // namespace

// What an agent of the tree is told to start: `agents` with their hosts,
// and the start method, options and agent arguments this launcher uses.
control::msg::StartAgents Job::tree_message(int to, std::vector<control::msg::TreeAgent> agents) const {
  control::msg::StartAgents m;
  m.method = remote::word(opts_.launcher);
  m.self = nodes_.at(static_cast<size_t>(to)).host;
  for (auto& a : agents) {
    const auto& e = nodes_.at(static_cast<size_t>(a.node)).entry;
    a.host = e.host, a.user = e.user, a.port = e.port;
  }
  m.ssh_parallel = opts_.ssh_parallel;
  m.ssh_timeout_ms = static_cast<int>(secs(opts_.ssh_timeout_s).count());
  // The agents read these on their own hosts, from their own working
  // directory: a path relative to this one's would name nothing there.
  m.ssh_config = opts_.ssh_config.empty() ? "" : absolute_path(opts_.ssh_config);
  m.prefix = opts_.prefix;
  m.ssh_accept_new = opts_.ssh_accept_new;
  m.launcher_exec = remote::split_launcher_exec(opts_.launcher_exec);
  if (!m.launcher_exec.empty() && m.launcher_exec[0].find('/') != std::string::npos)  // not a name to look up in PATH
    m.launcher_exec[0] = absolute_path(m.launcher_exec[0]);
  if (!agents.empty()) {
    const auto args = agent_spec(nodes_.at(static_cast<size_t>(agents.front().node))).args;
    m.gpus_per_node = args.gpus_per_node, m.detect_gpus = args.detect_gpus;
    m.prepare_pmix = args.prepare_pmix, m.cpu_topology = args.cpu_topology;
  }
  m.agents = std::move(agents);
  return m;
}

// Node `n`'s agent said hello (first, or anew for a restart). A root of the
// tree is told to start the agents beneath it.
void Job::greeted(Node& n, const control::msg::Hello& m) {
  n.hello = m;
  n.state = NodeState::kUp;
  if (m.reach) n.reach_addr = *m.reach;  // as the agent that relayed it saw it
  if (tree_.parent(n.index) >= 0) return;  // its parent started it, and sends it its subtree
  starter_->connected(n.index);
  if (tree_.has_children(n.index)) {
    auto below = tree_.subtree(n.index);
    below.erase(below.begin());
    server_->send(n.index, tree_message(n.index, std::move(below)));
  }
}

// A restart's new agent for `node`: from here for a root, else from its
// parent, unless that is started anew too (it starts its subtree once it
// said hello).
void Job::start_again(int node) {
  const int p = tree_.parent(node);
  if (p < 0) return starter_->start(agent_spec(nodes_.at(static_cast<size_t>(node))));
  if (nodes_.at(static_cast<size_t>(p)).state == NodeState::kUp) server_->send(p, tree_message(p, tree_.subtree(node)));
}

void Job::start_agents(bool with_port) {
  for (auto& n : nodes_) {
    if (n.state != NodeState::kStarting || tree_.parent(n.index) >= 0) continue;
    if (n.local) n.reach_addr = "127.0.0.1";
    const auto spec = agent_spec(n);
    if (starter_->needs_control_port(spec) == with_port) starter_->start(spec);
  }
}

AgentStartSpec Job::agent_spec(const Node& n) const {
  const auto& entry = n.entry;
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
      !(opts_.mpi == MpiMode::kNone || opts_.mpi == MpiMode::kPmi || (n.local && per_node()));
  return spec;
}

void Job::node_failed_to_start(int node, const std::string& why) {
  Node& n = nodes_.at(static_cast<size_t>(node));
  if (n.back != Node::Back::kNo) {  // a lost host's way back (job_return.cc); an older try's end says nothing
    if (n.back == Node::Back::kStarting) return_failed(n, why);
    return;
  }
  // Once the agents were told to leave (aborting, closing), an agent's exit
  // is expected, not a start failure: every host had connected or failed by then.
  // An agent that connected ran: its connection reports (on_closed).
  if (n.state != NodeState::kStarting || phase_.ending()) return;
  // The agents it was to start will not be.
  std::vector<std::string> names;
  for (int b : tree_.beneath(node)) {
    Node& d = nodes_.at(static_cast<size_t>(b));
    names.push_back(d.host);
    if (d.state == NodeState::kStarting) d.state = NodeState::kStartFailed;
  }
  const std::string text = control::not_started_beneath(why, names);
  if (n.seat < 0 && !n.lost && names.empty()) {  // a spare: the job goes on with one fewer
    n.state = NodeState::kStartFailed;
    return spare_lost(n, "its agent could not be started: " + why);
  }
  if (phase_.is(Phase::kRestarting)) {
    if (attempts_.anew(node)) restart_failed(text);  // (else an old agent's watch, too late to matter)
    return;
  }
  n.state = NodeState::kStartFailed;
  start_failures_.push_back(n.host);
  progress_.print_over("dlaunch: error: " + text + "\n");
  const bool lost = fate_.on_host_lost(n.host, "its agent could not be started", n.ranks);
  if (lost) fate_.mark_said();  // the line above says it all
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
  const std::string silent = "its agent did not connect within " + std::to_string(static_cast<int>(opts_.agent_timeout_s)) +
                             " s (see --agent-timeout)";
  for (auto& n : nodes_)  // a silent spare: the job starts without it
    if (n.state == NodeState::kStarting && n.seat < 0 && !n.lost) n.state = NodeState::kStartFailed, spare_lost(n, silent);
  for (auto& n : nodes_)  // a health check that never answered is one that failed
    if (n.health == Node::Health::kPending && phase_.is(Phase::kStarting))
      health_failed(n, "no answer within " + std::to_string(static_cast<int>(opts_.agent_timeout_s)) +
                           " s (--agent-timeout)");
  if (!phase_.is(Phase::kStarting)) return;  // launched without them (or torn down)
  for (auto& n : nodes_)
    if (n.state == NodeState::kStarting) {
      missing += (missing.empty() ? "" : ", ") + n.host;
      ranks.insert(ranks.end(), n.ranks.begin(), n.ranks.end());
      if (known.empty()) known = starter_->waiting_for(n.index);
    }
  fate_.on_host_lost(missing, silent + (known.empty() ? "" : ": " + known), ranks);
  teardown(0);
}

}  // namespace dl::launcher
