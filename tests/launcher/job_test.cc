// The Job state machine end to end, with its agents faked: the Job's agent
// starter is replaced (its StarterFactory parameter) by one that either
// reports every start as failed, or runs a "scripted agent" per node: a
// thread that speaks the real control protocol on loopback (token
// handshake, hello, launch, exits, kill, bye) and does what the test says.
// No dlaunch-agent process and no rank process is started.
//
// Every blocking read in the fake has a timeout, the starter's stop() shuts
// the fakes' sockets down before joining them, and each job has a --timeout
// as a last resort, so no test can hang.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "control/messages.h"
#include "control/protocol.h"
#include "control/rank_identity.h"
#include "errors/error.h"
#include "launcher/job.h"
#include "tests/launcher/stderr_capture.h"
#include "wire/handshake.h"
#include "wire/socket.h"

using namespace dl::launcher;
namespace msg = dl::control::msg;
namespace control = dl::control;
namespace wire = dl::wire;
namespace hf = dl::hostfiles;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

namespace {
// A rank's variable as the agent applies it: its own, else the host's
// (shared ones are sent once per host, launcher/rank_env.h).
std::string rank_var(const control::msg::Launch& l, const control::msg::RankSpec& r, const std::string& k) {
  auto it = r.env.find(k);
  return it != r.env.end() ? it->second : l.env.at(k);
}
}  // namespace

namespace {
// Two hosts that are not this machine, so the Job treats both as remote.
hf::Placement two_fake_hosts() {
  hf::HostEntry a, b;
  a.host = "fake-a", a.slots = 2;
  b.host = "fake-b", b.slots = 2;
  return hf::place({a, b}, {});
}

RunOptions fast_options() {
  RunOptions o;
  o.command = {"/bin/true"};
  o.stdin_rank = kNoStdin;      // no stdin reader thread on the test's stdin
  o.control_addr = "127.0.0.1"; // remote hosts: the control server binds here, the fakes connect here
  o.agent_timeout_s = 5;
  o.ssh_timeout_s = 1;          // added to the agent timeout when hosts are remote
  o.kill_grace_s = 0.5;
  o.heartbeat_timeout_s = 5;
  o.timeout_s = 20;             // the last resort against a hang
  return o;
}

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}


// ---- per-node mode's peers, as a test sees them ----------------------------

struct TestPeers : Peers {
  PeerIdentity id;
  int published_code = -1;
  const PeerIdentity* identity() const override { return &id; }
  void publish_failure(int code, const std::string&) override { published_code = code; }
  void watch(Failed) override {}
  bool can_restart() const override { return false; }
  void restart(int, int, double, RestartDone done) override { done(0, "no restarts in this test"); }
  void abandon(int, const std::string&) override {}
  void next_attempt(int) override {}
};

// ---- a starter whose every start fails --------------------------------------

struct FailingStarter : AgentStarter {
  FailingStarter(boost::asio::io_context& io, Events ev) : io_(io), ev_(std::move(ev)) {}
  void start(const AgentStartSpec& spec) override {
    // Like the real starter: the event arrives later, on the io_context's thread.
    boost::asio::post(io_, [ev = ev_, node = spec.node, host = spec.host] {
      ev.failed(node, host + ": dlaunch-agent not found (test)");
    });
    ++starts;
  }
  void connected(int) override { ++connects; }
  void stop(int) override {}
  boost::asio::io_context& io_;
  Events ev_;
  int starts = 0, connects = 0;
};

// ---- scripted agents ----------------------------------------------------------

// What the fake agent of one node does.
struct Script {
  bool connect = true;                 // false: it never connects (a host that hangs in ssh)
  std::map<int, int> exit_codes;       // ranks that exit by themselves right after the launch, with this code;
                                       // the node's other ranks run until a kill, then end by SIGTERM
  std::string waiting;                 // with connect = false: the starter's waiting_for() (srun waiting for resources)
  std::string raw_after_hello;         // a JSON text sent right after the hello (a broken agent)
  std::string raw_after_launch;        // a JSON text sent right after the launch
  // --max-restarts: launch k (0 = the first) uses by_launch[k] instead of
  // exit_codes while there is one
  std::vector<std::map<int, int>> by_launch;
  bool ready = true;                   // false: it never answers a restart
};

