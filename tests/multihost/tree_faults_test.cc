// Faults of a launch tree on the namespace cluster that the chaos run
// found (docs/failures.md, "The chaos run"): 4 hosts with --fanout 2, so
// the launcher starts h1 and h3 and h1 starts h2. The hostfile names hosts
// by address, their agents by host name (h1, h2...): a verdict uses the
// hostfile's names.
#include <signal.h>

#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>

#include "tests/multihost/multihost_util.h"

using dl::cluster::Cluster;
using namespace dl::multihost;
using namespace std::chrono_literals;

TEST_CASE("launch tree: a root SIGKILLed is named with the hosts beneath it as the hostfile names them",
          "[multihost][cluster][tree][slow]") {
  Cluster c(4);
  const std::string mark = unique_marker();
  auto f = start_dlaunch(c, "-n 8 --fanout 2 --kill-grace 1 --heartbeat-timeout 3 sleep " + mark);
  if (!wait_running(c, "sleep " + mark, 2)) FAIL("the ranks did not start on every host: " << f.get().output);
  auto agents = pids_matching(c, "h1", "dlaunch-agent");
  REQUIRE(agents.size() == 1);
  REQUIRE(::kill(agents[0], SIGKILL) == 0);
  auto r = f.get();
  INFO(r.output);
  CHECK(r.status == 1);
  CHECK(contains(r.output, "lost the agent on " + c.address(1) + " (connection closed; the 1 host beneath it (" +
                               c.address(2) + ") were lost with it)"));
  CHECK(wait_clean(c, mark) == "");
}

// h2's agent (started by h1's) sleeps past the launcher's wait for agents
// (--agent-timeout 2 + --ssh-timeout 3 per level, 2 levels: 8 s), then
// starts: it finds its parent's port closed and leaves at once, rather than
// retrying it for --connect-timeout.
TEST_CASE("launch tree: an agent started past --agent-timeout is named, and leaves at once when it starts late",
          "[multihost][cluster][tree][slow]") {
  Cluster c(4);
  const std::string mark = unique_marker();
  const std::string prefix = c.dir() + "/slow-" + mark;
  write_slow_agent(prefix, "h2", 10);
  const auto t0 = std::chrono::steady_clock::now();
  auto r = run_dlaunch(c, "-n 8 --fanout 2 --agent-timeout 2 --ssh-timeout 3 --prefix " + prefix + " sleep " + mark);
  INFO(r.output);
  CHECK(r.status == 1);
  CHECK(contains(r.output, "lost the agent on " + c.address(2) + " (its agent did not connect within 2 s"));
  CHECK(count_lines_with(r.output, "lost the agent on") == 1);
  // The late agent starts 10 s after the launch; 2 s later it must be gone.
  const auto late = 12s - std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
  CHECK(wait_clean(c, mark, std::max<std::chrono::milliseconds>(late, 1s)) == "");
  std::filesystem::remove_all(prefix);
}
