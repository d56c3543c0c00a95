// --spares across the namespace cluster (real sshd): 5 hosts x 2 slots,
// `-n 8 --spares 1` runs two ranks on h0..h3 and holds h4 back. Everything
// on h3 is killed (-9), or h3's cable is cut: the next attempt runs h3's
// ranks, with their node rank and local ranks, on h4, every other host
// keeps its agent, and nothing is left on any host (docs/failures.md, "Spares").
// With --return-cooldown, a host whose cable was cut and plugged back comes
// back as a spare and takes the next lost host's seat ("A lost host comes back").
#include <signal.h>

#include <catch2/catch.hpp>

#include <fstream>
#include <iterator>
#include <thread>

#include "tests/multihost/multihost_util.h"

using dl::cluster::Cluster;
using namespace dl::multihost;
using namespace std::chrono_literals;

namespace {
enum class Fault { kKill, kCable };

void spare_takes_over(Fault fault) {
  Cluster c(5);
  const std::string mark = unique_marker();
  // Attempt 0: every rank becomes "sleep MARK". Attempt 1: the shell stays
  // (its argv holds "DLAUNCH_RESTART_COUNT"), says who it is, and ends after 3 s.
  auto f = start_dlaunch(c,
                         "-n 8 --spares 1 --kill-grace 1 --heartbeat-timeout 3 sh -c '"
                         "if [ \"$DLAUNCH_RESTART_COUNT\" = 0 ]; then exec sleep \"$0\"; fi; "
                         "echo \"second attempt: rank $RANK node $NODE_RANK local $LOCAL_RANK of $WORLD_SIZE\"; "
                         "sleep 3' " + mark,
                         90s);
  bool running = false;
  for (int i = 0; i < 150 && !running; ++i) {
    running = true;
    for (int h = 0; h < 4; ++h) running = running && pids_matching(c, c.host(h), "sleep " + mark).size() == 2;
    if (!running) std::this_thread::sleep_for(100ms);
  }
  if (!running) {
    auto r = f.get();
    FAIL("the ranks did not start on h0..h3: " << r.output);
  }
  CHECK(pids_matching(c, "h4", "sleep " + mark).empty());  // the spare holds no ranks ...
  REQUIRE(pids_matching(c, "h4", "dlaunch-agent").size() == 1);  // ... but its agent runs
  const auto h1 = pids_matching(c, "h1", "dlaunch-agent"), h4 = pids_matching(c, "h4", "dlaunch-agent");
  if (fault == Fault::kKill) {
    auto victims = pids_matching(c, "h3", "dlaunch-agent");
    for (int p : pids_matching(c, "h3", "sleep " + mark)) victims.push_back(p);
    REQUIRE(victims.size() == 3);
    for (int p : victims) ::kill(p, SIGKILL);
  } else {
    REQUIRE(c.script({"link", c.id(), "h3", "down"}).status == 0);
  }
  bool second = false;
  for (int i = 0; i < 300 && !second; ++i) {
    second = pids_matching(c, "h4", "DLAUNCH_RESTART_COUNT").size() == 2;
    if (!second) std::this_thread::sleep_for(100ms);
  }
  if (second) {
    CHECK(pids_matching(c, "h1", "dlaunch-agent") == h1);  // the same agents, the spare's too
    CHECK(pids_matching(c, "h4", "dlaunch-agent") == h4);
    for (const char* h : {"h0", "h1", "h2", "h4"}) {
      INFO(h);
      CHECK(pids_matching(c, h, "sleep " + mark).empty());  // nothing of attempt 0 is left
    }
  }
  auto r = f.get();
  INFO(r.output);
  CHECK(second);
  CHECK(r.status == 0);
  CHECK(contains(r.output, "attempt 1 of 2 failed: lost the agent on " + c.address(3)));
  CHECK(contains(r.output, "attempt 2 of 2: " + c.address(3) + " lost ("));
  CHECK(contains(r.output, "its ranks 6-7 moved to spare " + c.address(4) + "; no spare left; 8 ranks running again"));
  if (fault == Fault::kCable) CHECK(contains(r.output, "no heartbeat"));
  CHECK(contains(r.output, "attempt 2 of 2 succeeded"));
  CHECK(count_lines_with(r.output, "second attempt: rank") == 8);
  for (int rank = 0; rank < 8; ++rank)  // h3's node rank and local ranks, now on h4
    CHECK(contains(r.output, "second attempt: rank " + std::to_string(rank) + " node " + std::to_string(rank / 2) +
                                 " local " + std::to_string(rank % 2) + " of 8"));
  if (fault == Fault::kCable) REQUIRE(c.script({"link", c.id(), "h3", "up"}).status == 0);
  CHECK(wait_clean(c, mark, 20s) == "");
}
}  // namespace

