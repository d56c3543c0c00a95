// wire/client_retry.h: a client tries again when a server closes it or does
// not answer its handshake, within its overall timeout, with jittered
// pauses; a server that is not ours ends it at once. Real loopback servers.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "errors/error.h"
#include "wire/client_retry.h"
#include "wire/handshake.h"

using namespace dl::wire;
using Clock = std::chrono::steady_clock;

namespace {

// A loopback server on port 0 whose thread hands the n-th accepted
// connection (from 0) to `serve`, until destroyed.
class Server {
 public:
  explicit Server(std::function<void(int n, Socket s)> serve) : serve_(std::move(serve)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    REQUIRE(::listen(fd_, 16) == 0);
    REQUIRE(::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) == 0);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { run(); });
  }
  ~Server() {
    stop_ = true;
    thread_.join();
    ::close(fd_);
  }
  uint16_t port() const { return port_; }
  int accepted() const { return accepted_; }

 private:
  void run() {
    std::vector<Socket> held;  // kept open, unanswered, until the end
    while (!stop_) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 20) != 1) continue;
      Socket s(::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC));
      if (!s.valid()) continue;
      const int n = accepted_++;
      try {
        serve_(n, std::move(s));
      } catch (const dl::Error&) {
      }
    }
  }
  std::function<void(int, Socket)> serve_;
  int fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<int> accepted_{0};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

}  // namespace

TEST_CASE("client retry: pauses double up to the longest, each drawn from [0, d] (full jitter)", "[wire]") {
  for (int n = 1; n <= 12; ++n) {
    const auto d = std::min(kRetryFirstPause * (1 << std::min(n - 1, 10)), kRetryLongestPause);
    int below_half = 0;
    for (int k = 0; k < 200; ++k) {
      const auto p = retry_pause(n);
      CHECK(p >= Millis(0));
      CHECK(p <= d);
      below_half += p < d / 2;
    }
    // Full jitter spreads over the whole window, not only its upper half.
    CHECK(below_half > 0);
  }
}

TEST_CASE("client retry: each try waits longer for its connect and its handshake answer within what is left",
          "[wire]") {
  const Try first = try_budget(1, Millis(60000));
  CHECK(first.connect_wait == kRetryFirstConnectWait);
  CHECK(first.wait == kRetryFirstWait);
  const Try second = try_budget(2, Millis(60000));
  CHECK(second.connect_wait == 2 * kRetryFirstConnectWait);
  CHECK(second.wait == 2 * kRetryFirstWait);
  // The connect never waits longer than the handshake answer, nor either
  // longer than the time left.
  const Try late = try_budget(12, Millis(60000));
  CHECK(late.wait == kRetryLongestWait);
  CHECK(late.connect_wait == kRetryLongestWait);
  const Try short_left = try_budget(3, Millis(300));
  CHECK(short_left.wait == Millis(300));
  CHECK(short_left.connect_wait == Millis(300));
  CHECK(try_budget(1, Millis(0)).left == Millis(1));
}

TEST_CASE("client retry: a server that closes and then ignores the client is tried again", "[wire]") {
  const std::string token = new_token();
  std::vector<Socket> silent;
  Server srv([&](int n, Socket s) {
    if (n == 0) return;                                       // closed at once (a cap, a reset)
    if (n == 1) return silent.push_back(std::move(s));       // no answer: the first try's wait runs out
    server_handshake(s, token, "t/1", "client", Millis(5000));
    write_frame(s, kJson, "welcome", "client");
  });
  const auto t0 = Clock::now();
  Socket s = connect_authenticated("127.0.0.1", srv.port(), token, "t/1", "the test server", Millis(20000));
  const double took = seconds_since(t0);
  CHECK(read_frame(s, 64, Millis(5000), "the test server").payload == "welcome");
  CHECK(srv.accepted() == 3);
  // The silent try waited its first wait (2 s), not the whole timeout.
  CHECK(took >= std::chrono::duration<double>(kRetryFirstWait).count() * 0.9);
  CHECK(took < 10);
}

TEST_CASE("client retry: the final error says whom it waited for, how long and how often", "[wire]") {
  std::vector<Socket> silent;
  Server srv([&](int, Socket s) { silent.push_back(std::move(s)); });
  const auto t0 = Clock::now();
  std::string err;
  try {
    connect_authenticated("127.0.0.1", srv.port(), new_token(), "t/1", "the silent server", Millis(2500));
  } catch (const dl::TimeoutError& e) {
    err = e.what();
  }
  const double took = seconds_since(t0);
  CHECK_THAT(err, Catch::Contains("no handshake with the silent server within") && Catch::Contains("tries") &&
                      Catch::Contains("the last: "));
  CHECK(srv.accepted() >= 2);
  CHECK(took >= 2.4);
  CHECK(took < 4.5);
}

TEST_CASE("client retry: a server that is not ours is not tried again", "[wire]") {
  Server srv([&](int, Socket s) { server_handshake(s, new_token(), "t/1", "client", Millis(5000)); });
  const auto t0 = Clock::now();
  CHECK_THROWS_AS(connect_authenticated("127.0.0.1", srv.port(), new_token(), "t/1", "server", Millis(20000)),
                  dl::AuthError);
  CHECK(seconds_since(t0) < 2);
  CHECK(srv.accepted() == 1);
}

TEST_CASE("client retry: a host name that does not resolve is not tried again", "[wire]") {
  const auto t0 = Clock::now();
  CHECK_THROWS_AS(connect_authenticated("no-such-host.invalid", 1, new_token(), "t/1", "server", Millis(20000)),
                  UnresolvedHost);
  CHECK(seconds_since(t0) < 5);
}

// A port bound but not listening refuses every connection: an agent's
// launcher (or parent agent) that is gone. With Refused::kFinal that is
// said at once as NotListening; with the default it is a server still
// starting, tried until the timeout.
TEST_CASE("client retry: a refused connection is final when the client says so", "[wire]") {
  Socket bound(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(bound.fd(), reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  socklen_t len = sizeof a;
  REQUIRE(::getsockname(bound.fd(), reinterpret_cast<sockaddr*>(&a), &len) == 0);
  const uint16_t port = ntohs(a.sin_port);
  std::string err;
  try {
    connect_authenticated("127.0.0.1", port, new_token(), "t/1", "the launcher", Millis(60000), Refused::kFinal);
  } catch (const NotListening& e) {
    err = e.what();
  }
  CHECK_THAT(err, Catch::Contains("nothing listens at 127.0.0.1:" + std::to_string(port)) &&
                      Catch::Contains("refused"));
  CHECK_THROWS_AS(connect_authenticated("127.0.0.1", port, new_token(), "t/1", "the store", Millis(300)),
                  dl::TimeoutError);
}
