#include "agent/agent.h"
#include "agent/health.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iostream>

#include "agent/rank_environment.h"
#include "agent/rank_process.h"
#include "control/env_names.h"
#include "control/protocol.h"
#include "control/rank_identity.h"
#include "errors/error.h"
#include "errors/temp_dirs.h"
#include "machine/clock.h"
#include "machine/cpus.h"
#include "machine/gpu_report.h"
#include "machine/identity.h"
#include "remote/ssh/tcp_connect.h"
#include "wire/client_retry.h"
#include "wire/handshake.h"
#include "wire/host.h"
#include "wire/socket.h"

extern char** environ;

namespace dl::agent {

namespace msg = control::msg;
using std::chrono::milliseconds;

namespace {
// The MPI side as a contributor: each rank's PMIx variables and PMI socket
// (MpiSide::task_env), and what became of the socket.
class MpiContribution final : public RankContributor {
 public:
  explicit MpiContribution(MpiSide& mpi) : mpi_(mpi) {}
  TaskEnv task_env(int rank, const RankEnvSoFar&) override { return mpi_.task_env(rank); }
  void task_started(int rank) override { mpi_.task_spawned(rank); }
  void task_refused(int rank) override { mpi_.task_refused(rank); }

 private:
  MpiSide& mpi_;
};
}  // namespace

EnvVars own_environment() {
  EnvVars env;
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    auto eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return env;
}

Agent::Agent(asio::io_context& io, AgentOptions opts)
    : io_(io), opts_(std::move(opts)),
      ranks_(io, RankSupervisor::Hooks{[this](std::string f) { if (link_) link_->send(std::move(f)); },
                                       [this] { return link_ && link_->congested(); },
                                       [this] { ready_if_done(), finish_if_done(); },
                                       [this](msg::Exited& x) { add_torch_error(x); },
                                       [this](pid_t pid) { if (stacks_) stacks_->child_reaped(pid); }}),
      term_signals_(io, SIGTERM, SIGINT, SIGHUP), stdin_(io) {
  mpi::MpiHooks mpi;
  mpi.send = [this](control::MpiUp m) {
    if (link_ && !done_) link_->send_message(m);
  };
  mpi.fence = [this](uint64_t id, std::string blob) { link_->send(control::fence_frame(id, blob)); };
  mpi.start_children = [this](const msg::SpawnLaunch& m, const std::vector<EnvList>& envs, const std::string& error) {
    start_children(m, envs, error);
  };
  mpi_ = std::make_unique<MpiSide>(io_, std::move(mpi));
  mpi_task_ = std::make_unique<MpiContribution>(*mpi_);
}

Agent::~Agent() {
  mpi_.reset();
  if (health_.joinable()) health_.detach();  // its child dies with this process (PR_SET_PDEATHSIG)
}

void Agent::health_check(const msg::HealthCheck& c) {
  if (health_.joinable()) return;  // asked once per host
  // The clock the launcher judges, read as the check came; the answer says
  // how long it was held, so the launcher's round trip is the wire's alone.
  const long long came_ns = machine::wall_ns();
  const auto came = std::chrono::steady_clock::now();
  health_ = std::thread([this, c, came_ns, came] {
    const auto timeout = milliseconds(c.timeout_ms);
    msg::Health h;
    h.clock_ns = came_ns;
    try {
      const char* own_path = std::getenv("PATH");
      h.text = check_programs(c.programs, own_path ? own_path : "/usr/bin:/bin");
      if (h.text.empty() && !c.command.empty()) {
        const auto r = machine::run_child({"/bin/sh", "-c", c.command}, timeout, "the health check",
                                          {"DLAUNCH_HOST=" + c.host});
        h.text = health_verdict(r, timeout);
      }
    } catch (const std::exception& e) {
      h.text = e.what();
    }
    h.passed = h.text.empty();
    asio::post(io_, [this, h, came]() mutable {
      h.held_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - came).count();
      if (link_ && !done_) link_->send_message(h);
    });
  });
}

