// Start-up across namespace hosts: MASTER_ADDR when rank 0 is remote, the
// progress line on a terminal, several hosts failing at once, and per-node
// mode (--rdzv) with one dlaunch per host.
#include <catch2/catch.hpp>

#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "tests/multihost/multihost_util.h"

using dl::cluster::Cluster;
using namespace dl::multihost;

namespace {
// The "K=V" words of every line that has `tag`, one map per line.
std::vector<std::map<std::string, std::string>> fields(const std::string& out, const std::string& tag) {
  std::vector<std::map<std::string, std::string>> rows;
  std::istringstream in(out);
  std::string l;
  while (std::getline(in, l)) {
    if (!contains(l, tag)) continue;
    std::map<std::string, std::string> m;
    std::istringstream words(l.substr(l.find(tag) + tag.size()));
    std::string w;
    while (words >> w)
      if (auto eq = w.find('='); eq != std::string::npos) m[w.substr(0, eq)] = w.substr(eq + 1);
    rows.push_back(m);
  }
  return rows;
}

const char* kIdentity =
    "sh -c 'echo ID: RANK=$RANK NODE_RANK=$NODE_RANK LOCAL_RANK=$LOCAL_RANK WORLD_SIZE=$WORLD_SIZE "
    "MASTER=$MASTER_ADDR:$MASTER_PORT STORE=$DLAUNCH_STORE_ADDR HOST=$(hostname)'";
}  // namespace

TEST_CASE("rank 0 on a remote host: MASTER_ADDR is the served store's, or with --torch-store rank0 that host's",
          "[multihost][cluster][slow]") {
  Cluster c(4);
  // Launcher on h0; the job's hosts are h2 and h3 only.
  const std::string hf = c.dir() + "/hosts.h2h3";
  std::ofstream(hf) << c.address(2) << " slots=2\n" << c.address(3) << " slots=2\n";
  // By default the launcher serves torch's store: MASTER_ADDR is h0's address
  // as the agents reach it; with rank0, rank 0's torch hosts it on h2.
  for (const std::string store : {"served", "rank0"}) {
    INFO("--torch-store " << store);
    auto r = c.run_in("h0", bin("dlaunch") + " -n 4 --torch-store " + store + " --hostfile " + hf +
                                " --ssh-config " + c.ssh_config() + " " + kIdentity + " </dev/null");
    INFO(r.output);
    REQUIRE(r.status == 0);
    auto rows = fields(r.output, "ID:");
    REQUIRE(rows.size() == 4);
    std::set<std::string> masters;
    for (auto& m : rows) {
      masters.insert(m["MASTER"]);
      CHECK(m["HOST"] == "h" + std::to_string(2 + std::stoi(m["RANK"]) / 2));
    }
    REQUIRE(masters.size() == 1);
    CHECK(masters.begin()->rfind(c.address(store == "served" ? 0 : 2) + ":", 0) == 0);
    CHECK(wait_clean(c, "ID:").empty());
  }
}

TEST_CASE("on a terminal, start-up shows agents connected and failed, without one nothing", "[multihost][cluster][slow]") {
  Cluster c(5);
  REQUIRE(c.script({"stop-sshd", c.id(), "h3"}).status == 0);
  // Five hosts (this one, h0, by name, and h1..h4) so that the line is
  // drawn; h0's address as well would be this machine again, merged.
  const std::string hf = c.dir() + "/hosts.five";
  {
    std::ofstream out(hf);
    out << "localhost slots=1\n";
    for (int i = 1; i < 5; ++i) out << c.address(i) << " slots=1\n";
  }
  const std::string cmd = bin("dlaunch") + " -n 5 --hostfile " + hf + " --ssh-config " + c.ssh_config() + " true";
  // script(1) gives dlaunch a pseudo-terminal.
  auto tty = c.run_in("h0", "script -qec '" + cmd + "' /dev/null </dev/null");
  INFO(tty.output);
  CHECK(tty.status != 0);
  CHECK(contains(tty.output, "agents "));
  CHECK(contains(tty.output, "/5 connected, 1 failed"));
  CHECK(contains(tty.output, "error: " + c.address(3)));
  // The other agents leave when told to: their exit is no start failure.
  CHECK_FALSE(contains(tty.output, "exited with status 0"));
  auto plain = c.run_in("h0", cmd + " </dev/null");
  INFO(plain.output);
  CHECK(plain.status != 0);
  CHECK_FALSE(contains(plain.output, "connected"));
  CHECK(contains(plain.output, "error: " + c.address(3)));
}

