// mpirun's --rankfile (hostfiles/rankfile.h): parsing, the placement it
// gives, and the CPUs of a slot on a host's reported topology.
#include <catch2/catch.hpp>

#include <stdexcept>

#include "errors/error.h"
#include "hostfiles/rankfile.h"

using namespace dl::hostfiles;
using V = std::vector<int>;

namespace {
std::string parse_error(const std::string& text) {
  try {
    parse_rankfile(text, "rf");
  } catch (const dl::ParseError& e) {
    return e.what();
  }
  return "(no error)";
}
}  // namespace

TEST_CASE("rankfile: lines in any order, comments and blanks skipped", "[hostfiles][rankfile]") {
  auto lines = parse_rankfile("# two hosts\nrank 1=n2 slot=0-1\n\n  rank 0=n1   slot=1:0  # socket 1\nrank 2=n1\n", "rf");
  REQUIRE(lines.size() == 3);
  CHECK(lines[0].rank == 0);
  CHECK(lines[0].host == "n1");
  CHECK(lines[0].slot == "1:0");
  CHECK(lines[0].origin == "rf:4");
  CHECK(lines[1].host == "n2");
  CHECK(lines[1].slot == "0-1");
  CHECK(lines[2].slot.empty());
}

TEST_CASE("rankfile: bad lines are named with what was expected", "[hostfiles][rankfile]") {
  CHECK_THAT(parse_error("node1 slots=2\n"), Catch::Contains("rf:1: expected 'rank'"));
  CHECK_THAT(parse_error("rank 0 node1\n"), Catch::Contains("rf:1: expected N=HOST"));
  CHECK_THAT(parse_error("rank x=node1\n"), Catch::Contains("expected a rank number"));
  CHECK_THAT(parse_error("rank 0=node1 slots=1\n"), Catch::Contains("expected slot=CPUS"));
  CHECK_THAT(parse_error("rank 0=node1 slot=1 x\n"), Catch::Contains("unexpected 'x'"));
  CHECK_THAT(parse_error("rank 0=+n0 slot=1\n"), Catch::Contains("relative hosts (+n0)"));
  CHECK_THAT(parse_error("rank 0=a\nrank 0=b\n"), Catch::Contains("rf:2: rank 0 is placed again (first at rf:1)"));
  CHECK_THAT(parse_error("rank 0=a\nrank 2=b\n"), Catch::Contains("rank 1 has no line"));
  CHECK_THAT(parse_error("# nothing\n"), Catch::Contains("no 'rank N=HOST' lines"));
}

TEST_CASE("rankfile: the placement follows the file and the job's hosts give order and must hold every host",
          "[hostfiles][rankfile]") {
  auto lines = parse_rankfile("rank 0=b slot=0\nrank 1=a slot=1\nrank 2=b slot=2\n", "rf");
  Placement p = place_by_rankfile(lines, {}, 0);
  REQUIRE(p.nodes.size() == 2);
  CHECK(p.nodes[0].host == "b");  // first appearance
  CHECK(p.ranks[0].node == 0);
  CHECK(p.ranks[1].node == 1);
  CHECK(p.ranks[2].local_rank == 1);
  CHECK(p.ranks[2].cpus == "2");
  CHECK(p.local_size == V{2, 1});
  // A hostfile names the order and the ssh user.
  std::vector<HostEntry> hosts = {HostEntry{.host = "a", .user = "u", .origin = "hosts:1"},
                                  HostEntry{.host = "b", .origin = "hosts:2"}, HostEntry{.host = "c", .origin = "hosts:3"}};
  Placement q = place_by_rankfile(lines, hosts, 3);
  REQUIRE(q.nodes.size() == 2);
  CHECK(q.nodes[0].host == "a");
  CHECK(q.nodes[0].user == "u");
  CHECK(q.ranks[0].node == 1);
  CHECK_THROWS_WITH(place_by_rankfile(parse_rankfile("rank 0=z\n", "rf"), hosts, 0),
                    Catch::Contains("rf:1: host 'z' is not one of the job's hosts"));
  CHECK_THROWS_WITH(place_by_rankfile(lines, {}, 4), Catch::Contains("-n 4 with a rankfile of 3 ranks (rf)"));
}

TEST_CASE("rankfile: a slot is CPUs the host lets us use, or a socket's cores by index", "[hostfiles][rankfile]") {
  CpuTopology t;  // 2 sockets x 2 cores x 2 threads, siblings n and n+4
  t.cores = {{0, 4}, {1, 5}, {2, 6}, {3, 7}};
  t.packages = {{0, 1, 4, 5}, {2, 3, 6, 7}};
  CHECK(rankfile_cpus("0-2,7", t, "h", "rf:1") == V{0, 1, 2, 7});
  CHECK(rankfile_cpus("1:0", t, "h", "rf:1") == V{2, 6});
  CHECK(rankfile_cpus("1:0-1", t, "h", "rf:1") == V{2, 3, 6, 7});
  CHECK(rankfile_cpus("0:1", t, "h", "rf:1") == V{1, 5});
  CHECK_THROWS_WITH(rankfile_cpus("9", t, "node4", "rf:2"), Catch::Contains("rf:2: slot=9: CPU 9 is not one node4"));
  CHECK_THROWS_WITH(rankfile_cpus("2:0", t, "node4", "rf:2"), Catch::Contains("node4 has 2 usable socket(s)"));
  CHECK_THROWS_WITH(rankfile_cpus("0:5", t, "node4", "rf:2"), Catch::Contains("socket 0 of node4 has 2 usable cores"));
  CHECK_THROWS_WITH(rankfile_cpus("a:b", t, "node4", "rf:2"), Catch::Contains("expected CPUS"));
}
