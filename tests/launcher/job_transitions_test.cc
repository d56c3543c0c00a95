// The Job as a state machine, driven step by step on the test's thread: its
// links to the agents (launcher/agent_links.h) are a recorder, its agent
// starter a recorder too, and the test calls the Job's handler with typed
// messages, then looks at the phase and at what was sent to which node.
// No agent process, no thread, no control socket (the job's rendezvous
// store still listens on loopback, unused).
#include <catch2/catch.hpp>

#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "control/messages.h"
#include "control/protocol.h"
#include "errors/error.h"
#include "launcher/job.h"
#include "machine/clock.h"
#include "tests/launcher/stderr_capture.h"
#include "wire/frame.h"

using namespace dl::launcher;
namespace msg = dl::control::msg;
namespace control = dl::control;
namespace hf = dl::hostfiles;
using std::chrono::milliseconds;

namespace {

// An agent's answer to the health gate, its clock read now (this machine's,
// so the same as the launcher's) plus `clock_off_s`.
msg::Health health(bool passed, const std::string& text = "", double clock_off_s = 0) {
  return msg::Health{passed, text, dl::machine::wall_ns() + static_cast<long long>(clock_off_s * 1e9), 0};
}

// What the Job sent to one node, its JSON messages decoded.
struct Sent {
  std::vector<control::FromLauncher> messages;
  template <class M> std::vector<M> all() const {
    std::vector<M> out;
    for (const auto& m : messages)
      if (auto* x = std::get_if<M>(&m)) out.push_back(*x);
    return out;
  }
  template <class M> int count() const { return static_cast<int>(all<M>().size()); }
};

class RecordingLinks final : public AgentLinks {
 public:
  RecordingLinks(size_t nodes, Handler& h) : h_(h), open_(nodes, false), sent_(nodes) {}
  uint16_t listen(const std::string&) override { return 7000; }
  void stop_accepting() override { accepting_ = false; }
  void set_routes(std::vector<int> root_of, std::vector<std::string>) override { routes = std::move(root_of); }
  void adopt(int fd) override { ::close(fd); }
  void send(int node, std::string frame) override {
    REQUIRE(frame.size() >= dl::wire::kHeaderSize);
    if (static_cast<uint8_t>(frame[4]) != dl::wire::kJson) return;  // output and fence data: not looked at here
    sent_.at(static_cast<size_t>(node)).messages.push_back(
        control::decode_from_launcher(std::string_view(frame).substr(dl::wire::kHeaderSize)));
  }
  void broadcast_frame(const std::string& frame) override {
    for (size_t i = 0; i < open_.size(); ++i)
      if (open_[i]) send(static_cast<int>(i), frame);
  }
  bool connected(int node) const override { return open_.at(static_cast<size_t>(node)); }
  bool any_open() const override {
    for (bool o : open_)
      if (o) return true;
    return false;
  }
  dl::ssh::TcpConnection addresses(int) const override { return {}; }
  void start_heartbeats(milliseconds, milliseconds) override { heartbeats_ = true; }
  void stop_heartbeats() override { heartbeats_ = false; }
  void hold_reading() override {}
  void resume_reading() override {}
  size_t queued_bytes() const override { return 0; }

  // The agent of `node` says hello. As the real server does, the link is
  // bound before the handler hears of it (its answer may be to send), and
  // unbound again when the handler refuses it.
  // `gpus`: the NVIDIA GPUs its hello reports. A health_check that asks
  // only for the programs (a job with spares) is answered "passed" at once,
  // as an agent that finds them would, unless `answers_health` is false
  // (the test answers itself: programs missing, a clock off).
  std::string hello(int node, int free_port = 29500, const std::string& unhealthy = "",
                    std::vector<std::string> gpus = {}) {
    msg::Hello m;
    m.version = "test", m.node = node, m.host = "fake-" + std::to_string(node), m.pid = 4000 + node;
    m.free_port = free_port;
    m.unhealthy = unhealthy;
    if (!gpus.empty()) m.gpus = std::move(gpus), m.gpu_vendor = "nvidia";
    REQUIRE(!open_.at(static_cast<size_t>(node)));  // the server itself refuses a second one
    open_.at(static_cast<size_t>(node)) = true;
    const std::string refused = h_.on_hello(m);
    if (!refused.empty()) open_.at(static_cast<size_t>(node)) = false;
    const auto asked = sent(node).all<msg::HealthCheck>();
    if (refused.empty() && answers_health && !asked.empty() && asked.back().command.empty())
      h_.on_message(node, health(true, ""));
    return refused;
  }
  bool answers_health = true;
  void say(int node, const control::FromAgent& m) { h_.on_message(node, m); }
  void exited(int node, int rank, std::optional<int> code, std::optional<int> sig = std::nullopt) {
    msg::Exited x;
    x.rank = rank, x.pid = 5000 + rank, x.code = code, x.signal = sig, x.by_agent = sig.has_value();
    say(node, x);
  }
  // The connection closes (as the real server reports it: once, after the hello).
  void close(int node, const std::string& why) {
    open_.at(static_cast<size_t>(node)) = false;
    h_.on_closed(node, why);
  }
  const Sent& sent(int node) const { return sent_.at(static_cast<size_t>(node)); }
  size_t size() const { return open_.size(); }
  bool accepting_ = true, heartbeats_ = false;
  std::vector<int> routes;  // set_routes(): the launch tree, by node

 private:
  Handler& h_;
  std::vector<bool> open_;
  std::vector<Sent> sent_;
};

class RecordingStarter final : public AgentStarter {
 public:
  RecordingStarter(boost::asio::io_context& io, Events ev) : io_(io), ev_(std::move(ev)) {}
  void start(const AgentStartSpec& spec) override {
    specs.push_back(spec);
    if (fail.count(spec.node))
      boost::asio::post(io_, [ev = ev_, node = spec.node] { ev.failed(node, "fake-" + std::to_string(node) + ": cannot start (test)"); });
  }
  void connected(int node) override { connects.insert(node); }
  void stop(int) override { stopped = true; }
  std::vector<AgentStartSpec> specs;
  std::set<int> fail, connects;
  bool stopped = false;

 private:
  boost::asio::io_context& io_;
  Events ev_;
};

RunOptions test_options() {
  RunOptions o;
  o.command = {"/bin/true"};
  o.stdin_rank = kNoStdin;
  o.control_addr = "127.0.0.1";
  o.agent_timeout_s = 30;
  o.ssh_timeout_s = 1;
  o.kill_grace_s = 0.5;
  o.heartbeat_timeout_s = 5;
  return o;
}

// Two hosts that are not this machine, two ranks each: node 0 runs ranks 0-1, node 1 ranks 2-3.
hf::Placement two_hosts() {
  hf::HostEntry a, b;
  a.host = "fake-0", a.slots = 2;
  b.host = "fake-1", b.slots = 2;
  return hf::place({a, b}, {});
}


// A Job with recorders for its links and starter, started; every step is the
// test's call followed by running what became due.
struct Harness {
  explicit Harness(RunOptions o = test_options(), Peers* peers = nullptr, std::set<int> fail = {},
                   hf::Placement placement = two_hosts()) {
    JobParts parts;
    parts.peers = peers;
    parts.make_starter = [this, fail](boost::asio::io_context& io, AgentStarter::Events ev) {
      auto s = std::make_unique<RecordingStarter>(io, std::move(ev));
      s->fail = fail;
      starter = s.get();
      return s;
    };
    parts.make_links = [this](boost::asio::io_context&, const std::string&, size_t nodes, AgentLinks::Handler& h) {
      auto l = std::make_unique<RecordingLinks>(nodes, h);
      links = l.get();
      return l;
    };
    job = std::make_unique<Job>(std::move(o), std::move(placement), std::move(parts));
    job->start();
    settle();
  }
  ~Harness() {
    if (!concluded) finish();
  }
  void settle() { job->io().poll(); }
  // Runs the Job's loop until it is done or `limit` passed (for its timers).
  // Runs the Job's loop until it leaves `phase` or `limit` passed (for its timers).
  void run_while(Phase phase, milliseconds limit) {
    const auto until = std::chrono::steady_clock::now() + limit;
    while (job->phase() == phase && std::chrono::steady_clock::now() < until) job->io().run_one_for(milliseconds(20));
  }
  // The job's end: the agents' connections close as they do after a bye.
  int finish() {
    for (int n = 0; n < static_cast<int>(std::max<size_t>(links->size(), 2)); ++n)
      if (links->connected(n)) links->close(n, "closed by the agent");
    settle();
    concluded = true;
    code = job->conclude();
    err = cap.text();
    return code;
  }
  void launch_both() {
    REQUIRE(links->hello(0, 29500) == "");
    REQUIRE(links->hello(1, 29600) == "");
    settle();
    REQUIRE(job->phase() == Phase::kLaunched);
  }

  StderrCapture cap;
  RecordingLinks* links = nullptr;
  RecordingStarter* starter = nullptr;
  std::unique_ptr<Job> job;
  bool concluded = false;
  int code = -1;
  std::string err;
};

// `count` hosts that are not this machine, one slot each.
hf::Placement hosts(int count) {
  std::vector<hf::HostEntry> list;
  for (int i = 0; i < count; ++i) {
    hf::HostEntry e;
    e.host = "fake-" + std::to_string(i), e.slots = 1;
    list.push_back(e);
  }
  return hf::place(list, {});
}

// Variable k of the i-th launch a node was sent, as its agent reads it: the
// launch's own, over the launch_env sent before it.
template <class Sent> std::string shared_var(const Sent& sent, size_t i, const std::string& k) {
  const auto l = sent.template all<msg::Launch>().at(i);
  if (auto it = l.env.find(k); it != l.env.end()) return it->second;
  const auto shared = sent.template all<msg::LaunchEnv>().at(i);
  auto it = shared.env.find(k);
  return it == shared.env.end() ? "" : it->second;
}

std::vector<int> ranks_of(const msg::Launch& l) {
  std::vector<int> out;
  for (const auto& r : l.ranks) out.push_back(r.rank);
  return out;
}

}  // namespace

