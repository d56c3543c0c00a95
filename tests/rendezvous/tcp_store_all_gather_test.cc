// The TCP store's all-gather over real connections: one list for every
// caller however large, callers that leave, and refusals that leave the
// connection usable.
#include <thread>

#include <catch2/catch.hpp>

#include "errors/error.h"
#include "rendezvous/store_protocol.h"
#include "tests/rendezvous/store_envs.h"

using namespace dl::rdzv;
using namespace dl::rdzv::testing;
using namespace std::chrono_literals;

namespace {
// Rank r's value: `size` bytes that differ per rank and per position.
Bytes value_of(int r, size_t size) {
  Bytes v(size, '\0');
  for (size_t i = 0; i < size; ++i) v[i] = static_cast<char>('a' + (r * 7 + i) % 26);
  return v;
}
}  // namespace

TEST_CASE("tcp store all_gather: a list larger than the socket buffers reaches every caller whole",
          "[rendezvous]") {
  TcpEnv env;
  constexpr int kRanks = 24;
  constexpr size_t kValue = 256 * 1024;  // a 6 MiB list, to each of 24 callers
  std::vector<std::unique_ptr<Store>> clients;
  for (int i = 0; i < kRanks; ++i) clients.push_back(env.client());
  std::vector<std::vector<Bytes>> got(kRanks);
  std::vector<std::thread> ts;
  for (int i = 0; i < kRanks; ++i)
    ts.emplace_back([&, i] { got[i] = clients[i]->all_gather("big", i, kRanks, value_of(i, kValue), 20000ms); });
  for (auto& t : ts) t.join();
  for (int i = 0; i < kRanks; ++i) {
    REQUIRE(got[i].size() == kRanks);
    for (int r = 0; r < kRanks; ++r) CHECK(got[i][r] == value_of(r, kValue));
  }
  // The connections go on serving after the large replies.
  CHECK(clients[3]->add("after", 1) == 1);
}

TEST_CASE("tcp store all_gather: a caller that leaves keeps its value and the others complete", "[rendezvous]") {
  TcpEnv env;
  auto stay = env.client();
  {
    auto leaving = env.client();
    CHECK_THROWS_AS(leaving->all_gather("g", 1, 3, "one", 100ms), dl::TimeoutError);
  }  // it gave up and closed its connection: its value stays
  std::thread t([&] { CHECK(stay->all_gather("g", 0, 3, "zero", 10000ms) == std::vector<Bytes>{"zero", "one", "two"}); });
  auto last = env.client();
  CHECK(last->all_gather("g", 2, 3, "two", 10000ms) == std::vector<Bytes>{"zero", "one", "two"});
  t.join();
  // The list is kept under the prefix.
  CHECK(proto::decode_values(last->get("g")) == std::vector<Bytes>{"zero", "one", "two"});
}

TEST_CASE("tcp store all_gather: refusals leave the connection usable", "[rendezvous]") {
  TcpEnv env;
  auto a = env.client(), b = env.client();
  CHECK_THROWS_AS(a->all_gather("g", 0, 2, "a", 100ms), dl::TimeoutError);
  // Another count for the same prefix: refused by the server, named.
  try {
    b->all_gather("g", 1, 3, "b", 5000ms);
    FAIL("a second count was accepted");
  } catch (const dl::RemoteError& e) {
    CHECK_THAT(e.what(), Catch::Contains("says 3 ranks, others said 2"));
  }
  CHECK(b->add("still-served", 2) == 2);
  // A key set by other means is not taken for a list.
  b->set("plain", "text");
  CHECK_THROWS_WITH(b->all_gather("plain", 0, 1, "x", 1000ms), Catch::Contains("use a fresh prefix"));
}
