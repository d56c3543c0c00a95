// The launch tree (--fanout, docs/design.md "The launch tree") on the test
// bed's simulated hosts (--launcher sim): real agents, one per host, the
// launcher starting only the roots and each root starting its subtree and
// relaying its frames. Checked on the processes themselves (who started
// whom), and through the faults a flat launch survives: a failing leaf rank,
// an interior agent killed, Ctrl-C, --timeout's stack report,
// --max-restarts with a leaf's agent lost. The same tree over real sshd is
// tests/multihost/launch_tree_test.cc.
#include <catch2/catch.hpp>

#include <signal.h>

#include <filesystem>
#include <map>
#include <regex>
#include <set>

#include "tests/integration/run_command.h"

using namespace dl::it;

namespace {
RunSpec tree_run(const std::string& hosts, int fanout, std::vector<std::string> rank) {
  RunSpec s;
  s.argv = {bin("dlaunch"), "--launcher", "sim", "--fanout", std::to_string(fanout), "-H", hosts,
            "--gpus-per-node", "0", "--mpi", "none"};
  s.argv.insert(s.argv.end(), rank.begin(), rank.end());
  s.set_env = {{"DLAUNCH_SIM", "1"}};
  s.unset_env = {"CUDA_VISIBLE_DEVICES"};
  return s;
}

std::string host(int i, const std::string& m) { return "sim" + std::to_string(i) + "-" + m; }

std::string tree_hosts(const std::string& m, int count, int slots) {
  std::string list;
  for (int i = 0; i < count; ++i) list += (list.empty() ? "" : ",") + host(i, m) + ":" + std::to_string(slots);
  return list;
}

// The agents among `pids`, by the host each simulates. A process an agent
// forked that has not yet exec'd (a rank, an agent beneath) still reads as
// that agent: the agent is the one whose parent is not the same host's.
std::map<std::string, pid_t> agents(const std::vector<pid_t>& pids) {
  std::map<pid_t, std::string> host_of;
  for (pid_t p : pids) {
    std::string cmd = read_file("/proc/" + std::to_string(p) + "/cmdline");
    for (auto& c : cmd)
      if (c == '\0') c = ' ';
    static const std::regex sim(R"(dlaunch-agent .*--sim-host (\S+))");
    std::smatch mm;
    if (std::regex_search(cmd, mm, sim)) host_of[p] = mm[1];
  }
  std::map<std::string, pid_t> out;
  for (const auto& [p, h] : host_of) {
    auto parent = host_of.find(parent_of(p));
    if (parent == host_of.end() || parent->second != h) out[h] = p;
  }
  return out;
}

// Polls until `n` agents carrying `m` run (or `seconds` pass).
std::map<std::string, pid_t> wait_agents(const std::string& m, size_t n, double seconds, pid_t exclude) {
  std::map<std::string, pid_t> a;
  for (int i = 0; i < static_cast<int>(seconds * 20); ++i) {
    a = agents(marked(m, exclude));
    if (a.size() >= n) break;
    ::usleep(50000);
  }
  return a;
}
}  // namespace

