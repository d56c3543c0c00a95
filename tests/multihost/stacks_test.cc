// Where is everything stuck, across hosts (docs/hangs.md): 8 native ranks on
// 4 hosts, rank 5 (on h2) stuck elsewhere; each host's agent reads its own
// ranks with eu-stack, the launcher groups them all.
#include <signal.h>

#include <catch2/catch.hpp>

#include <filesystem>
#include <sstream>

#include "tests/multihost/multihost_util.h"

using dl::cluster::Cluster;
using namespace dl::multihost;
using namespace std::chrono_literals;

TEST_CASE("stacks across 4 hosts: --timeout groups 7 ranks and names rank 5 on h2, then 124 and nothing left",
          "[multihost][cluster][slow]") {
  Cluster c(4);
  const std::string mark = unique_marker();
  char tmpl[] = "/tmp/dl-mh-stacks-XXXXXX";
  const std::string report = ::mkdtemp(tmpl);
  auto r = run_dlaunch(c, "-n 8 --timeout 6 --kill-grace 1 --report-dir " + report +
                              " -x STUCK_ELSEWHERE=5 " + bin("dlaunch-stuck-rank") + " " + mark,
                       60s);
  INFO(r.output);
  CHECK(r.status == 124);
  std::string odd, rest;
  std::istringstream in(r.output);
  for (std::string l; std::getline(in, l);) {
    if (l.rfind("dlaunch:   rank 5 on ", 0) == 0) odd = l;
    if (l.rfind("dlaunch:   ranks 0-4, 6-7 (7): ", 0) == 0) rest = l;
  }
  CHECK(odd == "dlaunch:   rank 5 on " + c.address(2) + ": pause <- stuck_elsewhere <- main");
  CHECK(rest == "dlaunch:   ranks 0-4, 6-7 (7): pause <- stuck_here <- main");
  CHECK(std::filesystem::exists(report + "/stacks-1.json"));
  std::filesystem::remove_all(report);
  CHECK(wait_clean(c, mark, 5s) == "");
}

// Found by the chaos run (stop-rank): a SIGSTOPped shell rank was shown
// waiting in wait4, as if it were running.
TEST_CASE("stacks across 4 hosts: a rank SIGSTOPped on h2 is named stopped on --timeout", "[multihost][cluster][slow]") {
  Cluster c(4);
  const std::string mark = unique_marker();
  char tmpl[] = "/tmp/dl-mh-stacks-XXXXXX";
  const std::string report = ::mkdtemp(tmpl);
  auto f = start_dlaunch(c, "-n 8 --timeout 6 --kill-grace 1 --report-dir " + report + " sleep " + mark, 60s);
  if (!wait_running(c, "sleep " + mark, 2)) {
    auto r = f.get();
    FAIL("the ranks did not start on every host: " << r.output);
  }
  auto ranks = pids_matching(c, "h2", "sleep " + mark);
  REQUIRE(ranks.size() == 2);
  REQUIRE(::kill(ranks[0], SIGSTOP) == 0);
  auto r = f.get();
  INFO(r.output);
  CHECK(r.status == 124);
  CHECK(count_lines_with(r.output, "stopped by a signal (SIGSTOP or SIGTSTP: it runs again only after SIGCONT)") == 1);
  CHECK(count_lines_with(r.output, "(pid " + std::to_string(ranks[0]) + ")") == 0);  // the summary names no pid
  CHECK(contains(r.output, "on " + c.address(2) + ": stopped by a signal"));
  std::filesystem::remove_all(report);
  CHECK(wait_clean(c, mark, 5s) == "");
}