TEST_CASE("job transitions: both agents say hello, each node is launched with its own ranks",
          "[launcher][job][transitions]") {
  Harness h;
  CHECK(h.job->phase() == Phase::kStarting);
  REQUIRE(h.starter->specs.size() == 2);  // one agent per host, no launch before the last hello
  REQUIRE(h.links->hello(0) == "");
  h.settle();
  CHECK(h.job->phase() == Phase::kStarting);
  CHECK(h.links->sent(0).count<msg::Launch>() == 0);
  REQUIRE(h.links->hello(1) == "");
  h.settle();
  CHECK(h.job->phase() == Phase::kLaunched);
  CHECK(h.links->heartbeats_);
  REQUIRE(h.links->sent(0).count<msg::Launch>() == 1);
  REQUIRE(h.links->sent(1).count<msg::Launch>() == 1);
  CHECK(ranks_of(h.links->sent(0).all<msg::Launch>()[0]) == std::vector<int>{0, 1});
  CHECK(ranks_of(h.links->sent(1).all<msg::Launch>()[0]) == std::vector<int>{2, 3});
  CHECK(h.starter->connects == std::set<int>{0, 1});
}

TEST_CASE("job transitions: every rank exits 0: a bye to each node, no kill, exit 0", "[launcher][job][transitions]") {
  Harness h;
  h.launch_both();
  for (int r = 0; r < 4; ++r) h.links->exited(r / 2, r, 0);
  h.settle();
  CHECK(h.job->phase() == Phase::kClosing);
  for (int n = 0; n < 2; ++n) {
    CHECK(h.links->sent(n).count<msg::Bye>() == 1);
    CHECK(h.links->sent(n).count<msg::Kill>() == 0);
  }
  CHECK(h.finish() == 0);
  CHECK(h.job->phase() == Phase::kDone);
}

TEST_CASE("job transitions: one rank exits 3: every node is told to kill, the verdict names the rank",
          "[launcher][job][transitions]") {
  Harness h;
  h.launch_both();
  h.links->exited(1, 2, 3);
  h.settle();
  CHECK(h.job->phase() == Phase::kTearingDown);
  CHECK(h.links->sent(0).count<msg::Kill>() == 1);
  CHECK(h.links->sent(1).count<msg::Kill>() == 1);
  CHECK(h.links->sent(0).count<msg::Bye>() == 0);  // not before every rank's exit is known
  for (int r : {0, 1, 3}) h.links->exited(r / 2, r, std::nullopt, SIGTERM);
  h.settle();
  CHECK(h.job->phase() == Phase::kClosing);
  CHECK(h.links->sent(0).count<msg::Bye>() == 1);
  CHECK(h.finish() == 3);
  INFO(h.err);
  CHECK_THAT(h.err, Catch::Contains("rank 2"));
}

TEST_CASE("job transitions: what an agent may not say is refused or closes its connection",
          "[launcher][job][transitions]") {
  Harness h;
  REQUIRE(h.links->hello(0) == "");
  REQUIRE(h.links->hello(1) == "");
  h.settle();
  CHECK_THROWS_AS(h.links->exited(0, 3, 0), dl::RemoteError);  // rank 3 is node 1's
  CHECK_THROWS_AS(h.links->say(0, msg::Hello{}), dl::RemoteError);
  control::DataChunk c;
  c.rank = 2, c.stream = control::kStdout, c.bytes = "not yours\n";
  CHECK_THROWS_AS(static_cast<AgentLinks::Handler&>(*h.job).on_output(0, c), dl::RemoteError);
}

TEST_CASE("job transitions: a host whose agent cannot be started: the job ends before any launch",
          "[launcher][job][transitions]") {
  Harness h(test_options(), nullptr, {1});
  CHECK(h.job->phase() == Phase::kStarting);  // node 0 has not answered yet
  REQUIRE(h.links->hello(0) == "");
  h.settle();
  CHECK(h.job->phase() == Phase::kAborting);
  CHECK(h.links->sent(0).count<msg::Launch>() == 0);
  CHECK(h.links->sent(0).count<msg::Bye>() == 1);
  CHECK(h.finish() == 1);
  INFO(h.err);
  CHECK_THAT(h.err, Catch::Contains("fake-1") && Catch::Contains("cannot start"));
}

TEST_CASE("job transitions: an agent that never says hello ends the job at --agent-timeout, naming its host",
          "[launcher][job][transitions]") {
  auto o = test_options();
  o.agent_timeout_s = 0.2;
  o.ssh_timeout_s = 0;
  Harness h(o);
  REQUIRE(h.links->hello(0) == "");
  h.run_while(Phase::kStarting, milliseconds(5000));
  CHECK(h.job->phase() == Phase::kAborting);
  CHECK(h.links->sent(0).count<msg::Bye>() == 1);
  CHECK(h.links->sent(0).count<msg::Launch>() == 0);
  CHECK(h.finish() != 0);
  INFO(h.err);
  CHECK_THAT(h.err, Catch::Contains("fake-1") && Catch::Contains("did not connect"));
  CHECK_THAT(h.err, !Catch::Contains("fake-0:"));
}

TEST_CASE("job transitions: a connection lost after the launch: the host's ranks are lost, the others killed",
          "[launcher][job][transitions]") {
  Harness h;
  h.launch_both();
  h.links->close(1, "connection reset");
  h.settle();
  CHECK(h.job->phase() == Phase::kTearingDown);
  CHECK(h.links->sent(0).count<msg::Kill>() == 1);
  for (int r : {0, 1}) h.links->exited(0, r, std::nullopt, SIGTERM);
  h.settle();
  CHECK(h.job->phase() == Phase::kClosing);
  CHECK(h.finish() != 0);
  INFO(h.err);
  CHECK_THAT(h.err, Catch::Contains("fake-1") && Catch::Contains("connection reset"));
}

TEST_CASE("job transitions: --max-restarts: a lost agent is started anew, and node 0's ready port is MASTER_PORT",
          "[launcher][job][transitions]") {
  auto o = test_options();
  o.max_restarts = 1;
  o.torch_store = TorchStoreMode::kRank0;  // MASTER_PORT is then node 0's port, not the served store's
  Harness h(o);
  h.launch_both();
  CHECK(shared_var(h.links->sent(0), 0, "MASTER_PORT") == "29500");
  h.links->close(1, "connection reset");  // node 1's agent is gone with its ranks
  h.settle();
  for (int r : {0, 1}) h.links->exited(0, r, std::nullopt, SIGTERM);
  h.settle();
  REQUIRE(h.job->phase() == Phase::kRestarting);
  CHECK(h.links->sent(0).count<msg::Restart>() == 1);
  REQUIRE(h.starter->specs.size() == 3);  // node 1 again
  CHECK(h.starter->specs.back().node == 1);
  h.links->say(0, msg::Ready{1, 31000});
  h.settle();
  CHECK(h.job->phase() == Phase::kRestarting);  // node 1's new agent is not there yet
  REQUIRE(h.links->hello(1, 31001) == "");       // its hello is its ready
  h.settle();
  REQUIRE(h.job->phase() == Phase::kLaunched);
  const auto launches0 = h.links->sent(0).all<msg::Launch>();
  REQUIRE(launches0.size() == 2);
  CHECK(shared_var(h.links->sent(0), 1, "MASTER_PORT") == "31000");
  CHECK(h.links->sent(1).count<msg::Launch>() == 2);
  for (int r = 0; r < 4; ++r) h.links->exited(r / 2, r, 0);
  h.settle();
  CHECK(h.finish() == 0);
}

namespace {
struct RecordingPeers : Peers {
  PeerIdentity id;
  Failed failed;
  std::vector<int> published;
  RecordingPeers() {
    id.node = 1, id.token = std::string(64, 'd'), id.job_id = "dl-peers", id.store_addr = "127.0.0.1:1";
    id.master_addr = "10.0.0.1", id.master_port = 29400;
  }
  const PeerIdentity* identity() const override { return &id; }
  void publish_failure(int code, const std::string&) override { published.push_back(code); }
  void watch(Failed f) override { failed = std::move(f); }
  bool can_restart() const override { return false; }
  void restart(int, int, double, RestartDone done) override { done(0, "no"); }
  void abandon(int, const std::string&) override {}
  void next_attempt(int) override {}
};
}  // namespace

TEST_CASE("job transitions: per-node peers: only this node's agent starts, a failure here is told once, "
          "one there ends ours without telling back",
          "[launcher][job][transitions][per-node]") {
  SECTION("a rank of ours fails") {
    RecordingPeers peers;
    Harness h(test_options(), &peers);
    REQUIRE(h.starter->specs.size() == 1);
    CHECK(h.starter->specs[0].node == 1);
    CHECK(h.starter->specs[0].token == peers.id.token);
    CHECK_THAT(h.links->hello(0), Catch::Contains("not expected"));
    REQUIRE(h.links->hello(1) == "");
    h.settle();
    REQUIRE(h.job->phase() == Phase::kLaunched);
    CHECK(shared_var(h.links->sent(1), 0, "MASTER_ADDR") == "10.0.0.1");
    CHECK(shared_var(h.links->sent(1), 0, "MASTER_PORT") == "29400");
    h.links->exited(1, 3, 5);
    h.settle();
    h.links->exited(1, 2, std::nullopt, SIGTERM);
    h.settle();
    CHECK(peers.published == std::vector<int>{5});
    CHECK(h.finish() == 5);
  }
  SECTION("another node fails") {
    RecordingPeers peers;
    Harness h(test_options(), &peers);
    REQUIRE(h.links->hello(1) == "");
    h.settle();
    REQUIRE(peers.failed);
    peers.failed(7, "rank 0 (on fake-0) exited with code 7");
    h.settle();
    CHECK(h.job->phase() == Phase::kTearingDown);
    CHECK(h.links->sent(1).count<msg::Kill>() == 1);
    for (int r : {2, 3}) h.links->exited(1, r, std::nullopt, SIGTERM);
    h.settle();
    CHECK(peers.published.empty());  // the failure was theirs: not told back
    CHECK(h.finish() == 7);
  }
}