TEST_CASE("spares: everything on h3 is killed - its ranks run on the spare h4 in the next attempt, same node rank",
          "[multihost][cluster][slow][spares]") {
  spare_takes_over(Fault::kKill);
}

TEST_CASE("spares: h3's cable is cut - at the heartbeat timeout its ranks move to the spare h4",
          "[multihost][cluster][slow][spares]") {
  spare_takes_over(Fault::kCable);
}

TEST_CASE("spares: --dry-run names the spare, and too few hosts for the spares is refused naming the hostfile",
          "[multihost][cluster][spares]") {
  Cluster c(3);
  auto r = run_dlaunch(c, "-n 4 --spares 1 --dry-run true");
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK(contains(r.output, "spares: " + c.address(2)));
  CHECK(count_lines_with(r.output, c.address(2)) == 1);  // no rank row on the spare: only its line
  auto bad = run_dlaunch(c, "-n 2 --spares 3 true");
  INFO(bad.output);
  CHECK(bad.status == 2);
  CHECK(contains(bad.output, "--spares 3: the hostfile '" + c.hostfile() + "' gives 3 hosts"));
}

TEST_CASE("spares: --nnodes 3:4 with no spare - h3 is killed, the next attempt runs 6 ranks on h0..h2, numbered again",
          "[multihost][cluster][slow][spares]") {
  Cluster c(4);
  const std::string mark = unique_marker();
  auto f = start_dlaunch(c,
                         "-n 8 --nnodes 3:4 --kill-grace 1 --heartbeat-timeout 3 sh -c '"
                         "if [ \"$DLAUNCH_RESTART_COUNT\" = 0 ]; then exec sleep \"$0\"; fi; "
                         "echo \"second attempt: rank $RANK node $NODE_RANK local $LOCAL_RANK of $WORLD_SIZE\"; "
                         "sleep 2' " + mark,
                         90s);
  if (!wait_running(c, "sleep " + mark, 2, 20s)) {
    auto r = f.get();
    FAIL("the ranks did not start on every host: " << r.output);
  }
  auto victims = pids_matching(c, "h3", "dlaunch-agent");
  for (int p : pids_matching(c, "h3", "sleep " + mark)) victims.push_back(p);
  REQUIRE(victims.size() == 3);
  for (int p : victims) ::kill(p, SIGKILL);
  auto r = f.get();
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK(contains(r.output, c.address(3) + " lost ("));
  CHECK(contains(r.output, "no spare for its ranks 6-7: the job goes on with 3 hosts and 6 ranks (--min-hosts 3)"));
  CHECK(count_lines_with(r.output, "second attempt: rank") == 6);
  for (int rank = 0; rank < 6; ++rank)
    CHECK(contains(r.output, "second attempt: rank " + std::to_string(rank) + " node " + std::to_string(rank / 2) +
                                 " local " + std::to_string(rank % 2) + " of 6"));
  CHECK(pids_matching(c, "h3", "DLAUNCH_RESTART_COUNT").empty());  // no agent was started there again
  CHECK(wait_clean(c, mark, 20s) == "");
}

