// The launch tree (--fanout) on the namespace cluster with real sshd: 16
// job hosts h1..h16 (2 slots each) and the launcher on h0, outside the job,
// so that every job host is started over ssh. With --fanout 4 the launcher
// starts nodes 0, 4, 8 and 12 (h1, h5, h9, h13) and each of those starts the
// next 3 (depth 2). Checked from the outside: who ssh'd into each host
// (SSH_CONNECTION of its agent), whom its agent connects to, ranks'
// identity, a rank failing on a leaf, a root agent SIGKILLed mid-job (its
// subtree lost with it, nothing left anywhere), a leaf cut off the
// network, sshd down on a leaf and on a root, a signal to every rank, --max-restarts through the tree, and
// --launcher ssh.
#include <signal.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "tests/multihost/multihost_util.h"

using dl::cluster::Cluster;
using namespace dl::multihost;
using namespace std::chrono_literals;

namespace {
constexpr int kJobHosts = 16;

// Node k of the job runs on host h(k+1); its parent is the launcher (h0)
// for a root (k % 4 == 0), else the root of its group of 4.
std::string host_of(int node) { return "h" + std::to_string(node + 1); }
int parent_host_index(int node) { return node % 4 == 0 ? 0 : node - node % 4 + 1; }

// h1..h16, "<addr> slots=2" each.
std::string tree_hostfile(const Cluster& c) {
  const std::string path = c.dir() + "/hosts.tree";
  std::ofstream out(path);
  for (int i = 1; i <= kJobHosts; ++i) out << c.address(i) << " slots=2\n";
  return path;
}

// dlaunch on h0 with the tree's hostfile and --fanout 4.
dl::cluster::RunResult run_tree(const Cluster& c, const std::string& args, std::chrono::milliseconds timeout = 60s) {
  return c.run_in("h0", bin("dlaunch") + " --fanout 4 -n 32 --hostfile " + tree_hostfile(c) + " --ssh-config " +
                            c.ssh_config() + " " + args + " </dev/null",
                  timeout);
}

// Whether one line of `out` has `a` and, after it, `b`.
bool line_with(const std::string& out, const std::string& a, const std::string& b) {
  std::istringstream in(out);
  for (std::string l; std::getline(in, l);)
    if (auto at = l.find(a); at != std::string::npos && l.find(b, at + a.size()) != std::string::npos) return true;
  return false;
}

std::future<dl::cluster::RunResult> start_tree(const Cluster& c, const std::string& args) {
  return std::async(std::launch::async, [&c, args] { return run_tree(c, args); });
}

std::string proc_file(int pid, const char* what) {
  std::string s = dl::cluster::read_file("/proc/" + std::to_string(pid) + "/" + what);
  for (auto& ch : s)
    if (ch == '\0') ch = '\n';
  return s;
}

// The agent process of `host` (argv[0] is the agent binary, not an ssh
// client whose remote command names it), or -1.
int agent_pid(const Cluster& c, const std::string& host) {
  for (int pid : pids_matching(c, host, "dlaunch-agent")) {
    const std::string argv = proc_file(pid, "cmdline");
    if (argv.substr(0, argv.find('\n')) == bin("dlaunch-agent")) return pid;
  }
  return -1;
}

int parent_pid(int pid) {
  std::istringstream stat(dl::cluster::read_file("/proc/" + std::to_string(pid) + "/stat"));
  std::string skip;
  int ppid = -1;
  stat >> skip >> skip >> skip >> ppid;  // pid (comm) state ppid; comm has no space here
  return ppid;
}

// Until every job host runs `per_host` processes matching `needle`.
bool wait_job_hosts(const Cluster& c, const std::string& needle, int per_host, std::chrono::seconds limit = 30s) {
  const auto end = std::chrono::steady_clock::now() + limit;
  for (;;) {
    bool all = true;
    for (int i = 1; i <= kJobHosts && all; ++i)
      all = static_cast<int>(pids_matching(c, c.host(i), needle).size()) >= per_host;
    if (all) return true;
    if (std::chrono::steady_clock::now() >= end) return false;
    std::this_thread::sleep_for(100ms);
  }
}

// start_tree, then until every job host runs 2 ranks whose argv has
// `needle`; fails the test with dlaunch's output if they do not.
std::future<dl::cluster::RunResult> start_running(const Cluster& c, const std::string& args, const std::string& needle) {
  auto f = start_tree(c, args);
  if (!wait_job_hosts(c, needle, 2)) FAIL("the ranks did not start on every host: " << f.get().output);
  return f;
}

// While the job runs: each host's agent was started over ssh from its
// parent's host (sshd's SSH_CONNECTION names the client's address) and
// connects back to it; with OpenSSH each root's agent runs one ssh client
// per child.
void check_tree_shape(const Cluster& c, bool openssh) {
  for (int node = 0; node < kJobHosts; ++node) {
    const std::string host = host_of(node), parent = c.address(parent_host_index(node));
    INFO("node " << node << " on " << host << ", started from " << parent);
    const int pid = agent_pid(c, host);
    REQUIRE(pid > 0);
    CHECK(contains(proc_file(pid, "environ"), "SSH_CONNECTION=" + parent + " "));
    CHECK(contains(proc_file(pid, "cmdline"), "--connect\n" + parent + ":"));
    if (!openssh) continue;
    const auto clients = pids_matching(c, host, "BatchMode");
    CHECK(clients.size() == (node % 4 == 0 ? 3u : 0u));
    for (int client : clients) CHECK(parent_pid(client) == pid);
  }
}

// (a) and (d): every rank's line, its identity, and the tree's shape.
void launch_16_hosts(const std::string& launcher) {
  Cluster c(kJobHosts + 1);
  const std::string mark = unique_marker(), go = c.dir() + "/go";
  // Each rank says who it is, then waits (at most 30 s) for the test to look at the tree.
  auto f = start_tree(c, "-v " + launcher +
                             " sh -c 'echo ID RANK=$RANK NODE_RANK=$NODE_RANK HOST=$(hostname); i=0; "
                             "while [ ! -e " + go + " ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done' " + mark);
  const bool running = wait_job_hosts(c, mark, 2);
  if (running) check_tree_shape(c, launcher == "--launcher ssh");
  std::ofstream(go).put('\n');
  auto r = f.get();
  INFO(r.output);
  REQUIRE(running);
  CHECK(r.status == 0);
  CHECK(contains(r.output, "launch tree: 16 hosts, fanout 4, depth 2"));
  std::regex id(R"(ID RANK=(\d+) NODE_RANK=(\d+) HOST=(h\d+))");
  std::set<int> ranks;
  std::istringstream in(r.output);
  for (std::string l; std::getline(in, l);) {
    std::smatch m;
    if (!std::regex_search(l, m, id)) continue;
    const int rank = std::stoi(m[1]);
    ranks.insert(rank);
    CHECK(std::stoi(m[2]) == rank / 2);
    CHECK(m[3].str() == host_of(rank / 2));
  }
  CHECK(ranks.size() == 32);
  CHECK(count_lines_with(r.output, "ID RANK=") == 32);
  CHECK(wait_clean(c, mark) == "");
  CHECK(pids_matching(c, "h0", "BatchMode").empty());
}

// (c): h5's agent (node 4, which started h6, h7 and h8) SIGKILLed while
// every rank runs. With OpenSSH its 3 ssh clients lose their parent too.
void root_killed(const std::string& launcher) {
  Cluster c(kJobHosts + 1);
  const std::string mark = unique_marker();
  auto f = start_running(c, launcher + " sleep " + mark, "sleep " + mark);
  const int root = agent_pid(c, "h5");
  REQUIRE(root > 0);
  const auto killed = std::chrono::steady_clock::now();
  REQUIRE(::kill(root, SIGKILL) == 0);
  auto r = f.get();
  const auto took = std::chrono::steady_clock::now() - killed;
  INFO(r.output);
  CHECK(r.status == 1);
  CHECK(took < 20s);
  CHECK(contains(r.output, "lost the agent on " + c.address(5) + " (connection closed; the 3 hosts beneath it (" +
                               c.address(6) + ", " + c.address(7) + ", " + c.address(8) + ") were lost with it)"));
  CHECK(wait_clean(c, mark) == "");
  for (const auto& h : c.hosts()) {
    INFO(h);
    CHECK(pids_matching(c, h, "BatchMode").empty());
  }
}
}  // namespace