// The launch tree (launcher/launch_tree.h) as the Job drives it: 7 hosts with
// fanout 2 are roots 0 (over 1, 2, 3: 1 starts 2) and 4 (over 5, 6).
TEST_CASE("job transitions: a launch tree starts its roots, sends each its subtree, and a failed interior start names "
          "what it was to start",
          "[launcher][job][transitions]") {
  RunOptions o = test_options();
  o.launcher = dl::remote::StartMethod::kSim;
  o.fanout = 2;
  Harness h(o, nullptr, {}, hosts(7));
  REQUIRE(h.links->routes == std::vector<int>{-1, 0, 0, 0, -1, 4, 4});
  std::vector<int> started;
  for (const auto& sp : h.starter->specs) started.push_back(sp.node);
  CHECK(started == std::vector<int>{0, 4});  // the launcher starts only the roots
  REQUIRE(h.links->hello(0) == "");
  h.settle();
  const auto sub = h.links->sent(0).all<msg::StartAgents>();
  REQUIRE(sub.size() == 1);
  CHECK(sub[0].method == "sim");
  std::vector<std::pair<int, int>> list;  // (node, below)
  for (const auto& a : sub[0].agents) list.emplace_back(a.node, a.below);
  CHECK(list == std::vector<std::pair<int, int>>{{1, 1}, {2, 0}, {3, 0}});
  CHECK(sub[0].agents[0].host == "fake-1");
  // Relayed hellos (the links present each as the node's own) get no
  // start_agents: each one's parent sends it its subtree.
  for (int n : {4, 5, 6, 3}) REQUIRE(h.links->hello(n) == "");
  h.settle();
  CHECK(h.links->sent(5).count<msg::StartAgents>() == 0);
  CHECK(h.links->sent(4).count<msg::StartAgents>() == 1);
  // A node's failure reported by an agent that did not start it is refused.
  CHECK_THROWS_AS(h.links->say(4, msg::AgentFailed{1, "not mine"}), dl::RemoteError);
  // Root 0 could not start node 1: node 1 is named, and node 2 beneath it,
  // never started; with every host settled the job ends before any launch.
  h.links->say(0, msg::AgentFailed{1, "fake-1: cannot start (test) (started by the agent on fake-0)"});
  h.settle();
  CHECK(h.job->phase() != Phase::kLaunched);
  CHECK(h.finish() != 0);
  CHECK(h.err.find("dlaunch: error: fake-1: cannot start (test) (started by the agent on fake-0); the 1 host it was "
                   "to start (fake-2) were not started") != std::string::npos);
}

namespace {
// two_hosts() and a spare, fake-2 (node index 2), which holds no ranks.
hf::Placement two_hosts_and_a_spare() {
  hf::Placement p = two_hosts();
  hf::HostEntry spare;
  spare.host = "fake-2", spare.slots = 2;
  p.spares = {spare};
  return p;
}

RunOptions restart_options(int restarts) {
  auto o = test_options();
  o.max_restarts = restarts;
  o.torch_store = TorchStoreMode::kRank0;
  return o;
}

int count_in(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

void all_started(RecordingLinks& links, int node, std::vector<int> ranks) {
  for (int r : ranks) links.say(node, msg::Started{r, 6000 + r});
}
}  // namespace

TEST_CASE("job transitions: --spares: the spare's agent starts with the job, holds no ranks, and the launch waits for it",
          "[launcher][job][transitions][spares]") {
  Harness h(restart_options(1), nullptr, {}, two_hosts_and_a_spare());
  REQUIRE(h.starter->specs.size() == 3);
  REQUIRE(h.links->hello(0) == "");
  REQUIRE(h.links->hello(1) == "");
  h.settle();
  CHECK(h.job->phase() == Phase::kStarting);  // the spare has not said hello
  REQUIRE(h.links->hello(2) == "");
  h.settle();
  REQUIRE(h.job->phase() == Phase::kLaunched);
  const auto spare = h.links->sent(2).all<msg::Launch>();
  REQUIRE(spare.size() == 1);
  CHECK(spare[0].ranks.empty());  // heartbeats only
  CHECK(ranks_of(h.links->sent(1).all<msg::Launch>().at(0)) == std::vector<int>{2, 3});
  for (int r = 0; r < 4; ++r) h.links->exited(r / 2, r, 0);
  h.settle();
  CHECK(h.finish() == 0);
}

TEST_CASE("job transitions: --spares: a lost host's node rank, ranks and local ranks move to the spare - the others "
          "keep their agents",
          "[launcher][job][transitions][spares]") {
  Harness h(restart_options(1), nullptr, {}, two_hosts_and_a_spare());
  REQUIRE(h.links->hello(0, 29500) == "");
  REQUIRE(h.links->hello(1, 29600) == "");
  REQUIRE(h.links->hello(2, 29700) == "");
  h.settle();
  REQUIRE(h.job->phase() == Phase::kLaunched);
  h.links->close(1, "no heartbeat for 5 s");
  h.settle();
  for (int r : {0, 1}) h.links->exited(0, r, std::nullopt, SIGTERM);
  h.settle();
  REQUIRE(h.job->phase() == Phase::kRestarting);
  CHECK(h.starter->specs.size() == 3);  // no agent started anew: the spare is there
  CHECK(h.links->sent(0).count<msg::Restart>() == 1);
  CHECK(h.links->sent(2).count<msg::Restart>() == 1);
  h.links->say(2, msg::Ready{1, 32000});
  h.settle();
  CHECK(h.job->phase() == Phase::kRestarting);  // node 0 has not answered
  h.links->say(0, msg::Ready{1, 31000});
  h.settle();
  REQUIRE(h.job->phase() == Phase::kLaunched);
  const auto moved = h.links->sent(2).all<msg::Launch>();
  REQUIRE(moved.size() == 2);
  CHECK(ranks_of(moved[1]) == std::vector<int>{2, 3});
  REQUIRE(moved[1].identity);
  CHECK(moved[1].identity->node == 1);  // NODE_RANK 1, as on the lost host
  CHECK(shared_var(h.links->sent(0), 1, "MASTER_PORT") == "31000");  // node rank 0's host still offers it
  CHECK(ranks_of(h.links->sent(0).all<msg::Launch>().at(1)) == std::vector<int>{0, 1});
  all_started(*h.links, 0, {0, 1});
  all_started(*h.links, 2, {2, 3});
  h.settle();
  h.links->exited(0, 0, 0), h.links->exited(0, 1, 0), h.links->exited(2, 2, 0), h.links->exited(2, 3, 0);
  h.settle();
  CHECK(h.finish() == 0);
  INFO(h.err);
  CHECK_THAT(h.err, Catch::Contains("attempt 2 of 2: fake-1 lost (no heartbeat for 5 s); its ranks 2-3 moved "
                                    "to spare fake-2; no spare left; 4 ranks running again"));
  CHECK(count_in(h.err, "running again") == 1);
  CHECK_THAT(h.err, Catch::Contains("attempt 2 of 2 succeeded"));
  CHECK_THAT(h.err, Catch::Contains("the job's hosts changed 1 time: before attempt 2 of 2: fake-1 lost"));
}


namespace {
// Over two_hosts_and_a_spare(): rank 2 on fake-1 exits 3, the others are
// stopped, and every agent still connected is ready for attempt `attempt`.
void fake1_fails(Harness& h, int attempt) {
  h.links->exited(1, 2, 3);
  h.settle();
  h.links->exited(1, 3, std::nullopt, SIGTERM);
  h.links->exited(0, 0, std::nullopt, SIGTERM), h.links->exited(0, 1, std::nullopt, SIGTERM);
  h.settle();
  REQUIRE(h.job->phase() == Phase::kRestarting);
  for (int n = 0; n < 3; ++n)
    if (h.links->connected(n) && h.links->sent(n).count<msg::Restart>() == attempt) h.links->say(n, msg::Ready{attempt, 31000});
  h.settle();
  REQUIRE(h.job->phase() == Phase::kLaunched);
}
}  // namespace

TEST_CASE("job transitions: --spares: a host whose ranks fail in two attempts in a row is swapped out for the spare",
          "[launcher][job][transitions][spares]") {
  Harness h(restart_options(2), nullptr, {}, two_hosts_and_a_spare());
  for (int n = 0; n < 3; ++n) REQUIRE(h.links->hello(n, 29500 + n) == "");
  h.settle();
  fake1_fails(h, 1);
  // The first failure: the same hosts again.
  CHECK(h.links->sent(1).count<msg::Launch>() == 2);
  CHECK(h.links->sent(2).count<msg::Launch>() == 1);
  CHECK(h.links->sent(1).count<msg::Bye>() == 0);
  fake1_fails(h, 2);
  // The second in a row on fake-1: its seat goes to the spare, its agent is sent away.
  CHECK(h.links->sent(1).count<msg::Launch>() == 2);
  CHECK(h.links->sent(1).count<msg::Bye>() == 1);
  const auto spare = h.links->sent(2).all<msg::Launch>();
  REQUIRE(spare.size() == 2);
  CHECK(ranks_of(spare[1]) == std::vector<int>{2, 3});
  h.links->close(1, "closed by the agent");  // the agent that was sent away: nothing to say of it
  h.settle();
  CHECK(h.job->phase() == Phase::kLaunched);
  all_started(*h.links, 0, {0, 1}), all_started(*h.links, 2, {2, 3});
  h.settle();
  h.links->exited(0, 0, 0), h.links->exited(0, 1, 0), h.links->exited(2, 2, 0), h.links->exited(2, 3, 0);
  h.settle();
  CHECK(h.finish() == 0);
  INFO(h.err);
  CHECK_THAT(h.err, Catch::Contains("attempt 3 of 3: fake-1 lost (its ranks failed in two attempts in a row; swapped "
                                    "out); its ranks 2-3 moved to spare fake-2"));
}

TEST_CASE("job transitions: --spares: a spare lost while the job runs, and one that cannot start, are said and do not "
          "end the job",
          "[launcher][job][transitions][spares]") {
  SECTION("lost while the ranks run") {
    Harness h(restart_options(1), nullptr, {}, two_hosts_and_a_spare());
    for (int n = 0; n < 3; ++n) REQUIRE(h.links->hello(n) == "");
    h.settle();
    h.links->close(2, "connection reset");
    h.settle();
    CHECK(h.job->phase() == Phase::kLaunched);
    CHECK(h.links->sent(0).count<msg::Kill>() == 0);
    for (int r = 0; r < 4; ++r) h.links->exited(r / 2, r, 0);
    h.settle();
    CHECK(h.finish() == 0);
    CHECK_THAT(h.err, Catch::Contains("spare fake-2 lost (connection reset); no spare left"));
  }
  SECTION("its agent cannot be started") {
    Harness h(restart_options(1), nullptr, {2}, two_hosts_and_a_spare());
    REQUIRE(h.links->hello(0) == "");
    REQUIRE(h.links->hello(1) == "");
    h.settle();
    REQUIRE(h.job->phase() == Phase::kLaunched);  // without the spare
    for (int r = 0; r < 4; ++r) h.links->exited(r / 2, r, 0);
    h.settle();
    CHECK(h.finish() == 0);
    CHECK_THAT(h.err, Catch::Contains("spare fake-2 lost (its agent could not be started: fake-2: cannot start"));
  }
  SECTION("with no spare left, a lost host gets a new agent, as without --spares") {
    Harness h(restart_options(1), nullptr, {}, two_hosts_and_a_spare());
    for (int n = 0; n < 3; ++n) REQUIRE(h.links->hello(n) == "");
    h.settle();
    h.links->close(2, "connection reset");  // the spare
    h.links->close(1, "connection reset");
    h.settle();
    for (int r : {0, 1}) h.links->exited(0, r, std::nullopt, SIGTERM);
    h.settle();
    REQUIRE(h.job->phase() == Phase::kRestarting);
    REQUIRE(h.starter->specs.size() == 4);
    CHECK(h.starter->specs.back().node == 1);
  }
}

namespace {
// --return-cooldown `cooldown_s` over two_hosts_and_a_spare(), with `restarts` restarts.
RunOptions returning_options(int restarts, double cooldown_s) {
  auto o = restart_options(restarts);
  o.return_cooldown_s = cooldown_s;
  return o;
}

// Every host said hello (and, with --health-check, passed); fake-1 is lost
// while the ranks run and the restart gives its seat to the spare fake-2.
void fake1_seat_to_spare(Harness& h, bool answer_checks = false) {
  for (int n = 0; n < 3; ++n) REQUIRE(h.links->hello(n, 29500 + n) == "");
  if (answer_checks)
    for (int n = 0; n < 3; ++n) h.links->say(n, health(true, ""));
  h.settle();
  REQUIRE(h.job->phase() == Phase::kLaunched);
  h.links->close(1, "no heartbeat for 5 s");
  h.settle();
  for (int r : {0, 1}) h.links->exited(0, r, std::nullopt, SIGTERM);
  h.settle();
  REQUIRE(h.job->phase() == Phase::kRestarting);
  h.links->say(0, msg::Ready{1, 31000}), h.links->say(2, msg::Ready{1, 32000});
  h.settle();
  REQUIRE(h.job->phase() == Phase::kLaunched);
  all_started(*h.links, 0, {0, 1}), all_started(*h.links, 2, {2, 3});
  h.settle();
}

// Runs the Job's loop until `done` or `limit` passed.
template <class Done> bool run_until(Harness& h, Done done, milliseconds limit = milliseconds(3000)) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (!done() && std::chrono::steady_clock::now() < until) h.job->io().run_one_for(milliseconds(20));
  return done();
}
}  // namespace

