// The store's semantics (store_semantics.h) and the TCP server's state
// (store_state.h), driven directly: no sockets, no threads, no waiting.
#include <catch2/catch.hpp>

#include "errors/error.h"
#include "rendezvous/store_semantics.h"
#include "rendezvous/store_state.h"

using namespace dl::rdzv;
using namespace std::chrono_literals;
using proto::Op;
using proto::Request;
using proto::Status;

namespace {
// A StoreState whose answers to parked requests are collected, in order.
struct Harness {
  std::vector<std::pair<StoreState::WaiterPtr, proto::Reply>> answers;
  StoreState state{[this](const StoreState::WaiterPtr& w, const proto::Reply& r) { answers.emplace_back(w, r); }};

  StoreState::Result run(Request r) { return state.execute(r, StoreState::Clock::time_point{}); }
  proto::Reply now(Request r) {
    auto res = run(std::move(r));
    REQUIRE_FALSE(res.parked);
    return res.reply;
  }
  StoreState::WaiterPtr parks(Request r) {
    auto res = run(std::move(r));
    REQUIRE(res.parked);
    return res.parked;
  }
};

Request barrier(const std::string& key, int64_t count, int64_t timeout_ms = 1000) {
  Request r{Op::kBarrier, {key}, {}, {}, timeout_ms};
  r.count = count;
  return r;
}
}  // namespace

TEST_CASE("semantics: integers are parsed as std::stoll would, the whole value", "[rendezvous]") {
  using semantics::parse_integer;
  CHECK(parse_integer("42") == 42);
  CHECK(parse_integer("-7") == -7);
  CHECK(parse_integer("+7") == 7);
  CHECK(parse_integer(" \t12") == 12);
  CHECK(parse_integer("9223372036854775807") == INT64_MAX);
  CHECK(parse_integer("-9223372036854775808") == INT64_MIN);
  CHECK_FALSE(parse_integer(""));
  CHECK_FALSE(parse_integer("abc"));
  CHECK_FALSE(parse_integer("12abc"));
  CHECK_FALSE(parse_integer("12 "));
  CHECK_FALSE(parse_integer("+-1"));
  CHECK_FALSE(parse_integer("+"));
  CHECK_FALSE(parse_integer("9223372036854775808"));
  CHECK_FALSE(parse_integer(std::string("1\0" "2", 3)));
}

TEST_CASE("semantics: add, compare_set, has_all, missing over a key-value map", "[rendezvous]") {
  KeyValueMap kv;
  CHECK(semantics::add(kv, "n", 5) == 5);
  CHECK(semantics::add(kv, "n", -7) == -2);
  CHECK(*kv.find("n") == "-2");
  kv.put("text", "abc");
  try {
    semantics::add(kv, "text", 1);
    FAIL("no error");
  } catch (const dl::RemoteError& e) {
    CHECK(std::string(e.what()) == "add: the value at store key 'text' is not an integer");
  }
  CHECK(*kv.find("text") == "abc");
  kv.put("big", std::to_string(INT64_MAX));
  CHECK_THROWS_WITH(semantics::add(kv, "big", 1), Catch::Contains("overflows"));
  CHECK(*kv.find("big") == std::to_string(INT64_MAX));

  auto r = semantics::compare_set(kv, "c", "x", "y");  // missing, expected not empty
  CHECK(r.value == "x");
  CHECK_FALSE(r.swapped);
  CHECK_FALSE(kv.find("c"));
  r = semantics::compare_set(kv, "c", "", "first");
  CHECK((r.value == "first" && r.swapped));
  r = semantics::compare_set(kv, "c", "wrong", "second");
  CHECK((r.value == "first" && !r.swapped));
  r = semantics::compare_set(kv, "c", "first", "second");
  CHECK((r.value == "second" && r.swapped));

  CHECK(semantics::has_all(kv, {}));
  CHECK(semantics::has_all(kv, {"n", "c"}));
  CHECK_FALSE(semantics::has_all(kv, {"n", "nope"}));
  CHECK(semantics::missing(kv, {"a", "n", "b"}) == std::vector<std::string>{"a", "b"});
  CHECK(semantics::num_keys(kv) == 4);
  CHECK(semantics::delete_key(kv, "c"));
  CHECK_FALSE(semantics::delete_key(kv, "c"));
  CHECK(semantics::barrier_count_error("b", 1).empty());
  CHECK(semantics::barrier_count_error("b", 0) ==
        "barrier at store key 'b' for 0 callers: the count must be at least 1");
}

