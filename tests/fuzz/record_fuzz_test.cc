// The record codec (wire/record.h) on mutated records: a doctor peer's facts
// reply (what the doctor reads from every host), with every kind of field
// the codec has (nested, optional, maps of optionals, unsigned, doubles). A
// malformed record is refused with RecordError (a dl::Error); one that
// decodes encodes back to text that decodes to the same, laid out or not.
// And the codec's own lexer against nlohmann::json's as an oracle: on text
// that is UTF-8, both take and refuse the same JSON.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>

#include "doctor/records.h"
#include "tests/fuzz/fuzz_harness.h"
#include "wire/record.h"

using namespace dl::fuzz;
namespace wire = dl::wire;
namespace doctor = dl::doctor;

namespace {

const wire::RecordName kName{"the facts reply"};

std::vector<std::string> seeds() {
  doctor::HostFacts f;
  f.version = "0.1.0", f.hostname = "node\xff" "1", f.env = {{"PATH", "/bin"}, {"UNSET", std::nullopt}};
  f.cores = 64, f.mem_bytes = 1ull << 40, f.tmp_free_bytes = 0;
  doctor::GpuFact gpu;
  gpu.vendor = "nvidia", gpu.id = "0", gpu.pci_bus_id = "0000:18:00.0", gpu.numa = 1, gpu.memory_bytes = 1ull << 36;
  gpu.name = "H100", gpu.driver = "550", gpu.memory_used_bytes = 0;
  f.gpus = {gpu, doctor::GpuFact{}};
  f.gpu_tool = "nvidia-smi", f.cuda_visible_devices = "0,1";
  f.cuda = doctor::GpuProbe{2, "", std::string(""), 12040, std::nullopt};
  f.agent = doctor::ExecutableFact{"/usr/bin/dlaunch-agent", false, "not \"found\"\n", std::nullopt};
  f.ssh_rtt_us = 0.1, f.clock_offset_ms = -1e-300;
  doctor::HostFacts bare;
  return {wire::encode_record(f), wire::indent_json(wire::encode_record(f)), wire::encode_record(bare)};
}

}  // namespace

TEST_CASE("fuzz: typed records (a doctor peer's facts)", "[fuzz]") {
  FuzzOptions o;
  o.seed = 31;
  o.iterations = 20000;
  o.dictionary = {"\"env\"", "\"gpus\"", "\"cuda\"", "null", "true", "-1", "18446744073709551616", "1e999", "-0.0",
                  "[]", "{}", "\"\"", "\"\\ud83d\\ude00\"", "\"\\ud800\"", ":", ","};
  auto stats = fuzz_decoder(
      "decode_record<HostFacts>",
      [](std::string_view s) {
        const auto f = wire::decode_record<doctor::HostFacts>(s, kName);
        const std::string once = wire::encode_record(f);
        if (wire::encode_record(wire::decode_record<doctor::HostFacts>(once, kName)) != once)
          throw FuzzFailure("a decoded record does not survive encode and decode: " + escaped(once));
        if (wire::encode_record(wire::decode_record<doctor::HostFacts>(wire::indent_json(once), kName)) != once)
          throw FuzzFailure("indent_json changed a record: " + escaped(once));
        const std::string clean = wire::valid_utf8(s);
        if (wire::valid_utf8(clean) != clean) throw FuzzFailure("valid_utf8 is not idempotent: " + escaped(s));
        return true;
      },
      seeds(), o);
  CHECK(stats.accepted > 0);
  CHECK(stats.refused > 0);
}

