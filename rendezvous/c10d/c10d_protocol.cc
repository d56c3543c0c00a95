#include "rendezvous/c10d/c10d_protocol.h"

#include <array>
#include <cstring>
#include <optional>

namespace dl::rdzv::c10d {

namespace {

struct TypeInfo {
  std::optional<Op> op;  // nullopt: known to torch, not served here
  const char* name;
};

// By type byte, as torch numbers them in each dialect.
constexpr std::array<TypeInfo, 13> kLegacy = {{
    {Op::kSet, "SET"}, {Op::kCompareSet, "COMPARE_SET"}, {Op::kGet, "GET"}, {Op::kAdd, "ADD"},
    {Op::kCheck, "CHECK"}, {Op::kWait, "WAIT"}, {Op::kNumKeys, "GETNUMKEYS"}, {std::nullopt, "WATCH_KEY"},
    {Op::kDelete, "DELETE_KEY"}, {Op::kAppend, "APPEND"}, {Op::kMultiGet, "MULTI_GET"},
    {Op::kMultiSet, "MULTI_SET"}, {Op::kCancelWait, "CANCEL_WAIT"},
}};
constexpr std::array<TypeInfo, 17> kValidated = {{
    {Op::kValidate, "VALIDATE"}, {Op::kSet, "SET"}, {Op::kCompareSet, "COMPARE_SET"}, {Op::kGet, "GET"},
    {Op::kAdd, "ADD"}, {Op::kCheck, "CHECK"}, {Op::kWait, "WAIT"}, {Op::kNumKeys, "GETNUMKEYS"},
    {Op::kDelete, "DELETE_KEY"}, {Op::kAppend, "APPEND"}, {Op::kMultiGet, "MULTI_GET"},
    {Op::kMultiSet, "MULTI_SET"}, {Op::kCancelWait, "CANCEL_WAIT"}, {Op::kPing, "PING"},
    {std::nullopt, "QUEUE_PUSH"}, {std::nullopt, "QUEUE_POP"}, {std::nullopt, "QUEUE_LEN"},
}};

// Reads fields from the front of a buffer; each read says false when the
// buffer ends first (more must arrive) and sets `why` for a field over the limits.
class Reader {
 public:
  Reader(std::string_view in, const Limits& l) : in_(in), limits_(l) {}
  size_t at() const { return at_; }
  std::string why;

  template <typename T>
  bool number(T& v) {
    if (in_.size() - at_ < sizeof(T)) return false;
    std::memcpy(&v, in_.data() + at_, sizeof(T));
    at_ += sizeof(T);
    return true;
  }
  bool bytes(std::string& s, size_t max, const char* what) {
    uint64_t n = 0;
    if (!number(n)) return false;
    if (n > max) {
      why = std::string(what) + " of " + std::to_string(n) + " bytes (at most " + std::to_string(max) + ")";
      return false;
    }
    if (in_.size() - at_ < n) return false;
    s.assign(in_.data() + at_, n);
    at_ += n;
    return true;
  }
  bool key(std::string& s) { return bytes(s, limits_.max_key, "a key"); }
  bool value(std::string& s) { return bytes(s, limits_.max_value, "a value"); }
  bool count(uint64_t n) {
    if (n <= limits_.max_keys_per_query) return true;
    why = std::to_string(n) + " keys in one query (at most " + std::to_string(limits_.max_keys_per_query) + ")";
    return false;
  }
  bool keys(Query& q) {
    uint64_t n = 0;
    if (!number(n) || !count(n)) return false;
    q.keys.resize(n);
    for (auto& k : q.keys)
      if (!key(k)) return false;
    return true;
  }

