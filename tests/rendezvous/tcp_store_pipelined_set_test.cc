// TcpStore's pipelined sets (rendezvous/tcp_store.h, docs/rendezvous.md
// "Pipelined sets"): set() does not wait for its answer, so a set the real
// server refuses (a key over its limit) must be raised by the next call, by
// flush(), naming the key, and must leave the connection usable.
#include <thread>

#include <catch2/catch.hpp>

#include "errors/error.h"
#include "rendezvous/store_protocol.h"
#include "tests/rendezvous/store_envs.h"

using namespace dl::rdzv;
using namespace dl::rdzv::testing;
using namespace std::chrono_literals;

namespace {
const std::string kTooLongKey(proto::kMaxKeySize + 1, 'k');
}

TEST_CASE("tcp store: a refused set is raised by the next call, naming the key", "[rendezvous]") {
  TcpEnv env;
  auto c = env.client();
  c->set("keep", "intact");
  c->set(kTooLongKey, "v");              // refused by the server; set() does not wait to hear it
  c->set("after-the-refusal", "stored");  // already on its way: the server handles it in order
  try {
    c->get("keep");
    FAIL("the refused set was not reported");
  } catch (const dl::RemoteError& e) {
    const std::string what = e.what();
    CHECK_THAT(what, Catch::Contains("refused the set of key 'kkkk"));
    CHECK_THAT(what, Catch::Contains("over the limit of 4096"));
  }
  // Reported once, on the same connection, which serves on.
  CHECK(c->get("keep") == "intact");
  CHECK(c->get("after-the-refusal") == "stored");
  CHECK_FALSE(c->check({kTooLongKey.substr(0, 100)}));
}

TEST_CASE("tcp store: the call that reports a refused set is not made", "[rendezvous]") {
  TcpEnv env;
  auto c = env.client();
  c->set("big", std::string(proto::kMaxValueSize + 1, 'v'));
  CHECK_THROWS_WITH(c->add("counter", 1), Catch::Contains("'big'") && Catch::Contains("over the limit"));
  CHECK(c->add("counter", 1) == 1);  // the add that raised was never sent
  CHECK_FALSE(c->check({"big"}));
}

TEST_CASE("tcp store: flush raises a refused set, then has nothing left to raise", "[rendezvous]") {
  TcpEnv env;
  auto c = env.client();
  c->set("first", "1");
  c->set(kTooLongKey, "v");
  c->set("third", "3");
  c->set(kTooLongKey + "x", "v");
  CHECK_THROWS_WITH(c->flush(), Catch::Contains("refused the set of key 'kkkk") &&
                                    Catch::Contains("(and 1 later sets were refused too)"));
  CHECK_NOTHROW(c->flush());
  CHECK(c->check({"first", "third"}));
}

TEST_CASE("tcp store: many sets in a row are all stored, in order", "[rendezvous]") {
  TcpEnv env;
  auto c = env.client();
  // More than kMaxPendingSets, so the client collects answers on the way.
  const int n = static_cast<int>(kMaxPendingSets) * 3 + 7;
  for (int i = 0; i < n; ++i) c->set("k" + std::to_string(i % 10), std::to_string(i));
  c->flush();
  for (int i = n - 10; i < n; ++i) CHECK(c->get("k" + std::to_string(i % 10)) == std::to_string(i));
  // Another client sees them without any call of the first one in between.
  c->set("seen-by-others", "yes");
  CHECK(env.client()->get("seen-by-others") == "yes");
}

TEST_CASE("tcp store: sets whose answers a closed connection lost are named", "[rendezvous]") {
  TcpEnv env;
  auto c = env.client();
  c->set("keep", "intact");
  c->flush();
  env.server.server().stop();
  std::this_thread::sleep_for(100ms);  // the close has reached the client
  try {
    c->set("unanswered", "1");  // may still be sent into the closed connection
    c->flush();
    FAIL("a lost set was not reported");
  } catch (const dl::Error& e) {
    CHECK_THAT(std::string(e.what()), Catch::Contains("'unanswered'"));
  }
}
