#include "control/messages.h"

#include <charconv>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <type_traits>

#include "wire/frame.h"

namespace dl::control {

namespace {

template <class T> struct is_optional : std::false_type {};
template <class T> struct is_optional<std::optional<T>> : std::true_type {};
template <class T> struct is_vector : std::false_type {};
template <class T> struct is_vector<std::vector<T>> : std::true_type {};
template <class T> struct is_variant : std::false_type {};
template <class... T> struct is_variant<std::variant<T...>> : std::true_type {};

// The JSON is written and read here, straight from and into the structs
// (docs/wire-protocol.md, "Encoding"): no document tree in between, which
// cost a 64-rank launch about 1.2 ms at each end (nlohmann::json's maps of
// nodes). Strings are bytes: a byte from 0x80 up passes as it is in both
// directions, so an environment value that is not UTF-8 reaches the rank
// unchanged (a tree of nlohmann::json refused to write it).

// ---- encoding --------------------------------------------------------------

void put_string(std::string& out, std::string_view s) {
  out += '"';
  size_t run = 0;  // start of the bytes not yet copied
  for (size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    out.append(s.data() + run, i - run);
    run = i + 1;
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default: {
        static const char hex[] = "0123456789abcdef";
        const char u[] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
        out.append(u, sizeof u);
      }
    }
  }
  out.append(s.data() + run, s.size() - run);
  out += '"';
}

template <class T> void put(std::string& out, const T& v);

struct FieldWriter {
  std::string& out;
  bool first;
  template <class T> void operator()(const char* name, const T& v) {
    if constexpr (is_optional<T>::value) {
      if (v) field(name, *v);
    } else {
      field(name, v);
    }
  }
  template <class T> void field(const char* name, const T& v) {
    if (!first) out += ',';
    first = false;
    put_string(out, name);
    out += ':';
    put(out, v);
  }
};

template <class T> void put(std::string& out, const T& v) {
  if constexpr (std::is_same_v<T, bool>) {
    out += v ? "true" : "false";
  } else if constexpr (std::is_integral_v<T>) {
    char buf[24];
    const auto r = std::to_chars(buf, buf + sizeof buf, v);
    out.append(buf, r.ptr);
  } else if constexpr (std::is_same_v<T, std::string>) {
    put_string(out, v);
  } else if constexpr (std::is_same_v<T, EnvVars>) {
    out += '{';
    bool first = true;
    for (const auto& [k, x] : v) {
      if (!first) out += ',';
      first = false;
      put_string(out, k);
      out += ':';
      put_string(out, x);
    }
    out += '}';
  } else if constexpr (is_vector<T>::value) {
    out += '[';
    for (size_t i = 0; i < v.size(); ++i) {
      if (i) out += ',';
      put(out, v[i]);
    }
    out += ']';
  } else {
    out += '{';
    FieldWriter w{out, true};
    T::fields(v, w);
    out += '}';
  }
}

// ---- decoding --------------------------------------------------------------

enum class Kind { kNull, kBool, kString, kArray, kObject, kFloat, kInt };

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::kNull: return "null";
    case Kind::kBool: return "a boolean";
    case Kind::kString: return "a string";
    case Kind::kArray: return "an array";
    case Kind::kObject: return "an object";
    case Kind::kFloat: return "a fractional number";
    default: return "an integer";
  }
}

// Where a field is, built only when an error names it: "ranks[1].env.A".
struct Path {
  const Path* up = nullptr;
  std::string_view name;  // a field or an env key; empty for an element
  long index = -1;        // >= 0: element `index` of up
  std::string str() const {
    std::string s = up ? up->str() : "";
    if (index >= 0) return s + "[" + std::to_string(index) + "]";
    return s.empty() ? std::string(name) : s + "." + std::string(name);
  }
};

struct Context {
  const char* message;  // "exited"
  [[noreturn]] void fail(const Path& p, const std::string& what) const {
    throw ProtocolError("'" + std::string(message) + "' message: field '" + p.str() + "' " + what);
  }
  [[noreturn]] void wrong(const Path& p, Kind k, const char* expected) const {
    fail(p, std::string("is ") + kind_name(k) + ", expected " + expected);
  }
};

// A cursor over JSON text. check() validates a whole value (the first pass,
// so that text that is not JSON is refused as such before any field is
// looked at); the readers after it assume valid text.
class Reader {
 public:
  Reader(const char* b, const char* e) : p_(b), end_(e) {}

