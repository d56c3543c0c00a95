// `dlaunch doctor` on the namespace cluster with the faults of issue 5
// injected for real: each test asserts the finding, the host it names and the
// exit code, and that no peer or temporary file is left behind.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

#include "tests/doctor/doctor_util.h"

using dl::cluster::Cluster;
using namespace dl::doctor_test;
using namespace std::chrono_literals;

namespace {
// Full runs measure links on a CPU shared by every namespace host and by
// whatever else the machine runs (load 100 on 2 cores was seen): a pair can
// stream 3x slower than the median for no reason of its own. The tests ask
// for 10x; the rate-limited link below is over 100x slower.
const std::string kNoisy = " --link-factor 10 ";

}  // namespace

TEST_CASE("a healthy cluster is reported healthy, with the interface and busbw", "[doctor][cluster][slow]") {
  Cluster c(4);
  const std::string healthy = c.dir() + "/healthy";
  auto r = run_doctor(c, kNoisy + "--write-healthy " + healthy);
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK(count_failures(r.output) == 0);
  CHECK(contains(r.output, "healthy: 4 of 4 hosts passed, 0 problems"));
  CHECK(contains(r.output, "network: -x NCCL_SOCKET_IFNAME=eth0 -x GLOO_SOCKET_IFNAME=eth0 -x DLAUNCH_SOCKET_IFNAME=eth0"));
  CHECK(contains(r.output, "all_reduce: 4 MB float32 sum over 4 hosts, busbw "));
  // No GPU here: the NCCL check says it did not run, and why.
  CHECK(contains(r.output, "\nnccl: skipped: no host has an NVIDIA GPU CUDA can use\n"));
  for (int h = 0; h < 4; ++h) CHECK(row_of(r.output, c.address(h)).find(kFail) == std::string::npos);
  CHECK(contains(row_of(r.output, c.address(0)), "\u2713 local"));
  const std::string written = read_file(healthy);
  for (int h = 0; h < 4; ++h) CHECK(contains(written, c.address(h) + " slots=2\n"));
  CHECK(leftovers(c) == "");

  SECTION("--json says the same") {
    auto j = run_doctor(c, "--json --quick");
    INFO(j.output);
    CHECK(j.status == 0);
    auto doc = nlohmann::json::parse(j.output.substr(j.output.find('{')));
    CHECK(doc["healthy"] == true);
    CHECK(doc["hosts"].size() == 4);
    CHECK(doc["hosts"][2]["checks"]["ssh"]["mark"] == "ok");
    CHECK(doc["hosts"][2]["facts"]["cores"].get<int>() >= 1);
    CHECK(doc["hosts"][2]["checks"]["network"]["mark"] == "not_run");  // --quick stops after stage 3
    CHECK(leftovers(c) == "");
  }
}

TEST_CASE("sshd stopped on h2: ssh fails there, the other hosts go on", "[doctor][cluster][slow]") {
  Cluster c(4);
  REQUIRE(c.script({"stop-sshd", c.id(), "h2"}).status == 0);
  const std::string healthy = c.dir() + "/healthy";
  auto r = run_doctor(c, kNoisy + "--write-healthy " + healthy);
  INFO(r.output);
  CHECK(r.status == 1);
  auto f = failures(r.output, "ssh");
  REQUIRE(f.size() == 1);
  CHECK(contains(f[0], c.address(2)));
  CHECK(contains(f[0], "refused"));
  CHECK(count_failures(r.output) == 1);
  CHECK(contains(row_of(r.output, c.address(2)), kFail));
  CHECK(contains(r.output, "all_reduce: 4 MB float32 sum over 3 hosts"));
  const std::string written = read_file(healthy);
  CHECK_FALSE(contains(written, c.address(2)));
  CHECK(contains(written, c.address(3) + " slots=2"));
  CHECK(leftovers(c) == "");
}

TEST_CASE("h1's PATH differs: the env check names h1 and the difference", "[doctor][cluster][slow]") {
  Cluster c(4);
  const std::string normal = ssh_path(c);
  REQUIRE(c.script({"setenv", c.id(), "h1", "PATH=" + normal + ":/opt/dl-doctor-test/bin"}).status == 0);
  auto r = run_doctor(c, "--quick");
  INFO(r.output);
  CHECK(r.status == 1);
  auto f = failures(r.output, "env");
  REQUIRE(f.size() == 1);
  CHECK(contains(f[0], c.address(1) + ": PATH has /opt/dl-doctor-test/bin that most hosts lack"));
  CHECK(contains(f[0], "-x PATH"));
  CHECK(count_failures(r.output) == 1);
  CHECK(contains(row_of(r.output, c.address(1)), kFail + " PATH"));
  CHECK(leftovers(c) == "");
}