TEST_CASE("job transitions: --return-cooldown: a lost host gets a new agent after its cooldown, passes the health "
          "gate and is a spare - the next loss takes it, the running attempt untouched",
          "[launcher][job][transitions][spares][return]") {
  Harness h(returning_options(2, 0.2), nullptr, {}, two_hosts_and_a_spare());
  fake1_seat_to_spare(h);
  const int kills = h.links->sent(0).count<msg::Kill>(), spare_kills = h.links->sent(2).count<msg::Kill>();  // the first attempt's teardown
  CHECK(h.starter->specs.size() == 3);  // not before its cooldown
  REQUIRE(run_until(h, [&] { return h.starter->specs.size() == 4; }));
  CHECK(h.starter->specs.back().node == 1);
  CHECK(h.starter->specs.back().host == "fake-1");
  REQUIRE(h.links->hello(1, 29601) == "");  // its programs are found: it passes
  h.settle();
  CHECK(h.links->sent(1).count<msg::HealthCheck>() == 2);  // the gate again
  const auto standby = h.links->sent(1).all<msg::Launch>();
  REQUIRE(standby.size() == 2);
  CHECK(standby[1].ranks.empty());  // a spare: heartbeats only
  CHECK(h.links->heartbeats_);
  CHECK(h.links->sent(0).count<msg::Kill>() == kills);  // the running attempt is not touched
  CHECK(h.links->sent(2).count<msg::Kill>() == spare_kills);
  CHECK(h.job->phase() == Phase::kLaunched);
  // fake-0 is lost next: its seat, node rank 0, goes to fake-1.
  h.links->close(0, "connection reset");
  h.settle();
  for (int r : {2, 3}) h.links->exited(2, r, std::nullopt, SIGTERM);
  h.settle();
  REQUIRE(h.job->phase() == Phase::kRestarting);
  CHECK(h.links->sent(1).count<msg::Restart>() == 1);
  h.links->say(1, msg::Ready{2, 31001}), h.links->say(2, msg::Ready{2, 32000});
  h.settle();
  REQUIRE(h.job->phase() == Phase::kLaunched);
  const auto seated = h.links->sent(1).all<msg::Launch>();
  REQUIRE(seated.size() == 3);
  CHECK(ranks_of(seated[2]) == std::vector<int>{0, 1});
  REQUIRE(seated[2].identity);
  CHECK(seated[2].identity->node == 0);
  CHECK(shared_var(h.links->sent(1), 1, "MASTER_PORT") == "31001");  // node rank 0's host now
  all_started(*h.links, 1, {0, 1}), all_started(*h.links, 2, {2, 3});
  h.settle();
  h.links->exited(1, 0, 0), h.links->exited(1, 1, 0), h.links->exited(2, 2, 0), h.links->exited(2, 3, 0);
  h.settle();
  CHECK(h.finish() == 0);
  INFO(h.err);
  CHECK_THAT(h.err, Catch::Contains("dlaunch: fake-1 is back (passed the health gate after a 0.2 s cooldown); it is "
                                    "a spare now (1 spare)\n"));
  CHECK_THAT(h.err, Catch::Contains("attempt 3 of 3: fake-0 lost (connection reset); its ranks 0-1 moved to spare "
                                    "fake-1; no spare left; 4 ranks running again"));
  CHECK_THAT(h.err, Catch::Contains("attempt 3 of 3 succeeded"));
}

TEST_CASE("job transitions: --return-cooldown: a host that fails the health gate on its return is sent away in the "
          "check's own words, and each failed try doubles its cooldown",
          "[launcher][job][transitions][health][spares][return]") {
  auto o = returning_options(1, 0.1);
  o.health_check = "node-check";
  Harness h(o, nullptr, {}, two_hosts_and_a_spare());
  fake1_seat_to_spare(h, true);
  const int kills = h.links->sent(0).count<msg::Kill>();
  REQUIRE(run_until(h, [&] { return h.starter->specs.size() == 4; }));
  REQUIRE(h.links->hello(1, 29601) == "");
  h.settle();
  const auto asked = h.links->sent(1).all<msg::HealthCheck>();
  REQUIRE(asked.size() == 2);
  CHECK(asked[1].command == "node-check");
  h.links->say(1, health(false, "GPU 3: 2 uncorrectable ECC errors (exited with code 1)"));
  h.settle();
  CHECK(h.links->sent(1).count<msg::Bye>() == 1);
  CHECK(h.links->sent(1).count<msg::Launch>() == 1);  // not a spare: nothing but its first life's launch
  h.links->close(1, "closed by the agent");  // sent away: its end says nothing more
  h.settle();
  CHECK(h.job->phase() == Phase::kLaunched);
  CHECK(h.links->sent(0).count<msg::Kill>() == kills);
  // The second try, after twice the cooldown, cannot start its agent: the third waits 4 x.
  h.starter->fail.insert(1);
  REQUIRE(run_until(h, [&] { return h.starter->specs.size() == 5; }));
  h.run_while(Phase::kLaunched, milliseconds(100));
  CHECK(h.starter->specs.size() == 5);
  for (int r = 0; r < 4; ++r) h.links->exited(r < 2 ? 0 : 2, r, 0);
  h.settle();
  CHECK(h.finish() == 0);
  INFO(h.err);
  CHECK_THAT(h.err, Catch::Contains("dlaunch: fake-1 did not come back (failed the health check: GPU 3: 2 "
                                    "uncorrectable ECC errors (exited with code 1)); it is tried again in 0.2 s\n"));
  CHECK_THAT(h.err, Catch::Contains("dlaunch: fake-1 did not come back (fake-1: cannot start (test)); it is tried "
                                    "again in 0.4 s\n"));
  CHECK_THAT(h.err, !Catch::Contains("is back"));
}

TEST_CASE("job transitions: --return-cooldown: a host swapped out for failing twice comes back only after its old "
          "agent left and its cooldown passed - without the option, never",
          "[launcher][job][transitions][spares][return]") {
  SECTION("swapped out") {
    Harness h(returning_options(2, 0.1), nullptr, {}, two_hosts_and_a_spare());
    for (int n = 0; n < 3; ++n) REQUIRE(h.links->hello(n, 29500 + n) == "");
    h.settle();
    for (int attempt = 1; attempt <= 2; ++attempt) fake1_fails(h, attempt);
    REQUIRE(h.links->sent(1).count<msg::Bye>() == 1);  // swapped out
    h.run_while(Phase::kLaunched, milliseconds(300));
    CHECK(h.starter->specs.size() == 3);  // its agent has not left yet
    h.links->close(1, "closed by the agent");
    REQUIRE(run_until(h, [&] { return h.starter->specs.size() == 4; }));
    CHECK(h.starter->specs.back().node == 1);
  }
  SECTION("--return-cooldown 0, the default") {
    Harness h(returning_options(1, 0), nullptr, {}, two_hosts_and_a_spare());
    fake1_seat_to_spare(h);
    h.run_while(Phase::kLaunched, milliseconds(300));
    CHECK(h.starter->specs.size() == 3);
  }
}

