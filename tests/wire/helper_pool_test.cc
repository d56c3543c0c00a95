// Fork-join helper threads (wire/helper_pool.h): every share runs once, on
// the caller and at most max_helpers() helpers, and the call returns only
// when all have.
#include <catch2/catch.hpp>

#include <signal.h>

#include <atomic>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "wire/helper_pool.h"

using namespace dl::wire;

TEST_CASE("helper pool: each share runs once, share 0 on the caller, the rest on at most max helpers", "[wire]") {
  HelperPool pool(2);
  CHECK(pool.helpers() == 0);  // started when first needed
  for (size_t shares : {1u, 3u, 5u}) {
    std::vector<int> ran(shares, 0);
    std::mutex mu;
    std::set<std::thread::id> threads;
    std::thread::id first;
    pool.run(shares, [&](size_t s) {
      std::lock_guard<std::mutex> l(mu);
      ++ran[s];
      threads.insert(std::this_thread::get_id());
      if (s == 0) first = std::this_thread::get_id();
    });
    CHECK(ran == std::vector<int>(shares, 1));
    CHECK(first == std::this_thread::get_id());
    CHECK(threads.size() <= 3);  // the caller and two helpers
  }
  CHECK(pool.helpers() == 2);
}

TEST_CASE("helper pool: for_each_index visits every index once over blocks, with or without helpers", "[wire]") {
  for (size_t helpers : {0u, 3u}) {
    HelperPool pool(helpers);
    for (size_t n : {0u, 1u, 31u, 32u, 1000u}) {
      std::vector<std::atomic<int>> seen(n);
      pool.for_each_index(n, [&](size_t i) { seen[i]++; }, 32);
      int wrong = 0;
      for (auto& s : seen) wrong += s.load() != 1;
      CHECK(wrong == 0);
    }
    CHECK(pool.helpers() <= helpers);
  }
}

TEST_CASE("helper pool: posted tasks run on a helper, or at once with none, and helpers take no signal", "[wire]") {
  HelperPool none(0);
  bool here = false;
  none.post([&] { here = true; });
  CHECK(here);  // no helper: ran on the caller before post returned

  HelperPool pool(1);
  pool.prestart(1);
  REQUIRE(pool.helpers() == 1);
  std::atomic<bool> done{false};
  std::thread::id ran_on;
  bool blocked = false;
  pool.post([&] {
    ran_on = std::this_thread::get_id();
    sigset_t mask;
    ::pthread_sigmask(SIG_BLOCK, nullptr, &mask);
    blocked = sigismember(&mask, SIGINT) == 1 && sigismember(&mask, SIGCHLD) == 1;
    done = true;
  });
  for (int i = 0; i < 5000 && !done; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  REQUIRE(done);
  CHECK(ran_on != std::this_thread::get_id());
  CHECK(blocked);
}
