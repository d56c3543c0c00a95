#include "launcher/job.h"

#include <signal.h>
#include <unistd.h>

#include <cstring>
#include <thread>

#include "control/env_names.h"
#include "control/protocol.h"
#include "errors/error.h"
#include "errors/exit_codes.h"
#include "launcher/dry_run.h"
#include "launcher/dry_run_program.h"
#include "launcher/launch_plan.h"
#include "launcher/shared_env.h"
#include "launcher/signal_policy.h"
#include "launcher/stdin_forwarder.h"
#include "launcher/torch_store.h"
#include "remote/start_method.h"
#include "rendezvous/bootstrap.h"
#include "rendezvous/tcp_store_server.h"
#include "wire/handshake.h"


namespace dl::launcher {

namespace msg = control::msg;
using std::chrono::milliseconds;

namespace {
milliseconds secs(double s) { return milliseconds(static_cast<long>(s * 1000)); }

constexpr milliseconds kCloseWait{3000};
}  // namespace

Job::Job(RunOptions opts, hostfiles::Placement plan, std::optional<NodeView> view, StarterFactory make_starter)
    : opts_(std::move(opts)), plan_(std::move(plan)), view_(std::move(view)), make_starter_(std::move(make_starter)),
      signals_(io_, SIGINT, SIGTERM, SIGHUP), agent_timer_(io_), job_timer_(io_), kill_timer_(io_), close_timer_(io_),
      restart_timer_(io_), suspend_timer_(io_), output_timer_(io_), attempts_(opts_.max_restarts), progress_(io_), fate_(static_cast<int>(plan_.ranks.size())) {
  // The scheduler's warnings (Slurm's --signal=USR1@90): forwarded, never fatal.
  signals_.add(SIGUSR1);
  signals_.add(SIGUSR2);
  // Ctrl-Z and fg/bg: the whole job stops and continues (suspend()); so it
  // does where the terminal would stop dlaunch alone (a background dlaunch
  // reading its stdin, or writing under `stty tostop`).
  for (int sig : {SIGTSTP, SIGTTIN, SIGTTOU, SIGCONT}) signals_.add(sig);
  std::vector<std::string> rank_hosts;
  for (const auto& r : plan_.ranks) rank_hosts.push_back(plan_.nodes.at(static_cast<size_t>(r.node)).host);
  OutputOptions out;
  out.tag = opts_.tag_output, out.timestamp = opts_.timestamp_output, out.dir = opts_.output_dir;
  // torchrun's -r/-t maps are keyed by local rank.
  out.log_dir = opts_.log_dir;
  out.merge_stderr = opts_.merge_stderr;
  out.redirects = opts_.redirects, out.tee = opts_.tee, out.console_ranks = opts_.console_ranks;
  for (const auto& r : plan_.ranks) out.local_ranks.push_back(r.local_rank);
  sink_ = std::make_unique<OutputSink>(std::move(out), std::move(rank_hosts));
  nodes_.resize(plan_.nodes.size());
  for (size_t i = 0; i < plan_.nodes.size(); ++i) {
    Node& n = nodes_[i];
    n.index = static_cast<int>(i);
    n.host = plan_.nodes[i].host;
    n.external = view_ && static_cast<int>(i) != view_->node;
    n.local = view_ ? !n.external : remote::is_local_host(n.host);
  }
  for (const auto& r : plan_.ranks) nodes_.at(static_cast<size_t>(r.node)).ranks.push_back(r.rank);
  std::vector<int> ours;
  for (auto& n : nodes_)
    if (n.external) fate_.not_ours(n.ranks);
    else ours.insert(ours.end(), n.ranks.begin(), n.ranks.end());
  // The files and report paths are checked before anything starts: a
  // refusal is a usage error (exit 2), not a job lost after launch.
  sink_->make_files(ours);
  if (!opts_.log_dir.empty() && !ours.empty() && (opts_.verbose || ::isatty(2) == 1))
    write_fully(2, "dlaunch: --log-dir: this run's files are in " + sink_->files_path() + "\n");
  check_report_paths(opts_.report_dir, opts_.report_json);
}

Job::~Job() {
  ConsoleWriter::when_below_low(nullptr);
  if (starter_) starter_->stop(0);
}

int Job::own_nodes() const {
  int k = 0;
  for (auto& n : nodes_) k += n.external ? 0 : 1;
  return k;
}

void Job::log(const std::string& line) {
  if (opts_.verbose) write_fully(2, "dlaunch: " + line + "\n");
}

int Job::run() {
  // The ranks' output and dlaunch's lines go out from a thread of their own
  // while the job runs: a reader that stalls holds them up, not the loop.
  ConsoleWriter::enable();
  token_ = view_ ? view_->token : wire::new_token();
  job_id_ = view_ ? view_->job_id : "dl-" + wire::to_hex(wire::random_bytes(4));
  bool any_remote = false;
  for (auto& n : nodes_) any_remote = any_remote || (!n.local && !n.external);
  const std::string bind = any_remote ? (opts_.control_addr.empty() ? "0.0.0.0" : opts_.control_addr) : "127.0.0.1";
  control_host_ = any_remote ? opts_.control_addr : "127.0.0.1";
  server_ = std::make_unique<ControlServer>(io_, token_, nodes_.size(), *this);
  // The local agent needs no control port (it inherits a socketpair): it
  // starts first, and execs while the servers below open.
  make_starter();
  start_agents(false);
  const uint16_t port = server_->listen(bind);
  if (!view_) {
    store_ = std::make_unique<rdzv::TcpStoreServer>(io_, bind, 0, token_);
    store_->set_logger([this](const std::string& line) { log(line); });
    if (opts_.torch_store == TorchStoreMode::kServed) start_torch_store(bind);
  }
  mpi_router_ = make_mpi_router();
  std::vector<std::string> hosts;
  std::vector<std::vector<int>> ranks;
  for (auto& n : nodes_) hosts.push_back(n.host), ranks.push_back(n.ranks);
  fences_ = std::make_unique<FenceRelay>(
      io_, std::move(hosts), std::move(ranks), secs(opts_.fence_timeout_s),
      FenceRelay::Hooks{[this](uint64_t id, const std::string& all) {
                          log(control::fence_name(id) + " complete (" + std::to_string(all.size()) + " bytes)");
                          server_->broadcast_frame(control::fence_frame(id, all));
                        },
                        [this](uint64_t id, const std::string& missing) {
                          server_->broadcast(msg::FenceFailed{id, missing});
                          if (fate_.on_fence_timeout(id, opts_.fence_timeout_s, missing)) teardown(grace_ms());
                        }});
  log("control server on " + bind + ":" + std::to_string(port) + ", store " +
      (store_ ? "on port " + std::to_string(store_->port()) : "at " + view_->store_addr) + ", job " + job_id_);
  if (view_)
    view_->watch([this](int code, std::string verdict) {
      asio::post(io_, [this, code, verdict] { on_peer_failed(code, verdict); });
    });
  signals_.async_wait([this](auto ec, int sig) { if (!ec) on_signal(sig); });
  start_stack_collector();
  agent_timer_.expires_after(secs(opts_.agent_timeout_s) + (any_remote ? secs(opts_.ssh_timeout_s) : milliseconds(0)));
  agent_timer_.async_wait([this](boost::system::error_code ec) {
    if (ec || !phase_.is(Phase::kStarting)) return;
    // The silent hosts' own ranks fail (not node 0's: in per-node mode node
    // 0 may be another node's, already counted done, and the job would pass).
    std::string missing, known;  // known: why, if the start method can tell (srun waiting for resources)
    std::vector<int> ranks;
    for (auto& n : nodes_)
      if (!server_->greeted(n.index) && !n.start_failed && !n.external) {
        missing += (missing.empty() ? "" : ", ") + n.host;
        ranks.insert(ranks.end(), n.ranks.begin(), n.ranks.end());
        if (known.empty()) known = starter_->waiting_for(n.index);
      }
    fate_.on_host_lost(missing, "its agent did not connect within " + std::to_string(static_cast<int>(opts_.agent_timeout_s)) +
                                    " s (see --agent-timeout)" + (known.empty() ? "" : ": " + known), ranks);
    teardown(0);
  });
  if (opts_.timeout_s > 0) {
    job_timer_.expires_after(secs(opts_.timeout_s));
    job_timer_.async_wait([this](boost::system::error_code ec) {
      if (ec) return;
      // Between two attempts nothing runs: the timeout is the verdict (teardown finishes).
      if (phase_.is(Phase::kRestarting)) fate_ = Fate(static_cast<int>(plan_.ranks.size()));
      if (torch_store_)
        for (const auto& line : torch_store_->unfinished()) write_fully(2, "dlaunch: " + line + "\n");
      // Where every rank is, then the teardown (docs/hangs.md).
      if (fate_.on_timeout(opts_.timeout_s, opts_.timeout_from)) stacks_->on_timeout(opts_.timeout_s, [this] { teardown(grace_ms()); });
    });
  }
  control_port_ = port;
  start_agents(true);
  if (remote::show_start_progress(own_nodes(), ::isatty(2) == 1))
    progress_.start([this] {
      return "agents " + std::to_string(hellos_) + "/" + std::to_string(own_nodes()) + " connected" +
             (start_failures_.empty() ? "" : ", " + std::to_string(start_failures_.size()) + " failed");
    });
  io_.run();
  sink_->finish_all();  // lines of ranks whose exit never came (a lost host)
  starter_->stop(2000);
  if (const std::string last = attempts_.final_line(fate_); !last.empty()) write_fully(2, last + "\n");
  ConsoleWriter::drain_and_disable();  // every line is out before dlaunch exits
  return fate_.exit_code();
}

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
    if (n.external) continue;
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
      !(opts_.mpi == MpiMode::kNone || opts_.mpi == MpiMode::kPmi || opts_.max_restarts > 0 || (n.local && view_));
  return spec;
}

