// control::Connection on real loopback sockets: the server-side handshake
// and its deadline, heartbeats and the silence that closes a connection, and
// the send queue's backpressure.
#include <catch2/catch.hpp>

#include <sys/socket.h>

#include <algorithm>
#include <functional>
#include <thread>

#include "control/connection.h"
#include "control/protocol.h"
#include "wire/handshake.h"
#include "wire/socket.h"

namespace control = dl::control;
namespace asio = boost::asio;
using std::chrono::milliseconds;

namespace {
const std::string kToken(64, 'a');

// Two connected stream sockets, the first wrapped for asio.
std::pair<asio::ip::tcp::socket, int> socket_pair(asio::io_context& io) {
  asio::ip::tcp::acceptor acc(io, asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  asio::ip::tcp::socket client(io);
  client.connect(acc.local_endpoint());
  asio::ip::tcp::socket server(io);
  acc.accept(server);
  return {std::move(server), client.release()};
}

struct Closed {
  std::string why;
  bool authenticated = false;
  int times = 0;
};

control::Connection::Callbacks record(Closed& c, std::vector<dl::wire::Frame>* frames = nullptr) {
  control::Connection::Callbacks cb;
  cb.frame = [frames](dl::wire::Frame& f) { if (frames) frames->push_back(f); };
  cb.closed = [&c](const std::string& why, bool authed) { c.why = why, c.authenticated = authed, ++c.times; };
  return cb;
}

// Two started connections over a loopback socket pair: a, and b whose
// frames land in `at_b` (when given).
std::pair<std::shared_ptr<control::Connection>, std::shared_ptr<control::Connection>> started_pair(
    asio::io_context& io, Closed& ca, Closed& cb, std::vector<dl::wire::Frame>* at_b = nullptr) {
  auto [sock, peer_fd] = socket_pair(io);
  asio::ip::tcp::socket other(io, asio::ip::tcp::v4(), peer_fd);
  auto a = std::make_shared<control::Connection>(std::move(sock), control::kMaxControlFrame, record(ca));
  auto b = std::make_shared<control::Connection>(std::move(other), control::kMaxControlFrame, record(cb, at_b));
  a->start();
  b->start();
  return {a, b};
}
}  // namespace

TEST_CASE("connection: a peer that never handshakes is closed at the deadline", "[control]") {
  asio::io_context io;
  auto [sock, peer_fd] = socket_pair(io);
  dl::wire::Socket peer(peer_fd);
  Closed c;
  auto conn = std::make_shared<control::Connection>(std::move(sock), control::kMaxControlFrame, record(c));
  conn->start_server(kToken, control::kControlTag, milliseconds(1000));
  const auto t0 = std::chrono::steady_clock::now();
  io.run_for(std::chrono::seconds(5));
  CHECK(c.times == 1);
  CHECK(c.why == "no handshake within 1 s");
  CHECK_FALSE(c.authenticated);
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(4));
  CHECK_FALSE(conn->is_open());
}

TEST_CASE("connection: the token handshake, then frames both ways", "[control]") {
  asio::io_context io;
  auto [sock, peer_fd] = socket_pair(io);
  Closed c;
  std::vector<dl::wire::Frame> got;
  auto conn = std::make_shared<control::Connection>(std::move(sock), control::kMaxControlFrame, record(c, &got));
  conn->start_server(kToken, control::kControlTag, milliseconds(5000));
  std::string reply;
  std::thread agent([fd = peer_fd, &reply] {
    dl::wire::Socket s(fd);
    dl::wire::client_handshake(s, kToken, control::kControlTag, "the test server");
    dl::wire::write_frame(s, dl::wire::kJson, control::encode(control::msg::Started{1, 2}), "server");
    reply = dl::wire::read_frame(s, 1 << 20, milliseconds(5000), "server").payload;
  });
  for (int i = 0; i < 500 && got.empty(); ++i) io.run_for(milliseconds(10));
  REQUIRE(got.size() == 1);
  CHECK(conn->authenticated());
  CHECK(got[0].payload == control::encode(control::msg::Started{1, 2}));
  conn->send_message(control::msg::Bye{});
  io.run_for(milliseconds(200));
  agent.join();
  CHECK(reply == control::encode(control::msg::Bye{}));
  // The agent's side went away: reported once, as an authenticated peer.
  for (int i = 0; i < 100 && c.times == 0; ++i) io.run_for(milliseconds(10));
  CHECK(c.times == 1);
  CHECK(c.why == "connection closed");
  CHECK(c.authenticated);
}

