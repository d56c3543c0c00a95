#include "launcher/job.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>

#include "control/protocol.h"
#include "errors/error.h"
#include "errors/exit_codes.h"
#include "launcher/control_server.h"
#include "launcher/dry_run_program.h"
#include "launcher/launch_plan.h"
#include "launcher/seats.h"
#include "launcher/torch_store.h"
#include "machine/clock.h"
#include "machine/gpu_report.h"
#include "machine/gpus.h"
#include "remote/start_method.h"
#include "rendezvous/tcp_store_server.h"
#include "wire/handshake.h"
#include "wire/host.h"

namespace dl::launcher {

namespace msg = control::msg;
using std::chrono::milliseconds;

namespace {
constexpr milliseconds kCloseWait{3000};
}  // namespace

Job::Job(RunOptions opts, hostfiles::Placement plan, JobParts parts)
    : opts_(std::move(opts)), plan_(std::move(plan)), own_peers_(parts.peers ? nullptr : Peers::none()),
      peers_(parts.peers ? parts.peers : own_peers_.get()), make_starter_(std::move(parts.make_starter)),
      make_links_(std::move(parts.make_links)), signals_(io_, SIGINT, SIGTERM, SIGHUP), agent_timer_(io_),
      job_timer_(io_), kill_timer_(io_), close_timer_(io_), restart_timer_(io_), suspend_timer_(io_),
      attempts_(opts_.max_restarts), progress_(io_), fate_(static_cast<int>(plan_.ranks.size())),
      cooldown_(opts_.return_cooldown_s) {
  // The scheduler's warnings (Slurm's --signal=USR1@90): forwarded, never fatal.
  signals_.add(SIGUSR1);
  signals_.add(SIGUSR2);
  // Ctrl-Z and fg/bg: the whole job stops and continues (suspend()); so it
  // does where the terminal would stop dlaunch alone (a background dlaunch
  // reading its stdin, or writing under `stty tostop`).
  for (int sig : {SIGTSTP, SIGTTIN, SIGTTOU, SIGCONT}) signals_.add(sig);
  sink_ = make_output_sink(opts_, plan_);
  const PeerIdentity* id = peers_->identity();
  nodes_.resize(plan_.nodes.size() + plan_.spares.size());
  for (size_t i = 0; i < nodes_.size(); ++i) {
    Node& n = nodes_[i];
    n.index = static_cast<int>(i);
    n.entry = i < plan_.nodes.size() ? plan_.nodes[i] : plan_.spares[i - plan_.nodes.size()];
    n.host = n.entry.host;
    if (i < plan_.nodes.size()) n.seat = n.index, seats_.push_back(n.index);
    if (id && n.index != id->node) n.state = NodeState::kExternal;
    n.local = id ? n.ours() : wire::is_local_host(n.host);
  }
  first_seats_ = seats_.size();
  for (const auto& r : plan_.ranks) nodes_.at(static_cast<size_t>(r.node)).ranks.push_back(r.rank);
  std::vector<int> ours;
  for (auto& n : nodes_) {
    if (!n.ours()) {
      fate_.not_ours(n.ranks);
      continue;
    }
    ours.insert(ours.end(), n.ranks.begin(), n.ranks.end());
    ++own_nodes_;
  }
  // The files and report paths are checked before anything starts: a
  // refusal is a usage error (exit 2), not a job lost after launch.
  sink_->make_files(ours);
  // Named where someone watches, and whenever -r takes a stream off the
  // console: a batch job's log must say where its ranks' output went.
  if (!opts_.log_dir.empty() && !ours.empty() && (opts_.verbose || ::isatty(2) == 1 || opts_.redirects.any())) {
    const std::string files = sink_->files_path();
    write_fully(2, files.empty() ? "dlaunch: --log-dir " + opts_.log_dir + ": no -r/-t stream goes to files, so "
                                   "nothing is written there (add -r 3 or -t 3 for every rank's stdout and stderr)\n"
                                 : "dlaunch: --log-dir: this run's files are in " + files + "\n");
  }
  check_report_paths(opts_.report_dir, opts_.report_json);
}

Job::~Job() {
  output_.reset();
  if (starter_) starter_->stop(0);
}

void Job::log(const std::string& line) {
  if (opts_.verbose) write_fully(2, "dlaunch: " + line + "\n");
}

int Job::run() {
  start();
  io_.run();
  return conclude();
}

void Job::start() {
  // The ranks' output and dlaunch's lines go out from a thread of their own
  // while the job runs: a reader that stalls holds them up, not the loop.
  ConsoleWriter::enable();
  const PeerIdentity* id = peers_->identity();
  token_ = id ? id->token : wire::new_token();
  job_id_ = id ? id->job_id : "dl-" + wire::to_hex(wire::random_bytes(4));
  bool any_remote = false;
  for (auto& n : nodes_) any_remote = any_remote || (!n.local && n.ours());
  const std::string bind = open_links(any_remote);
  start_stores(bind);
  start_mpi_relays();
  log("control server on " + bind + ":" + std::to_string(control_port_) + ", store " +
      (store_ ? "on port " + std::to_string(store_->port()) : "at " + id->store_addr) + ", job " + job_id_);
  peers_->watch([this](int code, std::string verdict) {
    asio::post(io_, [this, code, verdict] { on_peer_failed(code, verdict); });
  });
  signals_.async_wait([this](auto ec, int sig) { if (!ec) on_signal(sig); });
  start_stack_collector();
  arm_timers(any_remote);
  start_agents(true);
  show_progress();
}

int Job::conclude() {
  sink_->finish_all();  // lines of ranks whose exit never came (a lost host)
  starter_->stop(2000);
  if (const std::string last = attempts_.final_line(fate_); !last.empty()) write_fully(2, last + "\n");
  if (const std::string failed = stacks_ ? stacks_->write_final() : ""; !failed.empty())
    write_fully(2, "dlaunch: " + failed + "\n");
  ConsoleWriter::drain_and_disable();  // every line is out before dlaunch exits
  return fate_.exit_code();
}

// The links to the agents; the local agent needs no control port (it
// inherits a socketpair): it starts first, and execs while the port opens.
// Returns the address the port is bound to.
std::string Job::open_links(bool any_remote) {
  const std::string bind = any_remote ? (opts_.control_addr.empty() ? "0.0.0.0" : opts_.control_addr) : "127.0.0.1";
  control_host_ = any_remote ? opts_.control_addr : "127.0.0.1";
  if (make_links_) server_ = make_links_(io_, token_, nodes_.size(), *this);
  else server_ = std::make_unique<ControlServer>(io_, token_, nodes_.size(), *this);
  output_ = std::make_unique<OutputFlow>(io_, *sink_, *server_);
  plan_tree();
  make_starter();
  start_agents(false);
  control_port_ = server_->listen(bind);
  return bind;
}

// The job's own store (per-node mode's is the group's), and torch's.
void Job::start_stores(const std::string& bind) {
  if (per_node()) return;
  store_ = std::make_unique<rdzv::TcpStoreServer>(io_, bind, 0, token_);
  store_->set_logger([this](const std::string& line) { log(line); });
  // torchrun's --master-port is the MASTER_PORT its ranks see: the served store's port too.
  if (opts_.torch_store == TorchStoreMode::kServed) start_torch_store(bind, static_cast<uint16_t>(opts_.master_port));
}

// MPI's relays across hosts: the router (spawns, names, connects) and the fences.
void Job::start_mpi_relays() { mpi_router_ = make_mpi_router(); }

// --agent-timeout (plus --ssh-timeout for remote hosts) and --timeout.
void Job::arm_timers(bool any_remote) {
  // In a launch tree each level's agents start after their parent said hello.
  agent_timer_.expires_after(secs(opts_.agent_timeout_s) +
                             (any_remote ? secs(opts_.ssh_timeout_s) * tree_.depth() : milliseconds(0)));
  agent_timer_.async_wait([this](boost::system::error_code ec) { if (!ec) on_agent_timeout(); });
  if (opts_.timeout_s <= 0) return;
  job_timer_.expires_after(secs(opts_.timeout_s));
  job_timer_.async_wait([this](boost::system::error_code ec) {
    if (ec) return;
    // Between two attempts nothing runs: the timeout is the verdict (teardown finishes).
    if (phase_.is(Phase::kRestarting)) fate_ = Fate(static_cast<int>(plan_.ranks.size()));
    for (const auto& line : torch_store_ ? torch_store_->unfinished() : peers_->torch_unfinished())
      write_fully(2, "dlaunch: " + line + "\n");
    // Where every rank is, then the teardown (docs/hangs.md).
    if (fate_.on_timeout(opts_.timeout_s, opts_.timeout_from)) stacks_->on_timeout(opts_.timeout_s, [this] { teardown(grace_ms()); });
  });
}

void Job::show_progress() {
  if (!remote::show_start_progress(own_nodes(), ::isatty(2) == 1)) return;
  progress_.start([this] {
    return "agents " + std::to_string(hellos_) + "/" + std::to_string(own_nodes()) + " connected" +
           (start_failures_.empty() ? "" : ", " + std::to_string(start_failures_.size()) + " failed");
  });
}

std::string Job::on_hello(const msg::Hello& m) {
  Node& n = nodes_.at(static_cast<size_t>(m.node));
  if (!n.ours()) return "agent claims node " + std::to_string(m.node) + ", which is not expected";
  if (n.back == Node::Back::kStarting) return hello_returned(n, m);
  if (n.hello) return hello_again(n, m);
  if (n.lost) return "agent claims node " + std::to_string(m.node) + ", which the job no longer uses";
  greeted(n, m);
  log(std::string(n.seat < 0 ? "spare agent" : "agent") + " on " + n.host + " connected (pid " + std::to_string(m.pid) + ")");
  ++hellos_;
  check_health(n, m);
  if (phase_.is(Phase::kStarting) && ready_to_launch() && !fate_.failed()) launch_all();
  else if (fate_.failed() && phase_.is(Phase::kStarting) && all_agents_settled()) teardown(0);
  return "";
}

void Job::on_message(int node, const control::FromAgent& m) {
  Node& n = nodes_.at(static_cast<size_t>(node));
  auto own = [&](int rank) {
    if (std::find(n.ranks.begin(), n.ranks.end(), rank) == n.ranks.end()) throw RemoteError("exit of a foreign rank");
  };
  auto exited = [&](const msg::Exited& x) {
    own(x.rank);
    RankExit e;
    e.rank = x.rank, e.host = n.host, e.pid = x.pid, e.code = x.code.value_or(0);
    e.signal = x.signal.value_or(0), e.core = x.core.value_or(false), e.by_agent = x.by_agent;
    e.error = x.error.value_or("");
    e.error += interpreter_hint(opts_, e.error);
    e.name = mpi_router_->describe(x.rank);
    on_rank_exit(std::move(e));
  };
  std::visit(control::Visitor{
                 [](const msg::Hello&) { throw RemoteError("a second hello"); },
                 [](const msg::Heartbeat&) {},
                 [&](const msg::Started&) { on_started(1); },
                 [&](const msg::StartedBelow& s) {
                   // Only a relaying agent counts for others, and never more than its subtree holds.
                   if (!tree_.has_children(node)) throw RemoteError("started_below from an agent that starts no others");
                   if (s.count <= 0 || s.count > static_cast<int>(plan_.ranks.size()))
                     throw RemoteError("started_below of " + std::to_string(s.count) + " ranks, not 1 to " +
                                       std::to_string(plan_.ranks.size()));
                   on_started(s.count);
                 },
                 [&](const msg::Stacks& s) { stacks_->on_stacks(node, s); },
                 [&](const msg::Ready& r) { on_ready(node, r); },
                 [&](const msg::AgentFailed& f) {
                   if (f.node < 0 || static_cast<size_t>(f.node) >= nodes_.size() || tree_.parent(f.node) != node)
                     throw RemoteError("agent_failed of node " + std::to_string(f.node) + ", which it did not start");
                   node_failed_to_start(f.node, f.why);
                 },
                 [](const msg::AgentLost&) {},  // the links' business (ControlServer): on_closed
                 [&](const msg::Health& h) { on_health(n, h); },
                 [&](const control::MpiUp& u) { mpi_router_->receive(node, u); },
                 [&](const msg::SpawnFailed& f) {
                   own(f.rank);
                   RankExit e;
                   e.rank = f.rank, e.host = n.host, e.spawn_failed = true, e.code = f.code;
                   e.message = f.message + missing_python_hint(opts_, f.message);
                   e.name = mpi_router_->describe(f.rank);
                   on_rank_exit(std::move(e));
                 },
                 [&](const msg::Exited& x) { exited(x); },
                 [&](const msg::ExitedClean& c) {
                   if (c.pids.size() != c.ranks.size()) throw RemoteError("exited_clean with a pid count unlike its rank count");
                   msg::Exited x;
                   x.code = 0;
                   for (size_t i = 0; i < c.ranks.size(); ++i) x.rank = c.ranks[i], x.pid = c.pids[i], exited(x);
                 },
             },
             m);
}

void Job::on_rank_exit(RankExit e) {
  sink_->finish(e.rank);
  if (fate_.on_exit(e)) teardown(grace_ms());
  check_finished();
}

void Job::on_output(int node, const control::DataChunk& c) {
  const auto& mine = nodes_.at(static_cast<size_t>(node)).ranks;
  if (std::find(mine.begin(), mine.end(), c.rank) == mine.end()) throw RemoteError("output for a foreign rank");
  output_->write(c);
}

// The fences are by node rank (the seat an agent holds), as the MPI map
// the agents were given orders the hosts.
void Job::on_fence(int node, uint64_t id, std::string_view blob) {
  if (!mpi_ || !fences_) throw RemoteError("fence data outside an MPI job");
  const Node& n = nodes_.at(static_cast<size_t>(node));
  if (n.seat < 0) {
    if (n.lost) return;  // swapped out: what it still sends is of an attempt that ended
    throw RemoteError("fence data from a spare, which holds no ranks");
  }
  fences_->contribute(n.seat, id, blob);
}

// Per-node mode: another node failed (or the store was lost): stop ours.
void Job::on_peer_failed(int code, const std::string& verdict) {
  if (phase_.ending() && fate_.all_done()) return;
  peer_failed_ = !fate_.failed();
  if (fate_.on_peer_failure(code, verdict)) teardown(grace_ms());
}

void Job::on_closed(int node, const std::string& why) {
  Node& n = nodes_.at(static_cast<size_t>(node));
  // An old agent beneath one lost during the restart, reported after it:
  // its host's new agent is being started already (lost_while_restarting).
  if (phase_.is(Phase::kRestarting) && n.state == NodeState::kStarting && attempts_.anew(node))
    return log("the old agent on " + n.host + " ended (" + why + "); its new one is on its way");
  n.state = NodeState::kGone;
  stacks_->on_closed(node);
  loss_known_ = std::chrono::steady_clock::now();
  n.why_gone = why;
  if (n.seat < 0 && !n.lost && !phase_.ending()) spare_lost(n, why);
  if (n.lost) {  // swapped out, or a lost spare: its agent's end changes nothing
    // but for a relay that holds no seat (it failed the health gate): the
    // hosts beneath it get new agents for the restart.
    if (phase_.is(Phase::kRestarting) && tree_.has_children(node)) lost_while_restarting(n, why);
    if (n.back == Node::Back::kChecking) return_failed(n, "its agent's connection closed: " + why);
    if (phase_.ending() && !server_->any_open()) stop();
    return;
  }
  if (phase_.is(Phase::kRestarting)) lost_while_restarting(n, why);
  if (!phase_.ending()) {
    if (fate_.on_host_lost(n.host, why, n.ranks)) teardown(grace_ms());
    check_finished();
  }
  if (phase_.ending() && !server_->any_open()) stop();
}

void Job::spare_lost(Node& n, const std::string& why) {
  n.lost = true;
  size_t left = 0;
  for (const auto& x : nodes_) left += x.seat < 0 && !x.lost ? 1 : 0;
  const std::string line = "spare " + n.host + " lost (" + why + ")" + spares_left(left);
  write_fully(2, "dlaunch: " + line + "\n");
  note_change("lost_spare", n.host, why, {}, "");
  if (phase_.is(Phase::kRestarting)) attempts_.changed(line);
  else if (phase_.is(Phase::kStarting)) attempts_.changed_before_start(line);
  else attempts_.changed_during(line);
  schedule_return(n);
  if (phase_.is(Phase::kRestarting) && attempts_.forget(n.index)) all_ready();
  if (phase_.is(Phase::kStarting) && ready_to_launch() && !fate_.failed()) launch_all();
}

void Job::note_change(const std::string& kind, const std::string& host, const std::string& why,
                      const std::vector<int>& ranks, const std::string& to_host) {
  MembershipChange c;
  c.attempt = attempts_.changing_attempt(phase_.is(Phase::kRestarting));
  c.at_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - born_).count();
  c.kind = kind, c.host = host, c.why = why, c.ranks = ranks, c.to_host = to_host;
  attempts_.record(std::move(c));
}

