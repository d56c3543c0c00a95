#include "agent/agent.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <iostream>

#include "agent/cpu_binding.h"
#include "agent/gpu_binding.h"
#include "agent/rank_process.h"
#include "agent/rank_env_filter.h"
#include "control/protocol.h"
#include "errors/error.h"
#include "wire/handshake.h"
#include "wire/socket.h"

namespace dl::agent {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace {
// Output reading pauses while this much is queued for the launcher, so a
// rank that writes faster than the network drains is slowed, not buffered.
constexpr size_t kPauseAbove = 8u << 20;
constexpr size_t kResumeBelow = 2u << 20;
// After a rank exits, how long its pipes may stay open (a child holding
// them) before its exit is reported anyway.
constexpr milliseconds kDrainAfterExit{2000};

std::string host_name() {
  char buf[256] = {};
  ::gethostname(buf, sizeof buf - 1);
  return buf;
}
}  // namespace

struct Agent::Rank {
  Rank(asio::io_context& io, int r) : rank(r), out(io), err(io), in(io), drain(io) {}
  int rank;
  pid_t pid = -1;
  asio::posix::stream_descriptor out, err, in;
  std::array<char, 65536> buf[2];
  bool eof[2] = {false, false};
  std::optional<int> status;  // waitpid status
  uint64_t sent = 0;          // bit s: the agent sent signal s before the rank ended
  bool reported = false;
  std::deque<std::string> stdin_q;
  bool stdin_writing = false, stdin_eof = false;
  asio::steady_timer drain;
};

Agent::Agent(asio::io_context& io, AgentOptions opts)
    : io_(io), opts_(std::move(opts)), sock_(io), parser_(control::kMaxControlFrame), sigchld_(io, SIGCHLD),
      term_signals_(io, SIGTERM, SIGINT, SIGHUP), hb_timer_(io), kill_timer_(io), stdin_(io) {}

Agent::~Agent() { stop_mpi(); }

int Agent::run() {
  // The PMIx server's slow half runs while we connect and wait for the
  // launch message; a launch that asks for MPI waits for it (mpi_job.h).
  if (opts_.prepare_pmix) mpi_ = MpiJob::prepare();
  const std::string peer = "the launcher at " + opts_.launcher_host + ":" + std::to_string(opts_.launcher_port);
  wire::Socket s = wire::connect_tcp(opts_.launcher_host, opts_.launcher_port, opts_.connect_timeout);
  wire::client_handshake(s, opts_.token, control::kControlTag, peer);
  sock_.assign(asio::ip::tcp::v4(), s.release());
  json gpus = json::array();
  if (opts_.detect_gpus)
    for (auto& g : detect_gpus(opts_.gpus_per_node)) gpus.push_back(g);
  json hello = {{"t", "hello"}, {"version", DLAUNCH_VERSION}, {"node", opts_.node},
                {"host", host_name()}, {"pid", ::getpid()}, {"free_port", wire::free_tcp_port()},
                {"gpus", gpus}, {"pmix", MpiJob::available()}};
  if (opts_.cpu_topology) {
    CpuTopology topo = read_cpu_topology(own_allowed_cpus());
    hello["cpu"] = {{"cores", topo.cores}, {"numa", topo.numa}};
  }
  send(control::json_frame(hello));
  last_rx_ = Clock::now();
  read_control();
  watch_stdin();
  sigchld_.async_wait([this](auto ec, int) { if (!ec) reap(); });
  term_signals_.async_wait([this](auto ec, int sig) {
    if (!ec) lost_launcher(std::string("agent received signal ") + ::strsignal(sig));
  });
  io_.run();
  return exit_code_;
}

void Agent::send(std::string frame) {
  tx_bytes_ += frame.size();
  txq_.push_back(std::move(frame));
  if (!writing_) write_next();
}

void Agent::write_next() {
  if (txq_.empty()) {
    writing_ = false;
    if (done_) io_.stop();
    return;
  }
  writing_ = true;
  asio::async_write(sock_, asio::buffer(txq_.front()), [this](boost::system::error_code ec, size_t) {
    if (ec) return lost_launcher("writing to the launcher failed: " + ec.message());
    tx_bytes_ -= txq_.front().size();
    txq_.pop_front();
    if (tx_bytes_ < kResumeBelow) resume_paused_reads();
    write_next();
  });
}

void Agent::read_control() {
  sock_.async_read_some(asio::buffer(rxbuf_), [this](boost::system::error_code ec, size_t n) {
    if (ec) return lost_launcher(ec == asio::error::eof ? "the launcher closed the connection" : ec.message());
    last_rx_ = Clock::now();
    try {
      parser_.feed(rxbuf_.data(), n);
      while (auto f = parser_.next()) on_frame(*f);
    } catch (const Error& e) {
      return lost_launcher(std::string("bad message from the launcher: ") + e.what());
    } catch (const json::exception& e) {
      return lost_launcher(std::string("bad message from the launcher: ") + e.what());
    }
    if (!done_) read_control();
  });
}

void Agent::on_frame(const wire::Frame& f) {
  if (f.type == wire::kJson) return on_json(json::parse(f.payload));
  if (f.type == control::kFence) {
    auto fence = control::parse_fence(f.payload);
    if (mpi_) mpi_->fence_done(fence.id, std::string(fence.blob));
    return;
  }
  if (f.type != wire::kData) return;
  auto chunk = control::parse_data(f.payload);
  auto it = ranks_.find(chunk.rank);
  if (it == ranks_.end() || !it->second->in.is_open()) return;
  Rank& r = *it->second;
  r.stdin_q.emplace_back(chunk.bytes);
  if (!r.stdin_writing) {
    r.stdin_writing = true;
    // A small recursive writer drains the rank's stdin queue.
    auto pump = std::make_shared<std::function<void()>>();
    *pump = [this, &r, pump] {
      if (r.stdin_q.empty()) {
        r.stdin_writing = false;
        if (r.stdin_eof) r.in.close();
        return;
      }
      asio::async_write(r.in, asio::buffer(r.stdin_q.front()), [&r, pump](boost::system::error_code ec, size_t) {
        if (ec) { r.stdin_q.clear(); r.in.close(); r.stdin_writing = false; return; }
        r.stdin_q.pop_front();
        (*pump)();
      });
    };
    (*pump)();
  }
}

void Agent::on_json(const json& m) {
  const std::string t = m.at("t");
  if (t == "hb") return;
  if (t == "launch") return launch(m);
  if (t == "signal") return signal_all(m.at("signal").get<int>());
  if (t == "kill") return teardown(milliseconds(m.at("grace_ms").get<int>()));
  if (t == "fence_failed") {
    if (mpi_) mpi_->fence_failed(m.at("id").get<uint64_t>());
    return;
  }
  if (t == "stdin_eof") {
    auto it = ranks_.find(m.at("rank").get<int>());
    if (it != ranks_.end()) {
      it->second->stdin_eof = true;
      if (!it->second->stdin_writing) it->second->in.close();
    }
    return;
  }
  if (t == "bye") {
    bye_ = true;
    return finish_if_done();
  }
}

void Agent::launch(const json& m) {
  hb_interval_ = milliseconds(m.value("hb_ms", 1000));
  hb_timeout_ = milliseconds(m.value("hb_timeout_ms", 10000));
  heartbeat();
  const json& common = m.at("env");
  const std::string wdir = m.value("wdir", "");
  if (m.contains("mpi") && !start_mpi(m)) return finish_if_done();
  for (const auto& spec : m.at("ranks")) start_rank(spec, common, wdir);
}

// Starts this host's PMIx server. On failure every rank is reported as not
// started (code 1, the reason) and false is returned.
bool Agent::start_mpi(const json& m) {
  MpiHooks hooks;
  hooks.post = [this](std::function<void()> task) { asio::post(io_, std::move(task)); };
  hooks.fence = [this](uint64_t id, std::string blob) { send(control::fence_frame(id, blob)); };
  hooks.abort = [this](int rank, int status, std::string msg) {
    send(control::json_frame({{"t", "mpi_abort"}, {"rank", rank}, {"status", status}, {"message", msg}}));
  };
  try {
    if (!mpi_) mpi_ = MpiJob::prepare();  // --no-pmix, yet MPI was asked for: start it now
    if (!mpi_) throw UsageError("this dlaunch-agent was built without libpmix: run with --mpi none, or rebuild with libpmix-dev");
    mpi_->start(m.at("mpi"), std::move(hooks));
    return true;
  } catch (const Error& e) {
    for (const auto& spec : m.at("ranks")) {
      const int rank = spec.at("rank");
      send(control::json_frame({{"t", "spawn_failed"}, {"rank", rank}, {"code", 1},
                                {"message", std::string("cannot start the PMIx server: ") + e.what()}}));
      auto r = std::make_unique<Rank>(io_, rank);
      r->status = 1 << 8;
      r->reported = true;
      ranks_[rank] = std::move(r);
    }
    return false;
  }
}

void Agent::stop_mpi() { mpi_.reset(); }

void Agent::start_rank(const json& spec, const json& common_env, const std::string& wdir) {
  const int rank = spec.at("rank");
  auto r = std::make_unique<Rank>(io_, rank);
  std::map<std::string, std::string> env;
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    auto eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  // Identity variables of an outer launcher (PMIx, PMI, OpenMPI's runtime)
  // would make the rank talk to it: they go before ours are added.
  for (auto it = env.begin(); it != env.end();)
    it = is_foreign_identity_var(it->first) ? env.erase(it) : std::next(it);
  MpiJob::scrub_rank_env(env);  // what the agent set for its own hwloc
  for (auto& [k, v] : common_env.items()) env[k] = v.get<std::string>();
  for (auto& [k, v] : spec.at("env").items()) env[k] = v.get<std::string>();
  // The PMIx server's variables (PMIX_RANK, PMIX_SERVER_URI*, ...) come last,
  // after the filter above removed any inherited ones.
  if (mpi_ && mpi_->started())
    for (auto& [k, v] : mpi_->rank_env(rank)) env[k] = v;
  SpawnSpec s;
  s.argv = spec.at("argv").get<std::vector<std::string>>();
  for (auto& [k, v] : env) s.env.push_back(k + "=" + v);
  s.wdir = wdir;
  s.want_stdin = spec.value("stdin", false);
  s.cpus = spec.value("cpus", std::vector<int>{});
  Resolved res = resolve_program(s.argv.at(0), env.count("PATH") ? env["PATH"] : "/usr/bin:/bin");
  if (res.code != 0) {
    send(control::json_frame({{"t", "spawn_failed"}, {"rank", rank}, {"code", res.code}, {"message", res.message}}));
    r->status = res.code << 8;
    r->reported = true;
    ranks_[rank] = std::move(r);
    return finish_if_done();
  }
  s.exe = res.path;
  Spawned sp = spawn_rank(s);
  r->pid = sp.pid;
  r->out.assign(sp.out_fd);
  r->err.assign(sp.err_fd);
  if (sp.in_fd >= 0) r->in.assign(sp.in_fd);
  Rank& ref = *r;
  ranks_[rank] = std::move(r);
  send(control::json_frame({{"t", "started"}, {"rank", rank}, {"pid", sp.pid}}));
  read_output(ref, 0);
  read_output(ref, 1);
}

void Agent::read_output(Rank& r, int stream) {
  if (tx_bytes_ > kPauseAbove) {
    paused_.emplace_back(&r, stream);
    return;
  }
  auto& d = stream == 0 ? r.out : r.err;
  d.async_read_some(asio::buffer(r.buf[stream]), [this, &r, stream](boost::system::error_code ec, size_t n) {
    if (n > 0) {
      auto s = stream == 0 ? control::kStdout : control::kStderr;
      send(control::data_frame(r.rank, s, std::string_view(r.buf[stream].data(), n)));
    }
    if (ec) {
      r.eof[stream] = true;
      (stream == 0 ? r.out : r.err).close();
      return maybe_report(r);
    }
    read_output(r, stream);
  });
}

void Agent::resume_paused_reads() {
  auto paused = std::move(paused_);
  paused_.clear();
  for (auto [r, stream] : paused) read_output(*r, stream);
}

void Agent::reap() {
  int st = 0;
  pid_t pid;
  while ((pid = ::waitpid(-1, &st, WNOHANG)) > 0) {
    for (auto& [rank, r] : ranks_) {
      if (r->pid != pid) continue;
      r->status = st;
      // Stragglers the rank left in its group go with it.
      ::kill(-pid, SIGKILL);
      r->drain.expires_after(kDrainAfterExit);
      r->drain.async_wait([this, rp = r.get()](boost::system::error_code ec) {
        if (!ec) rp->eof[0] = rp->eof[1] = true, maybe_report(*rp);
      });
      maybe_report(*r);
    }
  }
  sigchld_.async_wait([this](auto ec, int) { if (!ec) reap(); });
}

void Agent::maybe_report(Rank& r) {
  if (r.reported || !r.status || !r.eof[0] || !r.eof[1]) return;
  r.reported = true;
  r.drain.cancel();
  const int st = *r.status;
  json m = {{"t", "exited"}, {"rank", r.rank}, {"pid", r.pid}};
  if (WIFSIGNALED(st)) m["signal"] = WTERMSIG(st), m["core"] = static_cast<bool>(WCOREDUMP(st));
  else m["code"] = WEXITSTATUS(st);
  // Did the rank end by itself, or because of a signal this agent sent (a
  // teardown or a forwarded signal)? The launcher names ranks that failed by
  // themselves even when another rank's failure reached it first.
  const bool ours = WIFSIGNALED(st) ? (r.sent >> WTERMSIG(st)) & 1 : r.sent != 0;
  m["by_agent"] = ours;
  send(control::json_frame(m));
  finish_if_done();
}

void Agent::signal_all(int sig) {
  for (auto& [rank, r] : ranks_)
    if (r->pid > 0 && !r->status) {
      ::kill(-r->pid, sig);
      if (sig > 0 && sig < 64) r->sent |= uint64_t{1} << sig;
    }
}

void Agent::teardown(milliseconds grace) {
  signal_all(SIGTERM);
  kill_timer_.expires_after(grace);
  kill_timer_.async_wait([this](boost::system::error_code ec) {
    if (!ec) signal_all(SIGKILL);
  });
}

void Agent::heartbeat() {
  hb_timer_.expires_after(hb_interval_);
  hb_timer_.async_wait([this](boost::system::error_code ec) {
    if (ec || done_) return;
    if (hb_timeout_.count() > 0 && Clock::now() - last_rx_ > hb_timeout_)
      return lost_launcher("no heartbeat from the launcher for " + std::to_string(hb_timeout_.count()) + " ms");
    send(control::json_frame({{"t", "hb"}}));
    heartbeat();
  });
}

void Agent::watch_stdin() {
  int fd = ::dup(0);
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
  if (done_) return;
  bool any = false;
  for (auto& [rank, r] : ranks_) any = any || (r->pid > 0 && !r->status);
  signal_all(SIGKILL);
  if (any) std::cerr << "dlaunch-agent: " << why << "; killed this host's ranks\n";
  if (mpi_) mpi_->release_for_exit();  // main() _exits: no libpmix finalize to wait for
  done_ = true;
  exit_code_ = 1;
  io_.stop();
}

void Agent::finish_if_done() {
  if (!bye_ || done_) return;
  for (auto& [rank, r] : ranks_)
    if (!r->reported) return;
  for (auto& [rank, r] : ranks_)
    if (r->pid > 0) ::kill(-r->pid, SIGKILL);
  if (mpi_) mpi_->release_for_exit();  // main() _exits: no libpmix finalize to wait for
  done_ = true;
  exit_code_ = 0;
  hb_timer_.cancel();
  boost::system::error_code ec;
  sock_.shutdown(asio::ip::tcp::socket::shutdown_receive, ec);
  if (!writing_) io_.stop();
}

}  // namespace dl::agent