TEST_CASE("connection: a wrong token is refused and closes", "[control]") {
  asio::io_context io;
  auto [sock, peer_fd] = socket_pair(io);
  Closed c;
  auto conn = std::make_shared<control::Connection>(std::move(sock), control::kMaxControlFrame, record(c));
  conn->start_server(kToken, control::kControlTag, milliseconds(5000));
  std::thread agent([fd = peer_fd] {
    dl::wire::Socket s(fd);
    CHECK_THROWS(dl::wire::client_handshake(s, std::string(64, 'b'), control::kControlTag, "the test server"));
  });
  for (int i = 0; i < 300 && c.times == 0; ++i) io.run_for(milliseconds(10));
  agent.join();
  CHECK(c.times == 1);
  CHECK_FALSE(c.authenticated);
}

TEST_CASE("connection: heartbeats flow, and silence closes with the owner's words", "[control]") {
  asio::io_context io;
  Closed ca, cb;
  std::vector<dl::wire::Frame> at_b;
  auto [a, b] = started_pair(io, ca, cb, &at_b);
  // a beats every 50 ms and wants to hear from b within 400 ms; b never beats.
  a->start_heartbeats(milliseconds(50), milliseconds(400), "no heartbeat from b");
  io.run_for(milliseconds(1500));
  CHECK(ca.times == 1);
  // Over TCP the kernel's view ends the line: b's (in this process) acknowledged everything.
  CHECK(ca.why == "no heartbeat from b; nothing came from it since the heartbeats started; its host acknowledged "
                  "everything sent to it (the network and its kernel are up: the program itself went quiet)");
  CHECK(at_b.size() >= 3);
  for (auto& f : at_b) CHECK(f.payload == control::encode(control::msg::Heartbeat{}));
  // b then sees a's side go.
  CHECK(cb.times == 1);
}

// The words of a silence say what this end saw: how many frames came and
// how long ago the last, and what it could not send.
TEST_CASE("connection: a silence says when the peer last spoke", "[control]") {
  asio::io_context io;
  Closed ca, cb;
  auto [a, b] = started_pair(io, ca, cb);
  a->start_heartbeats(milliseconds(5000), milliseconds(500), "silent");
  b->send_message(control::msg::Heartbeat{});
  b->send_message(control::msg::Heartbeat{});
  const auto t0 = std::chrono::steady_clock::now();
  while (ca.times == 0 && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5)) io.run_for(milliseconds(10));
  REQUIRE(ca.times == 1);
  INFO(ca.why);
  CHECK(ca.why.rfind("silent; ", 0) == 0);
  CHECK(ca.why.find(" came from it since the heartbeats started, the last 0.") != std::string::npos);
  CHECK(ca.why.find("not sent") == std::string::npos);
}

TEST_CASE("connection: both sides beating stay open", "[control]") {
  asio::io_context io;
  Closed ca, cb;
  auto [a, b] = started_pair(io, ca, cb);
  a->start_heartbeats(milliseconds(50), milliseconds(400), "a lost b");
  b->start_heartbeats(milliseconds(50), milliseconds(400), "b lost a");
  io.run_for(milliseconds(1200));
  CHECK(ca.times == 0);
  CHECK(cb.times == 0);
}

TEST_CASE("connection: silence closes at the timeout, not at the next beat", "[control]") {
  asio::io_context io;
  Closed ca, cb;
  auto [a, b] = started_pair(io, ca, cb);
  // Beats every 5 s, wants to hear within 300 ms: only a check at the
  // timeout itself closes it within the 3 s run.
  const auto t0 = std::chrono::steady_clock::now();
  a->start_heartbeats(milliseconds(5000), milliseconds(300), "silent");
  while (ca.times == 0 && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(3)) io.run_for(milliseconds(10));
  const auto took = std::chrono::steady_clock::now() - t0;
  CHECK(ca.times == 1);
  CHECK(ca.why.rfind("silent; nothing came from it since the heartbeats started; its host acknowledged", 0) == 0);
  CHECK(took >= milliseconds(300));  // not before the timeout
  CHECK(took < std::chrono::seconds(3));
}

// This end's own loop held up (a stopped launcher, swap, a starved CPU) for
// longer than the timeout: the peer could not be heard meanwhile, so it gets
// a full timeout from the end of the stall before it counts as lost.
TEST_CASE("connection: a stall of this end's loop is not the peer's silence", "[control]") {
  asio::io_context io;
  Closed ca, cb;
  auto [a, b] = started_pair(io, ca, cb);
  a->start_heartbeats(milliseconds(5000), milliseconds(300), "silent");  // b never beats
  std::chrono::steady_clock::time_point stall_end;
  asio::post(io, [&] {
    std::this_thread::sleep_for(milliseconds(800));
    stall_end = std::chrono::steady_clock::now();
  });
  std::chrono::steady_clock::time_point closed_at;
  const auto t0 = std::chrono::steady_clock::now();
  while (ca.times == 0 && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5)) io.run_for(milliseconds(5));
  closed_at = std::chrono::steady_clock::now();
  REQUIRE(ca.times == 1);  // a silent peer is still found out
  CHECK(ca.why.rfind("silent; nothing came from it since the heartbeats started; its host acknowledged", 0) == 0);
  CHECK(closed_at - stall_end >= milliseconds(250));  // ... a timeout after the stall, not at once
}