bool Job::ready_to_launch() const {
  for (const auto& n : nodes_) {
    if (!n.ours() || n.lost) continue;
    if (n.state == NodeState::kStarting || n.health == Node::Health::kPending) return false;
    if (n.seat >= 0 && (n.state != NodeState::kUp || n.health != Node::Health::kPassed)) return false;
  }
  return true;
}

namespace {
// How many GPUs a hello shows of the vendor the job binds (0 for none, or
// for a host whose GPUs are all of another vendor: launch_plan says that).
size_t gpus_seen(const msg::Hello& m, const RunOptions& o, const std::string& host) {
  try {
    const auto g = machine::pick_gpus(machine::reported_gpus(m), o.gpu_vendor, host);
    return g ? g->gpus.size() : 0;
  } catch (const std::exception&) {
    return 0;
  }
}
}  // namespace

std::pair<size_t, std::string> Job::most_gpus() const {
  std::pair<size_t, std::string> most{0, ""};
  if (opts_.gpu_bind_mode == hostfiles::GpuBind::kNone || opts_.gpus_per_node >= 0) return most;
  for (const auto& n : nodes_)
    if (n.ours() && !n.lost && n.hello)
      if (const size_t c = gpus_seen(*n.hello, opts_, n.host); c > most.first) most = {c, n.host};
  return most;
}