 private:
  std::string_view in_;
  const Limits& limits_;
  size_t at_ = 0;
};

// The fields of `q.op`; false when they are not all there (or r.why says why not).
bool read_fields(Reader& r, Query& q) {
  switch (q.op) {
    case Op::kValidate: {
      uint32_t magic = 0;
      if (!r.number(magic)) return false;
      q.number = magic;
      return true;
    }
    case Op::kPing: {
      uint32_t nonce = 0;
      if (!r.number(nonce)) return false;
      q.number = nonce;
      return true;
    }
    case Op::kSet:
    case Op::kAppend:
      q.keys.resize(1), q.values.resize(1);
      return r.key(q.keys[0]) && r.value(q.values[0]);
    case Op::kCompareSet:
      q.keys.resize(1), q.values.resize(2);
      return r.key(q.keys[0]) && r.value(q.values[0]) && r.value(q.values[1]);
    case Op::kGet:
    case Op::kDelete:
      q.keys.resize(1);
      return r.key(q.keys[0]);
    case Op::kAdd:
      q.keys.resize(1);
      return r.key(q.keys[0]) && r.number(q.number);
    case Op::kCheck:
    case Op::kWait:
    case Op::kMultiGet:
      return r.keys(q);
    case Op::kMultiSet: {
      int64_t n = 0;
      if (!r.number(n)) return false;
      if (n < 0 || !r.count(static_cast<uint64_t>(n))) {
        if (r.why.empty()) r.why = "a negative key count";
        return false;
      }
      q.keys.resize(static_cast<size_t>(n)), q.values.resize(static_cast<size_t>(n));
      for (size_t i = 0; i < q.keys.size(); ++i)
        if (!r.key(q.keys[i]) || !r.value(q.values[i])) return false;
      return true;
    }
    case Op::kNumKeys:
    case Op::kCancelWait:
      return true;
  }
  return true;
}

Parsed refused(std::string why) {
  Parsed p;
  p.status = Parsed::Status::kRefused;
  p.why = std::move(why);
  return p;
}

// Decides a connection's dialect from its first bytes: the validated
// dialect's VALIDATE is type 0 and the magic; a legacy SET (also type 0)
// would need a key over 1 GiB long to start the same way.
bool decide(std::string_view in, Dialect& d) {
  if (in.empty()) return false;
  if (static_cast<uint8_t>(in[0]) != 0) return d = Dialect::kLegacy, true;
  if (in.size() < 5) return false;
  uint32_t magic = 0;
  std::memcpy(&magic, in.data() + 1, 4);
  d = magic == kValidationMagic ? Dialect::kValidated : Dialect::kLegacy;
  return true;
}

}  // namespace

std::string dialect_name(Dialect d) {
  return d == Dialect::kValidated ? "torch 2.x, validated" : d == Dialect::kLegacy ? "torch 1.x or 2.0, legacy" : "unknown";
}

Parsed parse(std::string_view in, Dialect& dialect, const Limits& limits) {
  if (dialect == Dialect::kUnknown && !decide(in, dialect)) return {};
  if (in.empty()) return {};
  const uint8_t type = static_cast<uint8_t>(in[0]);
  const bool legacy = dialect == Dialect::kLegacy;
  const size_t known = legacy ? kLegacy.size() : kValidated.size();
  const std::string client = "torch's TCPStore client (" + dialect_name(dialect) + " protocol)";
  if (type >= known)
    return refused(client + " sent query type " + std::to_string(type) +
                   ", unknown to dlaunch's c10d store: a newer torch than it serves");
  const TypeInfo& t = legacy ? kLegacy[type] : kValidated[type];
  if (!t.op) return refused(client + " sent " + t.name + ", which dlaunch's c10d store does not serve");
  Parsed p;
  p.query.op = *t.op;
  Reader r(in.substr(1), limits);
  if (!read_fields(r, p.query)) {
    if (r.why.empty()) return {};
    return refused(client + " sent " + t.name + " with " + r.why);
  }
  if (p.query.op == Op::kValidate && p.query.number != kValidationMagic)
    return refused(client + " sent VALIDATE with magic " + std::to_string(p.query.number) + ", not torch's");
  p.status = Parsed::Status::kQuery;
  p.used = 1 + r.at();
  return p;
}

Parsed parse(std::string_view in, Dialect& dialect) { return parse(in, dialect, Limits{}); }

void put_u8(std::string& out, uint8_t v) { out.push_back(static_cast<char>(v)); }
void put_u32(std::string& out, uint32_t v) { out.append(reinterpret_cast<const char*>(&v), sizeof v); }
void put_i64(std::string& out, int64_t v) { out.append(reinterpret_cast<const char*>(&v), sizeof v); }
void put_bytes(std::string& out, std::string_view v) {
  const uint64_t n = v.size();
  out.append(reinterpret_cast<const char*>(&n), sizeof n);
  out.append(v);
}

std::string encode(const Query& q, Dialect dialect) {
  uint8_t type = 0;
  auto find = [&](const auto& table) {
    for (size_t i = 0; i < table.size(); ++i)
      if (table[i].op == q.op) return type = static_cast<uint8_t>(i), void();
  };
  dialect == Dialect::kLegacy ? find(kLegacy) : find(kValidated);
  std::string out;
  put_u8(out, type);
  switch (q.op) {
    case Op::kValidate:
    case Op::kPing: put_u32(out, static_cast<uint32_t>(q.number)); break;
    case Op::kAdd: put_bytes(out, q.keys.at(0)), put_i64(out, q.number); break;
    case Op::kCheck:
    case Op::kWait:
    case Op::kMultiGet:
      put_i64(out, static_cast<int64_t>(q.keys.size()));
      for (const auto& k : q.keys) put_bytes(out, k);
      break;
    case Op::kMultiSet:
      put_i64(out, static_cast<int64_t>(q.keys.size()));
      for (size_t i = 0; i < q.keys.size(); ++i) put_bytes(out, q.keys[i]), put_bytes(out, q.values.at(i));
      break;
    default:
      for (const auto& k : q.keys) put_bytes(out, k);
      for (const auto& v : q.values) put_bytes(out, v);
  }
  return out;
}

}  // namespace dl::rdzv::c10d