TEST_CASE("tree: 16 simulated hosts with --fanout 4 are 4 roots started by dlaunch and 12 agents started by them",
          "[integration][tree]") {
  const std::string m = new_marker();
  RunSpec s = tree_run(tree_hosts(m, 16, 2), 4,
                       {"sh", "-c", "echo R=$RANK N=$NODE_RANK W=$WORLD_SIZE; exec sleep \"$0\"", m});
  s.argv.insert(s.argv.begin() + 1, "-v");
  Child c = start(s);
  ChildGuard guard{c, m};
  auto a = wait_agents(m, 16, 60, c.pid);
  REQUIRE(a.size() == 16);
  // Nodes 0, 4, 8, 12 are the roots, each starting the next three.
  for (int i = 0; i < 16; ++i) {
    INFO("host " << host(i, m));
    const pid_t parent = parent_of(a.at(host(i, m)));
    if (i % 4 == 0) CHECK(parent == c.pid);
    else CHECK(parent == a.at(host(i - i % 4, m)));
  }
  // Every rank runs (32 sleeps, each carrying the marker), beside the 16
  // agents, and has said its line (a rank's sh carries the marker before
  // its echo: on a loaded machine Ctrl-C could come between the two).
  REQUIRE(wait_marked(m, 16 + 32, 60, c.pid).size() >= 16 + 32);
  std::string said;
  for (int i = 0; i < 32; ++i) REQUIRE(read_fd_until(c.out_fd, said, "R=" + std::to_string(i) + " ", 60));
  // Ctrl-C reaches every rank through the tree: the job ends as interrupted.
  ::kill(c.pid, SIGINT);
  RunResult r = wait(c, 30);
  r.out = said + r.out;
  INFO(r.out << r.err);
  CHECK(r.code == 130);
  CHECK(r.err.find("launch tree: 16 hosts, fanout 4, depth 2") != std::string::npos);
  std::regex line(R"(R=(\d+) N=(\d+) W=32)");
  std::map<int, int> node_of;
  for (std::sregex_iterator i(r.out.begin(), r.out.end(), line), end; i != end; ++i)
    node_of[std::stoi((*i)[1])] = std::stoi((*i)[2]);
  REQUIRE(node_of.size() == 32);
  for (auto [rank, node] : node_of) CHECK(node == rank / 2);
  CHECK(wait_marked_gone(m, 10, c.pid).empty());
}

TEST_CASE("tree: a rank failing on a leaf host ends the job naming the rank and that host", "[integration][tree]") {
  const std::string m = new_marker();
  RunSpec s = tree_run(tree_hosts(m, 16, 1), 4,
                       {"sh", "-c", "if [ $RANK = 14 ]; then exit 7; fi; exec sleep \"$0\"", m});
  RunResult r = run(s, 60);
  INFO(r.out << r.err);
  CHECK(r.code == 7);
  CHECK(r.err.find("rank 14 on " + host(14, m)) != std::string::npos);
  CHECK(wait_marked_gone(m, 10).empty());
}

TEST_CASE("tree: an interior agent killed mid-job is named with the hosts beneath it and nothing is left",
          "[integration][tree]") {
  const std::string m = new_marker();
  Child c = start(tree_run(tree_hosts(m, 16, 1), 4, {"sh", "-c", "exec sleep \"$0\"", m}));
  ChildGuard guard{c, m};
  auto a = wait_agents(m, 16, 60, c.pid);
  REQUIRE(a.size() == 16);
  REQUIRE(wait_marked(m, 16 + 16, 60, c.pid).size() >= 32);
  ::kill(a.at(host(4, m)), SIGKILL);
  RunResult r = wait(c, 30);
  INFO(r.err);
  CHECK(r.code != 0);
  CHECK(r.err.find("lost the agent on " + host(4, m)) != std::string::npos);
  CHECK(r.err.find("the 3 hosts beneath it (" + host(5, m) + ", " + host(6, m) + ", " + host(7, m) +
                   ") were lost with it") != std::string::npos);
  CHECK(wait_marked_gone(m, 10, c.pid).empty());
}

TEST_CASE("tree: an agent in the middle of a depth-3 tree killed is reported by its parent with its subtree",
          "[integration][tree]") {
  const std::string m = new_marker();
  // 8 hosts, fanout 2: roots 0 and 4; 0 starts 1 and 3, 1 starts 2.
  RunSpec s = tree_run(tree_hosts(m, 8, 1), 2, {"sh", "-c", "exec sleep \"$0\"", m});
  s.argv.insert(s.argv.begin() + 1, "-v");
  Child c = start(s);
  ChildGuard guard{c, m};
  auto a = wait_agents(m, 8, 60, c.pid);
  REQUIRE(a.size() == 8);
  REQUIRE(parent_of(a.at(host(1, m))) == a.at(host(0, m)));
  REQUIRE(parent_of(a.at(host(2, m))) == a.at(host(1, m)));
  REQUIRE(wait_marked(m, 8 + 8, 60, c.pid).size() >= 16);
  ::kill(a.at(host(1, m)), SIGKILL);
  RunResult r = wait(c, 30);
  INFO(r.err);
  CHECK(r.code != 0);
  CHECK(r.err.find("depth 3") != std::string::npos);
  CHECK(r.err.find("lost the agent on " + host(1, m) + " (the agent on " + host(0, m) + " that started it lost it") !=
        std::string::npos);
  CHECK(r.err.find("the 1 host beneath it (" + host(2, m) + ") were lost with it") != std::string::npos);
  // The agent beneath it ends its ranks: it saw the link to its parent close
  // (and says whose), or, a simulated host being its parent's child process,
  // the parent's death signal came first.
  CHECK((r.err.find("the agent on " + host(1, m) + " that started this one closed the connection; killed this host's ranks") !=
             std::string::npos ||
         r.err.find("agent received signal Terminated; killed this host's ranks") != std::string::npos));
  CHECK(wait_marked_gone(m, 10, c.pid).empty());
}