std::string Job::gpus_short(const Node& n, size_t ranks, const std::pair<size_t, std::string>& most) const {
  if (most.first == 0 || !n.hello) return "";  // a CPU job on hosts without GPUs, or GPUs not judged
  const size_t need = std::min(most.first, ranks * static_cast<size_t>(std::max(1, opts_.gpus_per_rank)));
  const size_t seen = gpus_seen(*n.hello, opts_, n.host);
  if (seen >= need) return "";
  return "it sees " + std::to_string(seen) + " GPU" + (seen == 1 ? "" : "s") + " where " +
         (n.seat < 0 && n.back != Node::Back::kNo ? "a seat's " : "its ") + std::to_string(ranks) + " rank" +
         (ranks == 1 ? "" : "s") + " need " + std::to_string(need) + " (" + most.second + " has " +
         std::to_string(most.first) + "); check the host's GPUs (nvidia-smi), or run with --gpu-bind none for a job that uses none";
}

bool Job::short_of_gpus() {
  if (plan_.spares.empty()) return false;
  const auto most = most_gpus();
  for (auto& n : nodes_) {
    if (!n.ours() || n.lost || n.seat < 0) continue;
    if (const std::string why = gpus_short(n, n.ranks.size(), most); !why.empty()) {
      health_failed(n, why);
      return true;
    }
  }
  return false;
}

