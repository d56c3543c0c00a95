// --launcher sim: hosts simulated on this machine by real agents, each
// connecting back over TCP with the token handshake, standing for the host
// the -H list names at its own loopback address. The test bed of many hosts
// (bench/launch-tree) stands on what these tests check.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/stat.h>

#include <fstream>
#include <map>
#include <regex>
#include <set>

#include "tests/integration/run_command.h"

using namespace dl::it;

namespace {
// A dlaunch --launcher sim run whose agents and ranks carry `marker`: the
// simulated hosts' names hold it (each agent's --sim-host), and so does each
// rank's $0.
RunSpec sim_run(const std::string& hosts, std::vector<std::string> rank) {
  RunSpec s;
  s.argv = {bin("dlaunch"), "--launcher", "sim", "-H", hosts, "--gpus-per-node", "0"};
  s.argv.insert(s.argv.end(), rank.begin(), rank.end());
  s.set_env = {{"DLAUNCH_SIM", "1"}};
  s.unset_env = {"CUDA_VISIBLE_DEVICES"};
  return s;
}

std::string sim_hosts(const std::string& marker, int count, int slots) {
  std::string list;
  for (int i = 0; i < count; ++i)
    list += (list.empty() ? "" : ",") + ("sim" + std::to_string(i) + "-" + marker + ":" + std::to_string(slots));
  return list;
}
}  // namespace

TEST_CASE("sim: two simulated hosts of 2 slots run 4 ranks placed as on two machines", "[integration][sim]") {
  const std::string m = new_marker();
  RunSpec s = sim_run("sim-a-" + m + ":2,sim-b-" + m + ":2",
                      {"sh", "-c", "echo R=$RANK L=$LOCAL_RANK N=$NODE_RANK W=$WORLD_SIZE M=$MASTER_ADDR", m});
  // Rank 0's torch hosts the store at MASTER_ADDR: node 0's address (with the
  // default, dlaunch's own store, it would be the launcher's 127.0.0.1).
  s.argv.insert(s.argv.begin() + 1, {"-v", "--torch-store", "rank0"});
  RunResult r = run(s, 60);
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  std::regex line(R"(R=(\d) L=(\d) N=(\d) W=(\d) M=(\S+))");
  std::map<int, std::pair<int, int>> placed;  // rank: (local rank, node rank)
  for (std::sregex_iterator i(r.out.begin(), r.out.end(), line), end; i != end; ++i) {
    placed[std::stoi((*i)[1])] = {std::stoi((*i)[2]), std::stoi((*i)[3])};
    CHECK((*i)[4] == "4");
    CHECK((*i)[5] == "127.0.0.2");  // node 0's simulated address
  }
  CHECK(placed == std::map<int, std::pair<int, int>>{{0, {0, 0}}, {1, {1, 0}}, {2, {0, 1}}, {3, {1, 1}}});
  CHECK(r.err.find("same machine") == std::string::npos);
  CHECK(r.err.find("agent on sim-b-" + m + " connected") != std::string::npos);  // the hello's host
  CHECK(wait_marked_gone(m, 10).empty());
}

TEST_CASE("sim: a rank failing on one simulated host ends the job naming that host", "[integration][sim]") {
  const std::string m = new_marker();
  RunSpec s = sim_run("sim-a-" + m + ":1,sim-b-" + m + ":1",
                      {"sh", "-c", "if [ $NODE_RANK = 1 ]; then exit 7; fi; exec sleep \"$0\"", m});
  RunResult r = run(s, 60);
  INFO(r.out << r.err);
  CHECK(r.code == 7);
  CHECK(r.err.find("rank 1 on sim-b-" + m) != std::string::npos);
  CHECK(wait_marked_gone(m, 10).empty());
}

TEST_CASE("sim: 64 simulated hosts of one rank each run /bin/true", "[integration][sim]") {
  const std::string m = new_marker();
  RunResult r = run(sim_run(sim_hosts(m, 64, 1), {"/bin/true"}), 180);
  INFO(r.out << r.err);
  CHECK(r.code == 0);
  CHECK(r.err.find("same machine") == std::string::npos);
  CHECK(wait_marked_gone(m, 10).empty());
}

TEST_CASE("sim: --launcher sim without DLAUNCH_SIM=1 is refused naming the variable", "[integration][sim]") {
  const std::string m = new_marker();
  for (const char* value : {"", "0"}) {
    RunSpec s = sim_run(sim_hosts(m, 2, 1), {"sleep", m});
    if (*value) s.set_env = {{"DLAUNCH_SIM", value}};
    else s.set_env.clear(), s.unset_env.push_back("DLAUNCH_SIM");
    RunResult r = run(s, 30);
    INFO(r.err);
    CHECK(r.code == 2);
    CHECK(r.err.find("DLAUNCH_SIM=1") != std::string::npos);
    CHECK(r.err.find("--launcher takes") == std::string::npos);
  }
  CHECK(wait_marked_gone(m, 5).empty());
}

