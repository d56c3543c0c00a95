// The real dlaunch-agent against a launcher played by the test: after the
// token handshake and its hello, a malformed message from the launcher is
// refused with the message and field named, the agent kills what it started
// and exits 1; it never crashes and never hangs.
#include <catch2/catch.hpp>

#include <sys/socket.h>

#include <set>

#include "control/messages.h"
#include "control/protocol.h"
#include "tests/integration/fake_launcher.h"
#include "tests/integration/run_command.h"
#include "wire/handshake.h"
#include "wire/socket.h"

using namespace dl::it;
namespace control = dl::control;
namespace msg = dl::control::msg;
using std::chrono::milliseconds;

namespace {
void send_json(const dl::wire::Socket& s, const std::string& text) {
  dl::wire::write_frame(s, dl::wire::kJson, text, "the agent");
}
}  // namespace

TEST_CASE("agent: a launch message with a missing field is refused by name and the agent exits 1", "[integration]") {
  FakeLauncher l;
  Child c = start_agent(l.port);
  ChildGuard guard{c, ""};
  auto [s, hello] = l.accept_agent();
  CHECK(hello.node == 0);
  send_json(s, R"({"t":"launch","wdir":"","ranks":[],"hb_ms":1000,"hb_timeout_ms":10000})");
  RunResult r = wait(c, 20);
  INFO(r.err);
  CHECK_FALSE(r.timed_out);
  CHECK(r.signal == 0);
  CHECK(r.code == 1);
  CHECK(r.err.find("'launch' message: field 'env' is missing") != std::string::npos);
}

TEST_CASE("agent: a bad message mid-job kills the ranks it started, names the field, exits 1", "[integration]") {
  const std::string mark = new_marker();
  FakeLauncher l;
  Child c = start_agent(l.port);
  ChildGuard guard{c, mark};
  auto [s, hello] = l.accept_agent();
  msg::Launch launch;
  launch.wdir = "/";
  launch.hb_ms = 1000, launch.hb_timeout_ms = 30000;
  for (int r = 0; r < 2; ++r) {
    msg::RankSpec spec;
    spec.rank = r, spec.argv = {"sleep", mark};
    launch.ranks.push_back(spec);
  }
  dl::wire::write_frame(s, dl::wire::kJson, control::encode(launch), "the agent");
  REQUIRE(wait_marked(mark, 2, 10).size() == 2);
  // A kill whose grace is a string: refused, not a crash, not a silent default.
  send_json(s, R"({"t":"kill","grace_ms":"soon"})");
  RunResult r = wait(c, 20);
  INFO(r.err);
  CHECK_FALSE(r.timed_out);
  CHECK(r.code == 1);
  CHECK(r.err.find("'kill' message: field 'grace_ms' is a string, expected an integer") != std::string::npos);
  CHECK(r.err.find("killed this host's ranks") != std::string::npos);
  CHECK(wait_marked_gone(mark, 5).empty());
}

TEST_CASE("agent: an unknown message type from the launcher is refused", "[integration]") {
  FakeLauncher l;
  Child c = start_agent(l.port);
  ChildGuard guard{c, ""};
  auto [s, hello] = l.accept_agent();
  send_json(s, R"({"t":"reboot"})");
  RunResult r = wait(c, 20);
  INFO(r.err);
  CHECK_FALSE(r.timed_out);
  CHECK(r.code == 1);
  CHECK(r.err.find("unknown control message 'reboot' from the launcher") != std::string::npos);
}

// A launch-tree agent sends the hellos of the agents it started up in one
// write, once all of them said hello, and their stacks likewise (agent/relay.h): each write to the
// launcher is a wake-up of its loop, and it acts on none until it has all.
// So when the first relayed hello can be read, the others are already there.
TEST_CASE("agent: a tree agent's children's hellos and stacks reach the launcher together, in one write each",
          "[integration][tree]") {
  FakeLauncher fl;
  const std::string m = new_marker();
  RunSpec spec;
  spec.argv = {bin("dlaunch-agent"), "--connect", "127.0.0.1:" + std::to_string(fl.port), "--node", "0", "--no-pmix"};
  spec.set_env = {{"DLAUNCH_SIM", "1"}};
  spec.stdin_data = kToken + "\n";
  spec.stdin_devnull = false;
  spec.stdin_hold = true;
  Child c = start(spec);
  ChildGuard guard{c, m};
  auto [s, hello] = fl.accept_agent();
  msg::StartAgents start;
  start.method = "sim";
  start.self = "root-" + m;
  start.gpus_per_node = 0, start.detect_gpus = false, start.prepare_pmix = false;
  constexpr int kChildren = 6;
  for (int i = 1; i <= kChildren; ++i) start.agents.push_back({i, "leaf" + std::to_string(i) + "-" + m, "", 0, 0});
  send_json(s, control::encode(start));
  // The first relayed hello, then what else is in the socket right then.
  auto first = dl::wire::read_frame(s, control::kMaxControlFrame, milliseconds(30000), "the tree agent");
  REQUIRE(first.type == control::kRouted);
  std::string rest(1 << 20, '\0');
  const ssize_t n = ::recv(s.fd(), rest.data(), rest.size(), MSG_DONTWAIT);
  rest.resize(n > 0 ? static_cast<size_t>(n) : 0);
  dl::wire::FrameParser parser(1 << 20);
  parser.feed(rest.data(), rest.size());
  std::set<uint32_t> nodes{control::parse_routed(first.payload).node};
  while (auto f = parser.next()) {
    REQUIRE(f->type == control::kRouted);
    const auto r = control::parse_routed(f->payload);
    CHECK(std::holds_alternative<msg::Hello>(control::decode_from_agent(r.inner.payload)));
    nodes.insert(r.node);
  }
  CHECK(nodes == std::set<uint32_t>{1, 2, 3, 4, 5, 6});
  // Their answers to a stack dump (a broadcast) come up together too.
  dl::wire::send_all(s, control::routed_frame(control::kEveryNode, control::frame(msg::DumpStacks{7, 2000})),
                     "the tree agent");
  std::set<uint32_t> answered;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (answered.empty() && std::chrono::steady_clock::now() < deadline) {
    auto f = dl::wire::read_frame(s, control::kMaxControlFrame, milliseconds(30000), "the tree agent");
    if (f.type != control::kRouted) continue;  // the tree agent's own answer
    answered.insert(control::parse_routed(f.payload).node);
    rest.assign(1 << 20, '\0');
    const ssize_t k = ::recv(s.fd(), rest.data(), rest.size(), MSG_DONTWAIT);
    rest.resize(k > 0 ? static_cast<size_t>(k) : 0);
    dl::wire::FrameParser more(1 << 20);
    more.feed(rest.data(), rest.size());
    while (auto g = more.next())
      if (g->type == control::kRouted) answered.insert(control::parse_routed(g->payload).node);
  }
  CHECK(answered == std::set<uint32_t>{1, 2, 3, 4, 5, 6});
  // The agents it started carry the marker in their host names (--sim-host).
  const auto leaves = marked(m, c.pid);
  CHECK(leaves.size() == kChildren);
  // The launcher goes: the tree agent and every agent it started go too.
  s = dl::wire::Socket();
  const auto r = wait(c, 20);
  CHECK_FALSE(r.timed_out);
  CHECK(wait_marked_gone(m, 10).empty());
}
