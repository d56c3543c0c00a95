// Faults across hosts (issue 3): each asserts the message, the exit code and
// that no rank or agent is left in any host's namespace.
#include <signal.h>

#include <catch2/catch.hpp>

#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include "tests/multihost/multihost_util.h"

using dl::cluster::Cluster;
using namespace dl::multihost;
using namespace std::chrono_literals;

namespace {
// Starts 8 sleeping ranks (argv "sleep MARK") and waits until 2 run per host.
std::future<dl::cluster::RunResult> start_sleepers(const Cluster& c, const std::string& mark,
                                                    const std::string& opts = "") {
  auto f = start_dlaunch(c, "-n 8 --kill-grace 1 --heartbeat-timeout 3 " + opts + " sleep " + mark);
  if (!wait_running(c, "sleep " + mark, 2)) {
    auto r = f.get();
    FAIL("the ranks did not start on every host: " << r.output);
  }
  return f;
}

}  // namespace

TEST_CASE("launcher SIGKILLed: agents everywhere kill their ranks within the heartbeat timeout",
          "[multihost][cluster][slow]") {
  Cluster c(4);
  const std::string mark = unique_marker();
  auto f = start_sleepers(c, mark);
  const int pid = launcher_pid(mark);
  REQUIRE(pid > 0);
  REQUIRE(::kill(pid, SIGKILL) == 0);
  auto r = f.get();
  CHECK(r.status == 128 + SIGKILL);
  CHECK(wait_clean(c, mark, 3s + 3s) == "");
}

TEST_CASE("agent SIGKILLed on h2: the job fails naming h2 and nothing is left", "[multihost][cluster][slow]") {
  Cluster c(4);
  const std::string mark = unique_marker();
  auto f = start_sleepers(c, mark);
  auto agents = pids_matching(c, "h2", "dlaunch-agent");
  REQUIRE(agents.size() == 1);
  REQUIRE(::kill(agents[0], SIGKILL) == 0);
  auto r = f.get();
  INFO(r.output);
  CHECK(r.status == 1);
  CHECK(contains(r.output, "lost the agent on " + c.address(2)));
  CHECK(wait_clean(c, mark) == "");
}

TEST_CASE("h3's link goes down: the heartbeat timeout names h3", "[multihost][cluster][slow]") {
  Cluster c(4);
  const std::string mark = unique_marker();
  auto f = start_sleepers(c, mark);
  REQUIRE(c.script({"link", c.id(), "h3", "down"}).status == 0);
  const auto t0 = std::chrono::steady_clock::now();
  auto r = f.get();
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  INFO(r.output);
  CHECK(r.status == 1);
  CHECK(contains(r.output, "lost the agent on " + c.address(3)));
  CHECK(contains(r.output, "no heartbeat"));
  // What TCP knows: our heartbeats to it are not acknowledged.
  CHECK(contains(r.output, "sent to it unacknowledged"));
  CHECK(took < 3 + 1 + 5 + 3);
  // h3's agent stops its ranks on its own heartbeat timeout.
  CHECK(wait_clean(c, mark) == "");
}

TEST_CASE("agent SIGSTOPped on h1: the heartbeat timeout names h1", "[multihost][cluster][slow]") {
  Cluster c(4);
  const std::string mark = unique_marker();
  auto f = start_sleepers(c, mark);
  auto agents = pids_matching(c, "h1", "dlaunch-agent");
  REQUIRE(agents.size() == 1);
  REQUIRE(::kill(agents[0], SIGSTOP) == 0);
  auto r = f.get();
  ::kill(agents[0], SIGCONT);  // it finds the launcher gone and stops its ranks
  INFO(r.output);
  CHECK(r.status == 1);
  CHECK(contains(r.output, "lost the agent on " + c.address(1)));
  CHECK(contains(r.output, "no heartbeat"));
  // Its host's kernel acknowledged the heartbeats: the agent itself went quiet.
  CHECK(contains(r.output, "its host acknowledged everything sent to it"));
  CHECK(wait_clean(c, mark) == "");
}