TEST_CASE("two hosts down: each gets its line and the verdict names both", "[multihost][cluster][slow]") {
  Cluster c(4);
  REQUIRE(c.script({"stop-sshd", c.id(), "h1"}).status == 0);
  REQUIRE(c.script({"stop-sshd", c.id(), "h3"}).status == 0);
  const std::string mark = unique_marker();
  auto r = run_dlaunch(c, "-n 8 sleep " + mark);
  INFO(r.output);
  CHECK(r.status == 1);
  CHECK(contains(r.output, "error: " + c.address(1)));
  CHECK(contains(r.output, "error: " + c.address(3)));
  CHECK(contains(r.output, "agents could not be started on 2 hosts ("));
  const auto verdict = r.output.substr(r.output.find("agents could not be started"));
  CHECK(contains(verdict, c.address(1)));
  CHECK(contains(verdict, c.address(3)));
  CHECK(wait_clean(c, mark).empty());
}

TEST_CASE("per-node mode: one dlaunch per host meets at h0's store", "[multihost][cluster][slow]") {
  Cluster c(3);
  const std::string rdzv = "tcp://" + c.address(0) + ":29477";
  auto node = [&](int k) {
    return std::async(std::launch::async, [&c, &rdzv, k] {
      return c.run_in(c.host(k), "DLAUNCH_TOKEN=multihost-per-node-token " + bin("dlaunch") +
                                     " --nnodes 3 --node-rank " + std::to_string(k) + " --rdzv " + rdzv +
                                     " --rdzv-timeout 30 --nproc-per-node 2 " + kIdentity + " </dev/null");
    });
  };
  auto f2 = node(2), f1 = node(1), f0 = node(0);
  auto r0 = f0.get(), r1 = f1.get(), r2 = f2.get();
  INFO(r0.output << "---\n" << r1.output << "---\n" << r2.output);
  REQUIRE(r0.status == 0);
  REQUIRE(r1.status == 0);
  REQUIRE(r2.status == 0);
  std::set<std::string> ranks, masters, stores;
  for (auto* r : {&r0, &r1, &r2}) {
    for (auto& m : fields(r->output, "ID:")) {
      ranks.insert(m["RANK"]);
      masters.insert(m["MASTER"]);
      stores.insert(m["STORE"]);
      CHECK(m["WORLD_SIZE"] == "6");
      CHECK(m["HOST"] == "h" + m["NODE_RANK"]);
      CHECK(std::stoi(m["RANK"]) == 2 * std::stoi(m["NODE_RANK"]) + std::stoi(m["LOCAL_RANK"]));
    }
  }
  CHECK(ranks.size() == 6);
  REQUIRE(masters.size() == 1);
  CHECK(masters.begin()->rfind(c.address(0) + ":", 0) == 0);
  CHECK(stores == std::set<std::string>{c.address(0) + ":29477"});
  for (auto* r : {&r0, &r1, &r2}) CHECK(r->output.find("run on one machine") == std::string::npos);  // hosts of their own
}

TEST_CASE("per-node mode: a rank failing on h2 stops h0 and h1", "[multihost][cluster][slow]") {
  Cluster c(3);
  const std::string mark = unique_marker();
  const std::string rdzv = "tcp://" + c.address(0) + ":29478";
  auto node = [&](int k) {
    return std::async(std::launch::async, [&c, &rdzv, &mark, k] {
      return c.run_in(c.host(k), "DLAUNCH_TOKEN=multihost-per-node-token " + bin("dlaunch") +
                                     " --nnodes 3 --node-rank " + std::to_string(k) + " --rdzv " + rdzv +
                                     " --rdzv-timeout 30 sh -c 'if [ $RANK = 2 ]; then sleep 1; exit 5; fi; sleep " +
                                     mark + "' </dev/null");
    });
  };
  auto f0 = node(0), f1 = node(1), f2 = node(2);
  auto r0 = f0.get(), r1 = f1.get(), r2 = f2.get();
  INFO(r0.output << "---\n" << r1.output << "---\n" << r2.output);
  CHECK(r2.status == 5);
  CHECK(r0.status == 5);
  CHECK(r1.status == 5);
  CHECK(contains(r0.output, "node 2 (h2): rank 2 on h2"));
  CHECK(contains(r1.output, "node 2 (h2): rank 2 on h2"));
  CHECK(wait_clean(c, mark).empty());
}