void Job::node_failed_to_start(int node, const std::string& why) {
  Node& n = nodes_.at(static_cast<size_t>(node));
  // Once the agents were told to leave (aborting, closing), an agent's exit
  // is expected, not a start failure: every host had connected or failed by then.
  if (n.start_failed || phase_.ending()) return;
  if (server_->connected(node)) return;  // it ran: its connection reports
  if (phase_.is(Phase::kRestarting)) {
    if (attempts_.anew(node)) restart_failed(why);  // (else an old agent's watch, too late to matter)
    return;
  }
  n.start_failed = true;
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
    if (!server_->greeted(n.index) && !n.start_failed && !n.external) return false;
  return true;
}

std::string Job::on_hello(const msg::Hello& m) {
  Node& n = nodes_.at(static_cast<size_t>(m.node));
  if (n.external) return "agent claims node " + std::to_string(m.node) + ", which is not expected";
  if (n.hello) return hello_again(n, m);
  n.hello = m;
  starter_->connected(n.index);
  log("agent on " + n.host + " connected (pid " + std::to_string(m.pid) + ")");
  if (++hellos_ == own_nodes() && !fate_.failed()) launch_all();
  else if (fate_.failed() && phase_.is(Phase::kStarting) && all_agents_settled()) teardown(0);
  return "";
}