// What the fake agent of one node saw. Written by its thread, read after the join.
struct Seen {
  bool greeted = false;                // the handshake and hello went out
  std::optional<msg::Launch> launch;   // the last
  std::vector<msg::Launch> launches;   // all, in order
  int kills = 0, byes = 0;
  std::vector<std::string> order;      // message types received, heartbeats and MPI job maps left out
  int maps_before_launch = 0;          // MPI job maps (mpi_map) received before the first launch
  std::string ended;                   // why its loop ended: "bye" or the error
};

class ScriptedStarter : public AgentStarter {
 public:
  ScriptedStarter(boost::asio::io_context& io, Events ev, std::map<int, Script> scripts, std::map<int, Seen>& seen,
                  std::vector<AgentStartSpec>& specs)
      : io_(io), ev_(std::move(ev)), scripts_(std::move(scripts)), seen_(seen), specs_(specs) {}
  ~ScriptedStarter() override { stop(0); }

  void start(const AgentStartSpec& spec) override {
    specs_.push_back(spec);
    const Script script = scripts_[spec.node];
    if (!script.connect) return;
    // Like ssh reaching the host: node i is reached at 10.1.0.<i+1> (its ranks' MASTER_ADDR when it is node 0).
    boost::asio::post(io_, [ev = ev_, node = spec.node] {
      ev.reached(node, "10.1.0." + std::to_string(node + 1), "127.0.0.1");
    });
    Seen& seen = seen_[spec.node];
    std::lock_guard lk(mu_);
    running_local_ += spec.local ? 1 : 0;
    threads_.emplace_back([this, spec, script, &seen] { agent(spec, script, seen); });
  }
  void connected(int node) override { connected_.insert(node); }
  std::string waiting_for(int node) const override {
    auto it = scripts_.find(node);
    return it == scripts_.end() ? "" : it->second.waiting;
  }
  // Like the real starter: waits up to `ms` for local agents to finish, not for remote ones; then
  // breaks the fakes' connections (as killing an agent or its ssh session would) and joins them.
  void stop(int ms) override {
    std::unique_lock lk(mu_);
    done_.wait_for(lk, milliseconds(ms), [&] { return running_local_ == 0; });
    stopping_ = true;  // a fake still connecting gives up (connect() below) instead of retrying for its timeout
    for (int fd : open_fds_) ::shutdown(fd, SHUT_RDWR);
    lk.unlock();
    for (auto& t : threads_) t.join();
    threads_.clear();
  }
  std::set<int> connected_;

 private:
  // Connects to the launcher, retrying a refused connection as wire::connect_tcp does, but in short steps
  // so that stop() is not kept waiting for the whole timeout by a fake that started after the job ended.
  // The socket is registered for stop()'s shutdown, or not connected at all once stop() began.
  wire::Socket connect(const AgentStartSpec& spec, milliseconds timeout) {
    const auto deadline = Clock::now() + timeout;
    for (;;) {
      {
        std::lock_guard lk(mu_);
        if (stopping_) throw std::runtime_error("stopped before it connected");
      }
      try {
        auto sock = wire::connect_tcp(spec.control_addr, static_cast<uint16_t>(std::stoi(spec.control_port)),
                                      milliseconds(200));
        std::lock_guard lk(mu_);
        if (stopping_) throw std::runtime_error("stopped before it connected");
        open_fds_.insert(sock.fd());
        return sock;
      } catch (const dl::Error&) {
        if (Clock::now() > deadline) throw;
      }
    }
  }