TEST_CASE("launch tree: 16 hosts x 2 ranks with --fanout 4 - roots start their 3 hosts each over ssh and every rank reports",
          "[multihost][cluster][slow][tree]") {
  launch_16_hosts("");
}

TEST_CASE("launch tree: --launcher ssh - 16 hosts with --fanout 4 and an ssh per child on each root",
          "[multihost][cluster][slow][tree]") {
  launch_16_hosts("--launcher ssh");
}

TEST_CASE("launch tree: a rank exits 3 on a leaf host - the verdict names the rank and its host and dlaunch exits 3",
          "[multihost][cluster][slow][tree]") {
  Cluster c(kJobHosts + 1);
  const std::string mark = unique_marker();
  // Rank 23 is node 11 (h12), beneath h9.
  auto r = run_tree(c, "sh -c 'if [ $RANK = 23 ]; then exit 3; fi; exec sleep \"$0\"' " + mark);
  INFO(r.output);
  CHECK(r.status == 3);
  CHECK(line_with(r.output, "rank 23 on " + c.address(12) + " (pid ", ") exited with code 3"));
  CHECK(wait_clean(c, mark) == "");
}

TEST_CASE("launch tree: a root's agent SIGKILLed mid-job - the verdict names it and the 3 hosts beneath and nothing is left",
          "[multihost][cluster][slow][tree]") {
  root_killed("");
}

