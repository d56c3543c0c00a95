// The c10d store semantics, run on every Store implementation.
#include <algorithm>
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

TEMPLATE_TEST_CASE("store barrier holds every caller until the last arrives", "[rendezvous]", HashEnv, TcpEnv,
                   FileEnv) {
  TestType env;
  constexpr int kCallers = 6;
  std::vector<std::unique_ptr<Store>> clients;
  for (int i = 0; i < kCallers; ++i) clients.push_back(env.client());
  std::atomic<int> passed{0};
  std::vector<int64_t> arrival(kCallers);
  std::vector<std::thread> ts;
  // All but the last arrive; none may pass.
  for (int i = 0; i + 1 < kCallers; ++i)
    ts.emplace_back([&, i] { arrival[i] = clients[i]->barrier("b1", kCallers, 10000ms); ++passed; });
  while (clients.back()->add("b1", 0) < kCallers - 1) std::this_thread::sleep_for(5ms);
  std::this_thread::sleep_for(100ms);
  CHECK(passed == 0);
  arrival[kCallers - 1] = clients.back()->barrier("b1", kCallers, 10000ms);
  for (auto& t : ts) t.join();
  CHECK(passed == kCallers - 1);
  CHECK(arrival[kCallers - 1] == kCallers);
  std::sort(arrival.begin(), arrival.end());
  for (int i = 0; i < kCallers; ++i) CHECK(arrival[i] == i + 1);
  // A caller arriving after the barrier opened passes at once.
  CHECK(env.client()->barrier("b1", kCallers, 1000ms) == kCallers + 1);
}

TEMPLATE_TEST_CASE("store barrier timeout says how many arrived", "[rendezvous]", HashEnv, TcpEnv, FileEnv) {
  TestType env;
  auto a = env.client(), b = env.client();
  a->describe_key("start", "the training start barrier");
  std::thread t([&] { CHECK_THROWS_AS(b->barrier("start", 3, 300ms), dl::TimeoutError); });
  try {
    a->barrier("start", 3, 300ms);
    FAIL("barrier did not time out");
  } catch (const dl::TimeoutError& e) {
    CHECK_THAT(e.what(), Catch::Contains("start' (the training start barrier)") && Catch::Contains("of 3 callers"));
  }
  t.join();
  CHECK_THROWS_AS(a->barrier("other", 0, 100ms), dl::UsageError);
}

TEMPLATE_TEST_CASE("store add on a non-integer value fails with the same text everywhere", "[rendezvous]", HashEnv,
                   TcpEnv, FileEnv) {
  TestType env;
  auto s = env.client();
  s->set("text", "12abc");
  try {
    s->add("text", 1);
    FAIL("add did not fail");
  } catch (const dl::RemoteError& e) {
    CHECK_THAT(e.what(), Catch::Contains("add: the value at store key '") &&
                             Catch::Contains("text' is not an integer"));
  }
  CHECK(s->get("text") == "12abc");
  s->set("max", std::to_string(INT64_MAX));
  CHECK_THROWS_WITH(s->add("max", 1), Catch::Contains("overflows a 64-bit integer"));
  CHECK(s->add("max", -1) == INT64_MAX - 1);
}

TEMPLATE_TEST_CASE("store all_gather gives every caller all values in rank order", "[rendezvous]", HashEnv, TcpEnv,
                   FileEnv) {
  TestType env;
  constexpr int kCallers = 6;
  std::vector<std::unique_ptr<Store>> clients;
  for (int i = 0; i < kCallers; ++i) clients.push_back(env.client());
  std::vector<std::vector<Bytes>> got(kCallers);
  std::vector<std::thread> ts;
  // Ranks arrive in reverse order, with values of different sizes.
  for (int i = kCallers - 1; i >= 0; --i)
    ts.emplace_back([&, i] { got[i] = clients[i]->all_gather("ids", i, kCallers, std::string(i, 'a' + i), 10000ms); });
  for (auto& t : ts) t.join();
  std::vector<Bytes> want;
  for (int i = 0; i < kCallers; ++i) want.push_back(std::string(i, 'a' + i));
  for (int i = 0; i < kCallers; ++i) CHECK(got[i] == want);
  // A rank calling again once it is complete (a retry) gets the same values.
  CHECK(env.client()->all_gather("ids", 2, kCallers, "cc", 1000ms) == want);
}

TEMPLATE_TEST_CASE("store all_gather timeout names the ranks whose value never came", "[rendezvous]", HashEnv,
                   TcpEnv, FileEnv) {
  TestType env;
  auto a = env.client(), b = env.client();
  // b contributes and gives up first; a waits longer, so b's value is in
  // when a's wait runs out, however late b's thread starts.
  std::thread t([&] { CHECK_THROWS_AS(b->all_gather("g", 3, 5, "b", 300ms), dl::TimeoutError); });
  try {
    a->all_gather("g", 0, 5, "a", 1500ms);
    FAIL("all_gather did not time out");
  } catch (const dl::TimeoutError& e) {
    CHECK_THAT(e.what(), Catch::Contains("all-gather of 5 ranks at store key '") &&
                             Catch::Contains("no value from rank(s) ") && Catch::Contains("1, 2") &&
                             Catch::Contains(", 4 ("));
    // Only the absent ranks are named: 0 and 3 contributed.
    CHECK_THAT(e.what(), !Catch::Contains("rank(s) 0") && !Catch::Contains("2, 3"));
  }
  t.join();
  CHECK_THROWS_AS(a->all_gather("h", 0, 0, "x", 100ms), dl::UsageError);
  CHECK_THROWS_AS(a->all_gather("h", 2, 2, "x", 100ms), dl::UsageError);
  CHECK_THROWS_AS(a->all_gather("h", -1, 2, "x", 100ms), dl::UsageError);
  CHECK_THROWS_AS(a->all_gather("h", 0, proto::kMaxGatherCount + 1, "x", 100ms), dl::UsageError);
  CHECK_THROWS_WITH(a->all_gather("h", 0, 1024, std::string(proto::kMaxGatherBytes - 4096, 'v'), 100ms),
                    Catch::Contains("over the all-gather's limit"));
}