// Found by the chaos run (stop-agent): resumed, the agent wrote its last
// line to the launcher's closed ssh channel and died of SIGPIPE before it
// removed the job's temp dirs.
TEST_CASE("agent SIGSTOPped on h1 and resumed after the launcher gave it up: it removes its temp dir",
          "[multihost][cluster][slow]") {
  Cluster c(4);
  const std::string mark = unique_marker();
  // Python ranks: the agent makes their dir (/tmp/dlaunch-<agent pid>-py-...) before they start.
  auto f = start_dlaunch(c, "-n 8 --kill-grace 1 --heartbeat-timeout 3 python3 -c 'import time; time.sleep(60)' " + mark);
  if (!wait_running(c, mark, 2)) {
    auto r = f.get();
    FAIL("the ranks did not start on every host: " << r.output);
  }
  auto agents = pids_matching(c, "h1", "dlaunch-agent");
  REQUIRE(agents.size() == 1);
  const std::string dirs = "/tmp/dlaunch-" + std::to_string(agents[0]) + "-py-";
  auto made = c.run_in("h1", "ls -d " + dirs + "*");
  REQUIRE(made.status == 0);
  REQUIRE(::kill(agents[0], SIGSTOP) == 0);
  auto r = f.get();  // the launcher gives it up and leaves
  ::kill(agents[0], SIGCONT);
  INFO(r.output);
  CHECK(r.status == 1);
  CHECK(contains(r.output, "lost the agent on " + c.address(1)));
  CHECK(wait_clean(c, mark) == "");
  auto left = c.run_in("h1", "ls -d " + dirs + "* 2>/dev/null");
  CHECK(left.output == "");
}

TEST_CASE("SIGINT to the launcher stops ranks on every host", "[multihost][cluster][slow]") {
  Cluster c(4);
  const std::string mark = unique_marker();
  auto f = start_sleepers(c, mark);
  const int pid = launcher_pid(mark);
  REQUIRE(pid > 0);
  REQUIRE(::kill(pid, SIGINT) == 0);
  auto r = f.get();
  INFO(r.output);
  CHECK(r.status == 128 + SIGINT);
  CHECK(contains(r.output, "SIGINT"));
  CHECK(wait_clean(c, mark) == "");
}

TEST_CASE("sshd stopped on h2: one line names h2, nothing runs elsewhere", "[multihost][cluster][slow]") {
  Cluster c(4);
  REQUIRE(c.script({"stop-sshd", c.id(), "h2"}).status == 0);
  const std::string mark = unique_marker();
  auto r = run_dlaunch(c, "-n 8 sleep " + mark);
  INFO(r.output);
  CHECK(r.status != 0);
  CHECK(count_lines_with(r.output, "error: " + c.address(2)) + count_lines_with(r.output, "error: h2") == 1);
  CHECK(contains(r.output, "refused"));
  CHECK(wait_clean(c, mark) == "");
}

TEST_CASE("unknown host key on h3: the message says how to accept it", "[multihost][cluster][slow]") {
  Cluster c(4);
  // A config whose known_hosts lacks h3's key.
  const std::string kh = c.dir() + "/known_hosts.trimmed", cfg = c.dir() + "/ssh_config.trimmed";
  {
    std::ifstream in(c.known_hosts());
    std::ofstream out(kh);
    std::string l;
    while (std::getline(in, l))
      if (!contains(l, c.address(3)) && l.rfind("h3 ", 0) != 0 && l.rfind("h3,", 0) != 0) out << l << "\n";
  }
  {
    std::ifstream in(c.ssh_config());
    std::ofstream out(cfg);
    std::string l;
    while (std::getline(in, l)) {
      if (contains(l, c.known_hosts())) l.replace(l.find(c.known_hosts()), c.known_hosts().size(), kh);
      out << l << "\n";
    }
  }
  const std::string mark = unique_marker();
  auto r = c.run_in("h0", bin("dlaunch") + " --hostfile " + c.hostfile() + " --ssh-config " + cfg + " -n 8 sleep " +
                              mark + " </dev/null", 40s);
  INFO(r.output);
  CHECK(r.status != 0);
  CHECK(contains(r.output, c.address(3)));
  CHECK(contains(r.output, "--ssh-accept-new"));
  CHECK(wait_clean(c, mark) == "");
}

TEST_CASE("a bad --prefix: dlaunch-agent was not found, with a hint", "[multihost][cluster][slow]") {
  Cluster c(4);
  const std::string mark = unique_marker();
  auto r = run_dlaunch(c, "-n 8 --prefix /nonexistent sleep " + mark);
  INFO(r.output);
  CHECK(r.status != 0);
  // One line per remote host (h0 runs its agent locally, without ssh).
  CHECK(count_lines_with(r.output, "dlaunch-agent was not found (/nonexistent/bin/dlaunch-agent)") == 3);
  for (int h = 1; h < 4; ++h)
    CHECK(count_lines_with(r.output, "error: " + c.address(h) + ": dlaunch-agent was not found") == 1);
  CHECK(contains(r.output, "pass --prefix DIR"));
  CHECK(wait_clean(c, mark) == "");
}