namespace {
// Waits until `done` or `limit` passed.
template <class Done> bool wait_for(Done done, std::chrono::milliseconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (!done() && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(100ms);
  return done();
}

std::string file_text(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}
}  // namespace

TEST_CASE("spares: --return-cooldown - h2's cable is cut and its ranks move to the spare h3, and plugged back, h2 is a "
          "spare again after its cooldown and takes h1's ranks when everything on h1 is killed",
          "[multihost][cluster][slow][spares][return]") {
  Cluster c(4);
  const std::string mark = unique_marker();
  // dlaunch's stderr goes to a file while it runs (to see h2 come back), and
  // to the result's output at the end. Attempts 0 and 1: every rank is
  // "sleep MARK"; attempt 2 says who it is and ends.
  const std::string log = c.dir() + "/return-" + mark + ".err";
  auto f = start_dlaunch(c,
                         "-n 6 --spares 1 --max-restarts 2 --return-cooldown 1 --kill-grace 1 --heartbeat-timeout 3 "
                         "--ssh-timeout 2 sh -c '"
                         "if [ \"$DLAUNCH_RESTART_COUNT\" != 2 ]; then exec sleep \"$0\"; fi; "
                         "echo \"third attempt: rank $RANK node $NODE_RANK of $WORLD_SIZE\"; sleep 2' " + mark +
                             " </dev/null 2>" + log + "; s=$?; cat " + log + " >&2; exit $s",
                         90s);
  auto running_on = [&](const char* host, const std::string& needle, size_t count) {
    return pids_matching(c, host, needle).size() == count;
  };
  if (!wait_for([&] { return running_on("h0", "sleep " + mark, 2) && running_on("h1", "sleep " + mark, 2) &&
                             running_on("h2", "sleep " + mark, 2); }, 20s)) {
    auto r = f.get();
    FAIL("the ranks did not start on h0..h2: " << r.output);
  }
  REQUIRE(c.script({"link", c.id(), "h2", "down"}).status == 0);
  const bool moved = wait_for([&] { return running_on("h3", "sleep " + mark, 2); }, 30s);
  REQUIRE(c.script({"link", c.id(), "h2", "up"}).status == 0);
  const bool back = moved && wait_for([&] { return contains(file_text(log), " is back ("); }, 40s);
  if (back) {
    CHECK(running_on("h2", "dlaunch-agent", 1));  // its new agent, holding no ranks
    CHECK(pids_matching(c, "h2", "sleep " + mark).empty());
    auto victims = pids_matching(c, "h1", "dlaunch-agent");
    for (int p : pids_matching(c, "h1", "sleep " + mark)) victims.push_back(p);
    CHECK(victims.size() == 3);
    for (int p : victims) ::kill(p, SIGKILL);
  }
  auto r = f.get();
  INFO(r.output);
  REQUIRE(moved);
  REQUIRE(back);
  CHECK(r.status == 0);
  CHECK(contains(r.output, "attempt 2 of 3: " + c.address(2) + " lost (no heartbeat"));
  CHECK(contains(r.output, "its ranks 4-5 moved to spare " + c.address(3)));
  CHECK(contains(r.output, "dlaunch: " + c.address(2) + " is back (passed the health gate after a "));
  CHECK(contains(r.output, " cooldown); it is a spare now (1 spare)"));
  CHECK(contains(r.output, "attempt 3 of 3: " + c.address(1) + " lost ("));
  CHECK(contains(r.output, "its ranks 2-3 moved to spare " + c.address(2) + "; no spare left"));
  CHECK(contains(r.output, "attempt 3 of 3 succeeded"));
  CHECK(count_lines_with(r.output, "third attempt: rank") == 6);
  for (int rank = 0; rank < 6; ++rank)
    CHECK(contains(r.output, "third attempt: rank " + std::to_string(rank) + " node " + std::to_string(rank / 2) + " of 6"));
  CHECK(wait_clean(c, mark, 20s) == "");
}