TEST_CASE("store state: a wait parks until every key is set, then is answered once", "[rendezvous]") {
  Harness h;
  h.now({Op::kSet, {"a"}, "1", {}, 0});
  auto w = h.parks({Op::kWait, {"a", "b", "c"}, {}, {}, 1000});
  CHECK(h.state.parked() == 1);
  h.now({Op::kSet, {"b"}, "2", {}, 0});
  CHECK(h.answers.empty());
  h.now({Op::kSet, {"c"}, "3", {}, 0});
  REQUIRE(h.answers.size() == 1);
  CHECK(h.answers[0].first == w);
  CHECK(h.answers[0].second.status == Status::kOk);
  CHECK(h.state.parked() == 0);
  h.now({Op::kSet, {"c"}, "again", {}, 0});
  CHECK(h.answers.size() == 1);
  // A wait on keys that exist answers at once.
  CHECK(h.now({Op::kWait, {"a", "c"}, {}, {}, 1000}).status == Status::kOk);
}

TEST_CASE("store state: a get parks until its key is set and answers with the value", "[rendezvous]") {
  Harness h;
  auto g1 = h.parks({Op::kGet, {"k"}, {}, {}, 1000});
  auto g2 = h.parks({Op::kGet, {"k"}, {}, {}, 1000});
  h.now({Op::kAdd, {"other"}, {}, {}, 1});
  CHECK(h.answers.empty());
  CHECK(h.now({Op::kCas, {"k"}, "", "v", 0}).value == "v");  // a compare_set that stores wakes them
  REQUIRE(h.answers.size() == 2);
  CHECK(h.answers[0].second.value == "v");
  CHECK(h.answers[1].second.value == "v");
  CHECK(h.now({Op::kGet, {"k"}, {}, {}, 1000}).value == "v");
}

TEST_CASE("store state: a barrier releases everyone when the count is reached", "[rendezvous]") {
  Harness h;
  std::vector<StoreState::WaiterPtr> ws;
  for (int i = 0; i < 3; ++i) ws.push_back(h.parks(barrier("b", 4)));
  CHECK(h.answers.empty());
  CHECK(h.now({Op::kAdd, {"b"}, {}, {}, 0}).number == 3);
  // The last arrival is answered at once with its arrival number, the others
  // through Answer with theirs.
  CHECK(h.now(barrier("b", 4)).number == 4);
  REQUIRE(h.answers.size() == 3);
  for (int i = 0; i < 3; ++i) {
    CHECK(h.answers[i].first == ws[i]);
    CHECK(h.answers[i].second.number == i + 1);
  }
  CHECK(h.state.parked() == 0);
  CHECK(h.now(barrier("b", 4)).number == 5);  // arriving after it opened passes at once

  // Barriers of different counts on one key open separately.
  h.answers.clear();
  h.parks(barrier("m", 2));
  h.parks(barrier("m", 3));  // arrival 2: opens the count-2 barrier, parks itself
  REQUIRE(h.answers.size() == 1);
  CHECK(h.answers[0].second.number == 1);
  CHECK(h.now(barrier("m", 3)).number == 3);
  CHECK(h.answers.size() == 2);
  CHECK(h.answers[1].second.number == 2);
}

