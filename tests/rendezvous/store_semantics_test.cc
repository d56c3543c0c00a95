// The c10d store semantics, run on every Store implementation.
#include <atomic>
#include <thread>

#include <catch2/catch.hpp>

#include "errors/error.h"
#include "tests/rendezvous/store_envs.h"

using namespace dl::rdzv;
using namespace dl::rdzv::testing;
using namespace std::chrono_literals;

TEMPLATE_TEST_CASE("store set/get/check/delete/num_keys", "[rendezvous]", HashEnv, TcpEnv, FileEnv) {
  TestType env;
  auto s = env.client();
  const std::string binary("a\0b\xff", 4);
  s->set("k1", "v1");
  s->set("k2", binary);
  CHECK(s->get("k1") == "v1");
  CHECK(s->get("k2") == binary);
  s->set("k1", "v1b");
  CHECK(s->get("k1") == "v1b");
  CHECK(s->check({"k1", "k2"}));
  CHECK_FALSE(s->check({"k1", "nope"}));
  CHECK(s->num_keys() == 2);
  CHECK(s->delete_key("k1"));
  CHECK_FALSE(s->delete_key("k1"));
  CHECK_FALSE(s->check({"k1"}));
  CHECK(s->num_keys() == 1);
  auto other = env.client();  // a second client sees the same data
  CHECK(other->get("k2") == binary);
}

TEMPLATE_TEST_CASE("store add and compare_set", "[rendezvous]", HashEnv, TcpEnv, FileEnv) {
  TestType env;
  auto s = env.client();
  CHECK(s->add("n", 5) == 5);
  CHECK(s->add("n", -2) == 3);
  CHECK(s->get("n") == "3");
  // Missing key with non-empty expected: nothing set, expected returned.
  CHECK(s->compare_set("c", "x", "y") == "x");
  CHECK_FALSE(s->check({"c"}));
  // Missing key with empty expected: set.
  CHECK(s->compare_set("c", "", "first") == "first");
  CHECK(s->get("c") == "first");
  // Mismatch: unchanged, current value returned.
  CHECK(s->compare_set("c", "wrong", "second") == "first");
  CHECK(s->get("c") == "first");
  // Match: swapped.
  CHECK(s->compare_set("c", "first", "second") == "second");
  CHECK(s->get("c") == "second");
  s->set("text", "abc");
  CHECK_THROWS(s->add("text", 1));
}

TEMPLATE_TEST_CASE("store wait and timeouts name keys and ranks", "[rendezvous]", HashEnv, TcpEnv, FileEnv) {
  TestType env;
  auto s = env.client();
  s->set("here", "1");
  s->describe_key("job/rank/3", "rank 3 on node2");
  try {
    s->wait({"here", "job/rank/3", "job/rank/7"}, 200ms);
    FAIL("wait did not time out");
  } catch (const dl::TimeoutError& e) {
    std::string msg = e.what();
    CHECK_THAT(msg, Catch::Contains("job/rank/3' (rank 3 on node2)"));
    CHECK_THAT(msg, Catch::Contains("job/rank/7'"));
    CHECK_THAT(msg, Catch::Contains("missing rank(s): 3, 7"));
    CHECK_THAT(msg, !Catch::Contains("'here'"));
  }
  s->set_timeout(200ms);
  CHECK_THROWS_AS(s->get("absent"), dl::TimeoutError);
  // A wait is released by another client's set.
  auto setter = env.client();
  std::thread t([&] { std::this_thread::sleep_for(100ms); setter->set("late", "v"); });
  auto t0 = std::chrono::steady_clock::now();
  s->set_timeout(5000ms);
  CHECK(s->get("late") == "v");
  s->wait({"late", "here"}, 5000ms);
  t.join();
  CHECK(std::chrono::steady_clock::now() - t0 < 3s);
}

TEMPLATE_TEST_CASE("store concurrent add is exact and compare_set has one winner", "[rendezvous]", HashEnv,
                   TcpEnv, FileEnv) {
  TestType env;
  constexpr int kThreads = 8, kAdds = 100;
  std::vector<std::unique_ptr<Store>> clients;
  for (int i = 0; i < kThreads; ++i) clients.push_back(env.client());
  std::atomic<int> winners{0};
  std::vector<std::string> seen(kThreads);
  std::vector<std::thread> ts;
  for (int i = 0; i < kThreads; ++i) {
    ts.emplace_back([&, i] {
      for (int j = 0; j < kAdds; ++j) clients[i]->add("sum", j % 2 ? 2 : 1);
      std::string mine = "winner-" + std::to_string(i);
      seen[i] = clients[i]->compare_set("race", "", mine);
      if (seen[i] == mine) ++winners;
    });
  }
  for (auto& t : ts) t.join();
  CHECK(clients[0]->get("sum") == std::to_string(kThreads * (kAdds / 2) * 3));
  CHECK(winners == 1);
  std::string final_value = clients[0]->get("race");
  for (const auto& v : seen) CHECK(v == final_value);
}