  void agent(const AgentStartSpec& spec, const Script& script, Seen& seen) {
    const std::string peer = "launcher";
    const milliseconds timeout(10000);
    wire::Socket sock;
    try {
      sock = connect(spec, timeout);
      wire::client_handshake(sock, spec.token, control::kControlTag, peer, timeout);
      msg::Hello h;
      h.version = "test";
      h.node = spec.node;
      h.host = spec.host;
      h.pid = 4000 + spec.node;
      h.free_port = 29500;
      wire::send_all(sock, control::frame(h), peer);
      seen.greeted = true;
      if (!script.raw_after_hello.empty()) wire::write_frame(sock, wire::kJson, script.raw_after_hello, peer);
      std::set<int> running;
      control::EnvVars shared;  // the latest launch_env
      auto exited = [&](int rank, std::optional<int> code, std::optional<int> sig) {
        msg::Exited x;
        x.rank = rank, x.pid = 5000 + rank, x.code = code, x.signal = sig, x.by_agent = sig.has_value();
        wire::send_all(sock, control::frame(x), peer);
      };
      for (;;) {
        const wire::Frame f = wire::read_frame(sock, control::kMaxControlFrame, timeout, peer);
        if (f.type != wire::kJson) continue;
        const auto m = control::decode_from_launcher(f.payload);
        if (std::holds_alternative<msg::Heartbeat>(m)) {
          wire::send_all(sock, control::frame(msg::Heartbeat{}), peer);
          continue;
        }
        if (auto* d = std::get_if<control::MpiDown>(&m); d && std::holds_alternative<msg::MpiMap>(*d)) {
          if (seen.launches.empty()) ++seen.maps_before_launch;
          continue;
        }
        if (auto* e = std::get_if<msg::LaunchEnv>(&m)) {
          shared = e->env;
          continue;
        }
        if (auto* sent = std::get_if<msg::Launch>(&m)) {
          // As a real agent reads it: the shared variables, each rank's argv and identity filled in.
          msg::Launch got = *sent;
          control::complete_launch(got, shared);
          const msg::Launch* l = &got;
          seen.order.push_back("launch");
          seen.launch = *l;
          seen.launches.push_back(*l);
          for (const auto& r : l->ranks) running.insert(r.rank);
          const size_t k = seen.launches.size() - 1;
          for (const auto& [rank, code] : k < script.by_launch.size() ? script.by_launch[k] : script.exit_codes)
            if (running.erase(rank)) exited(rank, code, std::nullopt);
          if (!script.raw_after_launch.empty()) wire::write_frame(sock, wire::kJson, script.raw_after_launch, peer);
        } else if (std::holds_alternative<msg::Kill>(m)) {
          seen.order.push_back("kill");
          ++seen.kills;
          for (int r : running) exited(r, std::nullopt, SIGTERM);
          running.clear();
        } else if (auto* r = std::get_if<msg::Restart>(&m)) {
          seen.order.push_back("restart");
          // Node i offers port 31000 + 10 * attempt + i: node 0's must become MASTER_PORT.
          if (script.ready)
            wire::send_all(sock, control::frame(msg::Ready{r->attempt, 31000 + 10 * r->attempt + spec.node}), peer);
        } else if (std::holds_alternative<msg::Bye>(m)) {
          seen.order.push_back("bye");
          ++seen.byes;
          seen.ended = "bye";
          break;
        } else {
          seen.order.push_back("other");
        }
      }
    } catch (const std::exception& e) {
      seen.ended = e.what();
    }
    std::lock_guard lk(mu_);
    open_fds_.erase(sock.fd());
    sock.close();
    running_local_ -= spec.local ? 1 : 0;
    done_.notify_all();
  }

  boost::asio::io_context& io_;
  Events ev_;
  std::map<int, Script> scripts_;
  std::map<int, Seen>& seen_;
  std::vector<AgentStartSpec>& specs_;
  std::mutex mu_;
  std::condition_variable done_;
  int running_local_ = 0;  // fake agents of local nodes still running
  bool stopping_ = false;
  std::set<int> open_fds_;
  std::vector<std::thread> threads_;
};

// One job over the two fake hosts with these scripts; what it returned and what each agent saw.
struct Outcome {
  int code = -1;
  Phase phase = Phase::kStarting;
  double seconds = 0;
  std::string err;
  std::map<int, Seen> seen;
  std::vector<AgentStartSpec> specs;
  std::set<int> connected;
};