TEST_CASE("store state: a barrier opens on any write that brings its key to the count", "[rendezvous]") {
  Harness h;
  h.parks(barrier("b", 3));
  h.now({Op::kSet, {"b"}, "not a number", {}, 0});
  CHECK(h.answers.empty());
  h.now({Op::kSet, {"b"}, "5", {}, 0});
  CHECK(h.answers.size() == 1);
}

TEST_CASE("store state: add and barrier errors are error replies with one text", "[rendezvous]") {
  Harness h;
  h.now({Op::kSet, {"t"}, "abc", {}, 0});
  auto r = h.now({Op::kAdd, {"t"}, {}, {}, 1});
  CHECK(r.status == Status::kError);
  CHECK(r.value == "add: the value at store key 't' is not an integer");
  r = h.now(barrier("t", 2));
  CHECK(r.status == Status::kError);
  CHECK(r.value == "add: the value at store key 't' is not an integer");
  r = h.now(barrier("z", 0));
  CHECK(r.status == Status::kError);
  CHECK_THAT(r.value, Catch::Contains("the count must be at least 1"));
  CHECK(h.state.parked() == 0);
  CHECK(h.now({Op::kNumKeys, {}, {}, {}, 0}).number == 1);
}

TEST_CASE("store state: check, delete and num_keys", "[rendezvous]") {
  Harness h;
  h.now({Op::kSet, {"a"}, "1", {}, 0});
  h.now({Op::kSet, {"b"}, "", {}, 0});  // an empty value is a key all the same
  CHECK(h.now({Op::kCheck, {"a", "b"}, {}, {}, 0}).number == 1);
  CHECK(h.now({Op::kCheck, {"a", "x"}, {}, {}, 0}).number == 0);
  CHECK(h.now({Op::kNumKeys, {}, {}, {}, 0}).number == 2);
  CHECK(h.now({Op::kDelete, {"a"}, {}, {}, 0}).number == 1);
  CHECK(h.now({Op::kDelete, {"a"}, {}, {}, 0}).number == 0);
  CHECK(h.now({Op::kNumKeys, {}, {}, {}, 0}).number == 1);
}

TEST_CASE("store state: deadlines answer with the missing keys, in deadline order", "[rendezvous]") {
  Harness h;
  const StoreState::Clock::time_point t0{};
  h.now({Op::kSet, {"a"}, "1", {}, 0});
  auto late = h.parks({Op::kWait, {"a", "x", "y"}, {}, {}, 300});
  auto early = h.parks({Op::kGet, {"g"}, {}, {}, 100});
  auto b = h.parks(barrier("b", 2, 200));
  CHECK(h.state.next_deadline() == t0 + 100ms);
  h.state.expire(t0 + 99ms);
  CHECK(h.answers.empty());
  h.now({Op::kSet, {"x"}, "1", {}, 0});
  h.state.expire(t0 + 1000ms);
  REQUIRE(h.answers.size() == 3);
  CHECK(h.answers[0].first == early);
  CHECK(h.answers[0].second.status == Status::kTimeout);
  CHECK(h.answers[0].second.keys == std::vector<std::string>{"g"});
  CHECK(h.answers[1].first == b);
  CHECK(h.answers[1].second.keys == std::vector<std::string>{"b"});  // a barrier names its key
  CHECK(h.answers[2].first == late);
  CHECK(h.answers[2].second.keys == std::vector<std::string>{"y"});
  CHECK(h.state.parked() == 0);
  CHECK(h.state.next_deadline() == StoreState::Clock::time_point::max());
  // The barrier's arrival stays counted.
  CHECK(h.now({Op::kAdd, {"b"}, {}, {}, 0}).number == 1);
}