TEST_CASE("tree: --timeout collects every rank's stack through the tree and groups them", "[integration][tree]") {
  const std::string m = new_marker();
  TempDir report;
  RunSpec s = tree_run(tree_hosts(m, 8, 1), 2, {bin("dlaunch-stuck-rank"), m});
  s.argv.insert(s.argv.begin() + 1, {"--timeout", "5", "--kill-grace", "1", "--report-dir", report.path, "-x",
                                     "STUCK_ELSEWHERE=5", "-x", "READY_DIR=" + report.path});
  RunResult r = run(s, 60);
  INFO(r.err);
  CHECK(r.code == 124);
  CHECK(r.err.find("rank 5 on " + host(5, m)) != std::string::npos);
  CHECK(r.err.find("ranks 0-4, 6-7 (7): ") != std::string::npos);
  CHECK(read_file(report.path + "/stacks-1.txt").find("=== rank 7 on " + host(7, m)) != std::string::npos);
  CHECK(wait_marked_gone(m, 10).empty());
}

TEST_CASE("tree: --max-restarts starts a lost leaf's agent again from its parent and the job completes",
          "[integration][tree]") {
  const std::string m = new_marker();
  // The first attempt sleeps until the test kills a leaf's agent; the second prints and ends.
  RunSpec s = tree_run(tree_hosts(m, 16, 1), 4,
                       {"sh", "-c", "if [ $TORCHELASTIC_RESTART_COUNT = 0 ]; then exec sleep \"$0\"; fi; echo done $RANK",
                        m});
  s.argv.insert(s.argv.begin() + 1, {"--max-restarts", "1", "--kill-grace", "1"});
  Child c = start(s);
  ChildGuard guard{c, m};
  auto a = wait_agents(m, 16, 60, c.pid);
  REQUIRE(a.size() == 16);
  REQUIRE(wait_marked(m, 32, 60, c.pid).size() >= 32);
  const pid_t old = a.at(host(6, m));
  ::kill(old, SIGKILL);
  RunResult r = wait(c, 60);
  INFO(r.out << r.err);
  CHECK(r.code == 0);
  CHECK(r.err.find("lost the agent on " + host(6, m)) != std::string::npos);
  std::set<int> done;
  std::regex line(R"(done (\d+))");
  for (std::sregex_iterator i(r.out.begin(), r.out.end(), line), end; i != end; ++i) done.insert(std::stoi((*i)[1]));
  CHECK(done.size() == 16);
  CHECK(wait_marked_gone(m, 10, c.pid).empty());
}

