// The PMI-1 and PMI-2 parsers and encoders (mpi/pmi/pmi_wire.h) on the
// exact bytes MPICH's clients send, and on malformed input: an error that
// names what was expected, never a crash or a hang.
#include <catch2/catch.hpp>

#include "mpi/pmi/pmi_job.h"
#include "mpi/pmi/pmi_wire.h"

using namespace dl::mpi::pmi;

TEST_CASE("pmi wire: PMI-1 lines as MPICH's simple client writes them", "[mpich][pmi]") {
  auto p = next_command("cmd=put kvsname=kvs_7 key=bc-0 value=tcp://1.2.3.4:55$x\ncmd=barrier_in\n");
  REQUIRE(p.kind == Parsed::kCommand);
  CHECK(p.command.version == 1);
  CHECK(p.command.name == "put");
  REQUIRE(p.command.get("kvsname"));
  CHECK(*p.command.get("kvsname") == "kvs_7");
  CHECK(*p.command.get("key") == "bc-0");
  CHECK(*p.command.get("value") == "tcp://1.2.3.4:55$x");
  CHECK(p.command.get("nothing") == nullptr);
  CHECK(p.consumed == std::string("cmd=put kvsname=kvs_7 key=bc-0 value=tcp://1.2.3.4:55$x\n").size());

  auto init = next_command("cmd=init pmi_version=1 pmi_subversion=1\n");
  REQUIRE(init.kind == Parsed::kCommand);
  CHECK(init.command.name == "init");
  CHECK(*init.command.get("pmi_version") == "1");
  // An empty value is a value (MPICH may put one).
  auto empty = next_command("cmd=put kvsname=k key=a value=\n");
  REQUIRE(empty.kind == Parsed::kCommand);
  CHECK(*empty.command.get("value") == "");
}

TEST_CASE("pmi wire: partial input waits, whatever the split", "[mpich][pmi]") {
  const std::string line = "cmd=get kvsname=kvs_7 key=PMI_process_mapping\n";
  for (size_t cut = 0; cut < line.size(); ++cut) {
    INFO("cut at " << cut);
    CHECK(next_command(line.substr(0, cut)).kind == Parsed::kNeedMore);
  }
  const std::string v2 = encode(2, "kvs-get", {{"jobid", "kvs_7"}, {"srcid", "-1"}, {"key", "k"}});
  for (size_t cut = 0; cut < v2.size(); ++cut) {
    INFO("cut at " << cut);
    CHECK(next_command(v2.substr(0, cut)).kind == Parsed::kNeedMore);
  }
  CHECK(next_command(v2).kind == Parsed::kCommand);
}

TEST_CASE("pmi wire: PMI-2 frames, both length styles and doubled-semicolon escapes", "[mpich][pmi]") {
  // MPICH 4.1+: "%6u" (right-aligned); MPICH 3.x/4.0 simple2pmi: "%d" then spaces.
  for (std::string len : {"    53", "53    "}) {
    const std::string body = "cmd=fullinit;pmijobid=kvs_7;pmirank=3;threaded=FALSE;";
    REQUIRE(body.size() == 53);
    auto p = next_command(len + body + "trailing");
    INFO(len);
    REQUIRE(p.kind == Parsed::kCommand);
    CHECK(p.command.version == 2);
    CHECK(p.command.name == "fullinit");
    CHECK(*p.command.get("pmirank") == "3");
    CHECK(*p.command.get("threaded") == "FALSE");
    CHECK(p.consumed == 6 + 53);
  }
  auto esc = next_command("29    cmd=kvs-put;key=a;value=x;;y;");
  REQUIRE(esc.kind == Parsed::kCommand);
  CHECK(*esc.command.get("value") == "x;y");
}