TEST_CASE("sim: dlaunch killed by SIGKILL leaves no simulated host's agent or rank behind", "[integration][sim]") {
  const std::string m = new_marker();
  Child c = start(sim_run(sim_hosts(m, 3, 2), {"/bin/sh", "-c", "sleep \"$0\"; echo survived", m}));
  ChildGuard guard{c, m};
  // 3 agents (their --sim-host names carry the marker) and 6 ranks' shells and sleeps.
  REQUIRE(wait_marked(m, 3 + 6 + 6, 60, c.pid).size() >= 3 + 6 + 6);
  ::kill(c.pid, SIGKILL);
  RunResult r = wait(c, 10);
  CHECK(r.signal == SIGKILL);
  CHECK(wait_marked_gone(m, 10).empty());
  CHECK(r.out.find("survived") == std::string::npos);
}

// The health gate of a job with a spare finds the ranks' program on each
// host before the start: the simulated host whose PATH (planted, as an sshd
// SetEnv would) lacks the program's directory gives its seat to the spare.
TEST_CASE("sim: --spares 1 - a host that lacks the ranks' program is replaced by the spare before any rank starts",
          "[integration][sim][spares]") {
  const std::string m = new_marker();
  TempDir dir;
  const std::string prog = "dl-gate-" + m;
  {
    std::ofstream f(dir.path + "/" + prog);
    f << "#!/bin/sh\necho \"ran rank $RANK of $WORLD_SIZE on node $NODE_RANK\"\n";
  }
  ::chmod((dir.path + "/" + prog).c_str(), 0755);
  const std::string a = "sim-a-" + m, b = "sim-b-" + m, c = "sim-c-" + m;
  RunSpec s = sim_run(a + ":1," + b + ":1," + c + ":1", {prog, m});
  s.argv.insert(s.argv.begin() + 1, {"--spares", "1", "-n", "2"});
  const char* path = std::getenv("PATH");
  s.set_env["PATH"] = dir.path + ":" + (path ? path : "/usr/bin:/bin");
  s.set_env["DLAUNCH_SIM_HOST_ENV"] = b + ":PATH=/usr/bin:/bin";
  RunResult r = run(s, 60);
  INFO(r.out << r.err);
  CHECK(r.code == 0);
  CHECK(r.out.find("ran rank 0 of 2 on node 0") != std::string::npos);
  CHECK(r.out.find("ran rank 1 of 2 on node 1") != std::string::npos);
  CHECK(r.err.find(b + " lost (failed the health check: the ranks' program " + prog +
                   ": command not found in PATH); its rank 1 moved to spare " + c) != std::string::npos);
  CHECK(wait_marked_gone(m, 10).empty());
}

// The health gate reads each host's clock: the simulated host whose clock
// is 30 s behind (clock_shift.c preloaded in every process of the test bed,
// its shift planted on that host alone) gives its seat to the spare.
TEST_CASE("sim: --spares 1 - a host whose clock is 30 s behind is replaced by the spare before any rank starts",
          "[integration][sim][spares][clock]") {
  const std::string m = new_marker();
  const std::string a = "sim-a-" + m, b = "sim-b-" + m, c = "sim-c-" + m;
  RunSpec s = sim_run(a + ":1," + b + ":1," + c + ":1",
                      {"sh", "-c", "echo \"ran rank $RANK of $WORLD_SIZE on node $NODE_RANK\"", m});
  s.argv.insert(s.argv.begin() + 1, {"--spares", "1", "-n", "2"});
  s.set_env["LD_PRELOAD"] = DL_CLOCK_SHIFT_LIB;
  s.set_env["DLAUNCH_SIM_HOST_ENV"] = b + ":DL_CLOCK_SHIFT_S=-30";
  RunResult r = run(s, 60);
  INFO(r.out << r.err);
  CHECK(r.code == 0);
  CHECK(r.out.find("ran rank 0 of 2 on node 0") != std::string::npos);
  CHECK(r.out.find("ran rank 1 of 2 on node 1") != std::string::npos);
  CHECK(r.err.find(b + " lost (failed the health check: its clock is -30.0s off the launcher's (more than "
                   "--clock-threshold 1 s)") != std::string::npos);
  CHECK(r.err.find("its rank 1 moved to spare " + c) != std::string::npos);
  CHECK(r.err.find(a + " lost") == std::string::npos);
  CHECK(wait_marked_gone(m, 10).empty());
}
