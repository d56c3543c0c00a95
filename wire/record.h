#pragma once
// Typed records as JSON text: the one codec for every record dlaunch sends
// or stores (control messages, per-node mode's store records, the doctor's
// facts and results). A record is a struct that lists its fields once:
//
//   struct Node {
//     int rank = 0;
//     std::optional<std::string> host;
//     template <class S, class V> static void fields(S& s, V& v) { v("rank", s.rank), v("host", s.host); }
//   };
//
// That list drives encode_record() and decode_record(); nothing reads a
// record's field by a string where it is used. A field's type is one of
// bool, an integer, double, std::string, std::vector<T>, std::map<std::string,
// T>, another record, or std::optional<T> of one of those: an optional field
// may be absent (or null) and is left out when empty; every other field is
// required. An empty optional inside a vector or map is written as null. Members a record does not list are skipped, so a newer peer may
// add fields.
//
// The text is written and read straight from and into the structs, with no
// document tree between (a tree cost a 64-rank launch about 1.2 ms at each
// end). Strings are bytes: a byte from 0x80 up passes unchanged both ways, so
// a value that is not UTF-8 (an environment variable) arrives as it was sent.
//
// Decoding refuses, with one line naming the record and the field path
// ("node record: field 'ranks[1].env.A' is an integer, expected a string"):
// text over the size limit, text that is not JSON, a value that is not an
// object, a missing required field, a field of the wrong type or out of its
// type's range, and nesting deeper than 64.
#include <charconv>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "errors/error.h"

namespace dl::wire {

// A record that cannot be decoded (RecordName's default).
class RecordError : public ParseError {
 public:
  using ParseError::ParseError;
};
[[noreturn]] void throw_record_error(const std::string& what);

// How a decode's errors name the record ("node record", "'exited' message")
// and which error they throw: a protocol may throw its own class.
struct RecordName {
  std::string label;
  [[noreturn]] void (*raise)(const std::string& what) = &throw_record_error;
};

// The most text decode_record() reads unless told otherwise.
inline constexpr size_t kMaxRecordBytes = 16u << 20;

// The JSON object for `r`: {"field":value,...}.
template <class T> std::string encode_record(const T& r);
// Appends r's fields to `out`, the inside of an object, each preceded by a
// comma unless `first`; for a protocol that writes members of its own ahead
// of them (control's "t").
template <class T> void append_fields(std::string& out, const T& r, bool first);

// Reads `text` into a record. Throws through name.raise as above.
template <class T> T decode_record(std::string_view text, const RecordName& name, size_t max_bytes = kMaxRecordBytes);

// The two halves of decode_record(), for a protocol that dispatches on a
// member before it knows the record's type. check_object() refuses text that
// is not one JSON object (as "<label> is not valid JSON" or "<label> is not
// a JSON object") and returns the last top-level string member named `tag`,
// if any; read_checked_record() reads text check_object() accepted.
std::optional<std::string> check_object(std::string_view text, const RecordName& name, std::string_view tag);
template <class T> void read_checked_record(std::string_view checked_text, const RecordName& name, T& out);

// "{a, b?}": a record's field names, "?" after the optional ones (for
// protocol references that documents are checked against).
template <class T> std::string field_list();

// The JSON string for `s` (quoted and escaped).
void append_json_string(std::string& out, std::string_view s);

// encode_record()'s one line laid out for a reader: a member or element a
// line, two spaces a level ("{}" and "[]" stay as they are).
std::string indent_json(std::string_view json);

// `s` with each byte that does not start a valid UTF-8 sequence replaced by
// U+FFFD: for JSON meant for other tools, which refuse invalid UTF-8 (the
// codec itself passes bytes unchanged).
std::string valid_utf8(std::string_view s);

// ---- the templates' machinery ----------------------------------------------

namespace record_detail {

template <class T> struct is_optional : std::false_type {};
template <class T> struct is_optional<std::optional<T>> : std::true_type {};
template <class T> struct is_vector : std::false_type {};
template <class T> struct is_vector<std::vector<T>> : std::true_type {};
template <class T> struct is_string_map : std::false_type {};
template <class T> struct is_string_map<std::map<std::string, T>> : std::true_type {};

void put_integer(std::string& out, int64_t v);
void put_unsigned(std::string& out, uint64_t v);
void put_double(std::string& out, double v);

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
    append_json_string(out, name);
    out += ':';
    put(out, v);
  }
};