int Agent::run() {
  const auto& a = opts_.args;
  // Room for a few hundred ranks' descriptors while this is one thread.
  reserve_fd_table(kAgentFdsReserved);
  link_ = std::make_shared<control::Connection>(control_socket(), control::kMaxControlFrame);
  control::Connection::Callbacks cb;
  cb.frame = [this](wire::Frame& f) { on_frame(f); };
  cb.closed = [this](const std::string& why, bool) {
    const std::string peer = opts_.args.parent.empty() ? "the launcher" : "the agent on " + opts_.args.parent + " that started this one";
    lost_launcher(why == "connection closed" ? peer + " closed the connection" : why);
  };
  cb.drained = [this] {
    ranks_.resume_output();
    if (relay_) relay_->resume();
  };
  link_->set_callbacks(std::move(cb));

  msg::Hello hello;
  hello.version = DLAUNCH_VERSION;
  hello.node = a.node;
  // A simulated host (--sim-host) is its own machine to the launcher's
  // same-machine check.
  hello.host = a.sim_host.empty() ? wire::host_name() : a.sim_host;
  hello.pid = static_cast<int>(::getpid());
  hello.free_port = wire::free_tcp_port();
  hello.machine = machine::machine_identity() + (a.sim_host.empty() ? "" : "/sim:" + a.sim_host);
  if (a.detect_gpus) machine::report_gpus(machine::detect_gpus(a.gpus_per_node), hello);
  hello.pmix = MpiSide::available();
  hello.unhealthy = check_temp_dir(temp_base());
  if (a.cpu_topology) {
    const hostfiles::CpuTopology topo = machine::read_cpu_topology(machine::own_allowed_cpus());
    hello.cpu = msg::CpuReport{topo.cores, topo.numa, topo.numa_ids, topo.packages};
  }
  link_->send_message(hello);
  // The ranks' PMIx port and the server's thread (mpi/mpi_job.h): made while the
  // launcher plans the launch, not before the hello it waits for.
  if (a.prepare_pmix) mpi_->prepare_pmix();
  link_->start();
  watch_stdin();
  term_signals_.async_wait([this](auto ec, int sig) {
    if (!ec) lost_launcher(std::string("agent received signal ") + ::strsignal(sig));
  });
  io_.run();
  return exit_code_;
}

// The connection to the launcher: the inherited socketpair of a local agent
// (--control-fd, authenticated by construction), else TCP and the token handshake.
asio::generic::stream_protocol::socket Agent::control_socket() {
  const auto& a = opts_.args;
  if (a.control_fd >= 0) {
    ::fcntl(a.control_fd, F_SETFD, FD_CLOEXEC);  // the ranks must not hold it
    asio::generic::stream_protocol::socket sock(io_);
    sock.assign(asio::generic::stream_protocol(AF_UNIX, 0), a.control_fd);
    return sock;
  }
  const std::string peer = (a.parent.empty() ? "the launcher" : "the agent on " + a.parent) + " at " + a.connect_host +
                           ":" + std::to_string(a.connect_port);
  // Tried again while the launcher's port is busy (another user's idle
  // connections, a burst of agents), until --connect-timeout. Not when it
  // is refused: the launcher (or parent agent) opened its port before it
  // started this agent, so nothing there means it is gone (an agent that
  // started past --agent-timeout), and this agent leaves at once.
  wire::Socket s =
      wire::connect_authenticated(a.connect_host, a.connect_port, opts_.token, control::kControlTag, peer,
                                  opts_.connect_timeout, wire::Refused::kFinal);
  asio::ip::tcp::socket sock(io_);
  sock.assign(asio::ip::tcp::v4(), s.release());
  return asio::generic::stream_protocol::socket(std::move(sock));
}

void Agent::on_frame(wire::Frame& f) {
  if (done_) return;
  // While this host's ranks are being started off this thread
  // (RankSupervisor::spawn_all), what the launcher sends this agent waits,
  // in order, until they are supervised (a kill, a signal or a restart
  // must reach every one of them); what goes to the agents beneath passes
  // at once.
  if (ranks_.spawning() && f.type != control::kRouted) return deferred_.push_back(f);
  if (f.type == wire::kJson) {
    try {
      return on_message(control::decode_from_launcher(f.payload));
    } catch (const control::ProtocolError& e) {
      return lost_launcher(std::string("bad message from the launcher: ") + e.what());
    }
  }
  if (f.type == control::kFence) {
    auto fence = control::parse_fence(f.payload);
    return mpi_->fence_done(fence.id, fence.blob);
  }
  if (f.type == control::kRouted) {
    auto r = control::parse_routed(f.payload);
    std::string raw = wire::encode_frame(control::kRouted, f.payload);
    if (relay_) relay_->down(r, std::move(raw));
    // A broadcast is this agent's too.
    if (r.node == control::kEveryNode) on_frame(r.inner);
    return;
  }
  if (f.type != wire::kData) return;
  auto chunk = control::parse_data(f.payload);
  ranks_.stdin_data(chunk.rank, chunk.bytes);
}