TEST_CASE("job transitions: --min-hosts: a lost host without a spare leaves, the world shrinks and is numbered again - "
          "below the minimum the job ends naming every lost host",
          "[launcher][job][transitions][spares]") {
  auto o = restart_options(3);
  o.min_hosts = 2;
  Harness h(o, nullptr, {}, hosts(3));  // fake-0..2, one rank each
  for (int n = 0; n < 3; ++n) REQUIRE(h.links->hello(n, 29500 + n) == "");
  h.settle();
  REQUIRE(h.job->phase() == Phase::kLaunched);
  CHECK(shared_var(h.links->sent(0), 0, "WORLD_SIZE") == "3");
  h.links->close(1, "connection reset");
  h.settle();
  h.links->exited(0, 0, std::nullopt, SIGTERM), h.links->exited(2, 2, std::nullopt, SIGTERM);
  h.settle();
  REQUIRE(h.job->phase() == Phase::kRestarting);
  CHECK(h.starter->specs.size() == 3);  // no new agent for fake-1: it left the job
  h.links->say(0, msg::Ready{1, 31000}), h.links->say(2, msg::Ready{1, 31002});
  h.settle();
  REQUIRE(h.job->phase() == Phase::kLaunched);
  const auto third = h.links->sent(2).all<msg::Launch>();
  REQUIRE(third.size() == 2);
  CHECK(ranks_of(third[1]) == std::vector<int>{1});  // rank 2 is rank 1 now ...
  REQUIRE(third[1].identity);
  CHECK(third[1].identity->node == 1);  // ... on node rank 1
  CHECK(shared_var(h.links->sent(0), 1, "WORLD_SIZE") == "2");
  CHECK(ranks_of(h.links->sent(0).all<msg::Launch>().at(1)) == std::vector<int>{0});
  all_started(*h.links, 0, {0}), all_started(*h.links, 2, {1});
  h.settle();
  // fake-2 goes too: one host would remain, below --min-hosts 2.
  h.links->close(2, "no heartbeat for 5 s");
  h.settle();
  h.links->exited(0, 0, std::nullopt, SIGTERM);
  h.settle();
  CHECK(h.job->phase() == Phase::kClosing);
  CHECK(h.finish() == 1);
  INFO(h.err);
  CHECK_THAT(h.err, Catch::Contains("attempt 2 of 4: fake-1 lost (connection reset); no spare for its rank 1: the job "
                                    "goes on with 2 hosts and 2 ranks (--min-hosts 2); 2 ranks running again"));
  CHECK_THAT(h.err, Catch::Contains("cannot restart: 1 of 2 hosts would remain, below --min-hosts 2; hosts lost: "
                                    "fake-1 (connection reset), fake-2 (no heartbeat for 5 s)"));
}

TEST_CASE("job transitions: --min-hosts with --return-cooldown: a host that left a shrunk world comes back as a "
          "spare and joins at the next attempt in a seat of its own, the world growing back to its first size",
          "[launcher][job][transitions][spares][return]") {
  auto o = returning_options(3, 0.1);
  o.min_hosts = 2;
  Harness h(o, nullptr, {}, hosts(3));  // fake-0..2, one rank each
  for (int n = 0; n < 3; ++n) REQUIRE(h.links->hello(n, 29500 + n) == "");
  h.settle();
  REQUIRE(h.job->phase() == Phase::kLaunched);
  h.links->close(1, "connection reset");
  h.settle();
  h.links->exited(0, 0, std::nullopt, SIGTERM), h.links->exited(2, 2, std::nullopt, SIGTERM);
  h.settle();
  REQUIRE(h.job->phase() == Phase::kRestarting);
  h.links->say(0, msg::Ready{1, 31000}), h.links->say(2, msg::Ready{1, 31002});
  h.settle();
  REQUIRE(h.job->phase() == Phase::kLaunched);
  CHECK(shared_var(h.links->sent(0), 1, "WORLD_SIZE") == "2");
  all_started(*h.links, 0, {0}), all_started(*h.links, 2, {1});
  h.settle();
  // Its cooldown over, fake-1 gets a new agent, passes the gate: a spare.
  REQUIRE(run_until(h, [&] { return h.starter->specs.size() == 4; }));
  REQUIRE(h.links->hello(1, 29601) == "");
  h.settle();
  REQUIRE(h.links->sent(1).all<msg::Launch>().size() == 2);
  CHECK(h.links->sent(1).all<msg::Launch>()[1].ranks.empty());
  CHECK(h.links->sent(1).count<msg::Restart>() == 0);  // the running attempt goes on: nothing waits for it
  // The next attempt (rank 0 fails) takes it in: node rank 2, rank 2, a world of 3.
  h.links->exited(0, 0, 1);
  h.settle();
  h.links->exited(2, 1, std::nullopt, SIGTERM);
  h.settle();
  REQUIRE(h.job->phase() == Phase::kRestarting);
  for (int n = 0; n < 3; ++n) h.links->say(n, msg::Ready{2, 31000 + n});
  h.settle();
  REQUIRE(h.job->phase() == Phase::kLaunched);
  const auto joined = h.links->sent(1).all<msg::Launch>();
  REQUIRE(joined.size() == 3);
  CHECK(ranks_of(joined[2]) == std::vector<int>{2});
  REQUIRE(joined[2].identity);
  CHECK(joined[2].identity->node == 2);
  CHECK(ranks_of(h.links->sent(0).all<msg::Launch>().at(2)) == std::vector<int>{0});
  CHECK(ranks_of(h.links->sent(2).all<msg::Launch>().at(2)) == std::vector<int>{1});  // its node rank kept
  CHECK(h.links->sent(2).all<msg::Launch>().at(2).identity->node == 1);
  CHECK(shared_var(h.links->sent(0), 2, "WORLD_SIZE") == "3");
  all_started(*h.links, 0, {0}), all_started(*h.links, 2, {1}), all_started(*h.links, 1, {2});
  h.settle();
  for (int r = 0; r < 3; ++r) h.links->exited(r == 0 ? 0 : r == 1 ? 2 : 1, r, 0);
  h.settle();
  CHECK(h.finish() == 0);
  INFO(h.err);
  CHECK_THAT(h.err, Catch::Contains("dlaunch: fake-1 is back (passed the health gate after a 0.1 s cooldown); it is a "
                                    "spare now (1 spare)\n"));
  CHECK_THAT(h.err, Catch::Contains("attempt 3 of 4: spare fake-1 joins with rank 2: the job grows to 3 hosts and 3 "
                                    "ranks; 3 ranks running again"));
  CHECK_THAT(h.err, Catch::Contains("attempt 3 of 4 succeeded"));
}

TEST_CASE("job transitions: --min-hosts: a free spare does not grow a world that never shrank",
          "[launcher][job][transitions][spares]") {
  auto o = restart_options(1);
  o.min_hosts = 1;
  Harness h(o, nullptr, {}, two_hosts_and_a_spare());
  for (int n = 0; n < 3; ++n) REQUIRE(h.links->hello(n, 29500 + n) == "");
  h.settle();
  REQUIRE(h.job->phase() == Phase::kLaunched);
  h.links->exited(0, 0, 1);
  h.settle();
  h.links->exited(0, 1, std::nullopt, SIGTERM), h.links->exited(1, 2, std::nullopt, SIGTERM),
      h.links->exited(1, 3, std::nullopt, SIGTERM);
  h.settle();
  REQUIRE(h.job->phase() == Phase::kRestarting);
  for (int n = 0; n < 3; ++n) h.links->say(n, msg::Ready{1, 31000 + n});
  h.settle();
  REQUIRE(h.job->phase() == Phase::kLaunched);
  CHECK(h.links->sent(2).all<msg::Launch>().back().ranks.empty());  // still a spare
  CHECK(shared_var(h.links->sent(0), 1, "WORLD_SIZE") == "4");
  all_started(*h.links, 0, {0, 1}), all_started(*h.links, 1, {2, 3});
  h.settle();
  for (int r = 0; r < 4; ++r) h.links->exited(r / 2, r, 0);
  h.settle();
  CHECK(h.finish() == 0);
  INFO(h.err);
  CHECK(h.err.find("grows") == std::string::npos);
}

TEST_CASE("job transitions: --health-check: the launch waits for every host's answer - a host that fails with no spare "
          "ends the job before any rank starts, in the check's own words",
          "[launcher][job][transitions][health]") {
  auto o = test_options();
  o.health_check = "/usr/local/sbin/node-check";
  Harness h(o);
  REQUIRE(h.links->hello(0) == "");
  REQUIRE(h.links->hello(1) == "");
  h.settle();
  CHECK(h.job->phase() == Phase::kStarting);
  const auto asked = h.links->sent(1).all<msg::HealthCheck>();
  REQUIRE(asked.size() == 1);
  CHECK(asked[0].command == "/usr/local/sbin/node-check");
  CHECK(asked[0].host == "fake-1");
  CHECK(asked[0].timeout_ms == 60000);
  h.links->say(0, health(true, ""));
  h.settle();
  CHECK(h.job->phase() == Phase::kStarting);  // fake-1 has not answered
  h.links->say(1, health(false, "GPU 3: 2 uncorrectable ECC errors (exited with code 1)"));
  h.settle();
  CHECK(h.links->sent(0).count<msg::Launch>() == 0);
  CHECK(h.finish() == 1);
  INFO(h.err);
  CHECK_THAT(h.err, Catch::Contains("fake-1 failed the health check: GPU 3: 2 uncorrectable ECC errors"));
}

TEST_CASE("job transitions: the health gate with a spare: a host that fails gives its seat to the spare before the "
          "launch, and is sent away",
          "[launcher][job][transitions][health][spares]") {
  auto o = restart_options(1);
  o.health_check = "check";
  Harness h(o, nullptr, {}, two_hosts_and_a_spare());
  for (int n = 0; n < 3; ++n) REQUIRE(h.links->hello(n) == "");
  h.settle();
  h.links->say(1, health(false, "no /scratch mounted (exited with code 1)"));
  h.links->say(0, health(true, ""));
  h.settle();
  CHECK(h.job->phase() == Phase::kStarting);  // the spare's own answer is not in
  CHECK(h.links->sent(1).count<msg::Bye>() == 1);
  h.links->say(2, health(true, ""));
  h.settle();
  REQUIRE(h.job->phase() == Phase::kLaunched);
  CHECK(h.links->sent(1).count<msg::Launch>() == 0);
  const auto spare = h.links->sent(2).all<msg::Launch>();
  REQUIRE(spare.size() == 1);
  CHECK(ranks_of(spare[0]) == std::vector<int>{2, 3});
  REQUIRE(spare[0].identity);
  CHECK(spare[0].identity->node == 1);
  h.links->close(1, "closed by the agent");  // the host sent away: nothing more to say of it
  h.settle();
  CHECK(h.job->phase() == Phase::kLaunched);
  for (int r : {0, 1}) h.links->exited(0, r, 0);
  for (int r : {2, 3}) h.links->exited(2, r, 0);
  h.settle();
  CHECK(h.finish() == 0);
  INFO(h.err);
  CHECK_THAT(h.err, Catch::Contains("fake-1 lost (failed the health check: no /scratch mounted (exited with code 1)); "
                                    "its ranks 2-3 moved to spare fake-2; no spare left"));
}