void Job::check_health(Node& n, const msg::Hello& m) {
  if (!m.unhealthy.empty()) return health_failed(n, m.unhealthy);
  if (const auto f = opts_.preflight_failed.find(n.host); f != opts_.preflight_failed.end())
    return health_failed(n, "--preflight: " + f->second);
  // The checks that ask the host once more: with spares, its programs (a
  // host that lacks them is replaced before the start, not failed after it);
  // --health-check's command when given.
  const bool returning = n.back != Node::Back::kNo;  // asked as a spare is, with or without --spares
  if (opts_.health_check.empty() && plan_.spares.empty() && !returning) {
    n.health = Node::Health::kPassed;
    return;
  }
  n.health = Node::Health::kPending;
  msg::HealthCheck c;
  c.command = opts_.health_check, c.host = n.host;
  c.timeout_ms = static_cast<int>(opts_.health_timeout_s * 1000);
  if (!plan_.spares.empty() || returning) c.programs = program_probes(opts_, n.ranks);
  n.health_sent_ns = machine::wall_ns();
  server_->send(n.index, c);
}

void Job::on_health(Node& n, const msg::Health& h) {
  if (n.health != Node::Health::kPending) return;
  if (!h.passed) return health_failed(n, h.text.empty() ? "it failed" : h.text);
  // The host's clock, from the check's round trip less the time the agent
  // held it: known to within half of what is left (machine/clock.h).
  const long long rtt = std::max(0LL, machine::wall_ns() - n.health_sent_ns - h.held_ns);
  const long long offset = machine::clock_offset_ns(n.health_sent_ns, n.health_sent_ns + rtt, h.clock_ns);
  if (const std::string off = machine::clock_off(offset, rtt / 2, opts_.clock_threshold_s); !off.empty())
    return health_failed(n, off + "; " + machine::kClockFix);
  n.health = Node::Health::kPassed;
  log(n.host + " passed the health check (its clock " + machine::signed_offset(offset) + " off the launcher's, within " +
      machine::signed_offset(rtt / 2).substr(1) + ")");
  if (n.back == Node::Back::kChecking) return back_as_spare(n);
  if (phase_.is(Phase::kStarting) && ready_to_launch() && !fate_.failed()) launch_all();
}

