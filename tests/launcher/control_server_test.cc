// The launcher's control server on its own (launcher/control_server.h): an
// agent's connection, adopted as the local agent's is, binds to its node by
// its hello, typed messages reach the handler, a refused hello closes the
// connection, and a closed one is reported with its node. No Job, no agent.
#include <catch2/catch.hpp>

#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <variant>
#include <vector>

#include "control/messages.h"
#include "launcher/control_server.h"
#include "wire/socket.h"

using namespace std::chrono_literals;
using dl::launcher::ControlServer;
namespace msg = dl::control::msg;

namespace {
struct Recorder : ControlServer::Handler {
  std::string refuse;  // on_hello's answer
  std::vector<int> hellos, exited_ranks;
  std::vector<std::pair<int, std::string>> closed;
  std::string on_hello(const msg::Hello& m) override {
    hellos.push_back(m.node);
    return refuse;
  }
  void on_message(int node, const dl::control::FromAgent& m) override {
    if (const auto* x = std::get_if<msg::Exited>(&m)) exited_ranks.push_back(node * 100 + x->rank);
  }
  void on_output(int, const dl::control::DataChunk&) override {}
  void on_fence(int, uint64_t, std::string_view) override {}
  void on_closed(int node, const std::string& why) override { closed.emplace_back(node, why); }
  void log(const std::string&) override {}
};

// Runs `io` until `done` holds or 5 s passed.
template <class Pred>
bool run_until(boost::asio::io_context& io, Pred done) {
  const auto until = std::chrono::steady_clock::now() + 5s;
  while (!done() && std::chrono::steady_clock::now() < until) {
    io.restart();
    io.run_for(10ms);
  }
  return done();
}

void write_frame(int fd, const std::string& frame) {
  REQUIRE(::write(fd, frame.data(), frame.size()) == static_cast<ssize_t>(frame.size()));
}

msg::Hello hello(int node) {
  msg::Hello h;
  h.version = DLAUNCH_VERSION, h.node = node, h.host = "n" + std::to_string(node), h.pid = 1;
  return h;
}
}  // namespace

TEST_CASE("control server: a hello binds the connection to its node, and messages reach the handler typed",
          "[launcher]") {
  boost::asio::io_context io;
  Recorder h;
  ControlServer server(io, std::string(64, 't'), 3, h);
  int sv[2];
  REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
  server.adopt(sv[0]);
  write_frame(sv[1], dl::control::frame(hello(2)));
  msg::Exited x;
  x.rank = 7, x.pid = 42, x.code = 3;
  write_frame(sv[1], dl::control::frame(x));
  REQUIRE(run_until(io, [&] { return !h.exited_ranks.empty(); }));
  CHECK(h.hellos == std::vector<int>{2});
  CHECK(h.exited_ranks == std::vector<int>{207});  // node 2's rank 7
  CHECK(server.connected(2));
  CHECK_FALSE(server.connected(0));
  ::close(sv[1]);  // the agent is gone
  REQUIRE(run_until(io, [&] { return !h.closed.empty(); }));
  CHECK(h.closed[0].first == 2);
  CHECK_FALSE(server.connected(2));
  CHECK(server.greeted(2));
}

TEST_CASE("control server: a refused hello closes the connection, and nothing after it is read", "[launcher]") {
  boost::asio::io_context io;
  Recorder h;
  h.refuse = "node 1 is already taken";
  ControlServer server(io, std::string(64, 't'), 2, h);
  int sv[2];
  REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
  server.adopt(sv[0]);
  write_frame(sv[1], dl::control::frame(hello(1)));
  msg::Exited x;
  x.rank = 1, x.pid = 2, x.code = 0;
  write_frame(sv[1], dl::control::frame(x));
  REQUIRE(run_until(io, [&] { return !h.hellos.empty(); }));
  // The server's end closes: the agent's read sees EOF (after any answer).
  char buf[4096];
  ssize_t n = 0;
  const auto until = std::chrono::steady_clock::now() + 5s;
  while (std::chrono::steady_clock::now() < until) {
    io.restart();
    io.run_for(10ms);
    n = ::recv(sv[1], buf, sizeof buf, MSG_DONTWAIT);
    if (n == 0) break;
  }
  CHECK(n == 0);
  CHECK(h.exited_ranks.empty());
  CHECK_FALSE(server.connected(1));
  ::close(sv[1]);
}

// The launch tree: root 0's connection carries nodes 1 and 2 (kRouted
// frames); node 3 is its own. A relayed node is taken only through its root,
// after its relayed hello; a root lost takes its subtree with it, named as
// the job names them (addresses here), not as their agents' hellos do.
TEST_CASE("control server: relayed nodes are bound through their root only, and lost with it", "[launcher][tree]") {
  boost::asio::io_context io;
  Recorder h;
  ControlServer server(io, std::string(64, 't'), 4, h);
  server.set_routes({-1, 0, 0, -1}, {"10.9.0.1", "10.9.0.2", "10.9.0.3", "10.9.0.4"});
  int root[2], other[2];
  REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, root) == 0);
  REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, other) == 0);
  server.adopt(root[0]);
  server.adopt(other[0]);
  write_frame(root[1], dl::control::frame(hello(0)));
  write_frame(root[1], dl::control::routed_frame(1, dl::control::frame(hello(1))));
  msg::Exited x;
  x.rank = 5, x.pid = 42, x.code = 0;
  write_frame(root[1], dl::control::routed_frame(1, dl::control::frame(x)));
  // Node 2's exit before its hello is not taken.
  write_frame(root[1], dl::control::routed_frame(2, dl::control::frame(x)));
  write_frame(other[1], dl::control::frame(hello(3)));
  REQUIRE(run_until(io, [&] { return h.hellos.size() == 3 && !h.exited_ranks.empty(); }));
  CHECK(h.exited_ranks == std::vector<int>{105});
  CHECK(server.connected(1));
  CHECK_FALSE(server.connected(2));
  // A frame sent to node 1 leaves on the root's connection, wrapped for node 1.
  server.send(1, dl::control::frame(msg::Bye{}));
  REQUIRE(run_until(io, [] { return true; }));
  char buf[256];
  const ssize_t got = ::read(root[1], buf, sizeof buf);
  REQUIRE(got > 10);
  CHECK(static_cast<uint8_t>(buf[4]) == dl::control::kRouted);
  CHECK(buf[8] == 1);  // node 1, big-endian
  // Node 3 may not speak for node 1: its connection is closed.
  write_frame(other[1], dl::control::routed_frame(1, dl::control::frame(x)));
  REQUIRE(run_until(io, [&] { return !h.closed.empty(); }));
  CHECK(h.closed.at(0).first == 3);
  CHECK(h.closed.at(0).second.find("not beneath it") != std::string::npos);
  // The root lost: it, then node 1 beneath it, each named.
  ::close(root[1]);
  REQUIRE(run_until(io, [&] { return h.closed.size() == 3; }));
  CHECK(h.closed[1].first == 0);
  CHECK(h.closed[1].second.find("the 1 host beneath it (10.9.0.2) were lost with it") != std::string::npos);
  CHECK(h.closed[2].first == 1);
  CHECK(h.closed[2].second.find("lost with the agent on 10.9.0.1, which relayed for it") != std::string::npos);
  CHECK_FALSE(server.any_open());
  ::close(other[1]);
}
