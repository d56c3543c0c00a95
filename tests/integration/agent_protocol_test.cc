// The real dlaunch-agent against a launcher played by the test: after the
// token handshake and its hello, a malformed message from the launcher is
// refused with the message and field named, the agent kills what it started
// and exits 1; it never crashes and never hangs.
#include <catch2/catch.hpp>

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
