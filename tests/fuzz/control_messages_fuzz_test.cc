// The control-message decoders (control/messages.h) on mutated messages:
// the launcher decodes whatever an agent sends after the handshake, the
// agent whatever the launcher sends. A malformed message is refused with
// ProtocolError (a dl::Error), never a crash or a foreign exception; a
// message that decodes must encode back to something that decodes the same.
#include <catch2/catch.hpp>

#include "control/messages.h"
#include "tests/fuzz/fuzz_harness.h"

using namespace dl::fuzz;
namespace control = dl::control;
namespace msg = dl::control::msg;

namespace {

template <class Variant>
std::string reencode(const Variant& v) {
  return std::visit([](const auto& m) { return control::encode(m); }, v);
}

std::vector<std::string> agent_seeds() {
  msg::Hello h;
  h.version = "0.1.0", h.node = 3, h.host = "node3", h.pid = 42, h.free_port = 29500, h.gpus = {"0", "1"};
  h.pmix = true, h.cpu = msg::CpuReport{{{0, 1}, {2, 3}}, {{0, 1, 2, 3}}};
  msg::Exited x;
  x.rank = 7, x.pid = 99, x.signal = 9, x.core = false, x.by_agent = true;
  msg::Exited y;
  y.rank = 1, y.pid = 2, y.code = 3;
  return {control::encode(h), control::encode(x), control::encode(y), control::encode(msg::Started{1, 2}),
          control::encode(msg::SpawnFailed{4, 127, "nope: not found"}), control::encode(msg::MpiAbort{0, 5, "bye"}),
          control::encode(msg::Heartbeat{}), control::encode(msg::Ready{1, 29501}),
          // MPI's, decoded into MpiUp
          control::encode(msg::SpawnRequest{3, 0, {msg::SpawnApp{{"./w"}, 2, dl::control::EnvVars{{"A", "1"}}}}}),
          control::encode(msg::MpiLookup{4, 1, {"svc", "k2"}, true, 500}),
          control::encode(msg::MpiConnect{5, "connect", {"dl-1:*", "dl-1.spawn1:0"}, std::string("ab")}),
          control::encode(msg::MpiRefused{1, "PMI"})};
}

std::vector<std::string> launcher_seeds() {
  msg::Launch l;
  l.env = {{"A", "1"}}, l.wdir = "/tmp", l.hb_ms = 1000, l.hb_timeout_ms = 10000;
  msg::RankSpec r;
  r.rank = 0, r.argv = {"python3", "-c", "print(1)"}, r.env = {{"RANK", "0"}}, r.stdin_open = true, r.cpus = {{0, 1}};
  l.ranks = {r, r};
  l.mpi = msg::MpiSection{"dl-1", 2, 0, 2, {"a", "b"}, {{0}, {1}}, std::nullopt};
  return {control::encode(l), control::encode(msg::FenceFailed{18446744073709551615ull, "b (ranks 1)"}),
          control::encode(msg::Signal{15}), control::encode(msg::Kill{3000}), control::encode(msg::StdinEof{0}),
          control::encode(msg::Bye{}), control::encode(msg::Heartbeat{}), control::encode(msg::Restart{2}),
          // MPI's, decoded into MpiDown
          control::encode(msg::SpawnLaunch{6, "dl-1.spawn1", "dl-1", 0, {1}, {r}, std::string("node1")}),
          control::encode(msg::MpiLookupReply{4, {msg::PublishedName{"svc", "p", "dl-1", 0, true}}, std::nullopt}),
          control::encode(msg::MpiConnectDone{5, std::string("abcd"), std::nullopt}),
          control::encode(msg::MpiDmodexReply{7, true, "00ff"})};
}

FuzzOptions options(uint64_t seed) {
  FuzzOptions o;
  o.seed = seed;
  o.iterations = 20000;
  o.dictionary = {"\"t\"", "\"hello\"", "\"launch\"", "\"exited\"", "\"rank\"", "\"ranks\"", "\"mpi\"", "null",
                  "true", "-1", "4294967296", "1e9", "[]", "{}", "\"\"", "\"cpus\"", "\"env\"", ":", ","};
  return o;
}

}  // namespace

TEST_CASE("fuzz: control messages from an agent", "[fuzz]") {
  auto stats = fuzz_decoder(
      "decode_from_agent",
      [](std::string_view s) {
        auto m = control::decode_from_agent(s);
        if (reencode(control::decode_from_agent(reencode(m))) != reencode(m))
          throw FuzzFailure("an agent message does not survive encode/decode");
        return true;
      },
      agent_seeds(), options(11));
  CHECK(stats.accepted > 0);
  CHECK(stats.refused > 0);
}

TEST_CASE("fuzz: control messages from the launcher", "[fuzz]") {
  auto stats = fuzz_decoder(
      "decode_from_launcher",
      [](std::string_view s) {
        auto m = control::decode_from_launcher(s);
        if (reencode(control::decode_from_launcher(reencode(m))) != reencode(m))
          throw FuzzFailure("a launcher message does not survive encode/decode");
        return true;
      },
      launcher_seeds(), options(12));
  CHECK(stats.accepted > 0);
  CHECK(stats.refused > 0);
}