TEST_CASE("store state: a cancelled request is never answered", "[rendezvous]") {
  Harness h;
  auto gone = h.parks({Op::kWait, {"k"}, {}, {}, 100});
  auto stays = h.parks({Op::kWait, {"k"}, {}, {}, 100});
  auto gone_b = h.parks(barrier("b", 2, 100));
  h.state.cancel(gone);
  h.state.cancel(gone_b);
  h.state.cancel(gone);  // twice is harmless
  CHECK(h.state.parked() == 1);
  h.now({Op::kSet, {"k"}, "v", {}, 0});
  REQUIRE(h.answers.size() == 1);
  CHECK(h.answers[0].first == stays);
  // The cancelled barrier's arrival counted: the next caller opens it.
  CHECK(h.now(barrier("b", 2)).number == 2);
  h.state.expire(StoreState::Clock::time_point::max());
  CHECK(h.answers.size() == 1);
}

TEST_CASE("store state: a restart keeps only the keys under a prefix - a wait parked meanwhile still answers",
          "[rendezvous][restart]") {
  Harness h;
  h.now({Op::kSet, {"dlcoll/0/token"}, "old", {}, 0});
  h.now({Op::kAdd, {"barrier/1"}, {}, {}, 3});
  h.now({Op::kSet, {"keep/best"}, "0.25", {}, 0});
  h.now({Op::kSet, {"keepsake"}, "x", {}, 0});  // "keep" without the slash is not kept
  auto w = h.parks({Op::kWait, {"dlcoll/1/token"}, {}, {}, 1000});  // a rank of the next attempt, early
  CHECK(h.state.erase_all_but("keep/") == 3);
  CHECK(h.now({Op::kNumKeys, {}, {}, {}, 0}).number == 1);
  CHECK(h.now({Op::kGet, {"keep/best"}, {}, {}, 0}).value == "0.25");
  CHECK(h.now({Op::kCheck, {"barrier/1"}, {}, {}, 0}).number == 0);
  CHECK(h.now({Op::kAdd, {"barrier/1"}, {}, {}, 1}).number == 1);  // counts start again
  CHECK(h.now({Op::kCheck, {"dlcoll/0/token"}, {}, {}, 0}).number == 0);
  CHECK(h.answers.empty());
  h.now({Op::kSet, {"dlcoll/1/token"}, "new", {}, 0});
  REQUIRE(h.answers.size() == 1);
  CHECK(h.answers[0].first == w);
}

namespace {
Request gather(const std::string& prefix, int64_t rank, int64_t count, std::string value, int64_t timeout_ms = 1000) {
  Request r{Op::kAllGather, {prefix}, std::move(value), {}, timeout_ms};
  r.rank = rank, r.count = count;
  return r;
}
}  // namespace

TEST_CASE("state: an all-gather parks each rank and answers all with one list when the last arrives",
          "[rendezvous]") {
  Harness h;
  auto w2 = h.parks(gather("g", 2, 3, "two"));
  auto w0 = h.parks(gather("g", 0, 3, "zero"));
  // A rank that contributes again (a retry) replaces its value.
  auto w0b = h.parks(gather("g", 0, 3, "ZERO"));
  CHECK(h.answers.empty());
  auto last = h.now(gather("g", 1, 3, "one"));
  const std::vector<std::string> want{"ZERO", "one", "two"};
  REQUIRE(last.list);
  CHECK(proto::decode_values(*last.list) == want);
  REQUIRE(h.answers.size() == 3);
  for (auto& [w, r] : h.answers) CHECK(r.list == last.list);  // one list, shared
  CHECK(h.state.parked() == 0);
  // Complete: kept under the prefix, and a late call is answered from it.
  CHECK(proto::decode_values(*h.state.data().find("g")) == want);
  CHECK(proto::decode_values(h.now(gather("g", 1, 3, "x")).value) == want);
  CHECK(h.now(gather("g", 1, 4, "x")).status == Status::kError);  // another count
}

