// The doctor at scale: its peers started through the launch tree, on the
// test bed (--launcher sim: simulated hosts on this machine, in a network
// namespace of the test's own so that a planted slow link slows nothing
// else) and on the namespace cluster (real sshd, --fanout 4); the planted
// bad host and slow host each named in one line; nothing left behind.
#include <catch2/catch.hpp>

#include <dirent.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <fstream>
#include <random>
#include <sstream>

#include "tests/doctor/doctor_util.h"

using dl::cluster::Cluster;
using namespace dl::doctor_test;

namespace {
std::string sim_name(int i) {
  char b[16];
  std::snprintf(b, sizeof b, "node%04d", i + 1);
  return b;
}

std::string sim_hosts(int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s += (i ? "," : "") + sim_name(i);
  return s;
}

// The test bed's address of simulated node `i` (remote/sim_starter.h).
std::string sim_address(int i) {
  const unsigned a = (127u << 24) + 2 + static_cast<unsigned>(i);
  return "127." + std::to_string(a >> 16 & 255) + "." + std::to_string(a >> 8 & 255) + "." + std::to_string(a & 255);
}

// Processes whose environment holds `mark` (the doctor's peers inherit it).
std::string marked_processes(const std::string& mark) {
  std::string left;
  DIR* d = ::opendir("/proc");
  for (dirent* e; d && (e = ::readdir(d));) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9' || std::atoi(e->d_name) == ::getpid()) continue;
    std::ifstream f(std::string("/proc/") + e->d_name + "/environ");
    const std::string env((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    if (env.find(mark) != std::string::npos) left += std::string("left running: pid ") + e->d_name + "\n";
  }
  if (d) ::closedir(d);
  return left;
}

// Runs the doctor on `n` simulated hosts in a network namespace of its own
// (lo up; `setup` run first there, as root), with `env` added; waits for
// every peer to be gone (up to 10 s) and says what was left.
struct SimRun {
  dl::cluster::RunResult r;
  std::string left;
};
SimRun run_sim(int n, const std::string& args, const std::string& env = "", const std::string& setup = "true") {
  const std::string mark = "DL_DOCTOR_TREE_TEST=" + std::to_string(::getpid()) + "." + std::to_string(std::random_device{}());
  const std::string inner = "ip link set lo up && " + setup + " && exec env DLAUNCH_SIM=1 " + mark + " " + env + " " +
                            bin("dlaunch") + " doctor --launcher sim -H " + sim_hosts(n) + " " + args + " </dev/null";
  SimRun s;
  s.r = dl::cluster::run_argv({"unshare", "-n", "sh", "-c", inner}, std::chrono::seconds(240));
  for (int i = 0; i < 100 && !(s.left = marked_processes(mark)).empty(); ++i) ::usleep(100000);
  return s;
}

// htb on lo: everything to and from `addr` at 20 Mbit/s.
std::string slow_host_on_lo(const std::string& addr) {
  return "tc qdisc add dev lo root handle 1: htb default 10 && tc class add dev lo parent 1: classid 1:10 htb rate 100gbit && "
         "tc class add dev lo parent 1: classid 1:20 htb rate 20mbit && "
         "tc filter add dev lo protocol ip parent 1: prio 1 u32 match ip src " + addr + "/32 flowid 1:20 && "
         "tc filter add dev lo protocol ip parent 1: prio 1 u32 match ip dst " + addr + "/32 flowid 1:20";
}
// `job` (a dlaunch command line) on the test bed, each host of `plants`
// with /opt/dl-plant/bin put first on its PATH.
dl::cluster::RunResult run_job(const std::string& job, const std::vector<std::string>& plants = {}) {
  std::string env;
  for (const auto& h : plants) env += (env.empty() ? "" : ";") + h + ":PATH=/opt/dl-plant/bin:$PATH";
  return dl::cluster::run_argv({"sh", "-c", "DLAUNCH_SIM=1 DLAUNCH_SIM_HOST_ENV=\"" + env + "\" " + job + " </dev/null"},
                               std::chrono::seconds(120));
}

// How many times `what` is in `text`.
size_t count_of(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}
}  // namespace

TEST_CASE("test bed, 40 hosts through a tree of fan-out 4: a planted PATH on 3 hosts is one line, the table only theirs",
          "[doctor][sim][slow]") {
  std::string plants;
  for (int h : {10, 11, 12}) plants += (plants.empty() ? "" : ";") + sim_name(h) + ":PATH=/opt/dl-plant/bin:" + std::getenv("PATH");
  auto s = run_sim(40, "--fanout 4 --quick", "DLAUNCH_SIM_HOST_ENV='" + plants + "'");
  INFO(s.r.output);
  CHECK(s.r.status == 1);
  const auto f = failures(s.r.output, "env");
  REQUIRE(f.size() == 1);
  CHECK(contains(f[0], kFail + " env: 3 hosts (node[0011-0013]): PATH has /opt/dl-plant/bin that most hosts lack"));
  CHECK(count_failures(s.r.output) == 1);
  CHECK(contains(row_of(s.r.output, "node0012"), kFail + " PATH"));
  CHECK(row_of(s.r.output, "node0001").empty());  // healthy hosts are a count
  CHECK(contains(s.r.output, "\u2713 the other 37 hosts passed every check (-v lists them)"));
  CHECK(contains(s.r.output, "NOT healthy: 37 of 40 hosts passed, 1 problem"));
  CHECK(s.left == "");

  SECTION("the JSON: a tree of depth 3 (40 hosts, fan-out 4), the doctor holding 4 links, every clock read") {
    auto j = run_sim(40, "--fanout 4 --quick --json");
    INFO(j.r.output);
    CHECK(j.r.status == 0);
    auto doc = nlohmann::json::parse(j.r.output.substr(j.r.output.find('{')));
    CHECK(doc["notes"]["tree"]["direct"] == 4);
    CHECK(doc["notes"]["tree"]["depth"] == 3);
    CHECK(doc["notes"]["tree"]["method"] == "sim");
    for (const auto& h : doc["hosts"]) {
      CHECK(h["checks"]["clock"]["mark"] == "ok");
      CHECK(h["facts"]["hostname"] == h["host"]);  // each simulated host says it is the host the hostfile names
    }
    CHECK(j.left == "");
  }
}

TEST_CASE("test bed, 24 hosts through a tree: a host slowed to 20 Mbit/s is named once, sparse links", "[doctor][sim][slow]") {
  auto s = run_sim(24, "--fanout 4 --link-factor 5 --link-seconds 0.1", "", slow_host_on_lo(sim_address(13)));
  INFO(s.r.output);
  CHECK(s.r.status == 1);
  const auto f = failures(s.r.output, "links");
  REQUIRE(f.size() == 1);
  CHECK(contains(f[0], kFail + " links: node0014 is slow to every host: "));
  CHECK(count_failures(s.r.output) == 1);
  CHECK(contains(s.r.output, "\nlinks: "));
  CHECK(contains(s.r.output, "(a ring and 2 random matchings)"));
  CHECK(contains(s.r.output, "all_reduce: "));
  CHECK(contains(s.r.output, " float32 sum over 23 hosts"));
  CHECK(s.left == "");
}

TEST_CASE("test bed, 16 hosts through a tree of fan-out 4: --link-parallel 1 runs one link test at a time, every pair measured",
          "[doctor][sim][slow]") {
  // The pacing is the tree's (doctor/peer_fan.h, at_once): the doctor
  // sends each round once. One at a time, the bandwidth pass alone is at
  // least every pair x 2 directions x 0.1 s; a round at once, 4 x 0.2 s.
  auto s = run_sim(16, "--fanout 4 --link-parallel 1 --link-seconds 0.1 --json");
  INFO(s.r.output);
  REQUIRE(s.r.status == 0);
  const auto doc = nlohmann::json::parse(s.r.output.substr(s.r.output.find('{')));
  const auto& links = doc["notes"]["links"];
  const double pairs = static_cast<double>(links.size());
  CHECK(pairs >= 16);  // a ring and 2 random matchings of 16 hosts (a pair drawn twice is tested once)
  for (const auto& l : links) {
    CHECK(l["error"] == "");
    CHECK(l["seconds"].get<double>() >= 0.2);  // the test's own time, at its host: both directions
  }
  CHECK(doc["notes"]["stage_seconds"]["links"].get<double>() >= pairs * 0.2);
  CHECK(doc["notes"]["tree"]["direct"] == 4);
  CHECK(s.left == "");
}

TEST_CASE("test bed: 3 hosts, one of them at 20 Mbit/s, is found (every pair tested)", "[doctor][sim][slow]") {
  auto s = run_sim(3, "--link-factor 5", "", slow_host_on_lo(sim_address(2)));
  INFO(s.r.output);
  CHECK(s.r.status == 1);
  const auto f = failures(s.r.output, "links");
  REQUIRE(f.size() == 1);
  CHECK(contains(f[0], kFail + " links: node0003 is slow to every host: "));
  CHECK(s.left == "");
}

TEST_CASE("namespace cluster, 16 hosts through a tree of fan-out 4 (libssh): a planted PATH and a slow host named",
          "[doctor][cluster][slow]") {
  Cluster c(16);
  const std::string normal = ssh_path(c);
  REQUIRE(c.script({"setenv", c.id(), "h5", "PATH=" + normal + ":/opt/dl-doctor-test/bin"}).status == 0);
  REQUIRE(c.run_in("h9", "tc qdisc add dev eth0 root handle 1: htb default 20 && "
                         "tc class add dev eth0 parent 1: classid 1:20 htb rate 20mbit").status == 0);
  auto r = run_doctor(c, "--fanout 4 --link-factor 5 --json", "", std::chrono::seconds(240));
  INFO(r.output);
  CHECK(r.status == 1);
  auto doc = nlohmann::json::parse(r.output.substr(r.output.find('{')));
  // 15 remote hosts at fan-out 4: 4 roots start the rest; the doctor holds them and its own host's peer.
  CHECK(doc["notes"]["tree"]["direct"] == 5);
  CHECK(doc["notes"]["tree"]["depth"] == 2);
  CHECK(doc["notes"]["link_plan"] == "sparse");
  std::vector<std::string> lines;
  for (const auto& p : doc["problems"])
    if (p["mark"] == "fail") lines.push_back(p["check"].get<std::string>() + ": " + p["what"].get<std::string>());
  INFO(nlohmann::json(lines).dump(1));
  REQUIRE(lines.size() == 2);
  CHECK(contains(lines[0], "env: " + c.address(5) + ": PATH has /opt/dl-doctor-test/bin that most hosts lack"));
  CHECK(contains(lines[1], "links: " + c.address(9) + " is slow to every host: "));
  for (int h = 0; h < 16; ++h) CHECK(doc["hosts"][h]["checks"]["clock"]["mark"] == "ok");
  CHECK(leftovers(c) == "");
}

TEST_CASE("preflight: a host whose PATH differs stops the job before any rank starts, healthy hosts run it", "[doctor][sim]") {
  const std::string job = bin("dlaunch") + " --preflight --launcher sim -H " + sim_hosts(8) + " -n 8 /bin/echo ran-" +
                          std::to_string(::getpid());
  auto ok = run_job(job);
  INFO(ok.output);
  CHECK(ok.status == 0);
  CHECK(contains(ok.output, "dlaunch: --preflight: 8 hosts passed ("));
  CHECK(count_of(ok.output, "ran-") == 8);
  auto bad = run_job(job, {"node0003"});
  INFO(bad.output);
  CHECK(bad.status == 1);
  CHECK(contains(bad.output, kFail + " env: node0003: PATH has /opt/dl-plant/bin that most hosts lack"));
  CHECK(contains(bad.output, "the job was not started"));
  CHECK_FALSE(contains(bad.output, "ran-"));
}

TEST_CASE("preflight with --spares: a host whose PATH differs gives its seat to the spare, the job runs without it",
          "[doctor][sim]") {
  // 8 hosts, the last a spare (--spares 1): 7 seats of one rank each.
  const std::string mark = "ran-" + std::to_string(::getpid());
  const std::string job = bin("dlaunch") + " --preflight --launcher sim -H " + sim_hosts(8) +
                          " --spares 1 -n 7 --tag-output /bin/echo " + mark;
  auto r = run_job(job, {"node0003"});
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK(contains(r.output, kFail + " env: node0003: PATH has /opt/dl-plant/bin that most hosts lack"));
  CHECK(contains(r.output, "dlaunch: --preflight: 1 host failed the checks above (node0003) in "));
  CHECK(contains(r.output, "node0003 lost (failed the health check: --preflight: env: node0003: PATH has /opt/dl-plant/bin"));
  CHECK(contains(r.output, "moved to spare node0008"));
  CHECK(count_of(r.output, "] " + mark) == 7);
  CHECK_FALSE(contains(r.output, "@node0003] " + mark));  // the bad host holds no rank
  CHECK(contains(r.output, "@node0008] " + mark));

  SECTION("two hosts fail and one spare: the job does not start, naming the host left without a spare") {
    auto two = run_job(job, {"node0003", "node0005"});
    INFO(two.output);
    CHECK(two.status != 0);
    CHECK(contains(two.output, "(node0003, node0005)"));
    CHECK(contains(two.output, "no spare is left to take its ranks"));
    CHECK_FALSE(contains(two.output, "] " + mark));
  }
}