TEST_CASE("job transitions: the health gate judges each host's clock against --clock-threshold: 30 s off gives the "
          "seat to the spare, 0.5 s off passes, and --clock-threshold 0 judges none",
          "[launcher][job][transitions][health][spares][clock]") {
  auto o = restart_options(1);
  SECTION("30 s behind fails, 0.5 s ahead passes") {
    Harness h(o, nullptr, {}, two_hosts_and_a_spare());
    h.links->answers_health = false;
    for (int n = 0; n < 3; ++n) REQUIRE(h.links->hello(n) == "");
    h.settle();
    REQUIRE(h.links->sent(1).count<msg::HealthCheck>() == 1);  // spares: the gate asks every host
    h.links->say(0, health(true, "", 0.5));
    h.links->say(1, health(true, "", -30));
    h.links->say(2, health(true, ""));
    h.settle();
    REQUIRE(h.job->phase() == Phase::kLaunched);
    CHECK(h.links->sent(1).count<msg::Launch>() == 0);
    CHECK(h.links->sent(1).count<msg::Bye>() == 1);
    const auto spare = h.links->sent(2).all<msg::Launch>();
    REQUIRE(spare.size() == 1);
    CHECK(ranks_of(spare[0]) == std::vector<int>{2, 3});
    CHECK(h.links->sent(0).count<msg::Launch>() == 1);
    for (int r : {0, 1}) h.links->exited(0, r, 0);
    for (int r : {2, 3}) h.links->exited(2, r, 0);
    h.settle();
    CHECK(h.finish() == 0);
    INFO(h.err);
    CHECK_THAT(h.err, Catch::Contains("fake-1 lost (failed the health check: its clock is -30.0s off the launcher's "
                                      "(more than --clock-threshold 1 s); synchronise the clocks (chrony or ntpd"));
    CHECK_THAT(h.err, Catch::Contains("its ranks 2-3 moved to spare fake-2"));
    CHECK(h.err.find("fake-0 lost") == std::string::npos);
  }
  SECTION("--clock-threshold 0: no host fails for its clock") {
    o.clock_threshold_s = 0;
    Harness h(o, nullptr, {}, two_hosts_and_a_spare());
    h.links->answers_health = false;
    for (int n = 0; n < 3; ++n) REQUIRE(h.links->hello(n) == "");
    h.settle();
    for (int n = 0; n < 3; ++n) h.links->say(n, health(true, "", n == 1 ? -30 : 0));
    h.settle();
    REQUIRE(h.job->phase() == Phase::kLaunched);
    CHECK(h.links->sent(1).count<msg::Launch>() == 1);
    CHECK(h.links->sent(2).all<msg::Launch>().at(0).ranks.empty());
    for (int r : {0, 1}) h.links->exited(0, r, 0);
    for (int r : {2, 3}) h.links->exited(1, r, 0);
    h.settle();
    CHECK(h.finish() == 0);
    INFO(h.err);
    CHECK(h.err.find("clock") == std::string::npos);
  }
}

TEST_CASE("job transitions: the agent's own checks (its temp dir) fail a host in its hello, as --health-check would",
          "[launcher][job][transitions][health]") {
  Harness h;
  REQUIRE(h.links->hello(0) == "");
  REQUIRE(h.links->hello(1, 29500, "the temporary directory /tmp (TMPDIR) has 3 MiB free") == "");
  h.settle();
  CHECK(h.links->sent(0).count<msg::Launch>() == 0);
  CHECK(h.finish() == 1);
  INFO(h.err);
  CHECK_THAT(h.err, Catch::Contains("fake-1 failed the health check: the temporary directory /tmp (TMPDIR) has 3 MiB"));
}

// A second host lost between two attempts (the launcher restarting: every
// rank of the failed attempt reported, the agents asked to get ready), with
namespace {
// Node `node`'s connection resets while the restart waits for the agents:
// the restart must go on (the job's lines say why where it does not).
void lost_while_restarting(Harness& h, int node) {
  h.links->close(node, "connection reset");
  h.settle();
  const bool restarting = h.job->phase() == Phase::kRestarting;
  if (!restarting) h.finish();
  INFO(h.err);
  REQUIRE(restarting);
}
}  // namespace

// --min-hosts still allowing the job: the chaos case "a second host lost
// during the swap". The next attempt runs on the one host left.
TEST_CASE("job transitions: --min-hosts: a second host lost while the restart waits for the agents - the job goes on "
          "with the host left",
          "[launcher][job][transitions][spares]") {
  auto o = restart_options(3);
  o.min_hosts = 1;
  Harness h(o, nullptr, {}, hosts(3));
  for (int n = 0; n < 3; ++n) REQUIRE(h.links->hello(n, 29500 + n) == "");
  h.settle();
  REQUIRE(h.job->phase() == Phase::kLaunched);
  h.links->close(1, "connection reset");
  h.settle();
  h.links->exited(0, 0, std::nullopt, SIGTERM), h.links->exited(2, 2, std::nullopt, SIGTERM);
  h.settle();
  REQUIRE(h.job->phase() == Phase::kRestarting);
  lost_while_restarting(h, 2);  // before its ready: lost during the swap
  h.links->say(0, msg::Ready{1, 31000});
  h.settle();
  REQUIRE(h.job->phase() == Phase::kLaunched);
  CHECK(shared_var(h.links->sent(0), 1, "WORLD_SIZE") == "1");
  CHECK(ranks_of(h.links->sent(0).all<msg::Launch>().at(1)) == std::vector<int>{0});
  all_started(*h.links, 0, {0});
  h.links->exited(0, 0, 0);
  h.settle();
  CHECK(h.finish() == 0);
}

namespace {
// two_hosts_and_a_spare() after fake-1 failed the health gate: the spare
// fake-2 runs its ranks 2-3, fake-1 is sent away, and the job ends 0.
void spare_ran_fake1s_ranks(Harness& h) {
  REQUIRE(h.job->phase() == Phase::kLaunched);
  CHECK(h.links->sent(1).count<msg::Launch>() == 0);
  CHECK(h.links->sent(1).count<msg::Bye>() == 1);
  const auto spare = h.links->sent(2).all<msg::Launch>();
  REQUIRE(spare.size() == 1);
  CHECK(ranks_of(spare[0]) == std::vector<int>{2, 3});
  h.links->close(1, "closed by the agent");
  for (int r : {0, 1}) h.links->exited(0, r, 0);
  for (int r : {2, 3}) h.links->exited(2, r, 0);
  h.settle();
  CHECK(h.finish() == 0);
}
}  // namespace

TEST_CASE("job transitions: the health gate with a spare asks each host for the ranks' programs - a host that lacks "
          "them gives its seat to the spare",
          "[launcher][job][transitions][health][spares]") {
  auto o = restart_options(1);
  Harness h(o, nullptr, {}, two_hosts_and_a_spare());
  h.links->answers_health = false;
  for (int n = 0; n < 3; ++n) REQUIRE(h.links->hello(n) == "");
  h.settle();
  CHECK(h.job->phase() == Phase::kStarting);
  for (int n = 0; n < 3; ++n) {
    const auto asked = h.links->sent(n).all<msg::HealthCheck>();
    REQUIRE(asked.size() == 1);
    CHECK(asked[0].command.empty());  // no --health-check: the programs only
    REQUIRE(asked[0].programs.size() == 1);
    CHECK(asked[0].programs[0].argv0 == "/bin/true");
    CHECK(asked[0].programs[0].path.empty());  // no -x PATH: the agent's own
    CHECK_FALSE(asked[0].programs[0].wdir.empty());
  }
  h.links->say(0, health(true, ""));
  h.links->say(1, health(false, "the ranks' program /bin/true: No such file or directory"));
  h.links->say(2, health(true, ""));
  h.settle();
  spare_ran_fake1s_ranks(h);
  INFO(h.err);
  CHECK_THAT(h.err, Catch::Contains("fake-1 lost (failed the health check: the ranks' program /bin/true: No such file or "
                                    "directory); its ranks 2-3 moved to spare fake-2"));
}

TEST_CASE("job transitions: the health gate with a spare: a host that sees fewer GPUs than its ranks need, where "
          "another host has them, gives its seat to the spare - without spares the GPUs are not judged",
          "[launcher][job][transitions][health][spares]") {
  SECTION("with a spare") {
    Harness h(restart_options(1), nullptr, {}, two_hosts_and_a_spare());
    REQUIRE(h.links->hello(0, 29500, "", {"0", "1"}) == "");
    REQUIRE(h.links->hello(1, 29501, "", {"0"}) == "");
    REQUIRE(h.links->hello(2, 29502, "", {"0", "1"}) == "");
    h.settle();
    spare_ran_fake1s_ranks(h);
    INFO(h.err);
    CHECK_THAT(h.err, Catch::Contains("fake-1 lost (failed the health check: it sees 1 GPU where its 2 ranks need 2 "
                                      "(fake-0 has 2); check the host's GPUs"));
  }
  SECTION("the spare short of GPUs too: the job cannot start, naming the host") {
    Harness h(restart_options(1), nullptr, {}, two_hosts_and_a_spare());
    REQUIRE(h.links->hello(0, 29500, "", {"0", "1"}) == "");
    REQUIRE(h.links->hello(1, 29501, "", {"0"}) == "");
    REQUIRE(h.links->hello(2, 29502, "", {}) == "");
    h.settle();
    CHECK(h.links->sent(0).count<msg::Launch>() == 0);
    CHECK(h.finish() == 1);
    INFO(h.err);
    CHECK_THAT(h.err, Catch::Contains("it sees 0 GPUs where its 2 ranks need 2 (fake-0 has 2)"));
    CHECK_THAT(h.err, Catch::Contains("no spare is left to take its ranks"));
  }
  SECTION("no spares: launched as the hosts are") {
    Harness h(test_options());
    REQUIRE(h.links->hello(0, 29500, "", {"0", "1"}) == "");
    REQUIRE(h.links->hello(1, 29501, "", {"0"}) == "");
    h.settle();
    CHECK(h.job->phase() == Phase::kLaunched);
    CHECK(h.links->sent(1).count<msg::Launch>() == 1);
    CHECK(h.links->sent(0).count<msg::HealthCheck>() == 0);
  }
}

namespace {
// `count` hosts of one slot each (fake-0...) and `spares` spares after them.
hf::Placement hosts_and_spares(int count, int spares) {
  hf::Placement p = hosts(count);
  for (int i = 0; i < spares; ++i) {
    hf::HostEntry e;
    e.host = "fake-" + std::to_string(count + i), e.slots = 1;
    p.spares.push_back(e);
  }
  return p;
}
}  // namespace