TEST_CASE("connection: silence counts from start_heartbeats, not from the last frame before it", "[control]") {
  asio::io_context io;
  Closed ca, cb;
  auto [a, b] = started_pair(io, ca, cb);
  b->send_message(control::msg::Heartbeat{});
  io.run_for(milliseconds(600));  // a heard b 600 ms ago (an agent's hello, long before the launch)
  a->start_heartbeats(milliseconds(100), milliseconds(400), "silent");
  b->start_heartbeats(milliseconds(100), milliseconds(400), "silent");
  io.run_for(milliseconds(800));
  CHECK(ca.times == 0);
  CHECK(cb.times == 0);
}

TEST_CASE("connection: a frame sent since the last beat stands in for the next heartbeat", "[control]") {
  asio::io_context io;
  Closed ca, cb;
  std::vector<dl::wire::Frame> at_b;
  auto [a, b] = started_pair(io, ca, cb, &at_b);
  a->start_heartbeats(milliseconds(200), milliseconds(0), "");
  // a sends output every 20 ms for 600 ms: no heartbeat goes with it.
  asio::steady_timer t(io);
  int sent = 0;
  std::function<void()> tick = [&] {
    a->send(control::data_frame(0, control::kStdout, "x"));
    if (++sent == 30) return;
    t.expires_after(milliseconds(20));
    t.async_wait([&](boost::system::error_code ec) { if (!ec) tick(); });
  };
  tick();
  while (sent < 30) io.run_for(milliseconds(10));
  io.run_for(milliseconds(10));
  const auto beats = [&] {
    return std::count_if(at_b.begin(), at_b.end(), [](const dl::wire::Frame& f) {
      return f.type == dl::wire::kJson && f.payload == control::encode(control::msg::Heartbeat{});
    });
  };
  CHECK(at_b.size() == 30);
  CHECK(beats() == 0);
  // Once a falls quiet, the beats come back.
  io.run_for(milliseconds(700));
  CHECK(beats() >= 2);
  CHECK(ca.times == 0);
}

TEST_CASE("connection: any frame from the peer is liveness, heartbeat or not", "[control]") {
  asio::io_context io;
  Closed ca, cb;
  auto [a, b] = started_pair(io, ca, cb);
  a->start_heartbeats(milliseconds(1000), milliseconds(500), "silent");
  // b never beats, but sends output every 50 ms for a second.
  for (int i = 0; i < 20; ++i) {
    b->send(control::data_frame(0, control::kStdout, "y"));
    io.run_for(milliseconds(50));
  }
  CHECK(ca.times == 0);
}

TEST_CASE("connection: a queue over the high mark is congested until the peer drains it", "[control]") {
  asio::io_context io;
  auto [sock, peer_fd] = socket_pair(io);
  Closed c;
  bool drained = false;
  auto cb = record(c);
  cb.drained = [&drained] { drained = true; };
  auto conn = std::make_shared<control::Connection>(std::move(sock), control::kMaxControlFrame, cb);
  conn->start();
  const std::string chunk(1 << 20, 'x');
  for (int i = 0; i < 12; ++i) conn->send(control::data_frame(0, control::kStdout, chunk));
  CHECK(conn->congested());
  CHECK(conn->queued_bytes() > control::Connection::kPauseAbove);
  io.run_for(milliseconds(100));  // the kernel takes some; the rest waits for a reader
  CHECK_FALSE(drained);
  std::atomic<size_t> read_total{0};
  std::thread reader([fd = peer_fd, &read_total] {
    std::vector<char> buf(1 << 16);
    const size_t want = 12 * (5 + 5 + (1u << 20));
    while (read_total < want) {
      ssize_t n = ::recv(fd, buf.data(), buf.size(), 0);
      if (n <= 0) break;
      read_total += static_cast<size_t>(n);
    }
    ::close(fd);
  });
  for (int i = 0; i < 500 && conn->queued_bytes() > 0; ++i) io.run_for(milliseconds(10));
  reader.join();
  CHECK(drained);
  CHECK_FALSE(conn->congested());
  CHECK(read_total == 12 * (5 + 5 + (1u << 20)));
}
