// The record codec (wire/record.h): every field type survives a round trip,
// every refusal names the record and the field's path, and text that is not
// JSON, too big or too deep is refused as such.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <limits>
#include <random>

#include "wire/record.h"

namespace wire = dl::wire;

namespace {

struct Inner {
  std::string name;
  std::optional<double> load;
  template <class S, class V> static void fields(S& s, V& v) { v("name", s.name), v("load", s.load); }
  bool operator==(const Inner&) const = default;
};

struct Outer {
  int rank = 0;
  bool ok = false;
  uint16_t port = 0;
  int64_t big = 0;
  uint64_t id = 0;
  double seconds = 0;
  std::string text;
  std::vector<int> ids;
  std::vector<std::vector<std::string>> grid;
  std::map<std::string, std::string> env;
  std::map<std::string, Inner> by_host;
  std::vector<Inner> inner;
  std::optional<Inner> extra;
  std::optional<std::vector<int>> maybe_ids;
  template <class S, class V> static void fields(S& s, V& v) {
    v("rank", s.rank), v("ok", s.ok), v("port", s.port), v("big", s.big), v("id", s.id), v("seconds", s.seconds);
    v("text", s.text), v("ids", s.ids), v("grid", s.grid), v("env", s.env), v("by_host", s.by_host);
    v("inner", s.inner), v("extra", s.extra), v("maybe_ids", s.maybe_ids);
  }
  bool operator==(const Outer&) const = default;
};

struct Vars {
  std::map<std::string, std::optional<std::string>> env;
  std::vector<std::optional<int>> slots;
  template <class S, class V> static void fields(S& s, V& v) { v("env", s.env), v("slots", s.slots); }
};

const wire::RecordName kName{"test record"};

Outer full() {
  Outer o;
  o.rank = -3, o.ok = true, o.port = 65535, o.big = std::numeric_limits<int64_t>::min();
  o.id = std::numeric_limits<uint64_t>::max(), o.seconds = 0.1;
  o.text = std::string("q\"b\\s/\n\t\0\x01\x7f\x80\xff caf\xc3\xa9", 19);
  o.ids = {1, -2, 3}, o.grid = {{"a"}, {}, {"b", "c"}};
  o.env = {{"A", "1"}, {"B=", ""}};
  o.by_host = {{"node1", Inner{"x", 2.5}}, {"node2", Inner{"y", std::nullopt}}};
  o.inner = {Inner{"i", 1e300}, Inner{"j", -0.0}};
  o.extra = Inner{"e", 3};
  return o;
}

// The RecordError's text for `text`, or a failed test when it is accepted.
std::string refusal(const std::string& text) {
  try {
    (void)wire::decode_record<Outer>(text, kName);
  } catch (const wire::RecordError& e) {
    return e.what();
  }
  FAIL("accepted: " << text);
  return "";
}

// A valid Outer's text with `field`'s value the raw JSON `json` (added when
// the base leaves the field out).
std::string with(const std::string& field, const std::string& json) {
  std::vector<std::pair<std::string, std::string>> members = {
      {"rank", "1"},  {"ok", "true"}, {"port", "2"}, {"big", "3"},  {"id", "4"},      {"seconds", "5"},
      {"text", "\"t\""}, {"ids", "[]"},  {"grid", "[]"}, {"env", "{}"}, {"by_host", "{}"}, {"inner", "[]"}};
  bool found = false;
  for (auto& [k, v] : members)
    if (k == field) v = json, found = true;
  if (!found) members.emplace_back(field, json);
  std::string out;
  for (const auto& [k, v] : members) out += (out.empty() ? "{\"" : ",\"") + k + "\":" + v;
  return out + "}";
}

}  // namespace

TEST_CASE("record codec: every field type survives encode and decode", "[wire]") {
  const Outer o = full();
  const std::string text = wire::encode_record(o);
  CHECK(text.find('\n') == std::string::npos);  // controls escaped: one line
  CHECK(wire::decode_record<Outer>(text, kName) == o);

  Outer bare = o;
  bare.extra.reset(), bare.maybe_ids.reset();
  const std::string bare_text = wire::encode_record(bare);
  CHECK(bare_text.find("extra") == std::string::npos);  // an empty optional is left out
  CHECK(wire::decode_record<Outer>(bare_text, kName) == bare);
  bare.maybe_ids = std::vector<int>{};
  CHECK(wire::decode_record<Outer>(wire::encode_record(bare), kName) == bare);
}