Outcome run_scripted(std::map<int, Script> scripts, RunOptions o = fast_options(),
                     hf::Placement p = two_fake_hosts()) {
  Outcome out;
  // Every node gets its Seen before any thread runs, so the map is never changed concurrently.
  for (size_t i = 0; i < p.nodes.size(); ++i) out.seen[static_cast<int>(i)];
  ScriptedStarter* starter = nullptr;
  {
    JobParts parts;
    parts.make_starter = [&](boost::asio::io_context& io, AgentStarter::Events ev) {
      auto s = std::make_unique<ScriptedStarter>(io, std::move(ev), scripts, out.seen, out.specs);
      starter = s.get();
      return s;
    };
    Job job(std::move(o), std::move(p), std::move(parts));
    StderrCapture cap;
    const auto t0 = Clock::now();
    out.code = job.run();
    out.seconds = seconds_since(t0);
    out.err = cap.text();
    out.phase = job.phase();
    REQUIRE(starter);
    out.connected = starter->connected_;
  }  // the Job and its starter are gone: every fake agent thread was joined
  return out;
}
}  // namespace

TEST_CASE("job: agents that cannot be started on any host end the job at once", "[launcher][job]") {
  FailingStarter* starter = nullptr;
  JobParts parts;
  parts.make_starter = [&](boost::asio::io_context& io, AgentStarter::Events ev) {
    auto s = std::make_unique<FailingStarter>(io, std::move(ev));
    starter = s.get();
    return s;
  };
  Job job(fast_options(), two_fake_hosts(), std::move(parts));
  StderrCapture cap;
  const auto t0 = Clock::now();
  const int code = job.run();
  const double took = seconds_since(t0);
  const std::string err = cap.text();
  INFO("stderr: " << err);
  CHECK(code == 1);
  CHECK(job.phase() == Phase::kDone);
  REQUIRE(starter);
  CHECK(starter->starts == 2);
  CHECK(starter->connects == 0);
  // Both failures are reported as they come, then one verdict names both hosts; no waiting for
  // the agent timeout (6 s here), since every host has settled.
  CHECK(took < 2.0);
  CHECK_THAT(err, Catch::Contains("dlaunch: error: fake-a: dlaunch-agent not found (test)"));
  CHECK_THAT(err, Catch::Contains("dlaunch: error: fake-b: dlaunch-agent not found (test)"));
  CHECK_THAT(err, Catch::Contains("agents could not be started on 2 hosts (fake-a, fake-b)"));
}

TEST_CASE("job: one host's agent that cannot be started is one line, not that line and a verdict restating it",
          "[launcher][job]") {
  JobParts parts;
  parts.make_starter = [&](boost::asio::io_context& io, AgentStarter::Events ev) {
    return std::make_unique<FailingStarter>(io, std::move(ev));
  };
  hf::HostEntry a;
  a.host = "fake-a", a.slots = 2;
  Job job(fast_options(), hf::place({a}, {}), std::move(parts));
  StderrCapture cap;
  const int code = job.run();
  const std::string err = cap.text();
  INFO("stderr: " << err);
  CHECK(code == 1);
  CHECK(err == "dlaunch: error: fake-a: dlaunch-agent not found (test)\n");
}