// The teardown's kill asks the agents for their `ready` (msg::Kill::ready_for):
// each answers as its last rank ends, so when rank 0's slow exit (it traps
// SIGTERM and takes 2 s) is the last, the restart waits only for its host's
// answer, already on its way, not for a `restart` round trip through the
// tree to every agent.
TEST_CASE("tree: --max-restarts - the agents say ready as their ranks end, and the restart waits only for the last "
          "exit's agent",
          "[integration][tree][restart]") {
  const std::string m = new_marker();
  TempDir d;
  const std::string up = d.path + "/up.", go = d.path + "/go";
  RunSpec s = tree_run(
      tree_hosts(m, 6, 1), 2,
      {"sh", "-c",
       "if [ $TORCHELASTIC_RESTART_COUNT != 0 ]; then echo done $RANK; exit 0; fi; "
       "if [ $RANK = 0 ]; then trap 'sleep 2; exit 1' TERM; fi; : > " + up + "$RANK; "
       "if [ $RANK = 5 ]; then while [ ! -e " + go + " ]; do sleep 0.05; done; exit 3; fi; "
       "while :; do sleep 0.1; done",
       m});
  s.argv.insert(s.argv.begin() + 1, {"-v", "--max-restarts", "1", "--kill-grace", "10"});
  Child c = start(s);
  ChildGuard guard{c, m};
  int up_ranks = 0;  // every rank up, rank 0's trap set
  for (int i = 0; i < 1200 && up_ranks < 6; ++i, ::usleep(50000)) {
    up_ranks = 0;
    for (int r = 0; r < 6; ++r) up_ranks += std::filesystem::exists(up + std::to_string(r)) ? 1 : 0;
  }
  REQUIRE(up_ranks == 6);
  write_file(go, "");
  RunResult r = wait(c, 60);
  INFO(r.out << r.err);
  CHECK(r.code == 0);
  CHECK(r.err.find("exited with code 3; restarting") != std::string::npos);
  std::smatch w;
  REQUIRE(std::regex_search(r.err, w, std::regex(R"(restart 1: (waiting for (every agent|(\d+) agents?)|every agent was ready))")));
  INFO(w[0]);
  CHECK(w[2] != "every agent");  // a restart that asked only after the teardown waits for all 6
  if (w[3].matched) CHECK(std::stoi(w[3]) < 6);
  std::set<int> done;
  std::regex line(R"(done (\d+))");
  for (std::sregex_iterator i(r.out.begin(), r.out.end(), line), end; i != end; ++i) done.insert(std::stoi((*i)[1]));
  CHECK(done.size() == 6);
  CHECK(wait_marked_gone(m, 10, c.pid).empty());
}

// --spares with the tree: 9 hosts, fanout 2, the last a spare, which is not
// in the tree (dlaunch starts it): roots 0 and 4; 4 starts 5 and 7, 5
// starts 6.
RunSpec spare_tree_run(const std::string& m, std::vector<std::string> rank) {
  RunSpec s = tree_run(tree_hosts(m, 9, 1), 2, std::move(rank));
  s.argv.insert(s.argv.begin() + 1, {"-v", "--spares", "1", "--max-restarts", "1", "--kill-grace", "1"});
  return s;
}

// Attempt 0 sleeps until the test's fault; attempt 1 says its rank and node rank, and ends.
std::vector<std::string> sleep_then_done(const std::string& m) {
  return {"sh", "-c", "if [ $TORCHELASTIC_RESTART_COUNT = 0 ]; then exec sleep \"$0\"; fi; echo done $RANK $NODE_RANK", m};
}

std::set<int> done_ranks(const std::string& out) {
  std::set<int> done;
  std::regex line(R"(done (\d+) (\d+))");
  for (std::sregex_iterator i(out.begin(), out.end(), line), end; i != end; ++i) {
    CHECK((*i)[1] == (*i)[2]);  // one rank per host: NODE_RANK is RANK, on the spare too
    done.insert(std::stoi((*i)[1]));
  }
  return done;
}

// spare_tree_run's 9 agents, once they and the 8 ranks run, shaped as it says.
std::map<std::string, pid_t> spare_tree_up(const std::string& m, const Child& c) {
  auto a = wait_agents(m, 9, 60, c.pid);
  REQUIRE(a.size() == 9);
  REQUIRE(parent_of(a.at(host(6, m))) == a.at(host(5, m)));
  REQUIRE(parent_of(a.at(host(5, m))) == a.at(host(4, m)));
  REQUIRE(parent_of(a.at(host(8, m))) == c.pid);  // the spare: dlaunch's own
  REQUIRE(wait_marked(m, 9 + 8, 60, c.pid).size() >= 17);
  return a;
}