TEST_CASE("launch tree: --launcher ssh - a root's agent SIGKILLed mid-job - its ssh clients and the 3 hosts beneath end too",
          "[multihost][cluster][slow][tree]") {
  root_killed("--launcher ssh");
}

TEST_CASE("launch tree: a leaf's cable cut mid-job - its root misses its heartbeats and names it and nothing is left",
          "[multihost][cluster][slow][tree]") {
  Cluster c(kJobHosts + 1);
  const std::string mark = unique_marker();
  auto f = start_running(c, "--heartbeat-timeout 3 sleep " + mark, "sleep " + mark);
  REQUIRE(c.script({"link", c.id(), "h7", "down"}).status == 0);  // node 6, beneath h5
  auto r = f.get();
  c.script({"link", c.id(), "h7", "up"});
  INFO(r.output);
  CHECK(r.status == 1);
  CHECK(contains(r.output, "lost the agent on " + c.address(7) + " (the agent on " + c.address(5) + " that started it lost it: no heartbeat from the agent on " +
                               c.address(7) + " for 3 s"));
  CHECK(wait_clean(c, mark) == "");  // h7's agent, cut off from h5, ends its ranks itself
}

TEST_CASE("launch tree: --max-restarts 1 - a rank failing on a leaf in the first attempt only and the second succeeds",
          "[multihost][cluster][slow][tree][restart]") {
  Cluster c(kJobHosts + 1);
  const std::string mark = unique_marker(), failed_once = c.dir() + "/failed-once";
  auto r = run_tree(c, "--max-restarts 1 sh -c 'if [ $RANK = 23 ] && [ ! -e " + failed_once + " ]; then touch " +
                           failed_once + "; exit 3; fi; echo attempt $DLAUNCH_RESTART_COUNT: rank $RANK on $(hostname)' " +
                           mark);
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK(contains(r.output, "attempt 1 of 2 failed: rank 23 on " + c.address(12)));
  CHECK(contains(r.output, "attempt 2 of 2 succeeded"));
  CHECK(count_lines_with(r.output, "attempt 1: rank ") == 32);
  CHECK(contains(r.output, "attempt 1: rank 23 on h12"));
  CHECK(wait_clean(c, mark) == "");
}

TEST_CASE("launch tree: --max-restarts 1 - a root's agent killed and it and its subtree start again and the job succeeds",
          "[multihost][cluster][slow][tree][restart]") {
  Cluster c(kJobHosts + 1);
  const std::string mark = unique_marker();
  // Attempt 0: "sleep MARK". Attempt 1: says where it runs and ends.
  auto f = start_running(c, "--max-restarts 1 --kill-grace 1 sh -c 'if [ \"$DLAUNCH_RESTART_COUNT\" = 0 ]; then exec sleep \"$0\"; fi; "
                         "echo second attempt: rank $RANK on $(hostname)' " + mark, "sleep " + mark);
  const int root = agent_pid(c, "h9");  // node 8: it started h10, h11 and h12
  REQUIRE(root > 0);
  REQUIRE(::kill(root, SIGKILL) == 0);
  auto r = f.get();
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK(contains(r.output, "attempt 1 of 2 failed: lost the agent on " + c.address(9) + " (connection closed; the 3 hosts beneath it"));
  CHECK(contains(r.output, "attempt 2 of 2 succeeded"));
  CHECK(count_lines_with(r.output, "second attempt: rank ") == 32);
  for (int rank : {16, 17, 23})  // h9's own ranks and one beneath it
    CHECK(contains(r.output, "second attempt: rank " + std::to_string(rank) + " on " + host_of(rank / 2)));
  CHECK(wait_clean(c, mark) == "");
}