TEST_CASE("job: every rank exits 0, the job exits 0", "[launcher][job]") {
  auto out = run_scripted({{0, {.exit_codes = {{0, 0}, {1, 0}}}}, {1, {.exit_codes = {{2, 0}, {3, 0}}}}});
  INFO("stderr: " << out.err);
  CHECK(out.code == 0);
  CHECK(out.phase == Phase::kDone);
  CHECK(out.seconds < 3.0);
  CHECK(out.err.empty());
  // What the Job asked of the starter: both hosts remote, reached back at --control-addr.
  REQUIRE(out.specs.size() == 2);
  for (int i = 0; i < 2; ++i) {
    const auto& s = out.specs[static_cast<size_t>(i)];
    CHECK(s.node == i);
    CHECK(s.args.node == i);
    CHECK(s.host == (i == 0 ? "fake-a" : "fake-b"));
    CHECK_FALSE(s.local);
    CHECK(s.control_addr == "127.0.0.1");
    CHECK(s.token.size() == 64);
  }
  CHECK(out.connected == std::set<int>{0, 1});
  // Each agent got its own ranks once, no kill, and a bye when all had ended.
  for (int i = 0; i < 2; ++i) {
    const Seen& seen = out.seen[i];
    INFO("node " << i << " ended: " << seen.ended);
    CHECK(seen.ended == "bye");
    CHECK(seen.order == std::vector<std::string>{"launch", "bye"});
    // --mpi auto: the job's map came once, before the launch, which leaves it out.
    CHECK(seen.maps_before_launch == 1);
    REQUIRE(seen.launch);
    REQUIRE(seen.launch->ranks.size() == 2);
    CHECK(seen.launch->ranks[0].rank == 2 * i);
    CHECK(seen.launch->ranks[1].rank == 2 * i + 1);
    CHECK(seen.launch->ranks[0].argv == std::vector<std::string>{"/bin/true"});
    // torch's c10d store and dlaunch's are this launcher's (--control-addr), whichever host rank 0 is on.
    CHECK(rank_var(*seen.launch, seen.launch->ranks[0], "MASTER_ADDR") == "127.0.0.1");
    CHECK(rank_var(*seen.launch, seen.launch->ranks[0], "TORCHELASTIC_USE_AGENT_STORE") == "True");
    CHECK_THAT(rank_var(*seen.launch, seen.launch->ranks[0], "DLAUNCH_STORE_ADDR"), Catch::StartsWith("127.0.0.1:"));
  }
}

TEST_CASE("job: one rank exits 3, the job exits 3 and every agent is told to kill", "[launcher][job]") {
  // Rank 3 (on fake-b) fails; every other rank runs until the kill, then ends by SIGTERM.
  auto out = run_scripted({{0, {}}, {1, {.exit_codes = {{3, 3}}}}});
  INFO("stderr: " << out.err);
  CHECK(out.code == 3);
  CHECK(out.phase == Phase::kDone);
  CHECK(out.seconds < 3.0);
  // The first failure decides, and the ranks we killed afterwards do not change that.
  CHECK_THAT(out.err, Catch::Contains("rank 3 on fake-b (pid 5003) exited with code 3"));
  CHECK_THAT(out.err, !Catch::Contains("rank 0"));
  for (int i = 0; i < 2; ++i) {
    const Seen& seen = out.seen[i];
    INFO("node " << i << " ended: " << seen.ended);
    CHECK(seen.kills >= 1);
    CHECK(seen.order.front() == "launch");
    CHECK(seen.order.back() == "bye");  // the kill came first, the bye only once every rank had ended
    CHECK(seen.ended == "bye");
  }
}

TEST_CASE("job: a malformed message from an agent fails the job, no crash, no hang", "[launcher][job]") {
  Script broken;
  SECTION("right after its hello, before the launch") {
    broken.raw_after_hello = R"({"t":"exited","pid":1})";  // 'rank' is missing
  }
  SECTION("after the launch") {
    broken.raw_after_launch = R"({"t":"exited","pid":1})";
  }
  SECTION("after the launch, a message of no known type") {
    broken.raw_after_launch = R"({"t":"gossip","rank":0})";
  }
  auto out = run_scripted({{0, broken}, {1, {}}});
  INFO("stderr: " << out.err);
  CHECK(out.code == 1);
  CHECK(out.phase == Phase::kDone);
  CHECK(out.seconds < 3.0);
  // The verdict names the host whose agent broke the protocol, and why.
  CHECK_THAT(out.err, Catch::Contains("lost the agent on fake-a (protocol error"));
  // The broken agent's connection was closed by the launcher, not ended by a bye.
  CHECK(out.seen[0].ended != "bye");
  CHECK(out.seen[0].byes == 0);
}