  void ws() {
    while (p_ < end_ && (*p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t')) ++p_;
  }
  bool at_end() {
    ws();
    return p_ == end_;
  }
  char peek_char() {
    ws();
    return p_ < end_ ? *p_ : '\0';
  }
  bool eat(char c) {
    if (peek_char() != c) return false;
    ++p_;
    return true;
  }

  // ---- the first pass ----
  bool check(int depth = 0) {
    if (depth > 64) return false;  // no message nests nearly as deep
    switch (peek_char()) {
      case '{': {
        ++p_;
        if (eat('}')) return true;
        do {
          if (peek_char() != '"' || !check_string() || !eat(':') || !check(depth + 1)) return false;
        } while (eat(','));
        return eat('}');
      }
      case '[': {
        ++p_;
        if (eat(']')) return true;
        do {
          if (!check(depth + 1)) return false;
        } while (eat(','));
        return eat(']');
      }
      case '"': return check_string();
      case 't': return literal("true");
      case 'f': return literal("false");
      case 'n': return literal("null");
      default: return check_number();
    }
  }

  // A string (an object's key), checked, into `out`.
  bool check_key(std::string& out) {
    if (peek_char() != '"') return false;
    const char* start = p_;
    if (!check_string()) return false;
    const char* after = p_;
    p_ = start;
    string(out);
    p_ = after;
    return true;
  }

  // ---- the second pass ----
  Kind kind() {
    switch (peek_char()) {
      case '{': return Kind::kObject;
      case '[': return Kind::kArray;
      case '"': return Kind::kString;
      case 't':
      case 'f': return Kind::kBool;
      case 'n': return Kind::kNull;
      default: {
        Number n = number(false);
        return n.is_float ? Kind::kFloat : Kind::kInt;
      }
    }
  }
  bool boolean() {
    const bool v = *p_ == 't';
    p_ += v ? 4 : 5;
    return v;
  }
  void null() { p_ += 4; }
  struct Number {
    bool is_float = false, negative = false;
    uint64_t u = 0;  // !negative
    int64_t i = 0;   // negative
  };
  // An integer as nlohmann::json reads one: no fraction or exponent, and
  // within int64 (negative) or uint64; anything else is fractional.
  Number number(bool consume) {
    const char* q = p_;
    Number n;
    n.negative = *q == '-';
    const char* digits = q + (n.negative ? 1 : 0);
    const char* e = digits;
    while (e < end_ && *e >= '0' && *e <= '9') ++e;
    const char* t = e;
    while (t < end_ && (*t == '.' || *t == 'e' || *t == 'E' || *t == '+' || *t == '-' || (*t >= '0' && *t <= '9'))) ++t;
    if (t != e) {
      n.is_float = true;
    } else if (n.negative) {
      n.is_float = std::from_chars(q, e, n.i).ec != std::errc();
    } else {
      n.is_float = std::from_chars(digits, e, n.u).ec != std::errc();
    }
    if (consume) p_ = t;
    return n;
  }
  // A string's bytes, unescaped.
  void string(std::string& out) {
    ++p_;  // the quote
    const char* run = p_;
    out.clear();
    while (*p_ != '"') {
      if (*p_ != '\\') {
        ++p_;
        continue;
      }
      out.append(run, p_);
      ++p_;
      const char c = *p_++;
      switch (c) {
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'u': append_utf8(out, code_point()); break;
        default: out += c;  // " \ /
      }
      run = p_;
    }
    out.append(run, p_);
    ++p_;
  }
  // Skips one (valid) value.
  void skip() { check(); }

 private:
  bool literal(const char* w) {
    const size_t n = std::strlen(w);
    if (static_cast<size_t>(end_ - p_) < n || std::memcmp(p_, w, n) != 0) return false;
    p_ += n;
    return true;
  }
  static int hex(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }
  // After "\u": the code point of this escape and, for a high surrogate,
  // the low one that must follow. -1: malformed.
  long code_point() {
    auto unit = [this]() -> long {
      if (end_ - p_ < 4) return -1;
      long v = 0;
      for (int k = 0; k < 4; ++k) {
        const int h = hex(p_[k]);
        if (h < 0) return -1;
        v = v * 16 + h;
      }
      p_ += 4;
      return v;
    };
    const long hi = unit();
    if (hi < 0 || (hi >= 0xDC00 && hi <= 0xDFFF)) return -1;
    if (hi < 0xD800 || hi > 0xDBFF) return hi;
    if (end_ - p_ < 2 || p_[0] != '\\' || p_[1] != 'u') return -1;
    p_ += 2;
    const long lo = unit();
    if (lo < 0xDC00 || lo > 0xDFFF) return -1;
    return 0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00);
  }
  static void append_utf8(std::string& out, long cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }
  bool check_string() {
    ++p_;  // the quote
    while (p_ < end_) {
      const auto c = static_cast<unsigned char>(*p_++);
      if (c == '"') return true;
      if (c < 0x20) return false;  // a raw control character
      if (c != '\\') continue;
      if (p_ == end_) return false;
      const char e = *p_++;
      if (e == 'u') {
        if (code_point() < 0) return false;
      } else if (!std::strchr("\"\\/bfnrt", e) || e == '\0') {
        return false;
      }
    }
    return false;
  }
  bool check_number() {
    const char* q = p_;
    if (q < end_ && *q == '-') ++q;
    if (q == end_ || *q < '0' || *q > '9') return false;
    if (*q == '0') ++q;
    else
      while (q < end_ && *q >= '0' && *q <= '9') ++q;
    if (q < end_ && *q == '.') {
      ++q;
      if (q == end_ || *q < '0' || *q > '9') return false;
      while (q < end_ && *q >= '0' && *q <= '9') ++q;
    }
    if (q < end_ && (*q == 'e' || *q == 'E')) {
      ++q;
      if (q < end_ && (*q == '+' || *q == '-')) ++q;
      if (q == end_ || *q < '0' || *q > '9') return false;
      while (q < end_ && *q >= '0' && *q <= '9') ++q;
    }
    p_ = q;
    return true;
  }

  const char* p_;
  const char* end_;
};

template <class T> void read_value(Reader& r, const Context& c, const Path& path, T& out);

// Reads the object a struct is sent as: each member into the field of its
// name (others are skipped), then every required field must have come.
template <class T> void read_struct(Reader& r, const Context& c, const Path* up, T& out) {
  uint64_t seen = 0;
  std::string key;
  r.eat('{');
  if (!r.eat('}')) {
    do {
      r.peek_char();
      r.string(key);
      r.eat(':');
      int index = 0;
      bool matched = false;
      auto member = [&](const char* name, auto& field) {
        if (index >= 64) throw std::logic_error("control message with more than 64 fields: `seen` cannot hold them");
        if (!matched && key == name) {
          matched = true;
          seen |= uint64_t{1} << index;
          const Path p{up, name};
          using F = std::remove_reference_t<decltype(field)>;
          if constexpr (is_optional<F>::value) {
            if (r.kind() == Kind::kNull) {
              r.null();
              field.reset();
            } else {
              typename F::value_type v{};
              read_value(r, c, p, v);
              field = std::move(v);
            }
          } else {
            read_value(r, c, p, field);
          }
        }
        ++index;
      };
      T::fields(out, member);
      if (!matched) r.skip();
    } while (r.eat(','));
    r.eat('}');
  }
  int index = 0;
  auto missing = [&](const char* name, auto& field) {
    using F = std::remove_reference_t<decltype(field)>;
    if (!(seen >> index & 1)) {
      if constexpr (is_optional<F>::value) field.reset();
      else c.fail(Path{up, name}, "is missing");
    }
    ++index;
  };
  T::fields(out, missing);
}

template <class T> void read_value(Reader& r, const Context& c, const Path& path, T& out) {
  const Kind k = r.kind();
  if constexpr (std::is_same_v<T, bool>) {
    if (k != Kind::kBool) c.wrong(path, k, "a boolean");
    out = r.boolean();
  } else if constexpr (std::is_integral_v<T>) {
    if (k != Kind::kInt) c.wrong(path, k, "an integer");
    const Reader::Number n = r.number(true);
    if constexpr (std::is_unsigned_v<T>) {
      if (n.negative) c.fail(path, "is negative, expected an unsigned integer");
      if (n.u > std::numeric_limits<T>::max()) c.fail(path, "is out of range");
      out = static_cast<T>(n.u);
    } else {
      if (!n.negative && n.u > static_cast<uint64_t>(std::numeric_limits<T>::max())) c.fail(path, "is out of range");
      const int64_t v = n.negative ? n.i : static_cast<int64_t>(n.u);
      if (v < std::numeric_limits<T>::min() || v > std::numeric_limits<T>::max()) c.fail(path, "is out of range");
      out = static_cast<T>(v);
    }
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (k != Kind::kString) c.wrong(path, k, "a string");
    r.string(out);
  } else if constexpr (std::is_same_v<T, EnvVars>) {
    if (k != Kind::kObject) c.wrong(path, k, "an object of strings");
    out.clear();
    r.eat('{');
    if (r.eat('}')) return;
    std::string key, value;
    do {
      r.peek_char();
      r.string(key);
      r.eat(':');
      if (const Kind vk = r.kind(); vk != Kind::kString) c.wrong(Path{&path, key}, vk, "a string");
      r.string(value);
      out.insert_or_assign(out.end(), key, value);
    } while (r.eat(','));
    r.eat('}');
  } else if constexpr (is_vector<T>::value) {
    if (k != Kind::kArray) c.wrong(path, k, "an array");
    out.clear();
    r.eat('[');
    if (r.eat(']')) return;
    long i = 0;
    do {
      out.emplace_back();
      read_value(r, c, Path{&path, {}, i++}, out.back());
    } while (r.eat(','));
    r.eat(']');
  } else {
    if (k != Kind::kObject) c.wrong(path, k, "an object");
    read_struct(r, c, &path, out);
  }
}

// True when `t` names a message of Variant, nested groups (MpiUp) included.
template <class Variant, size_t I = 0> bool names_message(const std::string& t) {
  if constexpr (I == std::variant_size_v<Variant>) {
    return false;
  } else {
    using M = std::variant_alternative_t<I, Variant>;
    if constexpr (is_variant<M>::value) {
      if (names_message<M>(t)) return true;
    } else {
      if (t == M::kType) return true;
    }
    return names_message<Variant, I + 1>(t);
  }
}

// Picks the alternative of Variant whose kType is `t`, or the nested group
// (MpiUp, MpiDown) that holds it.
template <class Variant, size_t I = 0>
Variant decode_variant(const std::string& t, std::string_view text, const char* from) {
  if constexpr (I == std::variant_size_v<Variant>) {
    throw ProtocolError("unknown control message '" + t + "' from the " + from);
  } else {
    using M = std::variant_alternative_t<I, Variant>;
    if constexpr (is_variant<M>::value) {
      if (!names_message<M>(t)) return decode_variant<Variant, I + 1>(t, text, from);
      return Variant(decode_variant<M>(t, text, from));
    } else {
      if (t != M::kType) return decode_variant<Variant, I + 1>(t, text, from);
      M m{};
      const Context c{M::kType};
      Reader r(text.data(), text.data() + text.size());
      read_struct(r, c, nullptr, m);  // its "t" is a member no field has: skipped
      return Variant(std::move(m));
    }
  }
}

template <class Variant> Variant decode(std::string_view text, const char* from) {
  const std::string who(from);
  auto invalid = [&] { return ProtocolError("a control message from the " + who + " is not valid JSON"); };
  Reader r(text.data(), text.data() + text.size());
  if (r.peek_char() != '{') {
    if (!r.check() || !r.at_end()) throw invalid();
    throw ProtocolError("a control message from the " + who + " is not a JSON object");
  }
  // One pass checks the text and finds the type: the last top-level "t", as
  // a document tree would keep it.
  std::optional<std::string> type;
  std::string key;
  r.eat('{');
  if (!r.eat('}')) {
    do {
      if (!r.check_key(key) || !r.eat(':')) throw invalid();
      if (key == "t" && r.peek_char() == '"') {
        if (!r.check_key(key)) throw invalid();
        type = key;
      } else {
        if (key == "t") type.reset();
        if (!r.check()) throw invalid();
      }
    } while (r.eat(','));
    if (!r.eat('}')) throw invalid();
  }
  if (!r.at_end()) throw invalid();
  if (!type) throw ProtocolError("a control message from the " + who + " has no type (field 't')");
  return decode_variant<Variant>(*type, text, from);
}

// ---- the reference text ----------------------------------------------------

struct Lister {
  std::string out;
  template <class T> void operator()(const char* name, const T&) {
    out += (out.empty() ? "" : ", ") + std::string(name) + (is_optional<T>::value ? "?" : "");
  }
};

template <class M> std::string field_list() {
  Lister l;
  M m{};
  M::fields(m, l);
  return "{" + l.out + "}";
}

// One line per message of Variant, the messages of a nested group in its place.
template <class Variant, size_t I = 0> void reference_lines(std::string& out, const char* direction) {
  if constexpr (I < std::variant_size_v<Variant>) {
    using M = std::variant_alternative_t<I, Variant>;
    if constexpr (is_variant<M>::value) reference_lines<M>(out, direction);
    else out += std::string(direction) + "  " + M::kType + "  " + field_list<M>() + "\n";
    reference_lines<Variant, I + 1>(out, direction);
  }
}

template <class M> std::string nested_line(const char* name) { return std::string("  ") + name + "  " + field_list<M>() + "\n"; }

}  // namespace