void Agent::on_message(control::FromLauncher m) {
  std::visit(control::Visitor{
                 [](const msg::Heartbeat&) {},
                 [this](msg::Launch& l) { launch(std::move(l)); },
                 [this](msg::LaunchEnv& e) { launch_env_ = std::move(e.env); },
                 [this](const msg::Signal& s) {
                   // Ctrl-Z on dlaunch: the launcher stops itself after this,
                   // and is silent until SIGCONT comes.
                   if (s.signal == SIGSTOP) link_->pause_silence();
                   if (s.signal == SIGCONT) link_->resume_silence();
                   ranks_.signal_all(s.signal);
                 },
                 [this](const msg::Kill& k) {
                   ranks_.teardown(milliseconds(k.grace_ms));
                   if (k.ready_for) get_ready(*k.ready_for);
                 },
                 [this](const msg::StdinEof& e) { ranks_.stdin_eof(e.rank); },
                 [this](const control::MpiDown& d) { mpi_->receive(d); },
                 [this](const msg::DumpStacks& d) { dump_stacks(d); },
                 [this](const msg::StartAgents& s) { start_agents(s); },
                 [this](const msg::HealthCheck& c) { health_check(c); },
                 [this](const msg::Restart& r) { get_ready(r.attempt); },
                 [this](const msg::Bye&) {
                   bye_ = true;
                   if (relay_) relay_->closing();
                   finish_if_done();
                 },
             },
             m);
}

void Agent::launch(msg::Launch incoming) {
  try {
    control::complete_launch(incoming, launch_env_);  // what the launch left to us: shared env, argv, identity
  } catch (const control::ProtocolError& e) {
    return lost_launcher(std::string("bad message from the launcher: ") + e.what());
  }
  resolved_.clear(), wdirs_.clear();  // a new attempt (--max-restarts) looks again
  link_->start_heartbeats(milliseconds(incoming.hb_ms), milliseconds(incoming.hb_timeout_ms),
                          "no heartbeat from " +
                              (opts_.args.parent.empty() ? "the launcher" : "the agent on " + opts_.args.parent) +
                              " for " + std::to_string(incoming.hb_timeout_ms) + " ms");
  if (relay_) relay_->heartbeats(milliseconds(incoming.hb_ms), milliseconds(incoming.hb_timeout_ms));
  if (incoming.mpi && !start_mpi(incoming)) return finish_if_done();
  // Kept for ranks started later (restarts, MPI_Comm_spawn), without the
  // ranks (a copy of 64 ranks' specs was 0.15-0.4 ms of a launch's path).
  std::vector<msg::RankSpec> ranks = std::move(incoming.ranks);
  incoming.ranks.clear();
  launch_ = std::move(incoming);
  // A door combines several ranks' traffic; a host of one rank has nothing
  // to combine, and its rank, going direct, costs the store one connection
  // as the door would.
  if (ranks.size() > 1) store_door_.open_for(launch_->env, ranks.size());
  const msg::Launch& m = *launch_;
  if (!ranks.empty() && !error_files_) {
    if (!py_dir_) {
      py_dir_ = std::make_unique<PythonDir>();
      // What agents killed outright left on this host goes, once per agent,
      // after this launch's ranks are started (errors/temp_dirs.h).
      asio::post(io_, [] {
        reap_stale_temp_dirs(temp_base());
        reap_stale_temp_dirs("/dev/shm");
      });
    }
    error_files_ = std::make_unique<TorchErrorFiles>(*py_dir_);
    if (!stacks_) stacks_ = std::make_unique<StackDumper>(io_, *py_dir_);
  }
  // The agent's own environment, read once for all of this host's ranks.
  EnvVars inherited = own_environment();
  MpiSide::scrub_rank_env(inherited);  // what the agent set for its own hwloc
  // Which signals each child must reset: asked once here, not by each child.
  reset_signals_ = non_default_signals();
  // One growth for all of the ranks' descriptors (a forked local agent
  // made it before its first thread: get_ready_for).
  reserve_fd_table(fds_for_ranks(ranks.size()));
  // Before the ranks' PMI sockets are opened, so that the slots are low: for
  // this thread and spawn_all's helpers (at most 4). A few ranks' clones copy
  // a table that is small anyway.
  if (ranks.size() >= 8) reserve_spawn_slots(1 + 4);
  const RankEnvBase base = rank_env_base(std::move(inherited), m.env);
  const Contributors given = contributors(*mpi_task_);
  // Each rank is started as soon as it is prepared (spawn_all's threads),
  // while the next ones are prepared here. A few ranks are started from this
  // thread, and a rank's clone returns once it has exec'd: on a busy host,
  // or from a slow file system, that holds the loop, and the watch says so.
  const LoopWatch::Waiting starting("this host's ranks to start (each one's exec needs a CPU and its program's files)");
  ranks_.spawn_all(
      ranks.size(),
      [&](size_t i) -> RankSupervisor::Prepared {
        const auto& spec = ranks[i];
        auto s = prepare_rank(spec, m, base, given);
        if (!s) return std::nullopt;
        return std::make_pair(spec.rank, std::move(*s));
      },
      [this] {
        // The ranks' MPI sockets are watched once they are all started (also
        // when preparing one threw): the sockets of ranks that ended meanwhile
        // are closed without entering the loop's epoll set (mpi/pmi/pmi_service.h).
        mpi_->tasks_started();
        // Once the ranks are on their way: its thread's start is not on the path
        // of a job's start (docs/benchmarks.md, "Measurements behind the design").
        if (!loop_watch_)
          if (const auto stall = LoopWatch::threshold_from_env(); stall.count() > 0)
            loop_watch_ = std::make_unique<LoopWatch>(io_, "dlaunch-agent on " + wire::host_name(), stall);
        // What came meanwhile, posted: not inside the launch's own call.
        if (!deferred_.empty()) asio::post(io_, [this] { replay_deferred(); });
      });
}