TEST_CASE("job: an exit for a rank the node does not own fails the job", "[launcher][job]") {
  // fake-a reports rank 2, which is fake-b's. Accepting it would mark rank 2 done while it runs.
  msg::Exited foreign;
  foreign.rank = 2, foreign.pid = 77, foreign.code = 0;
  auto out = run_scripted({{0, {.raw_after_launch = control::encode(foreign)}}, {1, {}}});
  INFO("stderr: " << out.err);
  CHECK(out.code == 1);
  CHECK(out.phase == Phase::kDone);
  CHECK(out.seconds < 4.0);
  CHECK_THAT(out.err, Catch::Contains("lost the agent on fake-a") && Catch::Contains("foreign rank"));
  CHECK(out.seen[0].ended != "bye");
  // fake-b's ranks were still running: it was told to kill them, and then bye.
  CHECK(out.seen[1].kills >= 1);
  CHECK(out.seen[1].ended == "bye");
}

TEST_CASE("job: a host whose agent never connects ends the job at the agent timeout", "[launcher][job]") {
  auto o = fast_options();
  o.agent_timeout_s = 1;
  o.ssh_timeout_s = 0;
  auto out = run_scripted({{0, {}}, {1, {.connect = false}}}, o);
  INFO("stderr: " << out.err);
  CHECK(out.code == 1);
  CHECK(out.phase == Phase::kDone);
  CHECK(out.seconds >= 0.9);
  CHECK(out.seconds < 4.0);
  CHECK_THAT(out.err, Catch::Contains("fake-b") && Catch::Contains("did not connect within 1 s"));
  // fake-a connected, was never launched, and was told to leave.
  CHECK_FALSE(out.seen[0].launch);
  CHECK(out.seen[0].ended == "bye");
}

TEST_CASE("job: an agent that never connects while the start method knows why: the timeout says why",
          "[launcher][job][slurm]") {
  auto o = fast_options();
  o.agent_timeout_s = 1;
  o.ssh_timeout_s = 0;
  auto out = run_scripted({{0, {}}, {1, {.connect = false, .waiting = "srun is waiting for resources (test)"}}}, o);
  INFO("stderr: " << out.err);
  CHECK(out.code == 1);
  CHECK_THAT(out.err, Catch::Contains("fake-b") &&
                          Catch::Contains("did not connect within 1 s (see --agent-timeout): srun is waiting for "
                                          "resources (test)"));
}

// Per-node mode on a node other than node 0: when this node's agent never
// connects, its own ranks fail (the timer once failed node 0's ranks, which
// belong to another node and count as done, so the job passed silently).
TEST_CASE("job: per-node mode, this node's agent never connects: the job fails", "[launcher][job][per-node]") {
  auto o = fast_options();
  o.agent_timeout_s = 1;
  o.nnodes = 2;
  o.node_rank = 1;
  TestPeers peers;
  peers.id.node = 1;  // this dlaunch runs fake-b; fake-a (node 0) is another dlaunch's
  peers.id.token = std::string(64, 'c');
  peers.id.job_id = "dl-pernode";
  peers.id.store_addr = "127.0.0.1:1";
  peers.id.master_addr = "127.0.0.1";
  peers.id.master_port = 29500;
  std::map<int, Seen> seen;
  std::vector<AgentStartSpec> specs;
  JobParts parts;
  parts.peers = &peers;
  parts.make_starter = [&](boost::asio::io_context& io, AgentStarter::Events ev) {
    return std::make_unique<ScriptedStarter>(io, std::move(ev), std::map<int, Script>{{1, {.connect = false}}}, seen,
                                             specs);
  };
  Job job(o, two_fake_hosts(), std::move(parts));
  StderrCapture cap;
  const auto t0 = Clock::now();
  const int code = job.run();
  const double took = seconds_since(t0);
  const std::string err = cap.text();
  INFO("stderr: " << err);
  CHECK(job.phase() == Phase::kDone);
  CHECK(took < 4.0);
  REQUIRE(specs.size() == 1);  // only this node's agent is started
  CHECK(specs[0].node == 1);
  CHECK(specs[0].local);
  CHECK(code == 1);
  CHECK(peers.published_code == 1);  // the other nodes are told
  CHECK_THAT(err, Catch::Contains("fake-b") && Catch::Contains("did not connect"));
}

// ---- --max-restarts -----------------------------------------------------------

