#pragma once
// The record codec's reading half with nlohmann::json's SAX parser in place
// of wire/record.cc's lexer, for json_bench.cc to time against it: the same
// typed fields() mapping, driven by a token tape that one sax_parse() pass
// fills (nlohmann validates the whole text as it goes, so a refusal comes
// before any field is read, as with wire::check_object).
//
// A tape, not a handler per type: SAX pushes events while fields() pulls
// values, and a flat tape joins the two without a type-erased frame per
// nested object. The readers below are wire/record.h's, over the tape.
#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "wire/record.h"

namespace dl::bench {

using wire::record_detail::Context;
using wire::record_detail::Kind;
using wire::record_detail::Path;

enum class Tok : uint8_t { kObject, kEndObject, kArray, kEndArray, kKey, kString, kInt, kUint, kFloat, kBool, kNull };

struct Token {
  Tok t;
  bool b = false;
  uint32_t off = 0, len = 0;  // kKey, kString: bytes in Tape::text
  int64_t i = 0;
  uint64_t u = 0;
  double d = 0;
};

struct Tape {
  std::vector<Token> tokens;
  std::string text;
  void clear() { tokens.clear(), text.clear(); }
};

// Fills a Tape; refuses (returns false from the parse) nesting deeper than
// wire/record.h allows.
class TapeBuilder {
 public:
  using json = nlohmann::json;
  explicit TapeBuilder(Tape& t) : t_(t) {}
  bool null() { return push({Tok::kNull}); }
  bool boolean(bool v) { return push({Tok::kBool, v}); }
  bool number_integer(int64_t v) { Token k{Tok::kInt}; k.i = v; return push(k); }
  bool number_unsigned(uint64_t v) { Token k{Tok::kUint}; k.u = v; return push(k); }
  bool number_float(double v, const std::string&) { Token k{Tok::kFloat}; k.d = v; return push(k); }
  bool string(std::string& s) { return push(text(Tok::kString, s)); }
  bool binary(json::binary_t&) { return false; }
  bool key(std::string& s) { return push(text(Tok::kKey, s)); }
  bool start_object(size_t) { return ++depth_ <= 65 && push({Tok::kObject}); }
  bool end_object() { return --depth_, push({Tok::kEndObject}); }
  bool start_array(size_t) { return ++depth_ <= 65 && push({Tok::kArray}); }
  bool end_array() { return --depth_, push({Tok::kEndArray}); }
  bool parse_error(size_t, const std::string&, const nlohmann::detail::exception&) { return false; }

 private:
  bool push(Token k) { return t_.tokens.push_back(k), true; }
  Token text(Tok t, const std::string& s) {
    Token k{t};
    k.off = static_cast<uint32_t>(t_.text.size()), k.len = static_cast<uint32_t>(s.size());
    t_.text += s;
    return k;
  }
  Tape& t_;
  int depth_ = 0;
};

// wire::record_detail::Reader's interface over a tape.
class TapeReader {
 public:
  explicit TapeReader(const Tape& t) : t_(t) {}
  using Number = wire::record_detail::Reader::Number;
  char peek_char() const {
    switch (cur().t) {
      case Tok::kObject: return '{';
      case Tok::kEndObject: return '}';
      case Tok::kArray: return '[';
      case Tok::kEndArray: return ']';
      case Tok::kKey:
      case Tok::kString: return '"';
      case Tok::kBool: return cur().b ? 't' : 'f';
      case Tok::kNull: return 'n';
      default: return '0';
    }
  }
  // ',' and ':' are not tokens: a ',' is "the container goes on".
  bool eat(char c) {
    if (c == ':') return true;
    if (c == ',') return cur().t != Tok::kEndObject && cur().t != Tok::kEndArray;
    if (peek_char() != c) return false;
    ++at_;
    return true;
  }
  Kind kind() const {
    switch (cur().t) {
      case Tok::kObject: return Kind::kObject;
      case Tok::kArray: return Kind::kArray;
      case Tok::kKey:
      case Tok::kString: return Kind::kString;
      case Tok::kBool: return Kind::kBool;
      case Tok::kNull: return Kind::kNull;
      case Tok::kFloat: return Kind::kFloat;
      default: return Kind::kInt;
    }
  }
  bool boolean() { return t_.tokens[at_++].b; }
  void null() { ++at_; }
  Number number(bool consume) {
    const Token& k = cur();
    Number n;
    n.is_float = k.t == Tok::kFloat;
    n.negative = k.t == Tok::kInt && k.i < 0;
    if (n.negative) n.i = k.i;
    else n.u = k.t == Tok::kInt ? static_cast<uint64_t>(k.i) : k.u;
    if (consume) ++at_;
    return n;
  }
  bool real(double& out) {
    const Token& k = t_.tokens[at_++];
    out = k.t == Tok::kFloat ? k.d : k.t == Tok::kInt ? static_cast<double>(k.i) : static_cast<double>(k.u);
    return true;
  }
  void string(std::string& out) {
    const Token& k = t_.tokens[at_++];
    out.assign(t_.text, k.off, k.len);
  }
  void skip() {
    int depth = 0;
    do {
      const Tok t = t_.tokens[at_++].t;
      if (t == Tok::kObject || t == Tok::kArray) ++depth;
      if (t == Tok::kEndObject || t == Tok::kEndArray) --depth;
    } while (depth > 0);
  }
  const Token& cur() const { return t_.tokens[at_]; }
  size_t at() const { return at_; }