TEST_CASE("launch tree: sshd down on a leaf is named by the root that tried - on a root its 3 hosts are not started",
          "[multihost][cluster][slow][tree]") {
  Cluster c(kJobHosts + 1);
  const std::string mark = unique_marker();
  REQUIRE(c.script({"stop-sshd", c.id(), "h7"}).status == 0);  // node 6, beneath h5
  auto r = run_tree(c, "sleep " + mark);
  INFO(r.output);
  CHECK(r.status == 1);
  CHECK(line_with(r.output, "error: " + c.address(7), "connection refused"));
  CHECK(line_with(r.output, "error: " + c.address(7), "(started by the agent on " + c.address(5) + ")"));
  // And how to do without the tree where hosts may not ssh to one another.
  CHECK(line_with(r.output, "(started by the agent on " + c.address(5) + ")", "--fanout 0 starts every agent"));
  CHECK_FALSE(contains(r.output, "lost the agent"));  // the error line says it all: no verdict restating it
  CHECK(count_lines_with(r.output, "error: ") == 1);
  CHECK(wait_clean(c, mark) == "");
  REQUIRE(c.script({"start-sshd", c.id(), "h7"}).status == 0);
  REQUIRE(c.script({"stop-sshd", c.id(), "h5"}).status == 0);  // node 4, a root
  r = run_tree(c, "sleep " + mark);
  INFO(r.output);
  CHECK(r.status == 1);
  CHECK(line_with(r.output, "error: " + c.address(5), "; the 3 hosts it was to start (" + c.address(6) + ", " +
                                                            c.address(7) + ", " + c.address(8) + ") were not started"));
  CHECK(wait_clean(c, mark) == "");
}

TEST_CASE("launch tree: SIGUSR1 to the launcher reaches every rank on the 16 hosts - the job goes on and exits 0",
          "[multihost][cluster][slow][tree][signals]") {
  Cluster c(kJobHosts + 1);
  const std::string mark = unique_marker(), ready = c.dir() + "/ready";
  std::filesystem::create_directory(ready);
  // Each rank traps USR1, says so with a file, polls until it got it (at most 30 s) and exits 0.
  auto f = start_tree(c, "sh -c 'got=0; trap \"got=1\" USR1; touch " + ready + "/$RANK; i=0; "
                         "while [ $got = 0 ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done; "
                         "[ $got = 1 ] && echo rank $RANK on $(hostname) got USR1' " + mark);
  const auto end = std::chrono::steady_clock::now() + 30s;
  auto count = [&] { return std::distance(std::filesystem::directory_iterator(ready), {}); };
  while (count() < 32 && std::chrono::steady_clock::now() < end) std::this_thread::sleep_for(100ms);
  const bool all_ready = count() == 32;
  const int pid = launcher_pid(mark);
  if (all_ready && pid > 0) REQUIRE(::kill(pid, SIGUSR1) == 0);
  auto r = f.get();
  INFO(r.output);
  REQUIRE(all_ready);
  CHECK(r.status == 0);
  CHECK(count_lines_with(r.output, "got USR1") == 32);
  for (int rank = 0; rank < 32; ++rank)
    CHECK(contains(r.output, "rank " + std::to_string(rank) + " on " + host_of(rank / 2) + " got USR1"));
  CHECK(wait_clean(c, mark) == "");
}

TEST_CASE("launch tree: a relative --ssh-config and --launcher-exec reach the roots as this host's paths",
          "[multihost][cluster][slow][tree]") {
  Cluster c(kJobHosts + 1);
  const std::string hf = tree_hostfile(c);
  std::ofstream(c.dir() + "/my-ssh") << "#!/bin/sh\nexec ssh \"$@\"\n";
  std::filesystem::permissions(c.dir() + "/my-ssh", std::filesystem::perms::owner_all);
  // From the cluster dir: "./ssh_config" names nothing in a root's working directory (its home).
  for (const std::string launcher : {"", "--launcher ssh --launcher-exec ./my-ssh"}) {
    auto r = c.run_in("h0", "cd " + c.dir() + " && " + bin("dlaunch") + " --fanout 4 -n 32 --hostfile " + hf + " " +
                                launcher + " --ssh-config ./ssh_config sh -c 'echo ID $RANK $(hostname)' </dev/null");
    INFO(launcher << "\n" << r.output);
    CHECK(r.status == 0);
    CHECK(count_lines_with(r.output, "ID ") == 32);
    CHECK(contains(r.output, "ID 23 h12"));
    CHECK_FALSE(contains(r.output, "error:"));
  }
}