PlanInput Job::plan_input() const {
  PlanInput in;
  in.placement = &plan_;
  in.opts = &opts_;
  for (auto& n : nodes_) in.nodes.push_back({n.host, n.local, n.external, n.ranks, n.hello, n.reach_addr});
  in.job_id = job_id_;
  in.token = token_;
  in.control_host = control_host_;
  in.store_port = store_ ? store_->port() : 0;
  in.torch_store_port = torch_store_ ? torch_store_->port() : 0;
  if (view_) in.shared = SharedIdentity{view_->master_addr, view_->store_addr, view_->master_port};
  char cwd[4096] = {};
  in.wdir = opts_.wdir.empty() ? (::getcwd(cwd, sizeof cwd) ? cwd : "") : opts_.wdir;
  in.launcher_env = rdzv::process_environment();
  in.exports = resolve_exports(opts_.exports, in.launcher_env);
  in.restart_count = attempts_.restarts();
  in.output_terminal = ::isatty(1) == 1 && opts_.output_dir.empty();
  return in;
}

void Job::launch_all() {
  if (!phase_.is(Phase::kStarting)) return;
  // With --launcher ssh a host's address (and ours as it reached us) comes
  // from the SSH_CONNECTION line its ssh prints before the agent starts; the
  // agent's own TCP connection can say hello first, and MASTER_ADDR and the
  // store's address were then "". That connection's ends say the same.
  for (auto& n : nodes_) {
    if (n.local || n.external || !n.reach_addr.empty()) continue;
    const auto ends = server_->addresses(n.index);
    n.reach_addr = ends.remote_address;
    if (control_host_.empty()) control_host_ = ends.local_address;
  }
  const PlanInput in = plan_input();
  LaunchPlan plan = plan_launch(in);
  if (plan.refusal == LaunchPlan::Refusal::kNoPmix) {
    write_fully(2, "dlaunch: error: " + plan.why + "\n");
    fate_.on_host_lost(plan.hosts, "no PMIx server (--mpi pmix)", nodes_[0].ranks);
    return teardown(0);
  }
  if (plan.refusal == LaunchPlan::Refusal::kBadRequest) {
    fate_.on_bad_request(plan.why);
    return teardown(0);
  }
  if (plan.serve == "refuse" && in.restart_count == 0)
    log(std::string("MPI is not served (") +
        (view_ ? "per-node mode" : "--max-restarts: an MPI job cannot be restarted") +
        "); a rank that calls MPI_Init ends the job");
  mpi_ = plan.mpi;
  phase_.to(Phase::kLaunched);
  progress_.stop();
  agent_timer_.cancel();
  if (opts_.report_bindings) {
    std::vector<std::string> hosts;
    for (auto& n : nodes_) hosts.push_back(n.host);
    write_fully(2, binding_report(plan, hosts, opts_));
  }
  server_->start_heartbeats(milliseconds(heartbeat_interval_ms(opts_.heartbeat_timeout_s)), secs(opts_.heartbeat_timeout_s));
  write_fully(2, plan.warnings);
  // Said where someone watches (a terminal, or -v), so that a job that went
  // well still says nothing to the logs and scripts reading dlaunch's stderr.
  if (!plan.notice.empty() && (opts_.verbose || ::isatty(2) == 1)) write_fully(2, plan.notice);
  bool warned = false;
  for (auto& n : nodes_) {
    auto& m = plan.launches[static_cast<size_t>(n.index)];
    if (!m) continue;
    if (!warned) write_fully(2, inherited_identity_warning(*m, in.launcher_env, chosen_env(in))), warned = true;
    hoist_shared_env(*m);  // sent once per host, not per rank (launcher/shared_env.h)
    server_->send(n.index, *m);
  }
  start_stdin_reader();
}