// The line of a membership change counts every rank of the next attempt
// started, also those whose `started` an interior agent counted and sent up
// as one started_below (two levels of them here).
TEST_CASE("tree: --spares - a lost leaf's rank moves to the spare and the change's line counts every rank running "
          "again through the tree",
          "[integration][tree][spares]") {
  const std::string m = new_marker();
  Child c = start(spare_tree_run(m, sleep_then_done(m)));
  ChildGuard guard{c, m};
  auto a = spare_tree_up(m, c);
  ::kill(a.at(host(6, m)), SIGKILL);
  RunResult r = wait(c, 60);
  INFO(r.out << r.err);
  CHECK(r.code == 0);
  CHECK(r.err.find("the spares started by dlaunch") != std::string::npos);
  CHECK(r.err.find("attempt 2 of 2: " + host(6, m) + " lost (") != std::string::npos);
  CHECK(r.err.find("its rank 6 moved to spare " + host(8, m) + "; no spare left; 8 ranks running again ") !=
        std::string::npos);
  CHECK(done_ranks(r.out).size() == 8);
  CHECK(wait_marked_gone(m, 10, c.pid).empty());
}

// An interior agent lost takes the agents beneath it down: its seat goes to
// the spare, the host beneath it keeps its seat and gets a new agent,
// started by the lost agent's parent in its place.
TEST_CASE("tree: --spares - an interior agent killed: its seat goes to the spare, the host beneath it gets a new "
          "agent from the lost one's parent",
          "[integration][tree][spares]") {
  const std::string m = new_marker();
  Child c = start(spare_tree_run(m, sleep_then_done(m)));
  ChildGuard guard{c, m};
  auto a = spare_tree_up(m, c);
  ::kill(a.at(host(5, m)), SIGKILL);
  RunResult r = wait(c, 60);
  INFO(r.out << r.err);
  CHECK(r.code == 0);
  CHECK(r.err.find("attempt 2 of 2: " + host(5, m) + " lost (") != std::string::npos);
  CHECK(r.err.find("its rank 5 moved to spare " + host(8, m) + "; no spare left; the host beneath " + host(5, m) +
                   " in the launch tree (" + host(6, m) + ") gets a new agent, started by " + host(4, m) +
                   "; 8 ranks running again ") != std::string::npos);
  CHECK(r.err.find("new agent on " + host(6, m) + " connected") != std::string::npos);
  CHECK(done_ranks(r.out).size() == 8);
  CHECK(wait_marked_gone(m, 10, c.pid).empty());
}

// A spare lost while the ranks run: said once, no restart, no host lost with it.
TEST_CASE("tree: --spares - the spare's agent killed mid-job is said and the job goes on, nothing else lost",
          "[integration][tree][spares]") {
  const std::string m = new_marker();
  const std::string go = "/tmp/dl-tree-go-" + m;
  Child c = start(spare_tree_run(m, {"sh", "-c", "while [ ! -e \"$0\" ]; do sleep 0.1; done; echo done $RANK $NODE_RANK", go}));
  ChildGuard guard{c, m};
  auto a = spare_tree_up(m, c);  // (the ranks' sh carries the go file's name, the marker in it)
  for (int i = 0; i < 8; ++i) CHECK(parent_of(a.at(host(i, m))) != a.at(host(8, m)));
  ::kill(a.at(host(8, m)), SIGKILL);
  ::usleep(1000000);
  {
    std::FILE* f = std::fopen(go.c_str(), "w");
    REQUIRE(f);
    std::fclose(f);
  }
  RunResult r = wait(c, 60);
  ::unlink(go.c_str());
  INFO(r.out << r.err);
  CHECK(r.code == 0);
  CHECK(r.err.find("spare " + host(8, m) + " lost (") != std::string::npos);
  CHECK(r.err.find("no spare left") != std::string::npos);
  CHECK(r.err.find("lost the agent on") == std::string::npos);
  CHECK(r.err.find("restarting") == std::string::npos);  // no restart
  // The job's last line lists the change.
  CHECK(r.err.find("the job's hosts changed 1 time: during attempt 1 of 2: spare " + host(8, m) + " lost (") !=
        std::string::npos);
  CHECK(done_ranks(r.out).size() == 8);
  CHECK(wait_marked_gone(m, 10, c.pid).empty());
}

