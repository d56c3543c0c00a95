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