TEST_CASE("the launcher's own PATH differs: a warning, and its host stays in every stage", "[doctor][cluster][slow]") {
  Cluster c(3);
  // A login node's PATH nearly always differs from non-interactive ssh's.
  auto r = run_doctor_with_path(c, "/opt/dl-doctor-login/bin:" + ssh_path(c), kNoisy);
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK(count_failures(r.output) == 0);
  auto w = lines_starting(r.output, "! env: ");
  REQUIRE(w.size() == 1);
  CHECK(contains(w[0], c.address(0) + ": PATH has /opt/dl-doctor-login/bin that most hosts lack"));
  CHECK(contains(w[0], "-x PATH"));
  const std::string row = row_of(r.output, c.address(0));
  CHECK(contains(row, "! PATH"));
  CHECK_FALSE(contains(row, kFail));
  CHECK(contains(r.output, "all_reduce: 4 MB float32 sum over 3 hosts"));
  CHECK(leftovers(c) == "");
}

TEST_CASE("ports blocked from h1 to h3: the pair is named with the port, h3 is dropped", "[doctor][cluster][slow]") {
  Cluster c(4);
  // Every TCP port above ssh's: what dlaunch, NCCL and gloo would use.
  REQUIRE(c.script({"block", c.id(), "h1", "h3", "1024-65535"}).status == 0);
  const std::string healthy = c.dir() + "/healthy";
  auto r = run_doctor(c, kNoisy + "--connect-timeout 2 --write-healthy " + healthy);
  INFO(r.output);
  CHECK(r.status == 1);
  // The rule drops h1's packets to h3's ports, SYN-ACKs included: neither
  // can connect to the other, and both lines name the pair and the port.
  auto f = failures(r.output, "network");
  REQUIRE(f.size() == 2);
  CHECK(contains(r.output, kFail + " network: " + c.address(1) + " cannot connect to " + c.address(3) + " at " + c.address(3) + ":"));
  CHECK(contains(r.output, kFail + " network: " + c.address(3) + " cannot connect to " + c.address(1) + " at " + c.address(1) + ":"));
  for (const auto& l : f) CHECK(contains(l, "(eth0): could not connect to "));
  CHECK(count_failures(r.output) == 2);
  CHECK(contains(row_of(r.output, c.address(3)), kFail + " 1 pair"));
  CHECK(contains(row_of(r.output, c.address(1)), "! eth0"));
  CHECK(contains(r.output, "all_reduce: 4 MB float32 sum over 3 hosts"));
  const std::string written = read_file(healthy);
  CHECK_FALSE(contains(written, c.address(3)));
  CHECK(contains(written, c.address(1)));
  CHECK(leftovers(c) == "");
}

TEST_CASE("the link from h2 to h3 rate-limited: exactly that pair is flagged", "[doctor][cluster][slow]") {
  Cluster c(4);
  // This kernel has no netem and no prio qdisc: htb with a u32 filter limits
  // only h2's traffic to h3, everything else from h2 goes through a fast class.
  auto tc = c.run_in("h2", "tc qdisc add dev eth0 root handle 1: htb default 10 && "
                           "tc class add dev eth0 parent 1: classid 1:10 htb rate 100gbit && "
                           "tc class add dev eth0 parent 1: classid 1:20 htb rate 20mbit && "
                           "tc filter add dev eth0 protocol ip parent 1: prio 1 u32 match ip dst " + c.address(3) + "/32 flowid 1:20");
  REQUIRE(tc.status == 0);
  auto r = run_doctor(c, kNoisy);
  INFO(r.output);
  CHECK(r.status == 1);
  auto f = failures(r.output, "links");
  REQUIRE(f.size() == 1);
  CHECK(contains(f[0], c.address(2) + " <-> " + c.address(3) + ": "));
  CHECK(contains(f[0], "a typical host's best pair does"));
  CHECK(count_failures(r.output) == 1);
  CHECK(contains(row_of(r.output, c.address(3)), kFail));
  CHECK_FALSE(contains(row_of(r.output, c.address(0)), kFail));
  CHECK_FALSE(contains(row_of(r.output, c.address(1)), kFail));
  CHECK(leftovers(c) == "");
}

TEST_CASE("h2 slow to every host, 3 hosts: h2 is named once and dropped", "[doctor][cluster][slow]") {
  Cluster c(3);
  // Everything h2 sends at 20 Mbit/s: h2 is in 2 of the 3 pairs, so the
  // median pair is one of its own; a typical host's best pair is not.
  REQUIRE(c.run_in("h2", "tc qdisc add dev eth0 root handle 1: htb default 20 && "
                         "tc class add dev eth0 parent 1: classid 1:20 htb rate 20mbit").status == 0);
  auto r = run_doctor(c, kNoisy);
  INFO(r.output);
  CHECK(r.status == 1);
  auto f = failures(r.output, "links");
  REQUIRE(f.size() == 1);
  CHECK(contains(f[0], c.address(2) + " is slow to every host: "));
  CHECK(contains(f[0], c.address(0) + " "));
  CHECK(contains(f[0], c.address(1) + " "));
  CHECK(count_failures(r.output) == 1);
  CHECK(contains(row_of(r.output, c.address(2)), kFail));
  CHECK_FALSE(contains(row_of(r.output, c.address(0)), kFail));
  CHECK_FALSE(contains(row_of(r.output, c.address(1)), kFail));
  CHECK(contains(r.output, "all_reduce: 4 MB float32 sum over 2 hosts"));
  CHECK(leftovers(c) == "");
}

