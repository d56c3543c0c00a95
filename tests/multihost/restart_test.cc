// --max-restarts across the namespace cluster: a host's agent is killed
// mid-job; the attempt fails naming that host, a new agent is started there
// (ssh to that host only), the other hosts keep theirs, and the second
// attempt runs every rank on its host again and succeeds. Also SIGUSR1 to
// the launcher reaches ranks on every host (docs/failures.md).
#include <signal.h>

#include <catch2/catch.hpp>

#include <thread>

#include "tests/multihost/multihost_util.h"

using dl::cluster::Cluster;
using namespace dl::multihost;
using namespace std::chrono_literals;

namespace {
// `launcher`: the start method's options ("" = the default, libssh).
void h2_agent_killed_then_restarted(const std::string& launcher) {
  Cluster c(4);
  const std::string mark = unique_marker();
  // Attempt 0: every rank becomes "sleep MARK". Attempt 1: the shell stays
  // (its argv holds this script, hence "DLAUNCH_RESTART_COUNT"), says where it runs, and ends after 4 s.
  auto f = start_dlaunch(c,
                         launcher + " -n 8 --max-restarts 1 --kill-grace 1 --heartbeat-timeout 3 sh -c '"
                         "if [ \"$DLAUNCH_RESTART_COUNT\" = 0 ]; then exec sleep \"$0\"; fi; "
                         "echo \"second attempt: rank $RANK node $DLAUNCH_NODE_RANK count $TORCHELASTIC_RESTART_COUNT\"; "
                         "sleep 4' " + mark,
                         60s);
  if (!wait_running(c, "sleep " + mark, 2)) {
    auto r = f.get();
    FAIL("the ranks did not start on every host: " << r.output);
  }
  auto h1 = pids_matching(c, "h1", "dlaunch-agent"), h3 = pids_matching(c, "h3", "dlaunch-agent");
  auto h2 = pids_matching(c, "h2", "dlaunch-agent");
  REQUIRE(h1.size() == 1);
  REQUIRE(h2.size() == 1);
  REQUIRE(h3.size() == 1);
  REQUIRE(::kill(h2[0], SIGKILL) == 0);
  const bool second = wait_running(c, "DLAUNCH_RESTART_COUNT", 2, 30s);
  if (second) {
    for (const char* h : {"h0", "h1", "h2", "h3"}) {
      INFO(h);
      CHECK(pids_matching(c, h, "sleep " + mark).empty());  // nothing of attempt 0 is left
    }
    CHECK(pids_matching(c, "h1", "dlaunch-agent") == h1);  // the same agents ...
    CHECK(pids_matching(c, "h3", "dlaunch-agent") == h3);
    auto now = pids_matching(c, "h2", "dlaunch-agent");   // ... but a new one on h2
    CHECK(now.size() == 1);
    CHECK(now != h2);
  }
  auto r = f.get();
  INFO(r.output);
  CHECK(second);
  CHECK(r.status == 0);
  CHECK(contains(r.output, "attempt 1 of 2 failed: lost the agent on " + c.address(2)));
  CHECK(contains(r.output, "restarting (the last restart)"));
  CHECK(contains(r.output, "attempt 2 of 2 succeeded"));
  CHECK(count_lines_with(r.output, "second attempt: rank") == 8);
  for (int rank = 0; rank < 8; ++rank)  // 2 slots per host: the same placement as before
    CHECK(contains(r.output, "second attempt: rank " + std::to_string(rank) + " node " + std::to_string(rank / 2) +
                                 " count 1"));
  CHECK(wait_clean(c, mark) == "");
  CHECK(pids_matching(c, "h0", "BatchMode").empty());  // --launcher ssh: no ssh client is left either
}
}  // namespace

TEST_CASE("restart: h2's agent is killed mid-job - a new one is started there and the second attempt succeeds",
          "[multihost][cluster][slow][restart]") {
  h2_agent_killed_then_restarted("");
}

TEST_CASE("restart: --launcher ssh, h2's agent is killed mid-job - a new ssh starts one there, the second attempt succeeds",
          "[multihost][cluster][slow][restart]") {
  h2_agent_killed_then_restarted("--launcher ssh");
}

TEST_CASE("SIGUSR1 to the launcher reaches the ranks on every host - the job goes on and exits 0",
          "[multihost][cluster][slow][signals]") {
  Cluster c(4);
  const std::string mark = unique_marker();
  // Each rank traps USR1, then polls until it got it (at most 20 s), and exits 0.
  auto f = start_dlaunch(c,
                         "-n 8 sh -c '"
                         "got=0; trap \"got=1\" USR1; i=0; "
                         "while [ $got = 0 ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done; "
                         "[ $got = 1 ] && echo \"rank $RANK node $DLAUNCH_NODE_RANK got USR1\"' " + mark,
                         60s);
  const bool up = wait_running(c, mark, 2);
  std::this_thread::sleep_for(1s);  // every shell has set its trap
  const int pid = launcher_pid(mark);
  if (up && pid > 0) REQUIRE(::kill(pid, SIGUSR1) == 0);
  auto r = f.get();
  INFO(r.output);
  CHECK(up);
  CHECK(r.status == 0);
  CHECK(count_lines_with(r.output, "got USR1") == 8);
  for (int node = 0; node < 4; ++node)
    CHECK(count_lines_with(r.output, "node " + std::to_string(node) + " got USR1") == 2);
  CHECK(wait_clean(c, mark) == "");
}