TEST_CASE("job transitions: --spares: two hosts lost in one teardown with one spare - the second's new agent is said "
          "in the change's line too",
          "[launcher][job][transitions][spares]") {
  Harness h(restart_options(2), nullptr, {}, hosts_and_spares(3, 1));
  for (int n = 0; n < 4; ++n) REQUIRE(h.links->hello(n, 29500 + n) == "");
  h.settle();
  REQUIRE(h.job->phase() == Phase::kLaunched);
  h.links->close(1, "connection reset");
  h.links->close(2, "no heartbeat for 5 s");
  h.settle();
  h.links->exited(0, 0, std::nullopt, SIGTERM);
  h.settle();
  REQUIRE(h.job->phase() == Phase::kRestarting);
  REQUIRE(h.starter->specs.size() == 5);  // fake-2 again; fake-1's seat went to the spare
  CHECK(h.starter->specs.back().node == 2);
  h.links->say(0, msg::Ready{1, 31000});
  h.links->say(3, msg::Ready{1, 31003});
  REQUIRE(h.links->hello(2, 31002) == "");
  h.settle();
  REQUIRE(h.job->phase() == Phase::kLaunched);
  CHECK(ranks_of(h.links->sent(3).all<msg::Launch>().at(1)) == std::vector<int>{1});
  all_started(*h.links, 0, {0}), all_started(*h.links, 3, {1}), all_started(*h.links, 2, {2});
  h.settle();
  for (auto [node, rank] : std::vector<std::pair<int, int>>{{0, 0}, {3, 1}, {2, 2}}) h.links->exited(node, rank, 0);
  h.settle();
  CHECK(h.finish() == 0);
  INFO(h.err);
  CHECK_THAT(h.err, Catch::Contains("dlaunch: attempt 2 of 3: fake-1 lost (connection reset); its rank 1 moved to spare "
                                    "fake-3; fake-2 lost (no heartbeat for 5 s); no spare left: a new agent is started "
                                    "there; 3 ranks running again"));
  CHECK_THAT(h.err, Catch::Contains("the job's hosts changed 1 time: before attempt 2 of 3: fake-1 lost (connection "
                                    "reset); its rank 1 moved to spare fake-3; fake-2 lost"));
}

// MASTER_PORT is node rank 0's: when its host is lost while the restart
// waits (after it offered its port), the port is the one the spare that
// holds node rank 0 now offered, not the lost host's.
TEST_CASE("job transitions: --spares: node rank 0's host lost after it said ready - MASTER_PORT comes from the spare "
          "that takes its seat",
          "[launcher][job][transitions][spares]") {
  hf::Placement p = two_hosts_and_a_spare();
  hf::HostEntry second;
  second.host = "fake-3", second.slots = 2;
  p.spares.push_back(second);
  Harness h(restart_options(1), nullptr, {}, p);
  for (int n = 0; n < 4; ++n) REQUIRE(h.links->hello(n, 29500 + n) == "");
  h.settle();
  REQUIRE(h.job->phase() == Phase::kLaunched);
  h.links->exited(1, 2, 3);  // a rank's own failure: the restart keeps every host
  h.settle();
  h.links->exited(1, 3, std::nullopt, SIGTERM);
  h.links->exited(0, 0, std::nullopt, SIGTERM), h.links->exited(0, 1, std::nullopt, SIGTERM);
  h.settle();
  REQUIRE(h.job->phase() == Phase::kRestarting);
  h.links->say(2, msg::Ready{1, 32002});
  h.links->say(3, msg::Ready{1, 32003});
  h.links->say(0, msg::Ready{1, 31000});
  h.settle();
  lost_while_restarting(h, 0);  // node rank 0's host, after its ready
  h.links->say(1, msg::Ready{1, 31001});
  h.settle();
  REQUIRE(h.job->phase() == Phase::kLaunched);
  const auto seat0 = h.links->sent(2).all<msg::Launch>();
  REQUIRE(seat0.size() == 2);
  CHECK(ranks_of(seat0[1]) == std::vector<int>{0, 1});
  CHECK(shared_var(h.links->sent(2), 1, "MASTER_PORT") == "32002");
  CHECK(shared_var(h.links->sent(1), 1, "MASTER_PORT") == "32002");
  all_started(*h.links, 2, {0, 1}), all_started(*h.links, 1, {2, 3});
  h.settle();
  for (int r = 0; r < 4; ++r) h.links->exited(r < 2 ? 2 : 1, r, 0);
  h.settle();
  CHECK(h.finish() == 0);
  CHECK_THAT(h.err, Catch::Contains("fake-0 lost (connection reset); its ranks 0-1 moved to spare fake-2; 1 spare left"));
}


namespace {
// The tree of 8 (fake-4 lost, its seat on the spare fake-7, fake-5 and
// fake-6 beneath it given new agents): the second attempt's launches, its
// ranks started (fake-6's counted by fake-5) and ended, and its line.
void tree_second_attempt_ends(Harness& h) {
  CHECK(ranks_of(h.links->sent(7).all<msg::Launch>().at(1)) == std::vector<int>{4});
  CHECK(ranks_of(h.links->sent(5).all<msg::Launch>().at(1)) == std::vector<int>{5});
  CHECK(ranks_of(h.links->sent(6).all<msg::Launch>().at(1)) == std::vector<int>{6});
  CHECK(h.links->sent(7).all<msg::Launch>().at(1).identity->node == 4);
  for (int n : {0, 1, 2, 3}) all_started(*h.links, n, {n});
  all_started(*h.links, 7, {4});
  h.links->say(5, msg::StartedBelow{1});  // fake-6's rank, counted by fake-5
  all_started(*h.links, 5, {5});
  h.settle();
  for (auto [node, rank] : std::vector<std::pair<int, int>>{{0, 0}, {1, 1}, {2, 2}, {3, 3}, {7, 4}, {5, 5}, {6, 6}})
    h.links->exited(node, rank, 0);
  h.settle();
  CHECK(h.finish() == 0);
  INFO(h.err);
  CHECK_THAT(h.err, Catch::Contains("attempt 2 of 2: fake-4 lost (connection reset); its rank 4 moved to spare fake-7; "
                                    "no spare left; the 2 hosts beneath fake-4 in the launch tree (fake-5, fake-6) get "
                                    "new agents, started by dlaunch and fake-5; 7 ranks running again"));
}
}  // namespace

// The launch tree with a spare: the spare is started by dlaunch, beside the
// roots. A root lost with the two hosts beneath it: its seat goes to the
// spare; the two keep theirs and get new agents, the first of them started
// by dlaunch in the lost root's place and starting the other.
TEST_CASE("job transitions: --spares in a launch tree: the spare is dlaunch's own, and a lost root's seat goes to it "
          "while the hosts beneath it get new agents",
          "[launcher][job][transitions][spares][tree]") {
  RunOptions o = restart_options(1);
  o.launcher = dl::remote::StartMethod::kSim;
  o.fanout = 2;
  Harness h(o, nullptr, {}, hosts_and_spares(7, 1));
  REQUIRE(h.links->routes == std::vector<int>{-1, 0, 0, 0, -1, 4, 4, -1});
  std::vector<int> started;
  for (const auto& sp : h.starter->specs) started.push_back(sp.node);
  CHECK(started == std::vector<int>{0, 4, 7});  // the roots and the spare
  for (int n = 0; n < 8; ++n) REQUIRE(h.links->hello(n, 29500 + n) == "");
  h.settle();
  REQUIRE(h.job->phase() == Phase::kLaunched);
  CHECK(h.links->sent(7).count<msg::StartAgents>() == 0);
  // fake-4's connection closes: the server reports it and the two beneath it.
  h.links->close(4, "connection reset");
  h.links->close(5, "lost with the agent on fake-4, which relayed for it (connection reset)");
  h.links->close(6, "lost with the agent on fake-4, which relayed for it (connection reset)");
  h.settle();
  for (int r : {0, 1, 2, 3}) h.links->exited(r, r, std::nullopt, SIGTERM);
  h.settle();
  REQUIRE(h.job->phase() == Phase::kRestarting);
  REQUIRE(h.starter->specs.size() == 4);  // fake-5 from dlaunch: a root now
  CHECK(h.starter->specs.back().node == 5);
  CHECK(h.links->routes == std::vector<int>{-1, 0, 0, 0, -1, -1, 5, -1});
  for (int n : {0, 1, 2, 3, 7}) h.links->say(n, msg::Ready{1, 31000 + n});
  REQUIRE(h.links->hello(5, 31005) == "");
  h.settle();
  const auto sub = h.links->sent(5).all<msg::StartAgents>();
  REQUIRE(sub.size() == 1);  // its subtree: fake-6
  REQUIRE(sub[0].agents.size() == 1);
  CHECK(sub[0].agents[0].node == 6);
  CHECK(h.job->phase() == Phase::kRestarting);  // fake-6 is not there yet
  REQUIRE(h.links->hello(6, 31006) == "");
  h.settle();
  REQUIRE(h.job->phase() == Phase::kLaunched);
  CHECK_THROWS_AS(h.links->say(6, msg::StartedBelow{1}), dl::RemoteError);  // a leaf counts for no one
  tree_second_attempt_ends(h);
}

// An interior agent of the tree whose host fails the health gate: its seat
// goes to the spare, and its agent stays, holding no ranks, to relay for the
// hosts beneath it (its bye would end theirs). When it is lost later, the
// hosts beneath it get new agents, the first in its place.
TEST_CASE("job transitions: the health gate in a launch tree: an interior host that fails keeps its agent as a relay, "
          "holding no ranks",
          "[launcher][job][transitions][health][spares][tree]") {
  RunOptions o = restart_options(1);
  o.launcher = dl::remote::StartMethod::kSim;
  o.fanout = 2;
  o.health_check = "check";
  Harness h(o, nullptr, {}, hosts_and_spares(7, 1));
  for (int n = 0; n < 8; ++n) REQUIRE(h.links->hello(n, 29500 + n) == "");
  h.settle();
  for (int n = 0; n < 8; ++n) h.links->say(n, health(n != 4, n == 4 ? "GPU 0 is gone" : ""));
  h.settle();
  REQUIRE(h.job->phase() == Phase::kLaunched);
  CHECK(h.links->sent(4).count<msg::Bye>() == 0);
  const auto relay = h.links->sent(4).all<msg::Launch>();
  REQUIRE(relay.size() == 1);
  CHECK(relay[0].ranks.empty());  // heartbeats only
  CHECK(ranks_of(h.links->sent(7).all<msg::Launch>().at(0)) == std::vector<int>{4});
  // The relay is lost: fake-5 and fake-6 with it; they keep their seats.
  h.links->close(4, "connection reset");
  h.links->close(5, "lost with the agent on fake-4, which relayed for it (connection reset)");
  h.links->close(6, "lost with the agent on fake-4, which relayed for it (connection reset)");
  h.settle();
  for (int r : {0, 1, 2, 3}) h.links->exited(r, r, std::nullopt, SIGTERM);
  h.links->exited(7, 4, std::nullopt, SIGTERM);
  h.settle();
  REQUIRE(h.job->phase() == Phase::kRestarting);
  CHECK(h.starter->specs.back().node == 5);  // in fake-4's place, from dlaunch
  for (int n : {0, 1, 2, 3, 7}) h.links->say(n, msg::Ready{1, 31000 + n});
  REQUIRE(h.links->hello(5, 31005) == "");
  REQUIRE(h.links->hello(6, 31006) == "");
  h.settle();
  REQUIRE(h.job->phase() == Phase::kLaunched);
  CHECK(ranks_of(h.links->sent(6).all<msg::Launch>().at(1)) == std::vector<int>{6});
  for (auto [node, rank] : std::vector<std::pair<int, int>>{{0, 0}, {1, 1}, {2, 2}, {3, 3}, {7, 4}, {5, 5}, {6, 6}})
    h.links->exited(node, rank, 0);
  h.settle();
  CHECK(h.finish() == 0);
  INFO(h.err);
  CHECK_THAT(h.err, Catch::Contains("fake-4 lost (failed the health check: GPU 0 is gone); its rank 4 moved to spare fake-7"));
  CHECK_THAT(h.err, Catch::Contains("attempt 2 of 2: the 2 hosts beneath fake-4 in the launch tree (fake-5, fake-6) get "
                                    "new agents, started by dlaunch and fake-5"));
}

