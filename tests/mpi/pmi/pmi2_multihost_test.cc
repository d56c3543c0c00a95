// Slurm's libpmi2 client (pmi2_client.c) on 4 namespace hosts x 2 ranks:
// the PMI-2 fences cross hosts through the launcher, node attributes stay
// within a host, and nothing is left on any host.
#include <catch2/catch.hpp>

#include <string>

#include "tests/multihost/multihost_util.h"

using dl::cluster::Cluster;
using namespace dl::multihost;

TEST_CASE("dlaunch: a PMI-2 client on 4 hosts x 2 ranks", "[pmi2_mh][cluster][slow]") {
  Cluster c(4);
  const std::string mark = unique_marker();
  auto r = run_dlaunch(c, "-v -n 8 " + bin("pmi2_client") + " 8 " + mark, std::chrono::seconds(90));
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK(count_lines_with(r.output, "BAD") == 0);
  CHECK(count_lines_with(r.output, " ok") == 8);
  for (int k = 0; k < 8; ++k) CHECK(count_lines_with(r.output, "pmi2 rank " + std::to_string(k) + " of 8 jobid ") == 1);
  // Two KVS fences, each once through the launcher.
  CHECK(count_lines_with(r.output, "dlaunch: PMI fence 0 complete") == 1);
  CHECK(count_lines_with(r.output, "dlaunch: PMI fence 1 complete") == 1);
  CHECK(wait_clean(c, mark) == "");
}
