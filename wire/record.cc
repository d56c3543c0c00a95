#include "wire/record.h"

#include <cmath>
#include <cstring>

namespace dl::wire {

void throw_record_error(const std::string& what) { throw RecordError(what); }

void append_json_string(std::string& out, std::string_view s) {
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

void check_record_size(std::string_view text, const RecordName& name, size_t max_bytes) {
  if (text.size() > max_bytes)
    name.raise(name.label + " is " + std::to_string(text.size()) + " bytes, over the limit of " +
               std::to_string(max_bytes));
}

std::optional<std::string> check_object(std::string_view text, const RecordName& name, std::string_view tag) {
  auto invalid = [&] { name.raise(name.label + " is not valid JSON"); };
  record_detail::Reader r(text.data(), text.data() + text.size());
  if (r.peek_char() != '{') {
    if (!r.check() || !r.at_end()) invalid();
    name.raise(name.label + " is not a JSON object");
  }
  // The last top-level member named `tag` wins, as a document tree keeps it.
  std::optional<std::string> found;
  std::string key;
  r.eat('{');
  if (!r.eat('}')) {
    do {
      if (!r.check_key(key) || !r.eat(':')) invalid();
      const bool is_tag = !tag.empty() && key == tag;
      if (is_tag && r.peek_char() == '"') {
        if (!r.check_key(key)) invalid();
        found = key;
      } else {
        if (is_tag) found.reset();
        if (!r.check()) invalid();
      }
    } while (r.eat(','));
    if (!r.eat('}')) invalid();
  }
  if (!r.at_end()) invalid();
  return found;
}

std::string indent_json(std::string_view json) {
  std::string out;
  int depth = 0;
  bool in_string = false;
  auto newline = [&] { out += '\n' + std::string(static_cast<size_t>(2 * depth), ' '); };
  for (size_t i = 0; i < json.size(); ++i) {
    const char c = json[i];
    out += c;
    if (in_string) {
      if (c == '\\') out += json[++i];
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if ((c == '{' || c == '[') && i + 1 < json.size() && json[i + 1] != (c == '{' ? '}' : ']')) {
      ++depth, newline();
    } else if (c == ',') {
      newline();
    } else if (c == ':') {
      out += ' ';
    }
    if (!in_string && i + 1 < json.size() && (json[i + 1] == '}' || json[i + 1] == ']') && c != '{' && c != '[') {
      --depth, newline();
    }
  }
  return out;
}

std::string valid_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    // The length a lead byte announces (0: not a lead byte), and the
    // smallest second byte that keeps the encoding shortest and below
    // U+110000 outside the surrogates.
    const size_t n = c < 0x80 ? 1 : c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
    size_t ok = n > 0 && i + n <= s.size() ? n : 0;
    for (size_t k = 1; k < ok; ++k)
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) ok = 0;
    if (ok > 1) {
      const auto d = static_cast<unsigned char>(s[i + 1]);
      if ((c == 0xE0 && d < 0xA0) || (c == 0xED && d > 0x9F) || (c == 0xF0 && d < 0x90) || (c == 0xF4 && d > 0x8F)) ok = 0;
    }
    if (ok == 0) {
      out += "\xEF\xBF\xBD";  // U+FFFD
      ++i;
    } else {
      out.append(s.data() + i, ok);
      i += ok;
    }
  }
  return out;
}

namespace record_detail {

void put_integer(std::string& out, int64_t v) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

void put_unsigned(std::string& out, uint64_t v) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

// The shortest text that reads back as the same double. JSON has no NaN or
// infinity: those are written as null, which reads back as an absent
// optional field (and is refused for a required one).
void put_double(std::string& out, double v) {
  if (!std::isfinite(v)) {
    out += "null";
    return;
  }
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

namespace {

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

int hex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

void append_utf8(std::string& out, long cp) {
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

bool is_digit(char c) { return c >= '0' && c <= '9'; }

}  // namespace

std::string Path::str() const {
  std::string s = up ? up->str() : "";
  if (index >= 0) return s + "[" + std::to_string(index) + "]";
  return s.empty() ? std::string(name) : s + "." + std::string(name);
}

void Context::fail(const Path& p, const std::string& what) const {
  name.raise(name.label + ": field '" + p.str() + "' " + what);
}

void Context::wrong(const Path& p, Kind k, const char* expected) const {
  fail(p, std::string("is ") + kind_name(k) + ", expected " + expected);
}

bool Reader::check(int depth) {
  if (depth > 64) return false;  // no record nests nearly as deep
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

bool Reader::check_key(std::string& out) {
  if (peek_char() != '"') return false;
  const char* start = p_;
  if (!check_string()) return false;
  const char* after = p_;
  p_ = start;
  string(out);
  p_ = after;
  return true;
}

Kind Reader::kind() {
  switch (peek_char()) {
    case '{': return Kind::kObject;
    case '[': return Kind::kArray;
    case '"': return Kind::kString;
    case 't':
    case 'f': return Kind::kBool;
    case 'n': return Kind::kNull;
    default: return number(false).is_float ? Kind::kFloat : Kind::kInt;
  }
}

Reader::Number Reader::number(bool consume) {
  const char* q = p_;
  Number n;
  n.negative = *q == '-';
  const char* digits = q + (n.negative ? 1 : 0);
  const char* e = digits;
  while (e < end_ && is_digit(*e)) ++e;
  const char* t = e;
  while (t < end_ && (*t == '.' || *t == 'e' || *t == 'E' || *t == '+' || *t == '-' || is_digit(*t))) ++t;
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

bool Reader::real(double& out) {
  const auto r = std::from_chars(p_, end_, out);
  number(true);
  return r.ec == std::errc();
}

void Reader::string(std::string& out) {
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

bool Reader::literal(const char* w) {
  const size_t n = std::strlen(w);
  if (static_cast<size_t>(end_ - p_) < n || std::memcmp(p_, w, n) != 0) return false;
  p_ += n;
  return true;
}

// After "\u": the code point of this escape and, for a high surrogate, the
// low one that must follow. -1: malformed.
long Reader::code_point() {
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

bool Reader::check_string() {
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

bool Reader::check_number() {
  const char* q = p_;
  if (q < end_ && *q == '-') ++q;
  if (q == end_ || !is_digit(*q)) return false;
  if (*q == '0') ++q;
  else
    while (q < end_ && is_digit(*q)) ++q;
  if (q < end_ && *q == '.') {
    ++q;
    if (q == end_ || !is_digit(*q)) return false;
    while (q < end_ && is_digit(*q)) ++q;
  }
  if (q < end_ && (*q == 'e' || *q == 'E')) {
    ++q;
    if (q < end_ && (*q == '+' || *q == '-')) ++q;
    if (q == end_ || !is_digit(*q)) return false;
    while (q < end_ && is_digit(*q)) ++q;
  }
  p_ = q;
  return true;
}

}  // namespace record_detail
}  // namespace dl::wire