TEST_CASE("record codec: doubles read back exactly and what JSON cannot hold is written as null", "[wire]") {
  std::mt19937_64 rng(31);
  for (int i = 0; i < 1000; ++i) {
    Inner in{"r", std::bit_cast<double>(rng())};
    if (!std::isfinite(*in.load)) in.load = 1.5;
    CHECK(wire::decode_record<Inner>(wire::encode_record(in), kName) == in);
  }
  const Inner nan{"n", std::nan("")};
  CHECK(wire::encode_record(nan) == R"({"name":"n","load":null})");
  CHECK_FALSE(wire::decode_record<Inner>(wire::encode_record(nan), kName).load);
  // An integer is a number too.
  CHECK(wire::decode_record<Inner>(R"({"name":"a","load":7})", kName).load == 7.0);
}

TEST_CASE("record codec: JSON written by others decodes in any order with spaces and escapes and unknown members",
          "[wire]") {
  const auto in = wire::decode_record<Inner>(" {\n\"zzz\" : [1, {\"x\": null}] , \"load\":null,"
                                             " \"name\" : \"caf\\u00e9 \\ud83d\\ude00 \\/\" } ",
                                             kName);
  CHECK(in.name == "caf\xc3\xa9 \xf0\x9f\x98\x80 /");
  CHECK_FALSE(in.load);
  // The last of a repeated member counts.
  CHECK(wire::decode_record<Inner>(R"({"name":"a","name":"b"})", kName).name == "b");
}

TEST_CASE("record codec: every refusal names the record and the field's path", "[wire]") {
  CHECK(refusal(with("rank", "\"1\"")) == "test record: field 'rank' is a string, expected an integer");
  CHECK(refusal(with("rank", "1.5")) == "test record: field 'rank' is a fractional number, expected an integer");
  CHECK(refusal(with("rank", "2147483648")) == "test record: field 'rank' is out of range");
  CHECK(refusal(with("port", "-1")) == "test record: field 'port' is negative, expected an unsigned integer");
  CHECK(refusal(with("port", "65536")) == "test record: field 'port' is out of range");
  CHECK(refusal(with("ok", "1")) == "test record: field 'ok' is an integer, expected a boolean");
  CHECK(refusal(with("seconds", "\"x\"")) == "test record: field 'seconds' is a string, expected a number");
  CHECK(refusal(with("seconds", "1e999")) == "test record: field 'seconds' is out of range");
  CHECK(refusal(with("seconds", "null")) == "test record: field 'seconds' is null, expected a number");
  CHECK(refusal(with("text", "[]")) == "test record: field 'text' is an array, expected a string");
  CHECK(refusal(with("ids", "[1,true]")) == "test record: field 'ids[1]' is a boolean, expected an integer");
  CHECK(refusal(with("grid", "[[],[\"a\",3]]")) == "test record: field 'grid[1][1]' is an integer, expected a string");
  CHECK(refusal(with("env", "{\"A\":\"1\",\"B\":2}")) == "test record: field 'env.B' is an integer, expected a string");
  CHECK(refusal(with("env", "[]")) == "test record: field 'env' is an array, expected an object");
  CHECK(refusal(with("by_host", "{\"n1\":{\"load\":1}}")) == "test record: field 'by_host.n1.name' is missing");
  CHECK(refusal(with("inner", "[{\"name\":\"a\"},{\"name\":\"b\",\"load\":\"x\"}]")) ==
        "test record: field 'inner[1].load' is a string, expected a number");
  CHECK(refusal(with("extra", "{}")) == "test record: field 'extra.name' is missing");
  CHECK(refusal(with("extra", "7")) == "test record: field 'extra' is an integer, expected an object");
  CHECK(refusal(R"({"ok":true})") == "test record: field 'rank' is missing");
}

TEST_CASE("record codec: text that is not one JSON object is refused as such", "[wire]") {
  for (const char* bad : {"", "{", "{\"rank\":1", "{\"rank\":01}", "{\"rank\":1.}", "{\"rank\":1} x", "{\"rank\":1,}",
                          "{\"rank\" 1}", "{\"text\":\"\\ud800\"}", "{\"text\":\"\\x\"}", "{\"text\":\"a\nb\"}",
                          "{\"rank\":tru}", "{'rank':1}", "{\"rank\":1}}"}) {
    INFO(bad);
    CHECK(refusal(bad) == "test record is not valid JSON");
  }
  for (const char* other : {"[]", "1", "\"x\"", "null", "  true "}) {
    INFO(other);
    CHECK(refusal(other) == "test record is not a JSON object");
  }
  std::string deep = "{\"x\":";
  for (int i = 0; i < 70; ++i) deep += "[";
  for (int i = 0; i < 70; ++i) deep += "]";
  CHECK(refusal(deep + "}") == "test record is not valid JSON");
}