TEST_CASE("pmi wire: malformed input is an error that says what was expected", "[mpich][pmi]") {
  SECTION("a token without =") {
    auto p = next_command("cmd=put kvsname\n");
    REQUIRE(p.kind == Parsed::kError);
    CHECK_THAT(p.error, Catch::Contains("expected key=value"));
    CHECK_FALSE(p.fatal);  // the next line can still be read
    CHECK(p.consumed == 16);
  }
  SECTION("a line whose first key is not cmd") {
    auto p = next_command("cmd =x\n");
    REQUIRE(p.kind == Parsed::kError);
  }
  SECTION("neither cmd= nor a length: the stream cannot be followed") {
    auto p = next_command("hello world\n");
    REQUIRE(p.kind == Parsed::kError);
    CHECK(p.fatal);
    CHECK_THAT(p.error, Catch::Contains("expected cmd= (PMI-1) or a 6-digit length (PMI-2)"));
  }
  SECTION("a PMI-2 length of 0 or over 64 KiB") {
    CHECK(next_command("000000cmd=x;").fatal);
    CHECK(next_command("999999cmd=x;").fatal);
  }
  SECTION("a PMI-2 value without its ';'") {
    auto p = next_command("11    cmd=x;key=v");
    REQUIRE(p.kind == Parsed::kError);
    CHECK_THAT(p.error, Catch::Contains("not terminated"));
  }
  SECTION("a PMI-2 body that does not start with cmd=") {
    auto p = next_command("6     key=v;");
    REQUIRE(p.kind == Parsed::kError);
    CHECK_THAT(p.error, Catch::Contains("cmd= first"));
  }
  SECTION("a PMI-1 line with no end, past the limit") {
    auto p = next_command("cmd=put value=" + std::string(kMaxCommand, 'x'));
    REQUIRE(p.kind == Parsed::kError);
    CHECK(p.fatal);
  }
}

TEST_CASE("pmi wire: mcmd=spawn is read whole, up to endcmd", "[mpich][pmi]") {
  const std::string spawn = "mcmd=spawn\nnprocs=2\nexecname=./a\ntotspawns=1\nspawnssofar=1\nargcnt=0\nendcmd\n";
  CHECK(next_command(spawn.substr(0, spawn.size() - 3)).kind == Parsed::kNeedMore);
  auto p = next_command(spawn + "cmd=barrier_in\n");
  REQUIRE(p.kind == Parsed::kCommand);
  CHECK(p.command.name == "spawn");
  CHECK(*p.command.get("nprocs") == "2");
  CHECK(p.consumed == spawn.size());
}

TEST_CASE("pmi wire: replies in both wires", "[mpich][pmi]") {
  CHECK(encode(1, "maxes", {{"kvsname_max", "256"}, {"keylen_max", "64"}}) ==
        "cmd=maxes kvsname_max=256 keylen_max=64\n");
  // PMI-1 has no escapes: a space would split the value.
  CHECK(encode(1, "x", {{"msg", "a b\nc"}}) == "cmd=x msg=a_b_c\n");
  const std::string v2 = encode(2, "kvs-put-response", {{"rc", "0"}});
  CHECK(v2 == "26    cmd=kvs-put-response;rc=0;");
  // What we write, we read.
  auto back = next_command(v2);
  REQUIRE(back.kind == Parsed::kCommand);
  CHECK(back.command.name == "kvs-put-response");
}

TEST_CASE("pmi job: PMI_process_mapping as Hydra writes it", "[mpich][pmi]") {
  // 4 hosts x 2 ranks by slot: one block.
  CHECK(process_mapping({{0, 1}, {2, 3}, {4, 5}, {6, 7}}) == "(vector,(0,4,2))");
  // Uneven hosts: a block per run of equal sizes.
  CHECK(process_mapping({{0, 1, 2}, {3}, {4}}) == "(vector,(0,1,3),(1,2,1))");
  // Round robin (--map-by node): node ids wrap around.
  CHECK(process_mapping({{0, 2}, {1, 3}}) == "(vector,(0,2,1),(0,2,1))");
  CHECK(process_mapping({{0}}) == "(vector,(0,1,1))");
  // A rank no node holds: no mapping rather than a wrong one.
  CHECK(process_mapping({{0}, {2}}) == "");
  // Too long for a PMI value: none (MPICH then finds locality itself).
  std::vector<std::vector<int>> rr(2);
  for (int r = 0; r < 1000; ++r) rr[static_cast<size_t>(r % 2)].push_back(r);
  CHECK(process_mapping(rr) == "");
}

TEST_CASE("pmi job: fence blobs round-trip and truncation is refused", "[mpich][pmi]") {
  std::vector<std::pair<std::string, std::string>> puts = {{"a", "1"}, {"bc-3", std::string(3000, 'z')}, {"e", ""}};
  const std::string blob = encode_puts(puts);
  CHECK(decode_puts(blob) == puts);
  CHECK(decode_puts(blob + blob).size() == 6);  // hosts' blobs concatenated
  CHECK(decode_puts("").empty());
  CHECK_THROWS_WITH(decode_puts(blob.substr(0, blob.size() - 1)), Catch::Contains("truncated"));
  CHECK(is_pmi_fence(kFenceIdBit | 3));
  CHECK_FALSE(is_pmi_fence(3));
}