// Before the launch: a spare that fails leaves; a seated host's seat goes to
// a spare that has not failed (it is checked too before the launch), else
// the job cannot start. The host's agent is sent away.
void Job::health_failed(Node& n, const std::string& text) {
  n.health = Node::Health::kFailed;
  const std::string why = "failed the health check: " + text;
  if (n.back == Node::Back::kChecking) return return_failed(n, why);
  if (n.lost) return;
  if (n.seat < 0) {
    server_->send(n.index, msg::Bye{});
    return spare_lost(n, why);
  }
  if (!phase_.is(Phase::kStarting)) return;
  Node* spare = nullptr;
  for (auto& x : nodes_)
    if (x.ours() && x.seat < 0 && !x.lost && x.state != NodeState::kStartFailed &&
        (!spare || (x.health == Node::Health::kPassed && spare->health != Node::Health::kPassed)))
      spare = &x;
  if (!spare) {
    write_fully(2, "dlaunch: error: " + n.host + " " + why + (plan_.spares.empty() ? "" : "; no spare is left to take its ranks") + "\n");
    fate_.on_host_lost(n.host, why, n.ranks);
    fate_.mark_said();
    return teardown(0);
  }
  seats_.at(static_cast<size_t>(n.seat)) = spare->index;
  spare->seat = n.seat, n.seat = -1, n.lost = true;
  spare->ranks = std::move(n.ranks), n.ranks.clear();
  for (int r : spare->ranks) sink_->move_rank(r, spare->host);
  if (torch_store_) torch_store_->rename_nodes(seat_hosts());
  size_t left = 0;
  for (const auto& x : nodes_) left += x.seat < 0 && !x.lost ? 1 : 0;
  const std::string line = moved_line(n.host, why, spare->ranks, spare->host) + spares_left(left);
  lost_hosts_.push_back(n.host + " (" + why + ")");
  write_fully(2, "dlaunch: " + line + "\n");
  note_change("moved", n.host, why, spare->ranks, spare->host);
  attempts_.changed_before_start(line);
  // An agent that starts others stays, holding no ranks: its bye would end
  // the agents beneath it, whose hosts passed.
  if (tree_.has_children(n.index)) log(n.host + " takes no ranks; its agent stays to relay for the hosts beneath it");
  else server_->send(n.index, msg::Bye{});
  schedule_return(n);
  if (ready_to_launch() && !fate_.failed()) launch_all();
}

