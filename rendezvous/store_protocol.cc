#include "rendezvous/store_protocol.h"

#include <algorithm>

#include "errors/error.h"
#include "rendezvous/store_semantics.h"
#include "wire/coding.h"
#include "wire/frame.h"

namespace dl::rdzv::proto {

namespace {

void put_i64(std::string& out, int64_t v) { wire::append_be64(out, static_cast<uint64_t>(v)); }

void put_str(std::string& out, std::string_view s) {
  wire::append_be32(out, static_cast<uint32_t>(s.size()));
  out.append(s);
}

void put_strs(std::string& out, const std::vector<std::string>& v) {
  wire::append_be32(out, static_cast<uint32_t>(v.size()));
  for (const auto& s : v) put_str(out, s);
}

// A cursor over a payload from an untrusted peer. Every read checks the
// bytes left first and throws RemoteError naming what it was reading; no
// read or allocation goes past the payload.
struct Reader {
  std::string_view p;
  const char* what;  // "request" or "reply", for the message

  [[noreturn]] void fail(const std::string& why) const {
    throw RemoteError(std::string("malformed store ") + what + ": " + why);
  }
  void need(size_t n, const char* field) const {
    if (p.size() < n)
      fail("truncated " + std::string(field) + " (" + std::to_string(n) + " bytes needed, " +
           std::to_string(p.size()) + " left)");
  }
  uint8_t u8(const char* field) {
    need(1, field);
    auto v = static_cast<uint8_t>(p[0]);
    p.remove_prefix(1);
    return v;
  }
  uint32_t u32(const char* field) {
    need(4, field);
    uint32_t v = wire::get_be32(p.data());
    p.remove_prefix(4);
    return v;
  }
  int64_t i64(const char* field) {
    need(8, field);
    auto v = static_cast<int64_t>(wire::get_be64(p.data()));
    p.remove_prefix(8);
    return v;
  }
  std::string str(const char* field) {
    uint32_t n = u32(field);
    need(n, field);
    std::string s(p.substr(0, n));
    p.remove_prefix(n);
    return s;
  }
  std::vector<std::string> strs() {
    uint32_t n = u32("key count");
    if (n > kMaxKeysPerRequest)
      fail(std::to_string(n) + " keys, over the limit of " + std::to_string(kMaxKeysPerRequest));
    // Each key takes at least its 4-byte length: a count the payload cannot
    // hold is refused before anything is reserved for it.
    if (n > p.size() / 4) fail(std::to_string(n) + " keys announced, " + std::to_string(p.size()) + " bytes left");
    std::vector<std::string> v;
    v.reserve(n);
    for (uint32_t i = 0; i < n; ++i) v.push_back(str("key"));
    return v;
  }
  std::vector<Contribution> parts() {
    uint32_t n = u32("contribution count");
    if (n > kMaxKeysPerRequest)
      fail(std::to_string(n) + " contributions, over the limit of " + std::to_string(kMaxKeysPerRequest));
    // Each takes at least its rank and its value's length (12 bytes).
    if (n > p.size() / 12)
      fail(std::to_string(n) + " contributions announced, " + std::to_string(p.size()) + " bytes left");
    std::vector<Contribution> v(n);
    for (auto& c : v) c.rank = i64("rank"), c.value = str("value");
    return v;
  }
  void done() const {
    if (!p.empty()) fail(std::to_string(p.size()) + " bytes after the end");
  }
};

}  // namespace

const std::string kNoKey;  // not function-local: no guard to write after a fork

std::string encode(const Request& r) {
  std::string out(1, static_cast<char>(r.op));
  const std::string& key = r.keys.empty() ? kNoKey : r.keys[0];
  switch (r.op) {
    case Op::kSet: put_str(out, key), put_str(out, r.value); break;
    case Op::kGet: put_i64(out, r.number), put_str(out, key); break;
    case Op::kAdd: put_str(out, key), put_i64(out, r.number); break;
    case Op::kCas: put_str(out, key), put_str(out, r.value), put_str(out, r.desired); break;
    case Op::kWait: put_i64(out, r.number), put_strs(out, r.keys); break;
    case Op::kCheck: put_strs(out, r.keys); break;
    case Op::kDelete: put_str(out, key); break;
    case Op::kNumKeys: break;
    case Op::kBarrier: put_i64(out, r.number), put_str(out, key), put_i64(out, r.count); break;
    case Op::kAllGather:
      put_i64(out, r.number), put_str(out, key), put_i64(out, r.rank), put_i64(out, r.count), put_str(out, r.value);
      break;
    case Op::kBarrierWeighted:
      put_i64(out, r.number), put_str(out, key), put_i64(out, r.count), put_i64(out, r.weight);
      break;
    case Op::kAllGatherMany:
      put_i64(out, r.number), put_str(out, key), put_i64(out, r.count);
      wire::append_be32(out, static_cast<uint32_t>(r.parts.size()));
      for (const auto& c : r.parts) put_i64(out, c.rank), put_str(out, c.value);
      break;
  }
  return out;
}

Request decode_request(std::string_view payload) {
  Reader in{payload, "request"};
  Request r;
  const uint8_t op = in.u8("op");
  r.op = static_cast<Op>(op);
  switch (r.op) {
    case Op::kSet: r.keys.push_back(in.str("key")), r.value = in.str("value"); break;
    case Op::kGet: r.number = in.i64("timeout"), r.keys.push_back(in.str("key")); break;
    case Op::kAdd: r.keys.push_back(in.str("key")), r.number = in.i64("delta"); break;
    case Op::kCas:
      r.keys.push_back(in.str("key")), r.value = in.str("expected value"), r.desired = in.str("desired value");
      break;
    case Op::kWait: r.number = in.i64("timeout"), r.keys = in.strs(); break;
    case Op::kCheck: r.keys = in.strs(); break;
    case Op::kDelete: r.keys.push_back(in.str("key")); break;
    case Op::kNumKeys: break;
    case Op::kBarrier: r.number = in.i64("timeout"), r.keys.push_back(in.str("key")), r.count = in.i64("count"); break;
    case Op::kAllGather:
      r.number = in.i64("timeout"), r.keys.push_back(in.str("prefix"));
      r.rank = in.i64("rank"), r.count = in.i64("count"), r.value = in.str("value");
      break;
    case Op::kBarrierWeighted:
      r.number = in.i64("timeout"), r.keys.push_back(in.str("key"));
      r.count = in.i64("count"), r.weight = in.i64("weight");
      break;
    case Op::kAllGatherMany:
      r.number = in.i64("timeout"), r.keys.push_back(in.str("prefix")), r.count = in.i64("count");
      r.parts = in.parts();
      break;
    default: in.fail("unknown op " + std::to_string(op));
  }
  in.done();
  return r;
}

namespace {

// A kAllGatherMany's parts: none, ranks repeated, or one refused as a single
// contribution would be. "" when they are fine.
std::string parts_error(const Request& r) {
  const std::string& prefix = r.keys[0];
  if (r.parts.empty()) return "all-gather at store key '" + prefix.substr(0, 200) + "': no contributions";
  std::vector<int64_t> ranks;
  ranks.reserve(r.parts.size());
  for (const auto& c : r.parts) {
    std::string bad = semantics::all_gather_error(prefix, c.rank, r.count, c.value.size());
    if (!bad.empty()) return bad;
    ranks.push_back(c.rank);
  }
  std::sort(ranks.begin(), ranks.end());
  auto twice = std::adjacent_find(ranks.begin(), ranks.end());
  if (twice != ranks.end())
    return "all-gather at store key '" + prefix.substr(0, 200) + "': rank " + std::to_string(*twice) +
           " contributes twice in one request";
  return {};
}

// The reason a barrier or all-gather's count, rank or weight is refused.
std::string collective_error(const Request& r) {
  const std::string& key = r.keys.empty() ? kNoKey : r.keys[0];
  switch (r.op) {
    case Op::kBarrier: return semantics::barrier_count_error(key, r.count);
    case Op::kAllGather: return semantics::all_gather_error(key, r.rank, r.count, r.value.size());
    case Op::kAllGatherMany: return parts_error(r);
    case Op::kBarrierWeighted: {
      std::string bad = semantics::barrier_count_error(key, r.count);
      if (bad.empty() && (r.weight < 1 || r.weight > kMaxGatherCount))
        bad = "barrier at store key '" + key.substr(0, 200) + "': a weight of " + std::to_string(r.weight) +
              " arrivals is outside [1, " + std::to_string(kMaxGatherCount) + "]";
      return bad;
    }
    default: return {};
  }
}

}  // namespace

std::string check_limits(const Request& r) {
  std::string bad = collective_error(r);
  if (!bad.empty()) return bad;
  for (const auto& k : r.keys) {
    if (k.size() > kMaxKeySize)
      return "key of " + std::to_string(k.size()) + " bytes is over the limit of " +
             std::to_string(kMaxKeySize) + " bytes";
  }
  for (const std::string* v : {&r.value, &r.desired}) {
    if (v->size() > kMaxValueSize)
      return "value of " + std::to_string(v->size()) + " bytes for key '" +
             (r.keys.empty() ? "" : r.keys[0].substr(0, 200)) + "' is over the limit of " +
             std::to_string(kMaxValueSize) + " bytes";
  }
  return {};
}

std::string encode(const Reply& r, Op op) {
  std::string out(1, static_cast<char>(r.status));
  if (r.status == Status::kError) return out + r.value;
  if (r.status == Status::kTimeout) {
    put_strs(out, r.keys);
    return out;
  }
  switch (op) {
    case Op::kGet: case Op::kCas: put_str(out, r.value); break;
    case Op::kAdd: case Op::kNumKeys: case Op::kBarrier: case Op::kBarrierWeighted: put_i64(out, r.number); break;
    case Op::kCheck: case Op::kDelete: out.push_back(r.number ? 1 : 0); break;
    case Op::kAllGather: case Op::kAllGatherMany: out += r.list ? *r.list : r.value; break;
    default: break;
  }
  return out;
}

Reply decode_reply(std::string_view payload, Op op) {
  Reader in{payload, "reply"};
  Reply r;
  const uint8_t status = in.u8("status");
  r.status = static_cast<Status>(status);
  switch (r.status) {
    case Status::kError: r.value = std::string(in.p); return r;  // the rest is the message
    case Status::kTimeout: r.keys = in.strs(); break;
    case Status::kOk:
      switch (op) {
        case Op::kGet: case Op::kCas: r.value = in.str("value"); break;
        case Op::kAdd: case Op::kNumKeys: case Op::kBarrier: case Op::kBarrierWeighted: r.number = in.i64("number"); break;
        case Op::kCheck: case Op::kDelete: r.number = in.u8("flag"); break;
        case Op::kAllGather: case Op::kAllGatherMany: r.value = std::string(in.p), in.p = {}; break;
        default: break;
      }
      break;
    default: in.fail("unknown status " + std::to_string(status));
  }
  in.done();
  return r;
}

Tagged split_id(std::string_view payload) {
  Reader in{payload, "store/2 frame"};
  Tagged t;
  t.id = in.u32("request id");
  t.payload = in.p;
  return t;
}

std::string frame_with_id(uint8_t type, uint32_t id, std::string_view payload) {
  std::string out(wire::kHeaderSize + 4, '\0');
  wire::encode_frame_header(out.data(), static_cast<uint32_t>(4 + payload.size()), type);
  wire::put_be32(out.data() + wire::kHeaderSize, id);
  out.append(payload);
  return out;
}

std::string encode_values(const std::vector<std::string>& values) {
  size_t bytes = 0;
  for (const auto& v : values) bytes += v.size();
  std::string out;
  out.reserve(values_list_size(values.size(), bytes));
  put_strs(out, values);
  return out;
}

std::vector<std::string> decode_values(std::string_view list) {
  Reader in{list, "all-gather values list"};
  const uint32_t n = in.u32("value count");
  // Each value takes at least its 4-byte length (as strs() checks keys).
  if (n > in.p.size() / 4) in.fail(std::to_string(n) + " values announced, " + std::to_string(in.p.size()) + " bytes left");
  std::vector<std::string> v;
  v.reserve(n);
  for (uint32_t i = 0; i < n; ++i) v.push_back(in.str("value"));
  in.done();
  return v;
}

}  // namespace dl::rdzv::proto