// An interior agent lost while the restart waits for the agents: 12 hosts,
// fanout 3, the last a spare: roots 0 (over 1-3), 4 (over 5-7) and 8 (over
// 9, 10). Rank 9's failure ends the first attempt. Every agent answers
// `ready` as its ranks end, so to make the restart wait, host 10's agent is
// held (SIGSTOP) while its rank is in its SIGTERM trap: the launcher gives
// up on that exit after --kill-grace + 5 s and restarts, waiting for that
// agent, and the test kills root 4 then. Root 4's seat goes to the spare,
// hosts 5-7 keep theirs and get new agents; the second attempt runs the
// same world.
TEST_CASE("tree: --spares - an interior agent killed during the restart: its seat goes to the spare, the hosts "
          "beneath it get new agents, the job completes",
          "[integration][tree][spares]") {
  const std::string m = new_marker();
  TempDir dir;
  RunSpec s = tree_run(tree_hosts(m, 12, 1), 3,
                       {"sh", "-c",
                        "if [ $TORCHELASTIC_RESTART_COUNT = 0 ]; then"
                        "  if [ $RANK = 9 ]; then while [ ! -e \"$1/go\" ]; do sleep 0.05; done; exit 3; fi;"
                        "  trap 'touch \"$1/term-$RANK\"; kill $! 2>/dev/null; sleep 1; exit 0' TERM;"
                        "  sleep \"$0\" & wait; fi;"
                        "echo done $RANK $NODE_RANK $WORLD_SIZE",
                        m, dir.path});
  // The held agent must outlast the launcher's wait for its exit without
  // being lost for silence: --heartbeat-timeout well above 1 + 5 s.
  s.argv.insert(s.argv.begin() + 1,
                {"-v", "--spares", "1", "--max-restarts", "2", "--kill-grace", "1", "--heartbeat-timeout", "60"});
  Child c = start(s);
  ChildGuard guard{c, m};
  auto a = wait_agents(m, 12, 60, c.pid);
  REQUIRE(a.size() == 12);
  REQUIRE(parent_of(a.at(host(5, m))) == a.at(host(4, m)));
  REQUIRE(parent_of(a.at(host(10, m))) == a.at(host(8, m)));
  REQUIRE(parent_of(a.at(host(11, m))) == c.pid);  // the spare
  REQUIRE(wait_marked(m, 12 + 10 + 10, 60, c.pid).size() >= 32);  // agents, the ranks' sh and sleeps
  write_file(dir.path + "/go", "");
  // Rank 10 was sent SIGTERM (its trap runs for a second): hold its agent.
  bool term = false;
  for (int i = 0; i < 400 && !term; ++i, ::usleep(10000)) term = ::access((dir.path + "/term-10").c_str(), F_OK) == 0;
  REQUIRE(term);
  ::kill(a.at(host(10, m)), SIGSTOP);
  std::string err;
  const bool restarting = read_fd_until(c.err_fd, err, "restarting (", 30);
  if (restarting) ::kill(a.at(host(4, m)), SIGKILL);
  const bool moved = restarting && read_fd_until(c.err_fd, err, "starting a new agent on " + host(5, m), 30);
  ::kill(a.at(host(10, m)), SIGCONT);
  RunResult r = wait(c, 90);
  r.err = err + r.err;
  INFO(r.out << r.err);
  REQUIRE(restarting);
  CHECK(moved);
  CHECK(r.code == 0);
  CHECK(r.err.find("attempt 1 of 3 failed: rank 9 on " + host(9, m)) != std::string::npos);
  CHECK(r.err.find("attempt 2 of 3: " + host(4, m) + " lost (") != std::string::npos);
  CHECK(r.err.find("its rank 4 moved to spare " + host(11, m) + "; no spare left; the 3 hosts beneath " + host(4, m) +
                   " in the launch tree (" + host(5, m) + ", " + host(6, m) + ", " + host(7, m) +
                   ") get new agents, started by dlaunch and " + host(5, m) + "; 11 ranks running again ") !=
        std::string::npos);
  CHECK(r.err.find("the job's hosts changed 1 time: before attempt 2 of 3: " + host(4, m) + " lost") != std::string::npos);
  std::set<int> done;
  std::regex line(R"(done (\d+) (\d+) (\d+))");
  for (std::sregex_iterator i(r.out.begin(), r.out.end(), line), end; i != end; ++i) {
    CHECK((*i)[1] == (*i)[2]);  // one rank per host: NODE_RANK is RANK, on the spare too
    CHECK((*i)[3] == "11");
    done.insert(std::stoi((*i)[1]));
  }
  CHECK(done.size() == 11);
  CHECK(wait_marked_gone(m, 10, c.pid).empty());
}

