// The store protocol's decoders on malformed bytes: RemoteError, never a
// crash or a read past the payload (the fuzz test drives the same functions
// with arbitrary input).
#include <random>

#include <catch2/catch.hpp>

#include "errors/error.h"
#include "rendezvous/store_protocol.h"

using namespace dl::rdzv;
using proto::Op;
using proto::Request;

namespace {
std::vector<Request> samples() {
  Request b{Op::kBarrier, {"bar"}, {}, {}, 500};
  b.count = 4;
  return {{Op::kSet, {"k"}, std::string("v\0w", 3), {}, 0},
          {Op::kGet, {"key"}, {}, {}, 1000},
          {Op::kAdd, {"n"}, {}, {}, -3},
          {Op::kCas, {"c"}, "old", "new", 0},
          {Op::kWait, {"a", "bb", ""}, {}, {}, 70},
          {Op::kCheck, {"x", "y"}, {}, {}, 0},
          {Op::kDelete, {"d"}, {}, {}, 0},
          {Op::kNumKeys, {}, {}, {}, 0},
          b};
}
}  // namespace

TEST_CASE("store protocol: every request round-trips", "[rendezvous]") {
  for (const auto& r : samples()) {
    Request d = proto::decode_request(proto::encode(r));
    CHECK(d.op == r.op);
    CHECK(d.keys == r.keys);
    CHECK(d.value == r.value);
    CHECK(d.desired == r.desired);
    CHECK(d.number == r.number);
    CHECK(d.count == r.count);
  }
}

TEST_CASE("store protocol: truncated, padded or unknown requests and replies throw RemoteError", "[rendezvous]") {
  for (const auto& r : samples()) {
    const std::string whole = proto::encode(r);
    for (size_t n = 0; n < whole.size(); ++n)
      CHECK_THROWS_AS(proto::decode_request(std::string_view(whole).substr(0, n)), dl::RemoteError);
    CHECK_THROWS_AS(proto::decode_request(whole + "x"), dl::RemoteError);
  }
  CHECK_THROWS_WITH(proto::decode_request("\xff"), Catch::Contains("unknown op 255"));
  CHECK_THROWS_AS(proto::decode_request(std::string(1, '\0')), dl::RemoteError);
  // A length or key count past the end is refused before anything is read
  // or reserved for it.
  CHECK_THROWS_WITH(proto::decode_request(std::string("\x01\xff\xff\xff\xff" "k", 6)), Catch::Contains("truncated"));
  CHECK_THROWS_WITH(proto::decode_request(std::string("\x06\x00\x01\x00\x01", 5)), Catch::Contains("over the limit"));
  CHECK_THROWS_AS(proto::decode_request(std::string("\x06\x00\x00\x10\x00", 5)), dl::RemoteError);

  proto::Reply ok;
  ok.value = "value";
  const std::string get_reply = proto::encode(ok, Op::kGet);
  CHECK(proto::decode_reply(get_reply, Op::kGet).value == "value");
  for (size_t n = 0; n < get_reply.size(); ++n)
    CHECK_THROWS_AS(proto::decode_reply(std::string_view(get_reply).substr(0, n), Op::kGet), dl::RemoteError);
  CHECK_THROWS_WITH(proto::decode_reply("\x07", Op::kSet), Catch::Contains("unknown status 7"));
  CHECK_THROWS_AS(proto::decode_reply(std::string("\0\0", 2), Op::kSet), dl::RemoteError);
  CHECK(proto::decode_reply("\x02whatever", Op::kAdd).value == "whatever");  // kError: the rest is the text
}

TEST_CASE("store protocol: random and mutated bytes decode or throw RemoteError", "[rendezvous]") {
  std::mt19937 rng(20261122);
  std::vector<std::string> seeds;
  for (const auto& r : samples()) seeds.push_back(proto::encode(r));
  for (int i = 0; i < 20000; ++i) {
    std::string bytes;
    if (i % 2) {
      bytes.resize(rng() % 40);
      for (auto& c : bytes) c = static_cast<char>(rng());
      if (!bytes.empty()) bytes[0] = static_cast<char>(1 + rng() % 10);  // mostly known ops
    } else {
      bytes = seeds[rng() % seeds.size()];
      for (int m = 0; m < 3 && !bytes.empty(); ++m) bytes[rng() % bytes.size()] = static_cast<char>(rng());
    }
    try {
      proto::decode_request(bytes);
    } catch (const dl::RemoteError&) {}
    try {
      proto::decode_reply(bytes, static_cast<Op>(rng() % 11));
    } catch (const dl::RemoteError&) {}
  }
  SUCCEED("no crash, no other exception");
}