void Job::teardown(int grace_ms) {
  progress_.stop();
  if (!phase_.launched() && start_failures_.size() > 1) {
    std::string hosts;
    for (const auto& h : start_failures_) hosts += (hosts.empty() ? "" : ", ") + h;
    fate_.restate("agents could not be started on " + std::to_string(start_failures_.size()) + " hosts (" + hosts +
                  "); each is explained above");
  }
  if (fate_.failed() && !peer_failed_ && !published_) {
    published_ = true;
    peers_->publish_failure(fate_.exit_code(), fate_.verdict());
  }
  if (phase_.is(Phase::kStarting)) return abort_before_launch();
  // Nothing runs between two attempts: --timeout ends the job there.
  if (phase_.is(Phase::kRestarting)) return restart_failed("dlaunch was stopped (--timeout)");
  if (!phase_.launched() || phase_.is(Phase::kClosing)) return;
  const bool again = phase_.is(Phase::kTearingDown);
  if (!again) phase_.to(Phase::kTearingDown);
  // A teardown that a restart may follow asks for the agents' answers now:
  // each comes right after its host's last exit (msg::Kill::ready_for).
  msg::Kill kill;
  kill.grace_ms = grace_ms;
  if (attempts_.retry(fate_)) kill.ready_for = attempts_.next();
  server_->broadcast(kill);
  if (again && grace_ms > 0) return;
  // Agents confirm every exit; if some never do, give up after grace + 5 s.
  kill_timer_.expires_after(milliseconds(grace_ms) + milliseconds(5000));
  kill_timer_.async_wait([this](boost::system::error_code ec) {
    if (ec) return;
    for (auto& n : nodes_)
      if (!n.ranks.empty() && n.ours()) fate_.on_host_lost(n.host, "did not confirm that its ranks ended", n.ranks);
    check_finished();
  });
}

