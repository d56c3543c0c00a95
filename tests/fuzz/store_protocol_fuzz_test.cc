// The store protocol's decoders (rendezvous/store_protocol.h) on mutated
// requests and replies: a server decodes whatever a token holder sends, a
// client whatever the server answers. A malformed payload is refused
// (nullopt today, dl::RemoteError once the decoders throw), never a crash.
#include <catch2/catch.hpp>

#include <optional>

#include "rendezvous/store_protocol.h"
#include "tests/fuzz/fuzz_harness.h"

using namespace dl::fuzz;
namespace proto = dl::rdzv::proto;

namespace {

// Works whether a decoder returns std::optional<T> (nullopt: refused) or T
// and throws on malformed input.
template <class T>
const T* decoded(const std::optional<T>& v) { return v ? &*v : nullptr; }
template <class T>
const T* decoded(const T& v) { return &v; }

bool decode_request(std::string_view in) {
  const auto got = proto::decode_request(in);
  const proto::Request* r = decoded(got);
  if (!r) return false;
  (void)proto::check_limits(*r);
  // Every byte of a request is a field: what decodes must encode back to
  // exactly the same bytes, or client and server disagree on a request.
  const std::string again = proto::encode(*r);
  if (again != in) throw FuzzFailure("request does not encode back to its bytes: \"" + escaped(again) + "\"");
  return true;
}

// Input: u8 op (which body kOk carries) | reply payload.
bool decode_reply(std::string_view in) {
  if (in.empty()) return false;
  const auto got = proto::decode_reply(in.substr(1), static_cast<proto::Op>(in[0]));
  const proto::Reply* r = decoded(got);
  if (r) (void)proto::encode(*r, static_cast<proto::Op>(in[0]));
  // An all-gather's body is a values list the client decodes in turn.
  if (r && r->status == proto::Status::kOk && proto::is_gather(static_cast<proto::Op>(in[0])))
    (void)proto::decode_values(r->value);
  return r != nullptr;
}

proto::Request request(proto::Op op, std::vector<std::string> keys, std::string value = {}, int64_t number = 0) {
  proto::Request r;
  r.op = op;
  r.keys = std::move(keys);
  r.value = std::move(value);
  r.number = number;
  return r;
}

std::string reply_input(proto::Op op, const proto::Reply& r) {
  return std::string(1, static_cast<char>(op)) + proto::encode(r, op);
}

}  // namespace

TEST_CASE("fuzz: store protocol request decoder refuses malformed requests and round-trips the rest",
          "[fuzz][rendezvous]") {
  using proto::Op;
  proto::Request cas = request(Op::kCas, {"job/epoch"}, "3");
  cas.desired = "4";
  proto::Request barrier = request(Op::kBarrier, {"barrier/0"}, {}, 30000);
  barrier.count = 4;
  proto::Request gather = request(Op::kAllGather, {"nccl/ids"}, "0123456789abcdef", 30000);
  gather.rank = 2, gather.count = 8;
  proto::Request weighted = request(Op::kBarrierWeighted, {"barrier/1"}, {}, 30000);
  weighted.count = 64, weighted.weight = 8;
  proto::Request many = request(Op::kAllGatherMany, {"hosts"}, {}, 30000);
  many.count = 16, many.parts = {{3, "node3"}, {0, ""}, {9, std::string(40, 'v')}};
  const std::vector<std::string> seeds = {
      proto::encode(request(Op::kSet, {"rank/0/addr"}, "10.0.0.1:29500")),
      proto::encode(request(Op::kGet, {"rank/1/addr"}, {}, 5000)),
      proto::encode(request(Op::kAdd, {"counter"}, {}, -7)),
      proto::encode(cas),
      proto::encode(request(Op::kWait, {"a", "bb", std::string(70, 'k')}, {}, 1000)),
      proto::encode(request(Op::kCheck, {"x", ""})),
      proto::encode(request(Op::kDelete, {"gone"})),
      proto::encode(request(Op::kNumKeys, {})),
      proto::encode(barrier),
      proto::encode(gather),
      proto::encode(weighted),
      proto::encode(many),
  };
  FuzzOptions opt;
  opt.seed = 0x5707e;
  opt.iterations = 400000;
  opt.max_len = 512;
  const FuzzStats st = fuzz_decoder("store request", decode_request, seeds, opt);
  CHECK(st.accepted > st.runs / 100);  // the mutants get past the first check
}

TEST_CASE("fuzz: store protocol reply decoder refuses malformed replies", "[fuzz][rendezvous]") {
  using proto::Op;
  using proto::Status;
  auto reply = [](Status s, std::string value, int64_t number, std::vector<std::string> keys = {}) {
    proto::Reply r;
    r.status = s;
    r.value = std::move(value);
    r.number = number;
    r.keys = std::move(keys);
    return r;
  };
  const std::vector<std::string> seeds = {
      reply_input(Op::kSet, reply(Status::kOk, {}, 0)),
      reply_input(Op::kGet, reply(Status::kOk, "10.0.0.1:29500", 0)),
      reply_input(Op::kCas, reply(Status::kOk, "4", 0)),
      reply_input(Op::kAdd, reply(Status::kOk, {}, -1)),
      reply_input(Op::kNumKeys, reply(Status::kOk, {}, 12)),
      reply_input(Op::kBarrier, reply(Status::kOk, {}, 3)),
      reply_input(Op::kBarrierWeighted, reply(Status::kOk, {}, 24)),
      reply_input(Op::kAllGatherMany, reply(Status::kOk, proto::encode_values({"x", ""}), 0)),
      reply_input(Op::kAllGather, reply(Status::kOk, proto::encode_values({"a", "bb", ""}), 0)),
      reply_input(Op::kCheck, reply(Status::kOk, {}, 1)),
      reply_input(Op::kDelete, reply(Status::kOk, {}, 0)),
      reply_input(Op::kWait, reply(Status::kTimeout, {}, 0, {"rank/3/addr", "rank/7/addr"})),
      reply_input(Op::kGet, reply(Status::kError, "key of 5000 bytes is over the limit", 0)),
  };
  FuzzOptions opt;
  opt.seed = 0x5707f;
  opt.iterations = 400000;
  opt.max_len = 512;
  fuzz_decoder("store reply", decode_reply, seeds, opt);
}

// store/2 frames: a request id, then a store/1 request. What a server takes
// must frame back to the same bytes.
bool decode_request2(std::string_view in) {
  const proto::Tagged t = proto::split_id(in);
  if (!decode_request(t.payload)) return false;
  const std::string framed = proto::frame_with_id(proto::kRequest2, t.id, t.payload);
  if (framed.substr(5) != in) throw FuzzFailure("store/2 request does not frame back to its bytes");
  return true;
}

TEST_CASE("fuzz: store/2 request frames refuse malformed ids and requests", "[fuzz][rendezvous]") {
  using proto::Op;
  proto::Request many = request(Op::kAllGatherMany, {"ids"}, {}, 1000);
  many.count = 8, many.parts = {{1, "a"}, {7, "bb"}};
  const std::vector<std::string> seeds = {
      proto::frame_with_id(proto::kRequest2, 1, proto::encode(request(Op::kGet, {"k"}, {}, 5000))).substr(5),
      proto::frame_with_id(proto::kRequest2, 0xffffffffu, proto::encode(many)).substr(5),
  };
  FuzzOptions opt;
  opt.seed = 0x57072;
  opt.iterations = 200000;
  opt.max_len = 256;
  const FuzzStats st = fuzz_decoder("store/2 request", decode_request2, seeds, opt);
  CHECK(st.accepted > st.runs / 100);
}