TEST_CASE("state: an all-gather refuses a count that differs and values over its bound", "[rendezvous]") {
  Harness h;
  h.parks(gather("g", 0, 4, "a"));
  auto r = h.now(gather("g", 1, 5, "b"));
  CHECK(r.status == Status::kError);
  CHECK_THAT(r.value, Catch::Contains("says 5 ranks, others said 4"));
  // Values of different sizes: the running total is what is bounded.
  const std::string big(proto::kMaxGatherBytes / 2, 'x');
  h.parks(gather("g", 1, 4, big));
  r = h.now(gather("g", 2, 4, big));
  CHECK(r.status == Status::kError);
  CHECK_THAT(r.value, Catch::Contains("over the limit"));
  CHECK(h.now(gather("h", 4, 4, "x")).status == Status::kError);  // rank outside [0, count)
  CHECK(h.state.parked() == 2);
}

TEST_CASE("state: an all-gather timeout names the missing ranks up to kMaxNamedMissing", "[rendezvous]") {
  Harness h;
  h.parks(gather("g", 5, 200, "v", 100));
  h.state.expire(StoreState::Clock::time_point{} + 200ms);
  REQUIRE(h.answers.size() == 1);
  const auto& r = h.answers[0].second;
  CHECK(r.status == Status::kTimeout);
  REQUIRE(r.keys.size() == proto::kMaxNamedMissing + 1);
  CHECK(r.keys[0] == "rank/0");
  CHECK(r.keys[5] == "rank/6");  // 5 contributed
  CHECK(r.keys.back() == "... and " + std::to_string(199 - proto::kMaxNamedMissing) + " more ranks");
}

TEST_CASE("state: clearing the store for a restart drops the all-gathers outside what it keeps", "[rendezvous]") {
  Harness h;
  h.parks(gather("old/g", 0, 2, "a"));
  h.parks(gather("attempt1/g", 0, 2, "a"));
  h.state.erase_all_but("attempt1/");
  REQUIRE(h.answers.size() == 1);
  CHECK(h.answers[0].second.status == Status::kError);
  CHECK_THAT(h.answers[0].second.value, Catch::Contains("the job restarted"));
  // The one kept completes; the dropped one starts afresh.
  CHECK(h.now(gather("attempt1/g", 1, 2, "b")).list);
  h.parks(gather("old/g", 1, 2, "b"));
}

TEST_CASE("store state: a weighted barrier adds its weight and answers with its last arrival", "[rendezvous]") {
  Harness h;
  Request w{Op::kBarrierWeighted, {"b"}, {}, {}, 1000};
  w.count = 5, w.weight = 3;
  auto parked = h.parks(w);
  CHECK(h.parks(barrier("b", 5))->arrival == 4);
  CHECK(h.now(barrier("b", 5)).number == 5);
  REQUIRE(h.answers.size() == 2);
  CHECK(h.answers[0].first == parked);
  CHECK(h.answers[0].second.number == 3);
  w.weight = 0;
  CHECK(h.now(w).status == Status::kError);
}

TEST_CASE("store state: an all-gather of several ranks' values is taken whole or refused whole", "[rendezvous]") {
  Harness h;
  auto single = [](int64_t rank, std::string value) {
    Request r{Op::kAllGather, {"g"}, std::move(value), {}, 1000};
    r.rank = rank, r.count = 3;
    return r;
  };
  Request many{Op::kAllGatherMany, {"g"}, {}, {}, 1000};
  many.count = 3;
  h.parks(single(1, std::string(proto::kMaxGatherBytes - 100, 'b')));
  many.parts = {{0, "a"}, {2, std::string(200, 'c')}};
  CHECK(h.now(many).status == Status::kError);  // the list would pass its limit
  h.parks(single(2, "c"));  // parks: rank 0's value of the refused request was not kept
  many.parts = {{0, "a"}};
  auto done = h.now(many);
  REQUIRE(done.list);
  const auto values = proto::decode_values(*done.list);
  REQUIRE(values.size() == 3);
  CHECK(values[0] == "a");
  CHECK(values[2] == "c");
  CHECK(h.answers.size() == 2);
}