void Agent::replay_deferred() {
  while (!deferred_.empty() && !ranks_.spawning() && !done_) {
    wire::Frame f = std::move(deferred_.front());
    deferred_.pop_front();
    on_frame(f);
  }
}

// A failed rank's exit report gains what torch's @record wrote to its error
// file (the exception, its message and where it was raised), so the verdict
// names the cause.
void Agent::add_torch_error(msg::Exited& x) const {
  if (!error_files_ || (x.code.value_or(0) == 0 && !x.signal) || x.error) return;
  x.error = error_files_->read(x.rank);
}

// Answers at once when no rank was launched here; the ranks keep running.
void Agent::dump_stacks(const msg::DumpStacks& d) {
  auto answer = [this, id = d.id](std::vector<msg::RankStack> ranks) {
    if (link_ && !done_) link_->send_message(msg::Stacks{id, std::move(ranks)});
  };
  if (!stacks_) return answer({});
  stacks_->collect(ranks_.targets(), milliseconds(d.timeout_ms), std::move(answer));
}

// The agents beneath this one, started with the launcher's method; they
// connect to this agent at the address it reaches its own parent from.
void Agent::start_agents(const msg::StartAgents& m) {
  if (!relay_) {
    Relay::Hooks h;
    h.up = [this](std::string f) {
      if (link_ && !done_) link_->send(std::move(f));
    };
    h.up_congested = [this] { return link_ && link_->congested(); };
    h.idle = [this] { finish_if_done(); };
    h.hold_parent = [this](bool hold) {
      if (hold) link_->hold_reading();
      else link_->resume_reading();
    };
    h.say = [](const std::string& line) { std::cerr << "dlaunch-agent: " + line + "\n"; };
    // Named as the job names this host, so that the launcher's verdicts and
    // this agent's reports agree.
    const std::string host =
        !m.self.empty() ? m.self : opts_.args.sim_host.empty() ? wire::host_name() : opts_.args.sim_host;
    relay_ = std::make_unique<Relay>(io_, opts_.token, host, std::move(h));
  }
  std::string bind = ssh::describe_socket(link_->native_handle()).local_address;
  try {
    relay_->start_agents(m, bind.empty() ? "127.0.0.1" : bind);
  } catch (const control::ProtocolError& e) {
    lost_launcher(std::string("bad message from the launcher: ") + e.what());
  }
}

