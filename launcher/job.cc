#include "launcher/job.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <iostream>

#include "agent/cpu_binding.h"
#include "agent/gpu_binding.h"
#include "control/protocol.h"
#include "errors/error.h"
#include "errors/exit_codes.h"
#include "launcher/rank_env.h"
#include "launcher/ssh/quote.h"
#include "launcher/ssh/remote_process.h"
#include "launcher/ssh/session.h"
#include "rendezvous/tcp_store_server.h"
#include "wire/handshake.h"

extern char** environ;

namespace dl::launcher {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
namespace ip = asio::ip;

namespace {
milliseconds secs(double s) { return milliseconds(static_cast<long>(s * 1000)); }

// dlaunch started inside srun or mpirun inherits their identity variables;
// its ranks get dlaunch's own instead (agent/rank_env_filter.h), and the
// user is told once which ones. `launch` is node 0's launch message.
void warn_inherited_identity(const nlohmann::json& launch) {
  if (launch.at("ranks").empty()) return;
  EnvMap ours = launch.at("env").get<EnvMap>();
  for (auto& [k, v] : launch.at("ranks")[0].at("env").items()) ours[k] = v.get<std::string>();
  ours.erase("CUDA_VISIBLE_DEVICES");  // binding a host's GPUs contradicts nothing
  EnvMap inherited;
  for (char** e = environ; *e; ++e) {
    const std::string kv = *e;
    const auto eq = kv.find('=');
    if (eq != std::string::npos) inherited[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  inherited.erase("CUDA_VISIBLE_DEVICES");
  const auto names = contradicted_vars(inherited, ours);
  if (names.empty()) return;
  std::string list;
  for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
  write_fully(2, "dlaunch: warning: the ranks get dlaunch's own values instead of the inherited " + list +
                     " (is dlaunch running inside srun or mpirun?)\n");
}
constexpr milliseconds kHeartbeatInterval{1000};
constexpr milliseconds kCloseWait{3000};
}  // namespace

struct Job::Session : std::enable_shared_from_this<Session> {
  Session(asio::io_context& io, const std::string& token)
      : sock(io), hs(token, std::string(control::kControlTag)), parser(control::kMaxControlFrame), hs_deadline(io) {}
  ip::tcp::socket sock;
  wire::ServerHandshake hs;
  wire::FrameParser parser;
  bool authed = false, closed = false, writing = false;
  int node = -1;
  std::array<char, 65536> buf{};
  std::deque<std::string> txq;
  Clock::time_point last_rx = Clock::now();
  asio::steady_timer hs_deadline;  // a connection that has not authenticated by then is closed
};

struct Job::Node {
  int index = 0;
  std::string host;   // as the hostfile names it
  bool local = false;
  std::vector<int> ranks;
  std::shared_ptr<Session> session;
  LocalAgent agent;
  std::string agent_path;  // the local agent's, as started
  std::unique_ptr<asio::posix::stream_descriptor> agent_exit;  // its pidfd: readable once it exits
  json hello;
  std::string reach_addr;  // this host's address as the other hosts reach it
  bool start_failed = false;
  bool external = false;  // per-node mode: another node's dlaunch runs it
  std::atomic<bool> stop_ssh{false};
};

Job::Job(RunOptions opts, hostfiles::Placement plan, std::optional<NodeView> view)
    : opts_(std::move(opts)), plan_(std::move(plan)), view_(std::move(view)), acceptor_(io_), signals_(io_, SIGINT, SIGTERM, SIGHUP),
      agent_timer_(io_), job_timer_(io_), kill_timer_(io_), hb_timer_(io_), close_timer_(io_), progress_timer_(io_),
      fate_(static_cast<int>(plan_.ranks.size())) {
  std::vector<std::string> rank_hosts;
  for (const auto& r : plan_.ranks) rank_hosts.push_back(plan_.nodes.at(static_cast<size_t>(r.node)).host);
  sink_ = std::make_unique<OutputSink>(OutputOptions{opts_.tag_output, opts_.timestamp_output, opts_.output_dir},
                                       std::move(rank_hosts));
  for (size_t i = 0; i < plan_.nodes.size(); ++i) {
    auto n = std::make_unique<Node>();
    n->index = static_cast<int>(i);
    n->host = plan_.nodes[i].host;
    n->external = view_ && static_cast<int>(i) != view_->node;
    n->local = view_ ? !n->external : is_local_host(n->host);
    nodes_.push_back(std::move(n));
  }
  for (const auto& r : plan_.ranks) nodes_.at(static_cast<size_t>(r.node))->ranks.push_back(r.rank);
  for (auto& n : nodes_)
    if (n->external) fate_.not_ours(n->ranks);
}

int Job::own_nodes() const {
  int k = 0;
  for (auto& n : nodes_) k += n->external ? 0 : 1;
  return k;
}

Job::~Job() {
  for (auto& n : nodes_) n->stop_ssh = true;
  for (auto& t : ssh_threads_)
    if (t.joinable()) t.join();
  for (auto& n : nodes_) reap_local_agent(n->agent, 0);
}

void Job::log(const std::string& line) const {
  if (opts_.verbose) write_fully(2, "dlaunch: " + line + "\n");
}

int Job::run() {
  started_at_ = Clock::now();
  token_ = view_ ? view_->token : wire::new_token();
  job_id_ = view_ ? view_->job_id : "dl-" + wire::to_hex(wire::random_bytes(4));
  bool any_remote = false;
  for (auto& n : nodes_) any_remote = any_remote || (!n->local && !n->external);
  const std::string bind = any_remote ? (opts_.control_addr.empty() ? "0.0.0.0" : opts_.control_addr) : "127.0.0.1";
  control_host_ = any_remote ? opts_.control_addr : "127.0.0.1";
  ip::tcp::endpoint ep(ip::make_address(bind), 0);
  acceptor_.open(ep.protocol());
  acceptor_.set_option(ip::tcp::acceptor::reuse_address(true));
  acceptor_.bind(ep);
  acceptor_.listen(1024);
  if (!view_) store_ = std::make_unique<rdzv::TcpStoreServer>(io_, bind, 0, token_);
  log("control server on " + bind + ":" + std::to_string(acceptor_.local_endpoint().port()) + ", store " +
      (store_ ? "on port " + std::to_string(store_->port()) : "at " + view_->store_addr) + ", job " + job_id_);
  accept();
  if (view_)
    view_->watch([this](int code, std::string verdict) {
      asio::post(io_, [this, code, verdict] { on_peer_failed(code, verdict); });
    });
  signals_.async_wait([this](auto ec, int sig) { if (!ec) on_signal(sig); });
  agent_timer_.expires_after(secs(opts_.agent_timeout_s) + (any_remote ? secs(opts_.ssh_timeout_s) : milliseconds(0)));
  agent_timer_.async_wait([this](boost::system::error_code ec) {
    if (ec || launched_) return;
    std::string missing;
    for (auto& n : nodes_)
      if (!n->session && !n->start_failed && !n->external) missing += (missing.empty() ? "" : ", ") + n->host;
    fate_.on_host_lost(missing, "its agent did not connect within " + std::to_string(static_cast<int>(opts_.agent_timeout_s)) +
                                    " s (see --agent-timeout)", plan_.nodes.empty() ? std::vector<int>{} : nodes_[0]->ranks);
    teardown(0);
  });
  if (opts_.timeout_s > 0) {
    job_timer_.expires_after(secs(opts_.timeout_s));
    job_timer_.async_wait([this](boost::system::error_code ec) {
      if (!ec && fate_.on_timeout(opts_.timeout_s)) teardown(static_cast<int>(opts_.kill_grace_s * 1000));
    });
  }
  start_agents();
  if (show_start_progress(own_nodes(), ::isatty(2) == 1)) show_progress();
  io_.run();
  for (auto& n : nodes_) n->stop_ssh = true;
  for (auto& t : ssh_threads_) t.join();
  ssh_threads_.clear();
  for (auto& n : nodes_) reap_local_agent(n->agent, 2000);
  if (fate_.failed()) write_fully(2, "dlaunch: " + fate_.verdict() + "\n");
  return fate_.exit_code();
}

// `agents 12/64 connected, 3 failed` while agents start, redrawn in place.
void Job::show_progress() {
  if (launched_ || finishing_) {
    if (!progress_shown_.empty()) write_fully(2, "\r\033[K");
    progress_shown_.clear();
    return;
  }
  const std::string line = "agents " + std::to_string(hellos_) + "/" + std::to_string(own_nodes()) + " connected" +
                           (start_failures_.empty() ? "" : ", " + std::to_string(start_failures_.size()) + " failed");
  if (line != progress_shown_) write_fully(2, "\r\033[Kdlaunch: " + line), progress_shown_ = line;
  progress_timer_.expires_after(milliseconds(100));
  progress_timer_.async_wait([this](boost::system::error_code ec) { if (!ec) show_progress(); });
}

void Job::accept() {
  auto s = std::make_shared<Session>(io_, token_);
  acceptor_.async_accept(s->sock, [this, s](boost::system::error_code ec) {
    if (ec) return;
    s->sock.set_option(ip::tcp::no_delay(true));
    start_session(s);
    if (!stopped_) accept();
  });
}

// The agent speaks first (wire/handshake.h). Whoever connects must pass the
// handshake within its time limit, or is closed: an idle connection to the
// control port holds nothing open for the rest of the job.
void Job::start_session(std::shared_ptr<Session> s) {
  s->hs_deadline.expires_after(wire::kDefaultHandshakeTimeout);
  s->hs_deadline.async_wait([this, w = std::weak_ptr<Session>(s)](boost::system::error_code ec) {
    auto s = w.lock();
    if (ec || !s || s->authed || s->closed) return;
    log("refused a control connection: no handshake within " +
        std::to_string(wire::kDefaultHandshakeTimeout.count() / 1000) + " s");
    on_session_closed(s, "no handshake");
  });
  read_session(s);
}

void Job::read_session(std::shared_ptr<Session> s) {
  s->sock.async_read_some(asio::buffer(s->buf), [this, s](boost::system::error_code ec, size_t n) {
    if (ec) return on_session_closed(s, ec == asio::error::eof ? "connection closed" : ec.message());
    s->last_rx = Clock::now();
    try {
      s->parser.feed(s->buf.data(), n);
      while (auto f = s->parser.next()) {
        if (s->closed) return;
        on_frame(s, f->payload, f->type);
      }
    } catch (const std::exception& e) {
      return on_session_closed(s, std::string("protocol error: ") + e.what());
    }
    if (!s->closed) read_session(s);
  });
}

void Job::on_frame(const std::shared_ptr<Session>& s, const std::string& payload, uint8_t type) {
  if (!s->authed) {
    std::optional<std::string> answer;
    bool ok = false;
    if (type == wire::kHandshake && !s->hs.answered()) ok = (answer = s->hs.answer(payload)).has_value();
    else if (type == wire::kHandshake) ok = s->authed = s->hs.verify(payload);
    if (s->authed) s->hs_deadline.cancel();
    if (!ok) {
      log("refused a control connection: " + (type == wire::kHandshake  ? s->hs.error()
                                               : type == wire::kErrorText ? "the agent says: " + payload
                                                                          : std::string("no handshake")));
      s->closed = true;
      boost::system::error_code ec;
      s->sock.close(ec);
      return;
    }
    if (answer) {
      auto frame = std::make_shared<std::string>(wire::encode_frame(wire::kHandshake, *answer));
      asio::async_write(s->sock, asio::buffer(*frame), [frame](auto, size_t) {});
    }
    return;
  }
  if (type == wire::kData) {
    if (s->node < 0) throw RemoteError("output before hello");
    auto chunk = control::parse_data(payload);
    const auto& mine = nodes_[static_cast<size_t>(s->node)]->ranks;
    if (std::find(mine.begin(), mine.end(), chunk.rank) == mine.end()) throw RemoteError("output for a foreign rank");
    sink_->write(chunk.rank, chunk.stream, chunk.bytes);
    return;
  }
  if (type == control::kFence) {
    if (s->node < 0 || !mpi_) throw RemoteError("fence data outside an MPI job");
    auto f = control::parse_fence(payload);
    return on_fence(*nodes_[static_cast<size_t>(s->node)], f.id, f.blob);
  }
  if (type != wire::kJson) return;
  json m = json::parse(payload);
  if (s->node < 0) return on_hello(s, m);
  on_message(*nodes_[static_cast<size_t>(s->node)], m);
}

void Job::on_hello(const std::shared_ptr<Session>& s, const json& m) {
  if (m.at("t") != "hello") throw RemoteError("expected hello");
  const int node = m.at("node");
  if (node < 0 || node >= static_cast<int>(nodes_.size()) || nodes_[static_cast<size_t>(node)]->session ||
      nodes_[static_cast<size_t>(node)]->external)
    throw RemoteError("agent claims node " + std::to_string(node) + ", which is not expected");
  Node& n = *nodes_[static_cast<size_t>(node)];
  s->node = node;
  n.session = s;
  n.hello = m;
  log("agent on " + n.host + " connected (pid " + std::to_string(m.value("pid", 0)) + ")");
  if (++hellos_ == own_nodes() && !fate_.failed()) launch_all();
  else if (fate_.failed() && !launched_ && !finishing_ && all_agents_settled()) teardown(0);
}

void Job::on_message(Node& n, const json& m) {
  const std::string t = m.at("t");
  if (t == "hb" || t == "started") return;
  RankExit e;
  e.rank = m.at("rank");
  if (std::find(n.ranks.begin(), n.ranks.end(), e.rank) == n.ranks.end()) throw RemoteError("exit of a foreign rank");
  e.host = n.host;
  if (t == "mpi_abort") {
    if (fate_.on_mpi_abort(e.rank, n.host, m.at("status").get<int>()))
      teardown(static_cast<int>(opts_.kill_grace_s * 1000));
    return;
  }
  if (t == "spawn_failed") {
    e.spawn_failed = true, e.code = m.at("code"), e.message = m.at("message");
  } else if (t == "exited") {
    e.pid = m.at("pid"), e.code = m.value("code", 0), e.signal = m.value("signal", 0), e.core = m.value("core", false);
    e.by_agent = m.value("by_agent", true);
  } else {
    return;
  }
  sink_->finish(e.rank);
  if (fate_.on_exit(e)) teardown(static_cast<int>(opts_.kill_grace_s * 1000));
  check_finished();
}

// Collects node n's contribution to fence `id`; once every node has given
// one, sends their concatenation (node order) to every agent.
void Job::on_fence(Node& n, uint64_t id, std::string_view blob) {
  Fence& f = fences_[id];
  if (f.blobs.empty()) {
    f.blobs.resize(nodes_.size());
    f.timer = std::make_unique<asio::steady_timer>(io_, secs(opts_.fence_timeout_s));
    f.timer->async_wait([this, id](boost::system::error_code ec) { if (!ec) fence_timed_out(id); });
  }
  auto& slot = f.blobs[static_cast<size_t>(n.index)];
  if (slot) throw RemoteError("agent on " + n.host + " contributed twice to fence " + std::to_string(id));
  slot = std::string(blob);
  if (++f.have < nodes_.size()) return;
  std::string all;
  for (auto& b : f.blobs) all += *b;
  f.timer->cancel();
  fences_.erase(id);
  log("fence " + std::to_string(id) + " complete (" + std::to_string(all.size()) + " bytes)");
  const std::string frame = control::fence_frame(id, all);
  for (auto& node : nodes_) send(*node, frame);
}

void Job::fence_timed_out(uint64_t id) {
  auto it = fences_.find(id);
  if (it == fences_.end()) return;
  std::string missing;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (it->second.blobs[i]) continue;
    std::string ranks;
    for (int r : nodes_[i]->ranks) ranks += (ranks.empty() ? "" : ",") + std::to_string(r);
    missing += (missing.empty() ? "" : "; ") + nodes_[i]->host + " (ranks " + ranks + ")";
  }
  fences_.erase(it);
  for (auto& node : nodes_) send(*node, control::json_frame({{"t", "fence_failed"}, {"id", id}, {"message", missing}}));
  if (fate_.on_fence_timeout(id, opts_.fence_timeout_s, missing)) teardown(static_cast<int>(opts_.kill_grace_s * 1000));
}

// Per-node mode: another node failed (or the store was lost): stop ours.
void Job::on_peer_failed(int code, const std::string& verdict) {
  if (finishing_ && fate_.all_done()) return;
  peer_failed_ = !fate_.failed();
  if (fate_.on_peer_failure(code, verdict)) teardown(static_cast<int>(opts_.kill_grace_s * 1000));
}

void Job::on_session_closed(const std::shared_ptr<Session>& s, const std::string& why) {
  if (s->closed) return;
  s->closed = true;
  boost::system::error_code ec;
  s->sock.close(ec);
  if (s->node < 0) return;
  Node& n = *nodes_[static_cast<size_t>(s->node)];
  if (!finishing_) {
    if (fate_.on_host_lost(n.host, why, n.ranks)) teardown(static_cast<int>(opts_.kill_grace_s * 1000));
    check_finished();
  }
  if (finishing_) {
    for (auto& other : nodes_)
      if (other->session && !other->session->closed) return;
    stopped_ = true;
    io_.stop();
  }
}

void Job::send(Node& n, std::string frame) {
  auto s = n.session;
  if (!s || s->closed) return;
  s->txq.push_back(std::move(frame));
  if (s->writing) return;
  s->writing = true;
  auto pump = std::make_shared<std::function<void()>>();
  *pump = [s, pump] {
    if (s->txq.empty() || s->closed) { s->writing = false; return; }
    asio::async_write(s->sock, asio::buffer(s->txq.front()), [s, pump](boost::system::error_code ec, size_t) {
      if (ec) { s->writing = false; return; }
      s->txq.pop_front();
      (*pump)();
    });
  };
  (*pump)();
}

void Job::start_agents() {
  const std::string port = std::to_string(acceptor_.local_endpoint().port());
  for (auto& n : nodes_) {
    if (n->external) continue;
    if (!n->local) {
      start_remote_agent(n->index, port);
      continue;
    }
    std::vector<std::string> args{"--connect", "127.0.0.1:" + port, "--node", std::to_string(n->index)};
    if (!opts_.gpu_bind) args.push_back("--no-gpu-bind");
    if (opts_.bind_to != "none") args.push_back("--cpu-topology");
    if (opts_.mpi == "none" || view_) args.push_back("--no-pmix");  // no PMIx server warming up beside the ranks
    if (opts_.gpus_per_node >= 0) args.insert(args.end(), {"--gpus-per-node", std::to_string(opts_.gpus_per_node)});
    n->reach_addr = "127.0.0.1";
    n->agent_path = agent_path("", false);
    try {
      n->agent = start_local_agent(n->agent_path, args, token_);
    } catch (const Error& e) {
      asio::post(io_, [this, idx = n->index, why = n->host + ": " + e.what()] { node_failed_to_start(idx, why); });
      continue;
    }
    watch_local_agent(*n);
  }
}

// A local agent that exits before it connects fails its node at once, not
// when --agent-timeout runs out. Without pidfds (Linux < 5.3) the agent
// timer still bounds the wait.
void Job::watch_local_agent(Node& n) {
  const int fd = open_agent_pidfd(n.agent);
  if (fd < 0) return;
  n.agent_exit = std::make_unique<asio::posix::stream_descriptor>(io_, fd);
  n.agent_exit->async_wait(asio::posix::stream_descriptor::wait_read, [this, &n](boost::system::error_code ec) {
    if (ec || n.session || launched_ || finishing_) return;
    if (auto status = peek_agent_exit(n.agent))
      node_failed_to_start(n.index, n.host + ": " + local_agent_exit_error(n.agent_path, *status));
  });
}

void Job::start_remote_agent(int idx, const std::string& port) {
  Node& n = *nodes_[static_cast<size_t>(idx)];
  const auto& entry = plan_.nodes[static_cast<size_t>(idx)];
  ssh::Target target{entry.host, entry.user, entry.port};
  ssh::Options so;
  so.connect_timeout = secs(opts_.ssh_timeout_s);
  so.config_file = opts_.ssh_config;
  so.accept_new = opts_.ssh_accept_new;
  std::vector<std::string> argv{agent_path(opts_.prefix, true), "--node", std::to_string(idx)};
  if (!opts_.gpu_bind) argv.push_back("--no-gpu-bind");
  if (opts_.bind_to != "none") argv.push_back("--cpu-topology");
  if (opts_.mpi == "none") argv.push_back("--no-pmix");
  if (opts_.gpus_per_node >= 0) argv.insert(argv.end(), {"--gpus-per-node", std::to_string(opts_.gpus_per_node)});
  ssh_threads_.emplace_back([this, &n, idx, target, so, argv, port, token = token_,
                             control = opts_.control_addr, prefix = opts_.prefix]() mutable {
    try {
      ssh::Session session(target, so);
      const std::string back = control.empty() ? session.local_address() : control;
      const std::string host_port = back.find(':') != std::string::npos ? "[" + back + "]:" + port : back + ":" + port;
      argv.insert(argv.begin() + 1, {"--connect", host_port});
      asio::post(io_, [this, &n, back, addr = session.remote_address()] {
        n.reach_addr = addr;
        if (control_host_.empty()) control_host_ = back;
      });
      auto proc = session.exec(ssh::join_quoted(argv));
      proc->write_stdin(token + "\n");
      size_t err_seen = 0;
      while (!n.stop_ssh && proc->poll_output(milliseconds(20))) {
        if (proc->err().size() > err_seen && n.session) {
          // The agent's own complaints after start-up, tagged with its host.
          std::string tail = proc->err().substr(err_seen);
          err_seen = proc->err().size();
          asio::post(io_, [this, &n, tail] { write_fully(2, "dlaunch: [agent@" + n.host + "] " + tail); });
        }
      }
      if (n.stop_ssh) return;
      const int status = proc->exit_status().value_or(-1);
      std::string err = proc->err().substr(std::min(err_seen, proc->err().size()));
      while (!err.empty() && (err.back() == '\n' || err.back() == '\r')) err.pop_back();
      std::string why = target.str() + ": dlaunch-agent exited with status " + std::to_string(status);
      if (status == 127)
        why = target.str() + ": dlaunch-agent was not found (" + argv[0] +
              "); install dlaunch at the same path there or pass --prefix DIR";
      if (!err.empty()) why += " (" + err + ")";
      asio::post(io_, [this, idx, why] { node_failed_to_start(idx, why); });
    } catch (const std::exception& e) {
      asio::post(io_, [this, idx, why = std::string(e.what())] { node_failed_to_start(idx, why); });
    }
  });
}

void Job::node_failed_to_start(int node, const std::string& why) {
  Node& n = *nodes_[static_cast<size_t>(node)];
  if (n.start_failed || (finishing_ && launched_)) return;
  if (n.session && !n.session->closed) return;  // it ran: its session reports
  n.start_failed = true;
  start_failures_.push_back(n.host);
  write_fully(2, std::string(progress_shown_.empty() ? "" : "\r\033[K") + "dlaunch: error: " + why + "\n");
  progress_shown_.clear();
  const bool lost = fate_.on_host_lost(n.host, "its agent could not be started", n.ranks);
  if (launched_) {
    if (lost) teardown(0);
    return;
  }
  // Before launch: wait until every host has connected or failed, so each
  // failing host gets its own line (the agent timer bounds the wait).
  if (!finishing_ && all_agents_settled()) teardown(0);
}

// True when every node's agent has connected or failed to start.
bool Job::all_agents_settled() const {
  for (auto& n : nodes_)
    if (!n->session && !n->start_failed && !n->external) return false;
  return true;
}

// --mpi: pmix needs every agent to serve PMIx; auto uses it when they all can.
bool Job::decide_mpi() {
  if (opts_.mpi == "none" || view_) return true;  // per-node mode: no fences between nodes (docs/mpi.md)
  std::string without;
  for (auto& n : nodes_)
    if (!n->hello.value("pmix", false)) without += (without.empty() ? "" : ", ") + n->host;
  mpi_ = without.empty();
  if (mpi_ || opts_.mpi == "auto") return true;
  write_fully(2, "dlaunch: error: --mpi pmix: the dlaunch-agent on " + without +
                     " was built without libpmix; install libpmix-dev and rebuild, or use --mpi none\n");
  fate_.on_host_lost(without, "no PMIx server (--mpi pmix)", nodes_[0]->ranks);
  teardown(0);
  return false;
}

// --bind-to: every rank's CPUs, planned from what each agent reported.
// False (the job failed, with the host and the fix named) when a host has
// too few cores.
bool Job::plan_cpu_binding() {
  if (opts_.bind_to == "none") return true;
  for (auto& n : nodes_) {
    if (n->external) continue;
    agent::CpuTopology topo;
    if (n->hello.contains("cpu")) {
      topo.cores = n->hello["cpu"].value("cores", std::vector<std::vector<int>>{});
      topo.numa = n->hello["cpu"].value("numa", std::vector<std::vector<int>>{});
    }
    try {
      auto per_local = agent::plan_cpus(opts_.bind_to, topo, static_cast<int>(n->ranks.size()), opts_.cpus_per_rank,
                                        n->host);
      for (int r : n->ranks)
        cpus_[r] = per_local.at(static_cast<size_t>(plan_.ranks[static_cast<size_t>(r)].local_rank));
    } catch (const std::exception& e) {
      fate_.on_bad_request(e.what());
      teardown(0);
      return false;
    }
  }
  return true;
}

void Job::launch_all() {
  if (!decide_mpi() || !plan_cpu_binding()) return;
  launched_ = true;
  progress_timer_.cancel();
  if (!progress_shown_.empty()) write_fully(2, "\r\033[K"), progress_shown_.clear();
  agent_timer_.cancel();
  heartbeat();
  bool warned = false;
  for (auto& n : nodes_) {
    if (n->external) continue;
    json m = launch_message(n->index);
    if (!warned) warn_inherited_identity(m), warned = true;
    send(*n, control::json_frame(m));
  }
  start_stdin_reader();
}

json Job::launch_message(int node) {
  const bool all_local = std::all_of(nodes_.begin(), nodes_.end(), [](auto& n) { return n->local; });
  JobEnv je;
  je.placement = &plan_;
  je.job_id = job_id_;
  je.token = token_;
  Node& n0 = *nodes_[0];
  if (view_) {
    je.master_addr = view_->master_addr;
    je.master_port = view_->master_port;
    je.store_addr = view_->store_addr;
  } else {
    je.master_addr = all_local ? "127.0.0.1" : (n0.local ? control_host_ : n0.reach_addr);
    je.master_port = n0.hello.value("free_port", 29500);
    je.store_addr = (all_local ? std::string("127.0.0.1") : control_host_) + ":" + std::to_string(store_->port());
  }
  Node& n = *nodes_[static_cast<size_t>(node)];
  json common = json::object();
  for (const auto& x : opts_.exports) {
    auto eq = x.find('=');
    if (eq != std::string::npos) common[x.substr(0, eq)] = x.substr(eq + 1);
    else if (const char* v = std::getenv(x.c_str())) common[x] = v;
  }
  std::vector<std::string> gpus = n.hello.value("gpus", std::vector<std::string>{});
  json ranks = json::array();
  for (int r : n.ranks) {
    EnvMap env = rank_env(je, r);
    if (opts_.gpu_bind) {
      if (auto g = agent::bind_gpus(gpus, plan_.ranks[static_cast<size_t>(r)].local_rank, opts_.gpus_per_rank))
        env["CUDA_VISIBLE_DEVICES"] = *g;
    }
    bool in = opts_.stdin_target != "none" && std::to_string(r) == opts_.stdin_target;
    ranks.push_back({{"rank", r}, {"argv", opts_.command}, {"env", env}, {"stdin", in}});
    if (auto c = cpus_.find(r); c != cpus_.end()) ranks.back()["cpus"] = c->second;
  }
  char cwd[4096] = {};
  std::string wdir = opts_.wdir.empty() ? (::getcwd(cwd, sizeof cwd) ? cwd : "") : opts_.wdir;
  json m = {{"t", "launch"}, {"env", common}, {"wdir", wdir}, {"ranks", ranks},
            {"hb_ms", kHeartbeatInterval.count()}, {"hb_timeout_ms", secs(opts_.heartbeat_timeout_s).count()}};
  if (mpi_) {
    json hosts = json::array(), node_ranks = json::array();
    for (auto& x : nodes_) hosts.push_back(x->host), node_ranks.push_back(x->ranks);
    m["mpi"] = {{"nspace", job_id_}, {"world_size", plan_.ranks.size()}, {"node_rank", node},
                {"node_hosts", hosts}, {"node_ranks", node_ranks}, {"universe_size", plan_.ranks.size()}};
  }
  return m;
}

void Job::teardown(int grace_ms) {
  progress_timer_.cancel();
  if (!progress_shown_.empty()) write_fully(2, "\r\033[K"), progress_shown_.clear();
  if (!launched_ && start_failures_.size() > 1) {
    std::string hosts;
    for (const auto& h : start_failures_) hosts += (hosts.empty() ? "" : ", ") + h;
    fate_.restate("agents could not be started on " + std::to_string(start_failures_.size()) + " hosts (" + hosts +
                  "); each is explained above");
  }
  if (view_ && fate_.failed() && !peer_failed_ && !published_) {
    published_ = true;
    view_->publish_failure(fate_.exit_code(), fate_.verdict());
  }
  if (!launched_) {
    // Nothing runs yet: tell connected agents to leave, then stop.
    finishing_ = true;
    for (auto& n : nodes_) send(*n, control::json_frame({{"t", "bye"}}));
    close_timer_.expires_after(kCloseWait);
    close_timer_.async_wait([this](boost::system::error_code ec) { if (!ec) stopped_ = true, io_.stop(); });
    bool any_open = false;
    for (auto& n : nodes_) any_open = any_open || (n->session && !n->session->closed);
    if (!any_open) stopped_ = true, io_.stop();
    return;
  }
  const bool again = tearing_down_;
  tearing_down_ = true;
  for (auto& n : nodes_) send(*n, control::json_frame({{"t", "kill"}, {"grace_ms", grace_ms}}));
  if (again && grace_ms > 0) return;
  // Agents confirm every exit; if some never do, give up after grace + 5 s.
  kill_timer_.expires_after(milliseconds(grace_ms) + milliseconds(5000));
  kill_timer_.async_wait([this](boost::system::error_code ec) {
    if (ec) return;
    for (auto& n : nodes_)
      if (!n->ranks.empty() && !n->external)
        fate_.on_host_lost(n->host, "did not confirm that its ranks ended", n->ranks);
    check_finished();
  });
}

void Job::on_signal(int sig) {
  signals_.async_wait([this](auto ec, int s) { if (!ec) on_signal(s); });
  if (!launched_) {
    fate_.on_host_lost("(startup)", std::string("interrupted by SIG") + ::sigabbrev_np(sig), {});
    return teardown(0);
  }
  if (++signals_seen_ == 1) {
    fate_.on_signal(sig);
    if (isatty(2)) write_fully(2, std::string("dlaunch: forwarding SIG") + ::sigabbrev_np(sig) +
                                      " to all ranks (again to kill them at once)\n");
    for (auto& n : nodes_) send(*n, control::json_frame({{"t", "signal"}, {"signal", sig}}));
  } else {
    teardown(0);
  }
}

void Job::heartbeat() {
  hb_timer_.expires_after(kHeartbeatInterval);
  hb_timer_.async_wait([this](boost::system::error_code ec) {
    if (ec || finishing_) return;
    const auto limit = secs(opts_.heartbeat_timeout_s);
    for (auto& n : nodes_) {
      auto s = n->session;
      if (!s || s->closed) continue;
      if (Clock::now() - s->last_rx > limit) {
        on_session_closed(s, "no heartbeat for " + std::to_string(limit.count() / 1000) +
                                 " s: the host or its agent is frozen, or the network is down");
        continue;
      }
      send(*n, control::json_frame({{"t", "hb"}}));
    }
    heartbeat();
  });
}

void Job::start_stdin_reader() {
  if (opts_.stdin_target == "none") return;
  const int target = std::stoi(opts_.stdin_target);
  if (target >= static_cast<int>(plan_.ranks.size())) return;
  // A background job reading the terminal would be stopped by SIGTTIN.
  if (::isatty(0) && ::tcgetpgrp(0) != ::getpgrp()) return;
  Node* n = nodes_[static_cast<size_t>(plan_.ranks[static_cast<size_t>(target)].node)].get();
  if (n->external) return;
  std::thread([this, n, target] {
    char buf[65536];
    for (;;) {
      ssize_t got = ::read(0, buf, sizeof buf);
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) {
        asio::post(io_, [this, n, target] { send(*n, control::json_frame({{"t", "stdin_eof"}, {"rank", target}})); });
        return;
      }
      std::string data(buf, static_cast<size_t>(got));
      asio::post(io_, [this, n, target, data = std::move(data)] {
        send(*n, control::data_frame(target, control::kStdin, data));
      });
    }
  }).detach();
}

void Job::check_finished() {
  if (!launched_ || finishing_ || !fate_.all_done()) return;
  finish();
}

void Job::finish() {
  finishing_ = true;
  hb_timer_.cancel();
  kill_timer_.cancel();
  job_timer_.cancel();
  for (auto& n : nodes_) send(*n, control::json_frame({{"t", "bye"}}));
  close_timer_.expires_after(kCloseWait);
  close_timer_.async_wait([this](boost::system::error_code ec) { if (!ec) stopped_ = true, io_.stop(); });
}

}  // namespace dl::launcher