TEST_CASE("job: --max-restarts, a rank fails once: the same agents launch again with a new port and count",
          "[launcher][job][restart]") {
  auto o = fast_options();
  o.max_restarts = 2;
  o.torch_store = dl::launcher::TorchStoreMode::kRank0;  // MASTER_PORT is node 0's: a fresh one per attempt
  // Launch 0: rank 3 exits 1 (the others run until the kill). Launch 1: every rank exits 0.
  auto out = run_scripted({{0, {.by_launch = {{}, {{0, 0}, {1, 0}}}}},
                           {1, {.by_launch = {{{3, 1}}, {{2, 0}, {3, 0}}}}}},
                          o);
  INFO("stderr: " << out.err);
  CHECK(out.code == 0);
  CHECK(out.phase == Phase::kDone);
  CHECK_THAT(out.err, Catch::Contains("dlaunch: attempt 1 of 3 failed: rank 3 on fake-b (pid 5003) exited with code 1; "
                                      "restarting (1 more restart left)"));
  CHECK_THAT(out.err, Catch::Contains("dlaunch: attempt 2 of 3 succeeded"));
  CHECK(out.specs.size() == 2);  // no agent was started twice
  for (int i = 0; i < 2; ++i) {
    const Seen& seen = out.seen[i];
    INFO("node " << i << " ended: " << seen.ended);
    CHECK(seen.order == std::vector<std::string>{"launch", "kill", "restart", "launch", "bye"});
    REQUIRE(seen.launches.size() == 2);
    for (size_t k = 0; k < 2; ++k)
      for (const auto& r : seen.launches[k].ranks) {
        const auto& l = seen.launches[k];
        CHECK(rank_var(l, r, "TORCHELASTIC_RESTART_COUNT") == std::to_string(k));
        CHECK(rank_var(l, r, "DLAUNCH_RESTART_COUNT") == std::to_string(k));
        CHECK(rank_var(l, r, "TORCHELASTIC_MAX_RESTARTS") == "2");
        CHECK(rank_var(l, r, "MASTER_PORT") == (k == 0 ? "29500" : "31010"));  // node 0's ready port for attempt 1
      }
  }
}

TEST_CASE("job: --max-restarts exhausted: every attempt ran, the last failure is the verdict and exit code",
          "[launcher][job][restart]") {
  auto o = fast_options();
  o.max_restarts = 2;
  // Rank 3 fails on every launch, with the launch's number + 5 as its code.
  auto out = run_scripted({{0, {}}, {1, {.by_launch = {{{3, 5}}, {{3, 6}}, {{3, 7}}}}}}, o);
  INFO("stderr: " << out.err);
  CHECK(out.code == 7);
  CHECK_THAT(out.err, Catch::Contains("attempt 1 of 3 failed: rank 3 on fake-b (pid 5003) exited with code 5; "
                                      "restarting (1 more restart left)"));
  CHECK_THAT(out.err, Catch::Contains("attempt 2 of 3 failed: rank 3 on fake-b (pid 5003) exited with code 6; "
                                      "restarting (the last restart)"));
  CHECK_THAT(out.err, Catch::EndsWith("dlaunch: attempt 3 of 3 failed: rank 3 on fake-b (pid 5003) exited with code 7; "
                                      "no restarts left\n"));
  CHECK(out.seen[0].launches.size() == 3);
  CHECK(out.seen[1].launches.size() == 3);
}

TEST_CASE("job: --max-restarts, an agent that never says ready: the restart fails at the heartbeat timeout",
          "[launcher][job][restart]") {
  auto o = fast_options();
  o.max_restarts = 1;
  o.heartbeat_timeout_s = 2;
  auto out = run_scripted({{0, {.ready = false}}, {1, {.exit_codes = {{3, 4}}}}}, o);
  INFO("stderr: " << out.err);
  CHECK(out.code == 4);
  CHECK(out.seconds < 5.0);
  CHECK_THAT(out.err, Catch::Contains("attempt 1 of 2 failed: rank 3 on fake-b (pid 5003) exited with code 4; restarting"));
  CHECK_THAT(out.err, Catch::Contains("attempt 1 of 2 failed (above); cannot restart: no word from the agent on fake-a "
                                      "within 2 s"));
  CHECK(out.seen[0].launches.size() == 1);
  CHECK(out.seen[0].ended == "bye");
}