TEST_CASE("record codec: text over the limit is refused before it is read", "[wire]") {
  const std::string text = wire::encode_record(full());
  CHECK_NOTHROW(wire::decode_record<Outer>(text, kName, text.size()));
  try {
    (void)wire::decode_record<Outer>(text, kName, text.size() - 1);
    FAIL("accepted");
  } catch (const wire::RecordError& e) {
    CHECK(std::string(e.what()) ==
          "test record is " + std::to_string(text.size()) + " bytes, over the limit of " + std::to_string(text.size() - 1));
  }
}

TEST_CASE("record codec: a protocol throws its own error and dispatches on a member first", "[wire]") {
  struct Mine : std::runtime_error {
    using std::runtime_error::runtime_error;
  };
  const wire::RecordName name{"'x' message", [](const std::string& w) -> void { throw Mine(w); }};
  CHECK_THROWS_MATCHES(wire::decode_record<Inner>("{}", name), Mine,
                       Catch::Message("'x' message: field 'name' is missing"));
  CHECK_THROWS_AS(wire::check_object("{", name, "t"), Mine);

  const std::string text = R"({"t":"a","name":"n","t":"inner"})";
  CHECK(wire::check_object(text, name, "t") == "inner");
  CHECK_FALSE(wire::check_object(R"({"t":1})", name, "t"));
  CHECK_FALSE(wire::check_object(R"({"name":"n"})", name, "t"));
  Inner in;
  wire::read_checked_record(text, name, in);
  CHECK(in.name == "n");
}

TEST_CASE("record codec: an empty optional inside a map or vector is null", "[wire]") {
  const Vars in{{{"SET", "1"}, {"UNSET", std::nullopt}}, {1, std::nullopt, 3}};
  const std::string text = wire::encode_record(in);
  CHECK(text == R"({"env":{"SET":"1","UNSET":null},"slots":[1,null,3]})");
  const auto back = wire::decode_record<Vars>(text, kName);
  CHECK(back.env == in.env);
  CHECK(back.slots == in.slots);
  CHECK_THROWS_MATCHES(wire::decode_record<Vars>(R"({"env":{"A":1},"slots":[]})", kName), wire::RecordError,
                       Catch::Message("test record: field 'env.A' is an integer, expected a string"));
}

TEST_CASE("record codec: indent_json lays a record out a member a line and changes no value", "[wire]") {
  const Outer o = full();
  const std::string one = wire::encode_record(o);
  const std::string laid = wire::indent_json(one);
  CHECK(wire::decode_record<Outer>(laid, kName) == o);
  CHECK(wire::indent_json(R"({"a":[],"b":{},"c":[1,{"d":"x,{}[]\"y"}]})") ==
        "{\n  \"a\": [],\n  \"b\": {},\n  \"c\": [\n    1,\n    {\n      \"d\": \"x,{}[]\\\"y\"\n    }\n  ]\n}");
}

TEST_CASE("record codec: valid_utf8 keeps UTF-8 and replaces every byte that does not start a sequence", "[wire]") {
  CHECK(wire::valid_utf8("caf\xc3\xa9 \xf0\x9f\x98\x80 \xe2\x82\xac") == "caf\xc3\xa9 \xf0\x9f\x98\x80 \xe2\x82\xac");
  const std::string r = "\xef\xbf\xbd";
  CHECK(wire::valid_utf8("a\xff") == "a" + r);
  CHECK(wire::valid_utf8("\xc3") == r);                              // cut short
  CHECK(wire::valid_utf8("\xc0\xaf") == r + r);                      // overlong
  CHECK(wire::valid_utf8("\xed\xa0\x80") == r + r + r);              // a surrogate
  CHECK(wire::valid_utf8("\xf4\x90\x80\x80") == r + r + r + r);      // above U+10FFFF
  CHECK(wire::valid_utf8(std::string("\0x", 2)) == std::string("\0x", 2));
}

TEST_CASE("record codec: field_list names the fields and marks the optional ones", "[wire]") {
  CHECK(wire::field_list<Inner>() == "{name, load?}");
}