// --min-hosts with --return-cooldown on simulated hosts, flat: a host lost
// leaves a world of 2; it comes back as a spare (a new agent, the health
// gate) while the smaller world runs; the next attempt takes it in at node
// rank 2 and the world is 3 again. Attempt 1's rank 0 fails once dlaunch has
// said the host is back (its stderr goes to a file the ranks can read).
TEST_CASE("tree: --min-hosts and --return-cooldown - a lost host comes back and the world grows back to 3 hosts at "
          "the next attempt",
          "[integration][tree][spares][return]") {
  const std::string m = new_marker();
  TempDir dir;
  const std::string log = dir.path + "/dlaunch.err";
  RunSpec s = tree_run(tree_hosts(m, 3, 1), 0,
                       {"sh", "-c",
                        "case $TORCHELASTIC_RESTART_COUNT in "
                        "0) exec sleep \"$0\";; "
                        "1) if [ $RANK = 0 ]; then until grep -q ' is back (' \"$1\"; do sleep 0.1; done; exit 3; fi; "
                        "exec sleep \"$0\";; "
                        "*) echo \"done $RANK $NODE_RANK $WORLD_SIZE\";; esac",
                        m, log});
  s.argv.insert(s.argv.begin() + 1, {"-n", "3", "--min-hosts", "2", "--max-restarts", "3", "--return-cooldown", "1",
                                     "--kill-grace", "1"});
  std::vector<std::string> wrapped = {"/bin/sh", "-c", "\"$@\" 2>" + log + "; s=$?; cat " + log + " >&2; exit $s", "sh"};
  wrapped.insert(wrapped.end(), s.argv.begin(), s.argv.end());
  s.argv = wrapped;
  Child c = start(s);
  ChildGuard guard{c, m};
  auto a = wait_agents(m, 3, 60, c.pid);
  REQUIRE(a.size() == 3);
  REQUIRE(wait_marked(m, 3 + 3, 60, c.pid).size() >= 6);  // each rank's shell and sleep
  ::kill(a.at(host(1, m)), SIGKILL);
  RunResult r = wait(c, 90);
  INFO(r.out << r.err);
  CHECK(r.code == 0);
  CHECK(r.err.find("attempt 2 of 4: " + host(1, m) + " lost (") != std::string::npos);
  CHECK(r.err.find("the job goes on with 2 hosts and 2 ranks (--min-hosts 2)") != std::string::npos);
  CHECK(r.err.find("dlaunch: " + host(1, m) + " is back (passed the health gate after a 1 s cooldown)") !=
        std::string::npos);
  CHECK(r.err.find("attempt 3 of 4: spare " + host(1, m) + " joins with rank 2: the job grows to 3 hosts and 3 ranks") !=
        std::string::npos);
  // The two hosts that stayed keep their node ranks; the one back is node rank 2.
  for (const char* line : {"done 0 0 3", "done 1 1 3", "done 2 2 3"}) CHECK(r.out.find(line) != std::string::npos);
  CHECK(wait_marked_gone(m, 10, c.pid).empty());
}