namespace {
// A directory of this test's own for --report-json, removed with what it holds.
struct TempDirForReport {
  TempDirForReport() {
    char tmpl[] = "/tmp/dl-transitions-XXXXXX";
    REQUIRE(::mkdtemp(tmpl) != nullptr);
    path = tmpl;
  }
  ~TempDirForReport() { std::filesystem::remove_all(path); }
  std::string path;
};
std::string read_text(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// 7 hosts with fanout 2 and a spare (fake-7, dlaunch's own): roots 0 (over 1,
// 2, 3: 1 starts 2) and 4 (over 5, 6). Every agent up, the ranks launched,
// rank 0's failure ended the first attempt: the restart waits for the agents.
RunOptions tree_restart_options(int restarts) {
  RunOptions o = restart_options(restarts);
  o.launcher = dl::remote::StartMethod::kSim;
  o.fanout = 2;
  return o;
}
void tree_restarting(Harness& h, int nodes) {
  for (int n = 0; n < nodes; ++n) REQUIRE(h.links->hello(n, 29500 + n) == "");
  h.settle();
  REQUIRE(h.job->phase() == Phase::kLaunched);
  h.links->exited(0, 0, 3);
  h.settle();
  for (int r = 1; r < 7; ++r) h.links->exited(r, r, std::nullopt, SIGTERM);
  h.settle();
  REQUIRE(h.job->phase() == Phase::kRestarting);
}
// The connection of root fake-4 closes while the restart waits: the server
// reports it and the two beneath it.
void root4_lost(Harness& h) {
  h.links->close(4, "connection reset");
  h.links->close(5, "lost with the agent on fake-4, which relayed for it (connection reset)");
  h.links->close(6, "lost with the agent on fake-4, which relayed for it (connection reset)");
  h.settle();
}
}  // namespace

// An interior agent lost while the restart waits is lost as one while the
// ranks ran: its seat goes to the spare, the hosts beneath it keep theirs and
// get new agents (the first in its place, started by dlaunch), and the
// restart waits for them, also for one whose old agent had answered.
TEST_CASE("job transitions: --spares in a launch tree: an interior agent lost during the restart - its seat goes to "
          "the spare, the hosts beneath it get new agents and the restart waits for them",
          "[launcher][job][transitions][spares][tree]") {
  TempDirForReport dir;
  RunOptions o = tree_restart_options(1);
  o.report_json = dir.path + "/report.json";
  Harness h(o, nullptr, {}, hosts_and_spares(7, 1));
  tree_restarting(h, 8);
  for (int n : {0, 1, 2, 3, 5, 7}) h.links->say(n, msg::Ready{1, 31000 + n});  // all but fake-4 and fake-6
  h.settle();
  REQUIRE(h.job->phase() == Phase::kRestarting);
  root4_lost(h);
  REQUIRE(h.job->phase() == Phase::kRestarting);
  REQUIRE(h.starter->specs.size() == 4);  // fake-5, from dlaunch, in fake-4's place
  CHECK(h.starter->specs.back().node == 5);
  CHECK(h.links->routes == std::vector<int>{-1, 0, 0, 0, -1, -1, 5, -1});
  REQUIRE(h.links->hello(5, 31105) == "");
  h.settle();
  const auto sub = h.links->sent(5).all<msg::StartAgents>();
  REQUIRE(sub.size() == 1);
  REQUIRE(sub[0].agents.size() == 1);
  CHECK(sub[0].agents[0].node == 6);
  CHECK(h.job->phase() == Phase::kRestarting);  // fake-6's new agent is not there yet
  REQUIRE(h.links->hello(6, 31106) == "");
  h.settle();
  REQUIRE(h.job->phase() == Phase::kLaunched);
  tree_second_attempt_ends(h);
  CHECK_THAT(h.err, Catch::Contains("the job's hosts changed 1 time: before attempt 2 of 2: fake-4 lost"));
  const auto j = nlohmann::json::parse(read_text(o.report_json));
  REQUIRE(j["membership"].size() == 3);
  CHECK(j["membership"][0]["kind"] == "moved");
  CHECK(j["membership"][0]["host"] == "fake-4");
  CHECK(j["membership"][0]["to_host"] == "fake-7");
  CHECK(j["membership"][0]["ranks"] == nlohmann::json::array({4}));
  CHECK(j["membership"][0]["attempt"] == 2);
  CHECK(j["membership"][1]["kind"] == "new_agent");
  CHECK(j["membership"][1]["host"] == "fake-5");
  CHECK(j["membership"][1]["to_host"] == "dlaunch");
  CHECK(j["membership"][2]["host"] == "fake-6");
  CHECK(j["membership"][2]["to_host"] == "fake-5");
  CHECK_THAT(j["membership"][2]["why"].get<std::string>(), Catch::Contains("fake-4"));
}

TEST_CASE("job transitions: a launch tree without spares: an interior agent lost during the restart ends the job "
          "naming its host and what would have let it go on",
          "[launcher][job][transitions][tree]") {
  Harness h(tree_restart_options(1), nullptr, {}, hosts(7));
  tree_restarting(h, 7);
  for (int n : {0, 1, 2, 3}) h.links->say(n, msg::Ready{1, 31000 + n});
  h.settle();
  root4_lost(h);
  CHECK(h.job->phase() == Phase::kClosing);
  CHECK(h.starter->specs.size() == 2);  // no agent started anew
  CHECK(h.finish() == 3);  // the failed attempt's verdict: rank 0's exit code
  INFO(h.err);
  CHECK_THAT(h.err, Catch::Contains("attempt 1 of 2 failed (above); cannot restart: lost the agent on fake-4 "
                                    "(connection reset) while the restart waited for the agents; nothing can take its "
                                    "seat (see --spares and --min-hosts)"));
}

// A spare that took a seat at this restart, lost before the next attempt:
// the seat goes on to the next spare. A free spare lost then: said, and the
// job goes on with one fewer.
TEST_CASE("job transitions: --spares: a spare lost during the restart - its seat goes to the next spare, a free one "
          "is said and the restart goes on",
          "[launcher][job][transitions][spares]") {
  SECTION("the spare that took the lost host's seat") {
    Harness h(restart_options(1), nullptr, {}, hosts_and_spares(2, 2));
    for (int n = 0; n < 4; ++n) REQUIRE(h.links->hello(n, 29500 + n) == "");
    h.settle();
    h.links->close(1, "connection reset");
    h.settle();
    h.links->exited(0, 0, std::nullopt, SIGTERM);
    h.settle();
    REQUIRE(h.job->phase() == Phase::kRestarting);
    lost_while_restarting(h, 2);  // fake-2 holds node rank 1 now
    h.links->say(0, msg::Ready{1, 31000}), h.links->say(3, msg::Ready{1, 31003});
    h.settle();
    REQUIRE(h.job->phase() == Phase::kLaunched);
    CHECK(ranks_of(h.links->sent(3).all<msg::Launch>().at(1)) == std::vector<int>{1});
    CHECK(h.links->sent(3).all<msg::Launch>().at(1).identity->node == 1);
    all_started(*h.links, 0, {0}), all_started(*h.links, 3, {1});
    h.settle();
    h.links->exited(0, 0, 0), h.links->exited(3, 1, 0);
    h.settle();
    CHECK(h.finish() == 0);
    INFO(h.err);
    CHECK_THAT(h.err, Catch::Contains("attempt 2 of 2: fake-1 lost (connection reset); its rank 1 moved to spare "
                                      "fake-2; 1 spare left; fake-2 lost (connection reset); its rank 1 moved to spare "
                                      "fake-3; no spare left; 2 ranks running again"));
  }
  SECTION("a free spare") {
    Harness h(restart_options(1), nullptr, {}, hosts_and_spares(2, 2));
    for (int n = 0; n < 4; ++n) REQUIRE(h.links->hello(n, 29500 + n) == "");
    h.settle();
    h.links->exited(0, 0, 3);
    h.settle();
    h.links->exited(1, 1, std::nullopt, SIGTERM);
    h.settle();
    REQUIRE(h.job->phase() == Phase::kRestarting);
    h.links->say(0, msg::Ready{1, 31000}), h.links->say(1, msg::Ready{1, 31001}), h.links->say(2, msg::Ready{1, 31002});
    h.settle();
    CHECK(h.job->phase() == Phase::kRestarting);  // fake-3 has not answered
    h.links->close(3, "connection reset");
    h.settle();
    REQUIRE(h.job->phase() == Phase::kLaunched);  // no one left to wait for
    h.links->exited(0, 0, 0), h.links->exited(1, 1, 0);
    h.settle();
    CHECK(h.finish() == 0);
    INFO(h.err);
    CHECK_THAT(h.err, Catch::Contains("dlaunch: spare fake-3 lost (connection reset); 1 spare left"));
    CHECK_THAT(h.err, Catch::Contains("the job's hosts changed 1 time: before attempt 2 of 2: spare fake-3 lost"));
  }
}
