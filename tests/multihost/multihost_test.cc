// dlaunch on 4 namespace hosts x 2 slots: identity, the store, exit codes,
// fail-fast. The launcher runs inside h0, as on a login node.
#include <catch2/catch.hpp>

#include <chrono>
#include <map>
#include <regex>
#include <sstream>

#include "tests/multihost/multihost_util.h"

using dl::cluster::Cluster;
using namespace dl::multihost;

TEST_CASE("every rank on 4 hosts gets its identity and MASTER_ADDR is h0", "[multihost][cluster][slow]") {
  Cluster c(4);
  auto r = run_dlaunch(c, "-n 8 --tag-output sh -c 'echo RANK=$RANK LOCAL_RANK=$LOCAL_RANK NODE_RANK=$NODE_RANK "
                          "WORLD_SIZE=$WORLD_SIZE MASTER_ADDR=$MASTER_ADDR HOST=$(hostname -I)'");
  INFO(r.output);
  REQUIRE(r.status == 0);
  std::regex line(R"(RANK=(\d+) LOCAL_RANK=(\d+) NODE_RANK=(\d+) WORLD_SIZE=(\d+) MASTER_ADDR=(\S+) HOST=(\S+))");
  std::map<int, std::smatch> seen;
  std::istringstream in(r.output);
  std::string l;
  int lines = 0;
  while (std::getline(in, l)) {
    std::smatch m;
    if (!std::regex_search(l, m, line)) continue;
    ++lines;
    const int rank = std::stoi(m[1]);
    INFO(l);
    REQUIRE(rank >= 0);
    REQUIRE(rank < 8);
    CHECK(seen.count(rank) == 0);
    // Hostfile order, 2 slots each: ranks 2k, 2k+1 on host k.
    CHECK(std::stoi(m[2]) == rank % 2);
    CHECK(std::stoi(m[3]) == rank / 2);
    CHECK(std::stoi(m[4]) == 8);
    CHECK(m[5].str() == c.address(0));
    CHECK(m[6].str() == c.address(rank / 2));
    // --tag-output names the rank and the hostfile's name of its host.
    CHECK(contains(l, "[" + std::to_string(rank) + "@" + c.address(rank / 2) + "]"));
    seen[rank] = m;
  }
  CHECK(lines == 8);
  CHECK(seen.size() == 8);
  CHECK(wait_clean(c, "RANK=").empty());
}

TEST_CASE("dlaunch-hello meets at a barrier in the launcher's store across hosts", "[multihost][cluster][slow]") {
  Cluster c(4);
  auto r = run_dlaunch(c, "-n 8 " + bin("dlaunch-hello"));
  INFO(r.output);
  REQUIRE(r.status == 0);
  for (int rank = 0; rank < 8; ++rank) {
    CHECK(contains(r.output, "rank " + std::to_string(rank) + " of 8 on h" + std::to_string(rank / 2)));
    CHECK(contains(r.output, "rank " + std::to_string(rank) + " passed the barrier with all 8 ranks"));
  }
  // `dlaunch --hostfile hosts ./train`, the shape users type: a relative
  // program is found from the launcher's directory on every host (the remote
  // agents start in $HOME; looking there, they would refuse the ranks).
  const std::string hello = bin("dlaunch-hello");
  const std::string dir = hello.substr(0, hello.rfind("/bin/"));
  auto rel = c.run_in("h0", "cd '" + dir + "' && " + dlaunch_cmd(c, "-n 8 ./bin/dlaunch-hello") + " </dev/null");
  INFO(rel.output);
  REQUIRE(rel.status == 0);
  for (int rank = 0; rank < 8; ++rank)
    CHECK(contains(rel.output, "rank " + std::to_string(rank) + " passed the barrier with all 8 ranks"));
}