TEST_CASE("the --program is missing on h2 (hidden by a mount only h2's sshd sees)", "[doctor][cluster][slow]") {
  Cluster c(4);
  const std::string dir = c.dir() + "/prog", prog = dir + "/bin/train";
  std::filesystem::create_directories(dir + "/bin");
  { std::ofstream(prog) << "#!/bin/sh\nexit 0\n"; }
  std::filesystem::permissions(prog, std::filesystem::perms::owner_all);
  // h2's sshd runs in its own mount namespace (cluster.sh); an empty tmpfs
  // over bin/ there hides the program from every session on h2 only.
  const std::string pid = read_file(c.dir() + "/h2/sshd.pid");
  auto m = dl::cluster::run_argv({"nsenter", "-t", pid.substr(0, pid.find('\n')), "-m", "mount", "-t", "tmpfs", "dltest", dir + "/bin"});
  REQUIRE(m.status == 0);
  auto r = run_doctor(c, "--quick --program " + prog);
  INFO(r.output);
  CHECK(r.status == 1);
  auto f = failures(r.output, "program");
  REQUIRE(f.size() == 1);
  CHECK(contains(f[0], c.address(2) + ": --program " + prog + ": No such file or directory"));
  CHECK(count_failures(r.output) == 1);
  CHECK(contains(row_of(r.output, c.address(2)), kFail + " missing"));
  CHECK(leftovers(c) == "");
}

TEST_CASE("a host listed twice under two names", "[doctor][cluster][slow]") {
  Cluster c(4);
  const std::string hosts = c.dir() + "/hosts-twice";
  { std::ofstream(hosts) << read_file(c.hostfile()) << "h1 slots=2\n"; }
  auto r = run_doctor(c, "--quick", hosts);
  INFO(r.output);
  CHECK(r.status == 1);
  auto f = failures(r.output, "hostfile");
  REQUIRE(f.size() == 1);
  CHECK(contains(f[0], "h1 (" + hosts + ":5) is the same host as " + c.address(1) + " (" + hosts + ":2)"));
  CHECK(count_failures(r.output) == 1);
  CHECK(contains(row_of(r.output, "h1"), kFail + " twice"));
  CHECK(leftovers(c) == "");
}

TEST_CASE("an interface no other host reaches is named, and the one that works", "[doctor][cluster][slow]") {
  Cluster c(3);
  for (int h = 0; h < 3; ++h)
    // A veth pair with both ends in the host (this kernel has no dummy
    // links): an address on dl0 that no other host has a way to.
    REQUIRE(c.run_in(c.host(h), "ip link add dl0 type veth peer name dl0p && ip addr add 192.0.2." +
                                    std::to_string(h + 1) + "/24 dev dl0 && ip link set dl0 up && ip link set dl0p up").status == 0);
  auto r = run_doctor(c, kNoisy + "--connect-timeout 1");
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK(contains(r.output, "network: -x NCCL_SOCKET_IFNAME=eth0 -x GLOO_SOCKET_IFNAME=eth0"));
  auto w = lines_starting(r.output, "! network: dl0 on ");
  REQUIRE(w.size() == 1);
  for (int h = 0; h < 3; ++h) CHECK(contains(w[0], c.address(h)));
  CHECK(leftovers(c) == "");
}

TEST_CASE("a bad --prefix: dlaunch is not found on the remote hosts, with the fix", "[doctor][cluster][slow]") {
  Cluster c(3);
  auto r = run_doctor(c, "--quick --prefix /nonexistent");
  INFO(r.output);
  CHECK(r.status == 1);
  auto f = failures(r.output, "dlaunch");  // h0 runs its peer locally, without ssh or --prefix
  // One line for both hosts (one problem, however many hosts share it).
  REQUIRE(f.size() == 1);
  CHECK(contains(f[0], kFail + " dlaunch: 2 hosts (" + c.address(1).substr(0, c.address(1).rfind('.') + 1) + "[2-3]): dlaunch was not found there (/nonexistent/bin/dlaunch doctor --peer"));
  CHECK(contains(f[0], "pass --prefix DIR"));
  CHECK(contains(row_of(r.output, c.address(0)), "\u2713 0.1.0"));
  CHECK(leftovers(c) == "");
}
