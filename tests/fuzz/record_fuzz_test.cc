// The record codec (wire/record.h) on mutated records: a doctor peer's facts
// reply (what the doctor reads from every host), with every kind of field
// the codec has (nested, optional, maps of optionals, unsigned, doubles). A
// malformed record is refused with RecordError (a dl::Error); one that
// decodes encodes back to text that decodes to the same, laid out or not.
#include <catch2/catch.hpp>

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