// Nothing runs yet: tell connected agents to leave, then stop.
void Job::abort_before_launch() {
  phase_.to(Phase::kAborting);
  server_->broadcast(msg::Bye{});
  close_timer_.expires_after(kCloseWait);
  close_timer_.async_wait([this](boost::system::error_code ec) { if (!ec) stop(); });
  if (!server_->any_open()) stop();
}

// SIGQUIT (Ctrl-\ on a terminal) from now on reports where every rank is; the job goes on.
void Job::start_stack_collector() {
  StackOptions so{opts_.stack_timeout_s, opts_.report_dir, opts_.report_json};
  StackCollector::Hooks hooks;
  hooks.sources = [this] {
    std::vector<StackSource> out;
    if (!phase_.launched() || phase_.is(Phase::kClosing)) return out;
    for (auto& n : nodes_)
      if (n.state == NodeState::kUp && !n.ranks.empty()) out.push_back({n.index, n.host, n.ranks});
    return out;
  };
  hooks.send = [this](int node, const msg::DumpStacks& m) { server_->send(node, m); };
  hooks.membership = [this] { return attempts_.membership(); };
  stacks_ = std::make_unique<StackCollector>(io_, std::move(so), std::move(hooks));
}

void Job::check_finished() {
  if (!phase_.launched() || phase_.is(Phase::kClosing) || phase_.is(Phase::kRestarting) || !fate_.all_done()) return;
  if (attempts_.retry(fate_) && restartable()) return restart();
  // Per-node mode: the other nodes may be waiting to restart with us.
  if (opts_.max_restarts > 0 && fate_.failed()) peers_->abandon(attempts_.restarts(), fate_.verdict());
  finish();
}

void Job::finish() {
  phase_.to(Phase::kClosing);
  server_->stop_heartbeats();
  kill_timer_.cancel();
  job_timer_.cancel();
  restart_timer_.cancel();
  server_->broadcast(msg::Bye{});
  close_timer_.expires_after(kCloseWait);
  close_timer_.async_wait([this](boost::system::error_code ec) { if (!ec) stop(); });
}

void Job::stop() {
  if (phase_.is(Phase::kDone)) return;
  phase_.to(Phase::kDone);
  server_->stop_accepting();
  io_.stop();
}

}  // namespace dl::launcher