void Job::on_message(int node, const control::FromAgent& m) {
  Node& n = nodes_.at(static_cast<size_t>(node));
  auto own = [&](int rank) {
    if (std::find(n.ranks.begin(), n.ranks.end(), rank) == n.ranks.end()) throw RemoteError("exit of a foreign rank");
  };
  std::visit(control::Visitor{
                 [](const msg::Hello&) { throw RemoteError("a second hello"); },
                 [](const msg::Heartbeat&) {},
                 [](const msg::Started&) {},
                 [&](const msg::Stacks& s) { stacks_->on_stacks(node, s); },
                 [&](const msg::Ready& r) { on_ready(node, r); },
                 [&](const control::MpiUp& u) { mpi_router_->receive(node, u); },
                 [&](const msg::SpawnFailed& f) {
                   own(f.rank);
                   RankExit e;
                   e.rank = f.rank, e.host = n.host, e.spawn_failed = true, e.code = f.code, e.message = f.message;
                   e.name = mpi_router_->describe(f.rank);
                   on_rank_exit(std::move(e));
                 },
                 [&](const msg::Exited& x) {
                   own(x.rank);
                   RankExit e;
                   e.rank = x.rank, e.host = n.host, e.pid = x.pid, e.code = x.code.value_or(0);
                   e.signal = x.signal.value_or(0), e.core = x.core.value_or(false), e.by_agent = x.by_agent;
                   e.error = x.error.value_or("");
                   e.error += interpreter_hint(opts_, e.error);
                   e.name = mpi_router_->describe(x.rank);
                   on_rank_exit(std::move(e));
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
  sink_->write(c.rank, c.stream, c.bytes);
  show_held_output();
  // dlaunch's own stdout or stderr is not keeping up: hold the agents' output
  // back until it has (ConsoleWriter), rather than queue without bound.
  if (!output_held_ && ConsoleWriter::queued() > ConsoleWriter::kHigh) {
    output_held_ = true;
    server_->hold_reading();
    ConsoleWriter::when_below_low([this] {
      asio::post(io_, [this] {
        output_held_ = false;
        server_->resume_reading();
      });
    });
  }
}

// Partial lines (a prompt, a progress bar) are shown once they have waited
// OutputSink::kHoldFor: one timer for the first due. While the console is
// behind (reading held, or bytes queued) their waits start again.
void Job::show_held_output() {
  if (output_timer_armed_) return;
  const auto due = sink_->next_due();
  if (!due) return;
  output_timer_armed_ = true;
  output_timer_.expires_at(*due);
  output_timer_.async_wait([this](boost::system::error_code ec) {
    output_timer_armed_ = false;
    if (ec) return;
    sink_->show_held(OutputSink::Clock::now(), output_held_ || ConsoleWriter::queued() > 0);
    show_held_output();
  });
}

void Job::on_fence(int node, uint64_t id, std::string_view blob) {
  if (!mpi_) throw RemoteError("fence data outside an MPI job");
  fences_->contribute(node, id, blob);
}

// Per-node mode: another node failed (or the store was lost): stop ours.
void Job::on_peer_failed(int code, const std::string& verdict) {
  if (phase_.ending() && fate_.all_done()) return;
  peer_failed_ = !fate_.failed();
  if (fate_.on_peer_failure(code, verdict)) teardown(grace_ms());
}

void Job::on_closed(int node, const std::string& why) {
  Node& n = nodes_.at(static_cast<size_t>(node));
  stacks_->on_closed(node);
  if (phase_.is(Phase::kRestarting)) restart_failed("lost the agent on " + n.host + " (" + why + ")");
  if (!phase_.ending()) {
    if (fate_.on_host_lost(n.host, why, n.ranks)) teardown(grace_ms());
    check_finished();
  }
  if (phase_.ending() && !server_->any_open()) stop();
}

void Job::teardown(int grace_ms) {
  progress_.stop();
  if (!phase_.launched() && start_failures_.size() > 1) {
    std::string hosts;
    for (const auto& h : start_failures_) hosts += (hosts.empty() ? "" : ", ") + h;
    fate_.restate("agents could not be started on " + std::to_string(start_failures_.size()) + " hosts (" + hosts +
                  "); each is explained above");
  }
  if (view_ && fate_.failed() && !peer_failed_ && !published_) {
    published_ = true;
    view_->publish_failure(fate_.exit_code(), fate_.verdict());
  }
  if (phase_.is(Phase::kStarting)) return abort_before_launch();
  // Nothing runs between two attempts: --timeout ends the job there.
  if (phase_.is(Phase::kRestarting)) return restart_failed("dlaunch was stopped (--timeout)");
  if (!phase_.launched() || phase_.is(Phase::kClosing)) return;
  const bool again = phase_.is(Phase::kTearingDown);
  if (!again) phase_.to(Phase::kTearingDown);
  server_->broadcast(msg::Kill{grace_ms});
  if (again && grace_ms > 0) return;
  // Agents confirm every exit; if some never do, give up after grace + 5 s.
  kill_timer_.expires_after(milliseconds(grace_ms) + milliseconds(5000));
  kill_timer_.async_wait([this](boost::system::error_code ec) {
    if (ec) return;
    for (auto& n : nodes_)
      if (!n.ranks.empty() && !n.external) fate_.on_host_lost(n.host, "did not confirm that its ranks ended", n.ranks);
    check_finished();
  });
}

void Job::suspend(int sig) {
  // The ranks first (mpirun forwards Ctrl-Z the same way): with dlaunch
  // stopped and theirs running, their output would pile up and, after
  // --heartbeat-timeout, the agents would end the job as launcher-less.
  if (phase_.is(Phase::kLaunched)) server_->broadcast(msg::Signal{SIGSTOP});
  log(std::string("SIG") + ::sigabbrev_np(sig) + ": the ranks are stopped, and dlaunch stops until SIGCONT (fg or bg)");
  stop_self_when_sent(0);
}

// The SIGSTOP frames must be in the kernel's hands before this process
// stops: up to a second for a congested connection, in 10 ms steps.
void Job::stop_self_when_sent(int waited_ms) {
  if (server_->queued_bytes() == 0 || waited_ms >= 1000) {
    ::raise(SIGSTOP);  // returns once continued; continued() runs from SIGCONT's handler
    return;
  }
  suspend_timer_.expires_after(milliseconds(10));
  suspend_timer_.async_wait([this, waited_ms](boost::system::error_code ec) {
    if (!ec) stop_self_when_sent(waited_ms + 10);
  });
}

void Job::continued() {
  // However this process was stopped (Ctrl-Z, kill -STOP), the agents' last
  // frames are old now: their silence counts afresh, as ours does there.
  if (!phase_.is(Phase::kLaunched) && !phase_.is(Phase::kTearingDown)) return;
  server_->start_heartbeats(milliseconds(heartbeat_interval_ms(opts_.heartbeat_timeout_s)), secs(opts_.heartbeat_timeout_s));
  server_->broadcast(msg::Signal{SIGCONT});
  log("SIGCONT: the ranks continue");
}

// Nothing runs yet: tell connected agents to leave, then stop.
void Job::abort_before_launch() {
  phase_.to(Phase::kAborting);
  server_->broadcast(msg::Bye{});
  close_timer_.expires_after(kCloseWait);
  close_timer_.async_wait([this](boost::system::error_code ec) { if (!ec) stop(); });
  if (!server_->any_open()) stop();
}

void Job::on_signal(int sig) {
  signals_.async_wait([this](auto ec, int s) { if (!ec) on_signal(s); });
  const std::string name = std::string("SIG") + ::sigabbrev_np(sig);
  switch (signal_action(phase_.now(), sig, signals_seen_)) {
    case SignalAction::kSuspend: return suspend(sig);
    case SignalAction::kContinue: return continued();
    case SignalAction::kForwardNotice:
      server_->broadcast(msg::Signal{sig});  // to every rank's process group, on every host
      return log(name + " forwarded to every rank");
    case SignalAction::kIgnoreNotice: return log(name + " ignored: no ranks run now");
    case SignalAction::kEndRestart:
      fate_.on_signal(sig);  // ends the job: the failed attempt's verdict stands, not restarted
      return restart_failed("dlaunch was stopped (" + name + ")");
    case SignalAction::kAbortStartup:
      fate_.on_host_lost("(startup)", "interrupted by " + name, {});
      return teardown(0);
    case SignalAction::kForward:
      ++signals_seen_;
      fate_.on_signal(sig);
      if (isatty(2)) write_fully(2, "dlaunch: forwarding " + name + " to all ranks (again to kill them at once)\n");
      return server_->broadcast(msg::Signal{sig});
    case SignalAction::kKillNow: return teardown(0);
  }
}

// SIGQUIT (Ctrl-\ on a terminal) from now on reports where every rank is; the job goes on.
void Job::start_stack_collector() {
  StackOptions so{opts_.stack_timeout_s, opts_.report_dir, opts_.report_json};
  StackCollector::Hooks hooks;
  hooks.sources = [this] {
    std::vector<StackSource> out;
    if (!phase_.launched() || phase_.is(Phase::kClosing)) return out;
    for (auto& n : nodes_)
      if (!n.external && server_->connected(n.index)) out.push_back({n.index, n.host, n.ranks});
    return out;
  };
  hooks.send = [this](int node, const msg::DumpStacks& m) { server_->send(node, m); };
  stacks_ = std::make_unique<StackCollector>(io_, std::move(so), std::move(hooks));
}

void Job::start_stdin_reader() {
  if (opts_.stdin_target == "none" || !may_read_stdin()) return;
  const int target = std::stoi(opts_.stdin_target);
  if (target >= static_cast<int>(plan_.ranks.size())) return;
  const int node = plan_.ranks[static_cast<size_t>(target)].node;
  if (nodes_.at(static_cast<size_t>(node)).external) return;
  forward_stdin(
      io_, [this, node, target](std::string data) { server_->send(node, control::data_frame(target, control::kStdin, data)); },
      [this, node, target] { server_->send(node, msg::StdinEof{target}); });
}

void Job::check_finished() {
  if (!phase_.launched() || phase_.is(Phase::kClosing) || phase_.is(Phase::kRestarting) || !fate_.all_done()) return;
  if (attempts_.retry(fate_) && restartable()) return restart();
  // Per-node mode: the other nodes may be waiting to restart with us.
  if (view_ && view_->abandon && opts_.max_restarts > 0 && fate_.failed())
    view_->abandon(attempts_.restarts(), fate_.verdict());
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