template <class M> std::string encode(const M& m) {
  std::string out = "{\"t\":";
  put_string(out, M::kType);
  FieldWriter w{out, false};
  M::fields(m, w);
  out += '}';
  return out;
}

template <class M> std::string frame(const M& m) { return wire::encode_frame(wire::kJson, encode(m)); }

#define DL_CONTROL_MESSAGE(M)                       \
  template std::string encode<msg::M>(const msg::M&); \
  template std::string frame<msg::M>(const msg::M&);
DL_CONTROL_MESSAGE(Hello)
DL_CONTROL_MESSAGE(Started)
DL_CONTROL_MESSAGE(Exited)
DL_CONTROL_MESSAGE(SpawnFailed)
DL_CONTROL_MESSAGE(MpiAbort)
DL_CONTROL_MESSAGE(MpiRefused)
DL_CONTROL_MESSAGE(Heartbeat)
DL_CONTROL_MESSAGE(Launch)
DL_CONTROL_MESSAGE(FenceFailed)
DL_CONTROL_MESSAGE(Signal)
DL_CONTROL_MESSAGE(Kill)
DL_CONTROL_MESSAGE(StdinEof)
DL_CONTROL_MESSAGE(Bye)
DL_CONTROL_MESSAGE(SpawnRequest)
DL_CONTROL_MESSAGE(SpawnReply)
DL_CONTROL_MESSAGE(Stacks)
DL_CONTROL_MESSAGE(DumpStacks)
DL_CONTROL_MESSAGE(Ready)
DL_CONTROL_MESSAGE(Restart)
DL_CONTROL_MESSAGE(MpiPublish)
DL_CONTROL_MESSAGE(MpiLookup)
DL_CONTROL_MESSAGE(MpiUnpublish)
DL_CONTROL_MESSAGE(SpawnLaunch)
DL_CONTROL_MESSAGE(MpiLookupReply)
DL_CONTROL_MESSAGE(MpiConnect)
DL_CONTROL_MESSAGE(SpawnKnown)
DL_CONTROL_MESSAGE(MpiDmodex)
DL_CONTROL_MESSAGE(MpiDmodexData)
DL_CONTROL_MESSAGE(MpiConnectDone)
DL_CONTROL_MESSAGE(MpiDmodexServe)
DL_CONTROL_MESSAGE(MpiDmodexReply)
#undef DL_CONTROL_MESSAGE

std::string encode(const MpiUp& m) {
  return std::visit([](const auto& x) { return encode(x); }, m);
}
std::string encode(const MpiDown& m) {
  return std::visit([](const auto& x) { return encode(x); }, m);
}
std::string frame(const MpiUp& m) { return wire::encode_frame(wire::kJson, encode(m)); }
std::string frame(const MpiDown& m) { return wire::encode_frame(wire::kJson, encode(m)); }

FromAgent decode_from_agent(std::string_view text) { return decode<FromAgent>(text, "agent"); }
FromLauncher decode_from_launcher(std::string_view text) { return decode<FromLauncher>(text, "launcher"); }

std::string protocol_reference() {
  std::string out;
  reference_lines<FromAgent>(out, "agent -> launcher");
  reference_lines<FromLauncher>(out, "launcher -> agent");
  out += "nested:\n";
  out += nested_line<msg::CpuReport>("cpu");
  out += nested_line<msg::RankSpec>("ranks[]");
  out += nested_line<msg::MpiSection>("mpi");
  out += nested_line<msg::SpawnApp>("apps[]");
  out += nested_line<msg::PublishedName>("names[]");
  out += nested_line<msg::RankStack>("stacks.ranks[]");
  return out;
}

}  // namespace dl::control