 private:
  const Tape& t_;
  size_t at_ = 0;
};

// ---- wire/record.h's readers, over TapeReader ------------------------------

template <class T> void read_value(TapeReader& r, const Context& c, const Path& path, T& out);

template <class T> void read_struct(TapeReader& r, const Context& c, const Path* up, T& out) {
  uint64_t seen = 0;
  std::string key;
  r.eat('{');
  if (!r.eat('}')) {
    do {
      r.string(key);
      int index = 0;
      bool matched = false;
      auto member = [&](const char* name, auto& field) {
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
      if constexpr (wire::record_detail::is_optional<F>::value) field.reset();
      else c.fail(Path{up, name}, "is missing");
    }
    ++index;
  };
  T::fields(out, missing);
}

template <class T> void read_integer(TapeReader& r, const Context& c, const Path& path, Kind k, T& out) {
  if (k != Kind::kInt) c.wrong(path, k, "an integer");
  const TapeReader::Number n = r.number(true);
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

template <class T> void read_plain(TapeReader& r, const Context& c, const Path& path, T& out) {
  namespace d = wire::record_detail;
  const Kind k = r.kind();
  if constexpr (std::is_same_v<T, bool>) {
    if (k != Kind::kBool) c.wrong(path, k, "a boolean");
    out = r.boolean();
  } else if constexpr (std::is_integral_v<T>) {
    read_integer(r, c, path, k, out);
  } else if constexpr (std::is_floating_point_v<T>) {
    if (k != Kind::kInt && k != Kind::kFloat) c.wrong(path, k, "a number");
    double v = 0;
    r.real(v);
    out = static_cast<T>(v);
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (k != Kind::kString) c.wrong(path, k, "a string");
    r.string(out);
  } else if constexpr (d::is_string_map<T>::value) {
    if (k != Kind::kObject) c.wrong(path, k, "an object");
    out.clear();
    r.eat('{');
    std::string key;
    while (!r.eat('}')) {
      r.string(key);
      typename T::mapped_type v{};
      read_value(r, c, Path{&path, key}, v);
      out.insert_or_assign(out.end(), key, std::move(v));
    }
  } else if constexpr (d::is_vector<T>::value) {
    if (k != Kind::kArray) c.wrong(path, k, "an array");
    out.clear();
    r.eat('[');
    for (long i = 0; !r.eat(']'); ++i) {
      out.emplace_back();
      read_value(r, c, Path{&path, {}, i}, out.back());
    }
  } else {
    if (k != Kind::kObject) c.wrong(path, k, "an object");
    read_struct(r, c, &path, out);
  }
}

template <class T> void read_value(TapeReader& r, const Context& c, const Path& path, T& out) {
  if constexpr (wire::record_detail::is_optional<T>::value) {
    if (r.kind() == Kind::kNull) {
      r.null();
      out.reset();
    } else {
      typename T::value_type v{};
      read_value(r, c, path, v);
      out = std::move(v);
    }
  } else {
    read_plain(r, c, path, out);
  }
}

// wire::check_object's half: parses `text` into `tape` (refusing text that
// is not one JSON object, as check_object does) and returns the last
// top-level string member named `tag`, if any.
std::optional<std::string> sax_check_object(std::string_view text, const wire::RecordName& name, std::string_view tag,
                                            Tape& tape);
// read_checked_record's half: the tape sax_check_object filled, into `out`.
template <class T> void sax_read_record(const Tape& tape, const wire::RecordName& name, T& out) {
  const Context c{name};
  TapeReader r(tape);
  read_struct(r, c, nullptr, out);
}

}  // namespace dl::bench
