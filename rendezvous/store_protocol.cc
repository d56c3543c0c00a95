#include "rendezvous/store_protocol.h"

namespace dl::rdzv::proto {

namespace {

void put_u32(std::string& out, uint32_t v) {
  const char b[4] = {char(v >> 24), char(v >> 16), char(v >> 8), char(v)};
  out.append(b, 4);
}

void put_i64(std::string& out, int64_t s) {
  auto v = static_cast<uint64_t>(s);
  for (int shift = 56; shift >= 0; shift -= 8) out.push_back(char(v >> shift));
}

void put_str(std::string& out, std::string_view s) {
  put_u32(out, static_cast<uint32_t>(s.size()));
  out.append(s);
}

// A cursor over a payload; every read fails (ok = false) once out of bytes.
struct Reader {
  std::string_view p;
  bool ok = true;

  bool take(size_t n) {
    if (!ok || p.size() < n) return ok = false;
    return true;
  }
  uint64_t be(size_t n) {
    if (!take(n)) return 0;
    uint64_t v = 0;
    for (size_t i = 0; i < n; ++i) v = (v << 8) | static_cast<unsigned char>(p[i]);
    p.remove_prefix(n);
    return v;
  }
  uint8_t u8() { return static_cast<uint8_t>(be(1)); }
  uint32_t u32() { return static_cast<uint32_t>(be(4)); }
  int64_t i64() { return static_cast<int64_t>(be(8)); }
  std::string str() {
    uint32_t n = u32();
    if (!take(n)) return {};
    std::string s(p.substr(0, n));
    p.remove_prefix(n);
    return s;
  }
  std::vector<std::string> strs() {
    uint32_t n = u32();
    std::vector<std::string> v;
    if (n > kMaxKeysPerRequest || n > p.size() / 4) { ok = false; return v; }
    for (uint32_t i = 0; i < n && ok; ++i) v.push_back(str());
    return v;
  }
  bool done() const { return ok && p.empty(); }
};

void put_strs(std::string& out, const std::vector<std::string>& v) {
  put_u32(out, static_cast<uint32_t>(v.size()));
  for (const auto& s : v) put_str(out, s);
}

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
  }
  return out;
}

std::optional<Request> decode_request(std::string_view payload) {
  Reader in{payload};
  Request r;
  uint8_t op = in.u8();
  r.op = static_cast<Op>(op);
  switch (r.op) {
    case Op::kSet: r.keys = {in.str()}, r.value = in.str(); break;
    case Op::kGet: r.number = in.i64(), r.keys = {in.str()}; break;
    case Op::kAdd: r.keys = {in.str()}, r.number = in.i64(); break;
    case Op::kCas: r.keys = {in.str()}, r.value = in.str(), r.desired = in.str(); break;
    case Op::kWait: r.number = in.i64(), r.keys = in.strs(); break;
    case Op::kCheck: r.keys = in.strs(); break;
    case Op::kDelete: r.keys = {in.str()}; break;
    case Op::kNumKeys: break;
    case Op::kBarrier: r.number = in.i64(), r.keys = {in.str()}, r.count = in.i64(); break;
    default: return std::nullopt;
  }
  if (!in.done()) return std::nullopt;
  return r;
}

std::string check_limits(const Request& r) {
  if (r.op == Op::kBarrier && r.count < 1)
    return "barrier at key '" + r.keys[0].substr(0, 200) + "' for " + std::to_string(r.count) +
           " callers: the count must be at least 1";
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
    case Op::kAdd: case Op::kNumKeys: case Op::kBarrier: put_i64(out, r.number); break;
    case Op::kCheck: case Op::kDelete: out.push_back(r.number ? 1 : 0); break;
    default: break;
  }
  return out;
}

std::optional<Reply> decode_reply(std::string_view payload, Op op) {
  Reader in{payload};
  Reply r;
  r.status = static_cast<Status>(in.u8());
  if (!in.ok) return std::nullopt;
  if (r.status == Status::kError) {
    r.value = std::string(in.p);
    return r;
  }
  if (r.status == Status::kTimeout) {
    r.keys = in.strs();
  } else if (r.status == Status::kOk) {
    switch (op) {
      case Op::kGet: case Op::kCas: r.value = in.str(); break;
      case Op::kAdd: case Op::kNumKeys: case Op::kBarrier: r.number = in.i64(); break;
      case Op::kCheck: case Op::kDelete: r.number = in.u8(); break;
      default: break;
    }
  } else {
    return std::nullopt;
  }
  if (!in.done()) return std::nullopt;
  return r;
}

}  // namespace dl::rdzv::proto
