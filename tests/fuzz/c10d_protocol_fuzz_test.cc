// torch's c10d protocol (rendezvous/c10d/c10d_protocol.h) on mutated streams of
// queries: anyone who reaches the served store's port is parsed before
// anything else is known of them. Every query parse() accepts must encode
// back to exactly the bytes it took, and the keyspace must take it without
// a crash; a refusal is a reason, never an exception.
#include <catch2/catch.hpp>

#include "rendezvous/c10d/c10d_keyspace.h"
#include "rendezvous/c10d/c10d_protocol.h"
#include "tests/fuzz/fuzz_harness.h"

using namespace dl::fuzz;
namespace c10d = dl::rdzv::c10d;

namespace {
bool parse_stream(std::string_view in) {
  c10d::Dialect d = c10d::Dialect::kUnknown;
  c10d::Keyspace keys(c10d::Keyspace::Limits{64, 1u << 16});
  c10d::Limits limits{256, 1024, 64};
  bool any = false;
  while (true) {
    const auto p = c10d::parse(in, d, limits);
    if (p.status != c10d::Parsed::Status::kQuery) return any || p.status == c10d::Parsed::Status::kNeedMore;
    const std::string again = c10d::encode(p.query, d);
    if (again != in.substr(0, p.used))
      throw FuzzFailure("query does not encode back to its bytes: \"" + escaped(again) + "\"");
    std::string reply;
    (void)keys.handle(1, p.query, reply);
    (void)keys.take_woken();
    in.remove_prefix(p.used);
    any = true;
  }
}

std::string q(const c10d::Query& query, c10d::Dialect d) { return c10d::encode(query, d); }
}  // namespace

TEST_CASE("fuzz: c10d protocol parser refuses malformed queries and round-trips the rest", "[fuzz][rendezvous]") {
  using c10d::Op;
  const auto v = c10d::Dialect::kValidated, l = c10d::Dialect::kLegacy;
  const c10d::Query validate{Op::kValidate, {}, {}, c10d::kValidationMagic};
  const std::vector<std::string> seeds = {
      q(validate, v) + q({Op::kPing, {}, {}, 7}, v) + q({Op::kAdd, {"init/"}, {}, 1}, v),
      q(validate, v) + q({Op::kSet, {"pg/rank_0"}, {"addr"}, 0}, v) + q({Op::kWait, {"pg/rank_0", "x"}, {}, 0}, v) +
          q({Op::kCancelWait, {}, {}, 0}, v),
      q(validate, v) + q({Op::kMultiSet, {"a", "b"}, {"1", "2"}, 0}, v) + q({Op::kMultiGet, {"a", "b"}, {}, 0}, v) +
          q({Op::kCompareSet, {"a"}, {"1", "3"}, 0}, v) + q({Op::kDelete, {"b"}, {}, 0}, v),
      q({Op::kAdd, {"init/"}, {}, 1}, l) + q({Op::kSet, {"k"}, {"v"}, 0}, l) + q({Op::kGet, {"k"}, {}, 0}, l) +
          q({Op::kCheck, {"k"}, {}, 0}, l) + q({Op::kNumKeys, {}, {}, 0}, l) + q({Op::kAppend, {"k"}, {"w"}, 0}, l),
  };
  FuzzOptions opt;
  opt.dictionary = {std::string("\xce\xf7\x85\x3c", 4), std::string(8, '\0'), std::string("\xff\xff\xff\xff", 4)};
  const FuzzStats st = fuzz_decoder("c10d stream", parse_stream, seeds, opt);
  CHECK(st.accepted > st.runs / 100);
}
