// A connect storm against a real store server: thousands of real clients
// (bench/store-scale's epoll engine, the store protocol with the token
// handshake and the TcpStore client's retry policy) connect at once, pass
// one barrier and one all-gather. Asserts that none fails; how long it takes
// is bench/store-scale's business.
#include <sys/resource.h>

#include <catch2/catch.hpp>

#include "bench/store-scale/storm.h"
#include "rendezvous/tcp_store_server.h"
#include "wire/handshake.h"

using namespace std::chrono_literals;

TEST_CASE("tcp store: a storm of 3000 clients connects and passes a barrier and an all-gather with none failed",
          "[rendezvous][slow]") {
  constexpr int kClients = 3000;
  rlimit lim{};
  ::getrlimit(RLIMIT_NOFILE, &lim);
  lim.rlim_cur = lim.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &lim);
  // Both ends of every connection live in this process.
  if (lim.rlim_cur != RLIM_INFINITY && lim.rlim_cur < 2 * kClients + 256) {
    WARN("skipped: RLIMIT_NOFILE hard limit " << lim.rlim_max << " is too low for " << kClients << " clients");
    return;
  }
  const std::string token = dl::wire::new_token();
  dl::rdzv::BackgroundStoreServer server("127.0.0.1", 0, token);
  dl::bench::StormOptions o;
  o.port = server.port(), o.token = token;
  o.clients = o.world = kClients;
  o.connect_timeout = o.op_timeout = 60000ms;
  o.value_size = 16;
  dl::bench::Storm storm(o);
  auto connected = storm.connect();
  INFO(connected.first_error);
  CHECK(connected.failed == 0);
  CHECK(storm.open_connections() == kClients);
  auto passed = storm.barrier("storm/barrier");
  INFO(passed.first_error);
  CHECK(passed.failed == 0);
  // Every 32nd rank checks every value it got (storm.h).
  auto gathered = storm.all_gather("storm/gather");
  INFO(gathered.first_error);
  CHECK(gathered.failed == 0);
  CHECK(storm.open_connections() == kClients);
}

TEST_CASE("tcp store: storm clients with a wrong token all fail and the server serves on", "[rendezvous]") {
  const std::string token = dl::wire::new_token();
  dl::rdzv::BackgroundStoreServer server("127.0.0.1", 0, token);
  dl::bench::StormOptions o;
  o.port = server.port(), o.token = dl::wire::new_token();
  o.clients = o.world = 20;
  o.connect_timeout = o.op_timeout = 10000ms;
  auto wrong = dl::bench::Storm(o).connect();
  CHECK(wrong.failed == 20);
  CHECK_THAT(wrong.first_error, Catch::Contains("token"));
  o.token = token;
  dl::bench::Storm good(o);
  CHECK(good.connect().failed == 0);
  CHECK(good.barrier("b").failed == 0);
}