// Starts this host's MPI side for the launch (mpi/mpi_side.h). On failure
// every rank is reported as not started (code 1, the reason) and false is
// returned.
bool Agent::start_mpi(const msg::Launch& m) {
  try {
    mpi_->start(*m.mpi);
    return true;
  } catch (const Error& e) {
    for (const auto& spec : m.ranks)
      ranks_.refuse(spec.rank, 1, std::string("cannot start the MPI server: ") + e.what());
    return false;
  }
}

void Agent::start_child(const msg::RankSpec& spec, const msg::Launch& m, const EnvVars& inherited,
                        const EnvList& pmix) {
  FixedContribution spawned(pmix);
  auto s = prepare_rank(spec, m, rank_env_base(inherited, m.env), contributors(spawned));
  if (!s) return;
  try {
    ranks_.spawn(spec.rank, *s);
  } catch (const Error& e) {
    ranks_.refuse(spec.rank, 1, e.what());
  }
}

Agent::Contributors Agent::contributors(RankContributor& mpi) const {
  Contributors list{&mpi};
  if (error_files_) list.push_back(error_files_.get());
  if (stacks_) list.push_back(stacks_.get());
  return list;
}

std::optional<SpawnSpec> Agent::prepare_rank(const msg::RankSpec& spec, const msg::Launch& m,
                                             const RankEnvBase& base, const Contributors& contributors) {
  // The rank's own layers over its launch's base: its variables and
  // identity, then each contributor's (launcher/rank_env.h, stages 3, 4).
  EnvVars over = spec.env;
  int inherit_fd = -1;
  size_t asked = 0;  // the contributors that gave something, told the rank's fate
  auto refuse = [&](int code, const std::string& why) {
    for (size_t c = 0; c < asked; ++c) contributors[c]->task_refused(spec.rank);
    ranks_.refuse(spec.rank, code, why);
    return std::nullopt;
  };
  for (; asked < contributors.size(); ++asked) {
    TaskEnv t;
    try {
      t = contributors[asked]->task_env(spec.rank, RankEnvSoFar{base.vars, over});
    } catch (const Error& e) {
      return refuse(1, e.what());
    }
    for (auto& [k, v] : t.vars) over[k] = std::move(v);
    if (t.inherit_fd >= 0) inherit_fd = t.inherit_fd;
  }
  SpawnSpec s;
  s.argv = spec.argv;
  if (s.argv.empty()) return refuse(127, "no program to run");
  s.env = rank_env_strings(base, over);
  s.wdir = spec.wdir.value_or(m.wdir);
  s.want_stdin = spec.stdin_open;
  s.stdout_pty = m.stdout_pty;
  s.cpus = spec.cpus.value_or(std::vector<int>{});
  s.inherit_fd = inherit_fd;
  s.reset_signals = &reset_signals_;
  if (const std::string why = wdir_problem(s.wdir); !why.empty()) return refuse(126, why);
  const std::string* path = rank_env_value(base, over, "PATH");
  auto key = std::make_tuple(s.argv.at(0), path ? *path : "/usr/bin:/bin", s.wdir);
  auto found = resolved_.find(key);
  if (found == resolved_.end())
    found = resolved_.emplace(key, resolve_program(std::get<0>(key), std::get<1>(key), std::get<2>(key))).first;
  const Resolved& res = found->second;
  if (res.code != 0) return refuse(res.code, res.message);
  s.exe = res.path;
  if (py_dir_ && PythonDir::is_python(s.exe)) py_dir_->ensure();  // before it starts: python -S runs no hook
  // Its MPI socket is the spec's now: spawn_rank closes the agent's copy.
  for (auto* c : contributors) c->task_started(spec.rank);
  return s;
}