template <class T> void put(std::string& out, const T& v) {
  if constexpr (is_optional<T>::value) {
    if (v) put(out, *v);
    else out += "null";
  } else if constexpr (std::is_same_v<T, bool>) {
    out += v ? "true" : "false";
  } else if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) {
    put_integer(out, v);
  } else if constexpr (std::is_integral_v<T>) {
    put_unsigned(out, v);
  } else if constexpr (std::is_floating_point_v<T>) {
    put_double(out, v);
  } else if constexpr (std::is_same_v<T, std::string>) {
    append_json_string(out, v);
  } else if constexpr (is_string_map<T>::value) {
    out += '{';
    bool first = true;
    for (const auto& [k, x] : v) {
      if (!first) out += ',';
      first = false;
      append_json_string(out, k);
      out += ':';
      put(out, x);
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

enum class Kind { kNull, kBool, kString, kArray, kObject, kFloat, kInt };

// Where a field is, built into text only when an error names it.
struct Path {
  const Path* up = nullptr;
  std::string_view name;  // a field or a map key; empty for an element
  long index = -1;        // >= 0: element `index` of up
  std::string str() const;
};

struct Context {
  const RecordName& name;
  [[noreturn]] void fail(const Path& p, const std::string& what) const;
  [[noreturn]] void wrong(const Path& p, Kind k, const char* expected) const;
};

// A cursor over JSON text. check() validates a whole value; the readers
// after it assume text check() accepted.
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

  // ---- validating ----
  bool check(int depth = 0);
  // A string (an object's key), checked, into `out`.
  bool check_key(std::string& out);

  // ---- reading checked text ----
  Kind kind();
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
  // An integer when it has no fraction or exponent and fits int64 (negative)
  // or uint64; anything else is fractional.
  Number number(bool consume);
  // A number as a double; false when it is beyond a double's range.
  bool real(double& out);
  // A string's bytes, unescaped.
  void string(std::string& out);
  void skip() { check(); }

 private:
  long code_point();
  bool literal(const char* w);
  bool check_string();
  bool check_number();

  const char* p_;
  const char* end_;
};

template <class T> void read_value(Reader& r, const Context& c, const Path& path, T& out);

template <class T> void read_optional(Reader& r, const Context& c, const Path& p, T& out) {
  if (r.kind() == Kind::kNull) {
    r.null();
    out.reset();
  } else {
    typename T::value_type v{};
    read_value(r, c, p, v);
    out = std::move(v);
  }
}

// Reads the object a record is sent as: each member into the field of its
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
        if (index >= 64) throw std::logic_error("a record with more than 64 fields: `seen` cannot hold them");
        if (!matched && key == name) {
          matched = true;
          seen |= uint64_t{1} << index;
          read_value(r, c, Path{up, name}, field);
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

template <class T> void read_integer(Reader& r, const Context& c, const Path& path, Kind k, T& out) {
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
}

template <class T> void read_map(Reader& r, const Context& c, const Path& path, T& out) {
  out.clear();
  r.eat('{');
  if (r.eat('}')) return;
  std::string key;
  do {
    r.peek_char();
    r.string(key);
    r.eat(':');
    typename T::mapped_type v{};
    read_value(r, c, Path{&path, key}, v);
    out.insert_or_assign(out.end(), key, std::move(v));
  } while (r.eat(','));
  r.eat('}');
}

template <class T> void read_vector(Reader& r, const Context& c, const Path& path, T& out) {
  out.clear();
  r.eat('[');
  if (r.eat(']')) return;
  long i = 0;
  do {
    out.emplace_back();
    read_value(r, c, Path{&path, {}, i++}, out.back());
  } while (r.eat(','));
  r.eat(']');
}

template <class T> void read_plain(Reader& r, const Context& c, const Path& path, T& out) {
  const Kind k = r.kind();
  if constexpr (std::is_same_v<T, bool>) {
    if (k != Kind::kBool) c.wrong(path, k, "a boolean");
    out = r.boolean();
  } else if constexpr (std::is_integral_v<T>) {
    read_integer(r, c, path, k, out);
  } else if constexpr (std::is_floating_point_v<T>) {
    if (k != Kind::kInt && k != Kind::kFloat) c.wrong(path, k, "a number");
    double v = 0;
    if (!r.real(v)) c.fail(path, "is out of range");
    out = static_cast<T>(v);
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (k != Kind::kString) c.wrong(path, k, "a string");
    r.string(out);
  } else if constexpr (is_string_map<T>::value) {
    if (k != Kind::kObject) c.wrong(path, k, "an object");
    read_map(r, c, path, out);
  } else if constexpr (is_vector<T>::value) {
    if (k != Kind::kArray) c.wrong(path, k, "an array");
    read_vector(r, c, path, out);
  } else {
    if (k != Kind::kObject) c.wrong(path, k, "an object");
    read_struct(r, c, &path, out);
  }
}

template <class T> void read_value(Reader& r, const Context& c, const Path& path, T& out) {
  if constexpr (is_optional<T>::value) read_optional(r, c, path, out);
  else read_plain(r, c, path, out);
}

struct Lister {
  std::string out;
  template <class T> void operator()(const char* name, const T&) {
    out += (out.empty() ? "" : ", ") + std::string(name) + (is_optional<T>::value ? "?" : "");
  }
};

}  // namespace record_detail

template <class T> void append_fields(std::string& out, const T& r, bool first) {
  record_detail::FieldWriter w{out, first};
  T::fields(r, w);
}

template <class T> std::string encode_record(const T& r) {
  std::string out = "{";
  append_fields(out, r, true);
  out += '}';
  return out;
}

template <class T> void read_checked_record(std::string_view checked_text, const RecordName& name, T& out) {
  const record_detail::Context c{name};
  record_detail::Reader r(checked_text.data(), checked_text.data() + checked_text.size());
  record_detail::read_struct(r, c, nullptr, out);
}

void check_record_size(std::string_view text, const RecordName& name, size_t max_bytes);

template <class T> T decode_record(std::string_view text, const RecordName& name, size_t max_bytes) {
  check_record_size(text, name, max_bytes);
  check_object(text, name, {});
  T out{};
  read_checked_record(text, name, out);
  return out;
}

template <class T> std::string field_list() {
  record_detail::Lister l;
  T r{};
  T::fields(r, l);
  return "{" + l.out + "}";
}

}  // namespace dl::wire