TEST_CASE("a failing rank on h2 gives its exit code, names the host and stops the others fast",
          "[multihost][cluster][slow]") {
  Cluster c(4);
  const std::string mark = unique_marker();
  const auto t0 = std::chrono::steady_clock::now();
  // Rank 5 (h2) fails with 7 after 1 s; the others would sleep for 40 s.
  auto r = run_dlaunch(c, "-n 8 --kill-grace 2 sh -c 'if [ $RANK = 5 ]; then sleep 1; exit 7; fi; exec sleep " +
                              mark + "'");
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  INFO(r.output);
  CHECK(r.status == 7);
  CHECK(contains(r.output, "rank 5 on " + c.address(2)));
  CHECK(contains(r.output, "exited with code 7"));
  // Ranks get SIGTERM at once (sleep dies of it); 1 s + start-up + slack.
  CHECK(took < 1 + 2 + 4);
  CHECK(wait_clean(c, mark) == "");
}

TEST_CASE("output of every rank on every host arrives whole and tagged", "[multihost][cluster][slow]") {
  Cluster c(4);
  // 20000 numbered lines per rank: a lost, cut or misattributed line shows.
  auto r = run_dlaunch(c, "-n 8 --tag-output sh -c 'seq 1 20000 | sed \"s/^/r$RANK n/\"'");
  REQUIRE(r.status == 0);
  std::vector<int> next(8, 1);
  std::istringstream in(r.output);
  std::string l;
  int bad = 0;
  std::string first_bad;
  while (std::getline(in, l)) {
    std::smatch m;
    static const std::regex re(R"(^\[(\d)@(\S+)\] r(\d) n(\d+)$)");
    if (!std::regex_match(l, m, re) || m[1] != m[3] || m[2].str() != c.address(std::stoi(m[1]) / 2) ||
        std::stoi(m[4]) != next[static_cast<size_t>(std::stoi(m[1]))]) {
      if (bad++ == 0) first_bad = l;
      continue;
    }
    ++next[static_cast<size_t>(std::stoi(m[1]))];
  }
  INFO("first bad line: " << first_bad);
  CHECK(bad == 0);
  for (int rank = 0; rank < 8; ++rank) CHECK(next[static_cast<size_t>(rank)] == 20001);
}

TEST_CASE("the launch shell's variables: h0's ranks have them, others only by -x or --export-all, and one warning says so",
          "[multihost][cluster][slow]") {
  Cluster c(2);
  const std::string shell = "STEPS=60 NCCL_SOCKET_IFNAME=eth0 GLOO_SOCKET_IFNAME=eth0 ";
  const std::string show = " --tag-output sh -c 'echo got=${STEPS:-unset},${NCCL_SOCKET_IFNAME:-unset}'";
  auto r = c.run_in("h0", shell + dlaunch_cmd(c, "-n 4" + show) + " </dev/null");
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK(contains(r.output, "[0@" + c.address(0) + "] got=60,eth0"));
  CHECK(contains(r.output, "[2@" + c.address(1) + "] got=unset,unset"));
  // One line (the test's own environment may hold more of the families, CUDA_HOME say).
  auto warning = [](const std::string& out) {
    std::istringstream in(out);
    for (std::string l; std::getline(in, l);)
      if (contains(l, "set here but not sent")) return l;
    return std::string();
  };
  CHECK(count_lines_with(r.output, "not sent") == 1);
  CHECK(warning(r.output).rfind("dlaunch: warning: ", 0) == 0);
  CHECK(contains(warning(r.output), "GLOO_SOCKET_IFNAME, NCCL_SOCKET_IFNAME"));
  CHECK(contains(warning(r.output), "not those on " + c.address(1) + " "));
  // Sent by name: h1's ranks have it, and what is sent is not named.
  r = c.run_in("h0", shell + dlaunch_cmd(c, "-n 4 -x NCCL_SOCKET_IFNAME -x STEPS" + show) + " </dev/null");
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK(contains(r.output, "[2@" + c.address(1) + "] got=60,eth0"));
  CHECK(contains(warning(r.output), "GLOO_SOCKET_IFNAME"));
  CHECK_FALSE(contains(warning(r.output), "NCCL_SOCKET_IFNAME"));
  // --export-all: everything, and no warning.
  r = c.run_in("h0", shell + dlaunch_cmd(c, "-n 4 --export-all" + show) + " </dev/null");
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK(contains(r.output, "[3@" + c.address(1) + "] got=60,eth0"));
  CHECK(count_lines_with(r.output, "not sent") == 0);
  CHECK(wait_clean(c, "got=").empty());
}