// Why the ranks cannot run in `wdir`, or "": checked once per directory,
// so that the refusal names it and says what to do (the child's chdir
// failing could only exit 126).
std::string Agent::wdir_problem(const std::string& wdir) {
  if (wdir.empty()) return "";
  auto [dir, fresh] = wdirs_.try_emplace(wdir);
  if (fresh) {
    struct stat st {};
    if (::stat(wdir.c_str(), &st) != 0) dir->second = std::strerror(errno);
    else if (!S_ISDIR(st.st_mode)) dir->second = "not a directory";
    else if (::access(wdir.c_str(), X_OK) != 0) dir->second = std::strerror(errno);
  }
  if (dir->second.empty()) return "";
  return "cannot change to the working directory " + wdir + ": " + dir->second +
         " (the ranks run in dlaunch's working directory on every host: start dlaunch in a directory that exists on "
         "each, or pass --wdir DIR)";
}

void Agent::watch_stdin() {
  int fd = ::fcntl(0, F_DUPFD_CLOEXEC, 0);  // a rank must not hold the launcher's pipe
  if (fd < 0) return;
  boost::system::error_code ec;
  stdin_.assign(fd, ec);
  if (ec) { ::close(fd); return; }  // not pollable (a file): nothing to watch
  stdin_.async_read_some(asio::buffer(stdin_buf_), [this](boost::system::error_code ec, size_t) {
    if (ec) lost_launcher("the launcher's channel (stdin) closed");
    else watch_stdin();
  });
}

void Agent::lost_launcher(const std::string& why) {
  if (done_) return io_.stop();  // finishing, and the link went before it drained
  // Starved of CPU meanwhile (which is likely why the launcher gave up on
  // this agent): said now, before the process leaves.
  if (loop_watch_) loop_watch_->check_starved();
  const bool any = ranks_.any_running();
  ranks_.signal_all(SIGKILL);
  // A refused message is always worth a line (the launcher shows the agent's
  // stderr); a launcher that just went away only when ranks had to die.
  const bool refused = why.rfind("bad message", 0) == 0 || why.rfind("protocol error", 0) == 0;
  if (any || refused)
    std::cerr << "dlaunch-agent: " << why << (any ? "; killed this host's ranks" : "") << "\n";
  if (relay_) relay_->stop();  // the agents beneath end with their ranks
  mpi_->release_for_exit();  // main() _exits: no libpmix finalize to wait for
  if (error_files_) error_files_->remove();  // main() _exits: no destructor does it
  if (stacks_) stacks_->remove();
  if (py_dir_) py_dir_->remove();
  store_door_.close();  // main() _exits: no destructor does it
  done_ = true;
  exit_code_ = 1;
  io_.stop();
}

// --max-restarts: answer `ready` for `attempt` once every rank is
// reported. Asked once by the teardown's Kill and maybe again by a Restart
// (an agent the restart found waiting): one answer each attempt.
void Agent::get_ready(int attempt) {
  if (attempt <= answered_) return;
  restart_ = attempt;
  ready_if_done();
}

// --max-restarts: the last attempt's ranks are all reported; forget them
// (their torch error files too, so that the next attempt's verdicts read
// only its own) and tell the launcher we can launch again.
void Agent::ready_if_done() {
  if (!restart_ || done_ || !ranks_.all_reported()) return;
  ranks_.forget_reported();
  mpi_->attempt_over();  // nothing of the last attempt's MPI reaches the launcher after `ready`
  if (error_files_) error_files_->remove();
  error_files_.reset();
  link_->send_message(msg::Ready{*restart_, wire::free_tcp_port()});
  answered_ = *restart_;
  restart_.reset();
}

void Agent::finish_if_done() {
  if (!bye_ || done_ || !ranks_.all_reported()) return;
  // The agents beneath leave first: their last reports pass through here.
  if (relay_ && !relay_->idle()) return;
  if (relay_) relay_->stop();
  ranks_.kill_all();
  mpi_->release_for_exit();  // main() _exits: no libpmix finalize to wait for
  if (error_files_) error_files_->remove();  // every exit was reported: nothing left to read
  if (stacks_) stacks_->remove();
  if (py_dir_) py_dir_->remove();
  store_door_.close();  // main() _exits: no destructor does it
  done_ = true;
  exit_code_ = 0;
  link_->stop_heartbeats();
  link_->shutdown_receive();
  link_->when_flushed([this] { io_.stop(); });
}

}  // namespace dl::agent
