// Pure layout answers of mpi/job_map.h, checked against maps written
// out by hand.
#include <catch2/catch.hpp>

#include "mpi/job_map.h"
#include "errors/error.h"

using namespace dl::mpi;

namespace {

// Two hosts, ranks placed round-robin: a {0,2}, b {1,3}.
JobMap two_hosts(int node_rank) {
  JobMap m;
  m.nspace = "dlaunch.test";
  m.world_size = 4;
  m.node_rank = node_rank;
  m.node_hosts = {"a", "b"};
  m.node_ranks = {{0, 2}, {1, 3}};
  m.tmpdir = "/nonexistent";
  return m;
}

}  // namespace

TEST_CASE("job map places every rank on its node with its local rank", "[mpi]") {
  JobMap m = two_hosts(1);
  REQUIRE_NOTHROW(validate(m));
  auto p = place_ranks(m);
  REQUIRE(p.size() == 4);
  CHECK(p[0].node == 0);
  CHECK(p[0].local_rank == 0);
  CHECK(p[1].node == 1);
  CHECK(p[1].local_rank == 0);
  CHECK(p[2].node == 0);
  CHECK(p[2].local_rank == 1);
  CHECK(p[3].node == 1);
  CHECK(p[3].local_rank == 1);
  CHECK(ppn_string(m) == "0,2;1,3");
  CHECK(hosts_string(m) == "a,b");
  CHECK(local_peers_string(m) == "1,3");
  CHECK(universe_size(m) == 4);
  m.universe_size = 8;
  CHECK(universe_size(m) == 8);
}

TEST_CASE("job map rejects inconsistent plans with a named reason", "[mpi]") {
  auto rejects = [](JobMap m, const std::string& needle) {
    try {
      validate(m);
      FAIL("accepted a bad map, expected: " << needle);
    } catch (const dl::UsageError& e) {
      CHECK_THAT(e.what(), Catch::Contains(needle));
    }
  };
  JobMap m = two_hosts(0);
  m.node_ranks = {{0, 2}, {1, 2}};
  rejects(m, "rank 2 is placed twice");
  m = two_hosts(0);
  m.node_ranks = {{0, 2}, {1}};
  rejects(m, "rank 3 is on no node");
  m = two_hosts(0);
  m.node_ranks = {{0, 2}, {1, 4}};
  rejects(m, "rank 4 on b is out of range");
  m = two_hosts(2);
  rejects(m, "node_rank 2");
  m = two_hosts(0);
  m.tmpdir.clear();
  CHECK_NOTHROW(validate(m));  // the PMIx server's own requirement (pmix::validate_served), not the map's
  m = two_hosts(0);
  m.universe_size = 3;
  rejects(m, "universe_size");
  m = two_hosts(0);
  m.app_sizes = {1, 2};
  rejects(m, "app sizes add up to 3, not world_size 4");
  m.app_sizes = {4, 0};
  rejects(m, "an app context has no ranks");
}

TEST_CASE("job map: MPMD ranks belong to their app context, in rank order", "[mpi]") {
  JobMap m = two_hosts(0);
  CHECK(app_of(m, 3) == 0);  // one app: every rank is app 0
  m.app_sizes = {1, 3};
  REQUIRE_NOTHROW(validate(m));
  CHECK(app_of(m, 0) == 0);
  CHECK(app_of(m, 1) == 1);
  CHECK(app_of(m, 3) == 1);
  CHECK(app_leader(m, 0) == 0);
  CHECK(app_leader(m, 1) == 1);
}

TEST_CASE("job map: the launch message's mpi section is read into one map that both servers answer from", "[mpi]") {
  dl::control::msg::MpiSection s;
  s.nspace = "dl-abc", s.world_size = 5, s.node_rank = 1, s.universe_size = 8;
  s.node_hosts = {"a", "b"};
  s.node_ranks = {{0, 1, 2}, {3, 4}};
  s.app_sizes = std::vector<int>{2, 3};
  const JobMap m = job_map_from(s);
  REQUIRE_NOTHROW(validate(m));
  CHECK(m.node_ranks[static_cast<size_t>(m.node_rank)] == std::vector<int>{3, 4});
  CHECK(universe_size(m) == 8);
  CHECK(app_of(m, 1) == 0);
  CHECK(app_of(m, 2) == 1);
  CHECK(app_leader(m, 1) == 2);
  s.universe_size = 0;
  CHECK(universe_size(job_map_from(s)) == 5);
}