namespace {

// What nlohmann::json's parser says of `text`: 0 when it is JSON, else the
// error's id (406: a number beyond a double).
struct Oracle {
  int error = 0;
  bool null() { return true; }
  bool boolean(bool) { return true; }
  bool number_integer(int64_t) { return true; }
  bool number_unsigned(uint64_t) { return true; }
  bool number_float(double, const std::string&) { return true; }
  bool string(std::string&) { return true; }
  bool binary(nlohmann::json::binary_t&) { return true; }
  bool start_object(size_t) { return true; }
  bool key(std::string&) { return true; }
  bool end_object() { return true; }
  bool start_array(size_t) { return true; }
  bool end_array() { return true; }
  bool parse_error(size_t, const std::string&, const nlohmann::detail::exception& e) {
    error = e.id;
    return false;
  }
};

int depth(const nlohmann::json& j) {
  int d = 0;
  if (j.is_structured())
    for (const auto& x : j) d = std::max(d, depth(x));
  return d + (j.is_structured() ? 1 : 0);
}

}  // namespace

// The codec reads bytes (a value that is not UTF-8 passes), refuses nesting
// deeper than 64 and reads a number beyond a double's range as JSON (its
// field is "out of range"); nlohmann::json does otherwise on each, so those
// inputs are left out of the comparison, and it stops reading at a NUL byte,
// which the codec must refuse. Everything else must agree.
TEST_CASE("fuzz: the record codec takes exactly the JSON nlohmann::json takes", "[fuzz]") {
  FuzzOptions o;
  o.seed = 47;
  o.iterations = 30000;
  o.dictionary = {"null", "true", "false", "-", "-0", "01", "1.", ".5", "1e", "1e+", "0.5E-3", "18446744073709551616",
                  "1e999", "\"\\u00e9\"", "\"\\ud83d\\ude00\"", "\"\\ud800\"", "\"\\udc00\"", "\\x", "\\u12",
                  "[", "]", "{", "}", ":", ",", "\"", " ", "\t", "\n", std::string(1, '\0'), "\x01", "\xc3\xa9"};
  doctor::HostFacts f;
  f.version = "0.1.0", f.hostname = "caf\xc3\xa9", f.env = {{"PATH", "/bin"}, {"UNSET", std::nullopt}};
  f.ssh_rtt_us = 0.1, f.clock_offset_ms = -1e-300;
  const std::vector<std::string> json_seeds = {
      wire::encode_record(f), wire::indent_json(wire::encode_record(f)),
      R"({"t":"launch","a":[1,-0,0.5e-3,1E+2,-12345678901234567890,"\u00e9\ud83d\ude00\n\/\b\f\r\t\""],)"
      R"("b":{"c":null,"d":true,"e":false,"f":[[],{}]}})",
      "[1,2]", "\"s\"", "3"};
  size_t compared = 0;
  auto stats = fuzz_decoder(
      "check_object against nlohmann::json",
      [&](std::string_view s) {
        bool ours = true;
        try {
          (void)wire::check_object(s, kName, "t");
        } catch (const wire::RecordError& e) {
          ours = std::string_view(e.what()).find("is not valid JSON") == std::string_view::npos;
        }
        if (wire::valid_utf8(s) != s || s.rfind("\xef\xbb\xbf", 0) == 0) return ours;  // bytes; a BOM nlohmann skips
        // nlohmann::json ends its input at a NUL byte (and takes "{}\0junk");
        // a raw NUL is never JSON, in a string or out.
        if (s.find('\0') != std::string_view::npos) {
          if (ours) throw FuzzFailure("the codec takes a raw NUL byte: " + escaped(s));
          return ours;
        }
        Oracle oracle;
        const bool theirs = nlohmann::json::sax_parse(s.begin(), s.end(), &oracle);
        if (oracle.error == 406) return ours;
        if (theirs && !ours && depth(nlohmann::json::parse(s)) > 65) return ours;
        ++compared;
        if (ours != theirs)
          throw FuzzFailure(std::string(ours ? "the codec takes" : "the codec refuses") + " what nlohmann::json " +
                            (theirs ? "takes" : "refuses") + ": " + escaped(s));
        return ours;
      },
      json_seeds, o);
  CHECK(stats.accepted > 1000);
  CHECK(stats.refused > 1000);
  CHECK(compared > 10000);
}
