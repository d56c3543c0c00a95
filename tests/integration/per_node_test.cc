// Per-node mode on real processes: several dlaunch processes on this machine,
// each one "node", meet at the store that node rank 0 hosts. What crosses
// hosts is in tests/multihost; here: identity, fail-fast across nodes, a
// node that never comes, a node killed outright, Slurm's variables.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <set>
#include <thread>

#include "tests/integration/run_command.h"
#include "wire/socket.h"

using namespace dl::it;

namespace {
int some_free_port() { return dl::wire::free_tcp_port(true); }

// A port held by a socket bound to it that does not listen (what another
// program's connection, or a bound socket, looks like to bind()); its
// descriptor in `fd`, to close when the port should be free again.
int held_port(int& fd) {
  fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  socklen_t len = sizeof a;
  REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0);
  return ntohs(a.sin_port);
}

const std::string kToken = "per-node-test-token-0123456789abcdef";

// dlaunch as node `k` of `n` meeting at 127.0.0.1:port.
RunSpec node(int k, int n, int port, std::vector<std::string> rest) {
  RunSpec s;
  s.argv = {bin("dlaunch"), "--nnodes", std::to_string(n), "--node-rank", std::to_string(k), "--rdzv",
            "tcp://127.0.0.1:" + std::to_string(port)};
  s.argv.insert(s.argv.end(), rest.begin(), rest.end());
  s.set_env["DLAUNCH_TOKEN"] = kToken;
  return s;
}

const char* kShowIdentity =
    "echo \"id $RANK $WORLD_SIZE $LOCAL_RANK $LOCAL_WORLD_SIZE $NODE_RANK $MASTER_ADDR $MASTER_PORT "
    "$DLAUNCH_STORE_ADDR $DLAUNCH_JOB_ID $PMI_RANK $OMPI_COMM_WORLD_SIZE\"";

// The "id ..." lines of a node's output, split into words.
std::vector<std::vector<std::string>> id_lines(const std::string& out) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& l : lines(out)) {
    if (l.rfind("id ", 0) != 0) continue;
    std::vector<std::string> w;
    size_t p = 3;
    while (p <= l.size()) {
      size_t q = l.find(' ', p);
      if (q == std::string::npos) q = l.size();
      w.push_back(l.substr(p, q - p));
      p = q + 1;
    }
    rows.push_back(w);
  }
  return rows;
}
// What the guards look for in /proc/PID/cmdline, which separates arguments
// with NULs: the port argument of this test's dlaunch processes, unique to
// the test. (A marker with a space, "--node-rank 0", never matched an argv:
// it matched only processes whose one argument holds a test's name, such as
// a ctest -R or a concurrent test, and killed those.)
std::string port_marker(int port) { return ":" + std::to_string(port) + '\0'; }         // --rdzv tcp://HOST:PORT
std::string env_port_marker(int port) { return std::string("--rdzv-port") + '\0' + std::to_string(port) + '\0'; }
}  // namespace

TEST_CASE("per-node: two nodes meet and their ranks get one world's identity", "[integration][per-node]") {
  const int port = some_free_port();
  Child c1 = start(node(1, 2, port, {"--nproc-per-node", "3", "/bin/sh", "-c", kShowIdentity}));
  Child c0 = start(node(0, 2, port, {"--nproc-per-node", "2", "/bin/sh", "-c", kShowIdentity}));
  ChildGuard g0{c0, port_marker(port)}, g1{c1, port_marker(port)};
  RunResult r0 = wait(c0, 30), r1 = wait(c1, 30);
  INFO(r0.err << r1.err);
  REQUIRE(r0.code == 0);
  REQUIRE(r1.code == 0);
  auto rows0 = id_lines(r0.out), rows1 = id_lines(r1.out);
  REQUIRE(rows0.size() == 2);
  REQUIRE(rows1.size() == 3);
  std::set<std::string> ranks, masters, stores, jobs;
  for (auto* rows : {&rows0, &rows1}) {
    for (auto& w : *rows) {
      REQUIRE(w.size() == 11);
      ranks.insert(w[0]);
      CHECK(w[1] == "5");
      CHECK(w[9] == w[0]);   // PMI_RANK
      CHECK(w[10] == "5");   // OMPI_COMM_WORLD_SIZE
      masters.insert(w[5] + ":" + w[6]);
      stores.insert(w[7]);
      jobs.insert(w[8]);
    }
  }
  CHECK(ranks == std::set<std::string>{"0", "1", "2", "3", "4"});
  CHECK(masters.size() == 1);
  CHECK(stores == std::set<std::string>{"127.0.0.1:" + std::to_string(port)});
  CHECK(jobs.size() == 1);
  for (auto& w : rows0) CHECK((w[4] == "0" && w[3] == "2" && std::stoi(w[0]) < 2 && w[2] == w[0]));
  for (auto& w : rows1) CHECK((w[4] == "1" && w[3] == "3" && std::stoi(w[0]) >= 2 && std::stoi(w[2]) == std::stoi(w[0]) - 2));
  // Both nodes are this machine: each says so (their LOCAL_RANKs overlap).
  for (const std::string* err : {&r0.err, &r1.err})
    CHECK(err->find("dlaunch: warning: node ranks 0 and 1 run on one machine") != std::string::npos);
}

TEST_CASE("per-node: an MPI program ends both nodes with 2 naming per-node mode, never singletons",
          "[integration][per-node]") {
  const int port = some_free_port();
  for (const char* program : {"mpi_hello", "mpich_hello"}) {
    INFO(program);
    Child n1 = start(node(1, 2, port, {"--nproc-per-node", "1", bin(program)}));
    ChildGuard g1{n1, port_marker(port)};
    RunResult r0 = run(node(0, 2, port, {"--nproc-per-node", "1", bin(program)}), 60);
    RunResult r1 = wait(n1, 60);
    INFO("node 0: " << r0.out << r0.err << "\nnode 1: " << r1.out << r1.err);
    CHECK(r0.code == 2);
    CHECK(r1.code == 2);
    CHECK(r0.err.find("called MPI_Init") != std::string::npos);
    CHECK(r0.err.find("per-node mode (--rdzv) serves no MPI") != std::string::npos);
    CHECK((r0.out + r1.out).find("of 1") == std::string::npos);  // no "rank 0 of 1" singleton
  }
  RunResult usage = run(node(0, 2, port, {"--mpi", "pmix", bin("mpi_hello")}), 30);
  CHECK(usage.code == 2);
  CHECK(usage.err.find("--mpi pmix with --rdzv: per-node mode serves no MPI") != std::string::npos);
}

TEST_CASE("per-node: a failing rank on node 1 stops node 0's ranks, both exit with its code", "[integration][per-node]") {
  const std::string m = new_marker();
  const int port = some_free_port();
  const std::string script = "if [ \"$RANK\" = 3 ]; then sleep 0.5; exit 7; fi; sleep \"$0\"";
  Child c0 = start(node(0, 2, port, {"--nproc-per-node", "2", "/bin/sh", "-c", script, m}));
  Child c1 = start(node(1, 2, port, {"--nproc-per-node", "2", "/bin/sh", "-c", script, m}));
  ChildGuard g0{c0, m}, g1{c1, m};
  RunResult r0 = wait(c0, 30), r1 = wait(c1, 30);
  INFO(r0.err << "---\n" << r1.err);
  CHECK(r1.code == 7);
  CHECK(r0.code == 7);
  CHECK(r1.err.find("rank 3 on ") != std::string::npos);
  CHECK(r0.err.find("node 1 (") != std::string::npos);
  CHECK(r0.err.find("rank 3 on ") != std::string::npos);
  CHECK(r0.seconds < 15);
  CHECK(wait_marked_gone(m, 3).empty());
}

// --max-restarts: a node fails after the other node's ranks have all
// exited 0 (that node has left the group): no restart can have it back, so
// the failed node does not claim one, and both say why.
TEST_CASE("per-node: a failure after the other node finished is not restarted, and both nodes say why",
          "[integration][per-node]") {
  const std::string m = new_marker();
  const int port = some_free_port();
  const std::string script = "if [ \"$RANK\" = 1 ]; then sleep 2; exit 3; fi; exit 0";
  Child c0 = start(node(0, 2, port, {"--max-restarts", "1", "--nproc-per-node", "1", "/bin/sh", "-c", script, m}));
  Child c1 = start(node(1, 2, port, {"--max-restarts", "1", "--nproc-per-node", "1", "/bin/sh", "-c", script, m}));
  ChildGuard g0{c0, m}, g1{c1, m};
  RunResult r0 = wait(c0, 60), r1 = wait(c1, 60);
  INFO(r0.err << "---\n" << r1.err);
  CHECK(r1.code == 3);
  CHECK(r0.code == 3);
  CHECK_THAT(r1.err, Catch::Contains("cannot restart: node rank 0 had already finished"));
  CHECK_THAT(r0.err, Catch::Contains("not restarted: node rank 0 had already finished"));
  CHECK(r1.err.find("lost the rendezvous store") == std::string::npos);
  CHECK(r1.seconds < 20);
  CHECK(wait_marked_gone(m, 3).empty());
}

TEST_CASE("per-node: node 0 whose port another program holds is refused within seconds, naming the port",
          "[integration][per-node]") {
  // A socket bound to the port and not listening: node 0 cannot listen
  // there, and nothing answers a connect. Taken for a store served
  // elsewhere, node 0 would wait --rdzv-timeout (300 s) without a word.
  int fd = -1;
  const int port = held_port(fd);
  Child c0 = start(node(0, 2, port, {"true"}));
  ChildGuard g0{c0, port_marker(port)};
  RunResult r0 = wait(c0, 30);
  ::close(fd);
  INFO(r0.err);
  CHECK_FALSE(r0.timed_out);
  CHECK(r0.code != 0);
  CHECK(r0.seconds < 15);
  CHECK(r0.err.find("node rank 0 cannot listen on port " + std::to_string(port)) != std::string::npos);
  CHECK(r0.err.find("another program holds the port") != std::string::npos);
  CHECK(r0.err.find("--rdzv-port") != std::string::npos);
}

TEST_CASE("per-node: node 0's port held for a moment only: node 0 waits it out and the nodes meet",
          "[integration][per-node]") {
  // An ephemeral port of someone's connection looks the same to bind(), and
  // goes away: node 0 tries again for a few seconds before refusing.
  int fd = -1;
  const int port = held_port(fd);
  Child c0 = start(node(0, 2, port, {"true"}));
  Child c1 = start(node(1, 2, port, {"true"}));
  ChildGuard g0{c0, port_marker(port)}, g1{c1, port_marker(port)};
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  ::close(fd);
  RunResult r0 = wait(c0, 30), r1 = wait(c1, 30);
  INFO(r0.err << "---\n" << r1.err);
  CHECK(r0.code == 0);
  CHECK(r1.code == 0);
}

TEST_CASE("per-node: a node that never arrives fails the others with its node rank named", "[integration][per-node]") {
  const int port = some_free_port();
  Child c0 = start(node(0, 3, port, {"--rdzv-timeout", "2", "true"}));
  Child c2 = start(node(2, 3, port, {"--rdzv-timeout", "30", "true"}));
  ChildGuard g0{c0, port_marker(port)}, g2{c2, port_marker(port)};
  RunResult r0 = wait(c0, 20), r2 = wait(c2, 40);
  INFO(r0.err << "---\n" << r2.err);
  CHECK(r0.code == 124);
  CHECK(r0.err.find("node rank 1 did not arrive within 2 s") != std::string::npos);
  // Node 2 was waiting too: it learns the verdict instead of waiting out its own 30 s.
  CHECK(r2.code != 0);
  CHECK(r2.err.find("node rank 1 did not arrive") != std::string::npos);
  CHECK(r2.seconds < 10);
}

TEST_CASE("per-node: node 1's dlaunch killed outright fails node 0 within the heartbeat timeout", "[integration][per-node]") {
  const std::string m = new_marker();
  const int port = some_free_port();
  Child c0 = start(node(0, 2, port, {"--heartbeat-timeout", "3", "sleep", m}));
  Child c1 = start(node(1, 2, port, {"--heartbeat-timeout", "3", "sleep", m}));
  ChildGuard g0{c0, m}, g1{c1, m};
  REQUIRE(wait_marked(m, 4, 20).size() >= 4);  // two dlaunch, two ranks
  ::kill(c1.pid, SIGKILL);
  RunResult r0 = wait(c0, 30);
  wait(c1, 5);
  INFO(r0.err);
  CHECK(r0.code == 1);
  CHECK(r0.err.find("node 1 (") != std::string::npos);
  CHECK(r0.err.find("no heartbeat for 3 s") != std::string::npos);
  CHECK(r0.seconds < 15);
  CHECK(wait_marked_gone(m, 5).empty());  // node 1's rank died with its agent
}

// --max-restarts: node 1's dlaunch killed outright, and a survivor's rank
// fails of it first (as gloo's "Connection closed by peer" does). The
// cause is said once the heartbeats show it, and the restart does not wait
// for a node that is gone.
TEST_CASE("per-node: a killed node behind a survivor's failure is named and ends the restart at once",
          "[integration][per-node]") {
  const std::string m = new_marker();
  const int port = some_free_port();
  TempDir tmp;
  const std::string flag = tmp.path + "/peer-gone";
  const std::string survivor = "while [ ! -e " + flag + " ]; do sleep 0.1; done; exit 1";
  Child c0 = start(node(0, 2, port, {"--heartbeat-timeout", "3", "--max-restarts", "1", "/bin/sh", "-c", survivor, m}));
  Child c1 = start(node(1, 2, port, {"--heartbeat-timeout", "3", "--max-restarts", "1", "sleep", "60", m}));
  ChildGuard g0{c0, m}, g1{c1, m};
  REQUIRE(wait_marked(m, 4, 20).size() >= 4);
  ::kill(c1.pid, SIGKILL);
  write_file(flag, "");
  RunResult r0 = wait(c0, 40);
  wait(c1, 5);
  INFO(r0.err);
  CHECK(r0.code == 1);
  CHECK_THAT(r0.err, Catch::Contains("restarting (the last restart)"));
  CHECK_THAT(r0.err, Catch::Contains("node 1 (") && Catch::Contains("sent no heartbeat for 3 s: its dlaunch was killed"));
  CHECK_THAT(r0.err, Catch::Contains("cannot restart: node 1 ("));
  CHECK(r0.err.find("did not get ready to restart") == std::string::npos);
  CHECK(r0.seconds < 14);
  CHECK(wait_marked_gone(m, 5).empty());
}

TEST_CASE("per-node: --rdzv env under Slurm's variables", "[integration][per-node]") {
  const int port = some_free_port();
  auto slurm = [&](int k) {
    RunSpec s;
    s.argv = {bin("dlaunch"), "--rdzv", "env", "--rdzv-port", std::to_string(port), "--nproc-per-node", "2",
              "/bin/sh", "-c", kShowIdentity};
    s.set_env = {{"DLAUNCH_TOKEN", kToken},         {"SLURM_JOB_ID", "4242"},  {"SLURM_PROCID", std::to_string(k)},
                 {"SLURM_NTASKS", "2"},             {"SLURM_LOCALID", "0"},    {"SLURM_NODEID", std::to_string(k)},
                 {"SLURM_JOB_NODELIST", "localhost"}};
    // dlaunch's own and torchrun's variables would outrank Slurm's.
    s.unset_env = {"RANK", "WORLD_SIZE", "DLAUNCH_RANK", "DLAUNCH_WORLD_SIZE"};
    return s;
  };
  Child c1 = start(slurm(1));
  Child c0 = start(slurm(0));
  ChildGuard g0{c0, env_port_marker(port)}, g1{c1, env_port_marker(port)};
  RunResult r0 = wait(c0, 30), r1 = wait(c1, 30);
  INFO(r0.err << r1.err);
  REQUIRE(r0.code == 0);
  REQUIRE(r1.code == 0);
  auto rows = id_lines(r0.out + r1.out);
  REQUIRE(rows.size() == 4);
  std::set<std::string> ranks;
  for (auto& w : rows) {
    ranks.insert(w[0] + "@" + w[4]);
    CHECK(w[1] == "4");
  }
  CHECK(ranks == std::set<std::string>{"0@0", "1@0", "2@1", "3@1"});
}

TEST_CASE("per-node: bad input is refused with what to do", "[integration][per-node]") {
  const int port = some_free_port();
  SECTION("no token") {
    RunSpec s = node(0, 1, port, {"true"});
    s.set_env.erase("DLAUNCH_TOKEN");
    s.unset_env = {"DLAUNCH_TOKEN"};
    RunResult r = run(s, 10);
    CHECK(r.code == 2);
    CHECK(r.err.find("export DLAUNCH_TOKEN=$(dlaunch token)") != std::string::npos);
  }
  SECTION("node rank out of range") {
    RunResult r = run(node(2, 2, port, {"true"}), 10);
    CHECK(r.code == 2);
    CHECK(r.err.find("--node-rank must be in 0..1") != std::string::npos);
  }
  SECTION("with a hostfile") {
    RunResult r = run(node(0, 2, port, {"-H", "a,b", "true"}), 10);
    CHECK(r.code == 2);
    CHECK(r.err.find("drop --hostfile/-H") != std::string::npos);
  }
  // Whichever of the two reaches the store second is refused (exit 2); the
  // other one is then stopped by the test.
  auto conflict = [&](RunSpec first, RunSpec second, const std::string& message) {
    const std::string m = new_marker();
    first.argv.insert(first.argv.end(), {"sleep", m});
    second.argv.insert(second.argv.end(), {"sleep", m});
    Child a = start(first);
    ChildGuard ga{a, m};
    REQUIRE(wait_marked(m, 1, 10).size() >= 1);
    ::usleep(500 * 1000);
    Child b = start(second);
    ChildGuard gb{b, m};
    RunResult rb = wait(b, 20);
    ::kill(a.pid, SIGTERM);
    RunResult ra = wait(a, 10);
    INFO(ra.err << "---\n" << rb.err);
    const bool b_refused = rb.code == 2 && rb.err.find(message) != std::string::npos;
    const bool a_refused = ra.code == 2 && ra.err.find(message) != std::string::npos;
    CHECK((a_refused || b_refused));
  };
  SECTION("two nodes claim the same rank") {
    conflict(node(0, 3, port, {"--rdzv-timeout", "20"}), node(0, 3, port, {"--rdzv-timeout", "20"}),
             "node rank 0 already joined");
  }
  SECTION("different --nnodes") {
    conflict(node(0, 3, port, {"--rdzv-timeout", "20"}), node(1, 2, port, {"--rdzv-timeout", "20"}),
             "this node says --nnodes");
  }
}

// Two nodes cut off together (the chaos run's half partition found it): the
// store's host counts each silent node, so it does not wait out --kill-grace
// + 5 s for the second one's "done" after the job failed.
TEST_CASE("per-node: two nodes killed together - node 0 ends within the heartbeat timeout, not a linger later",
          "[integration][per-node]") {
  const std::string m = new_marker();
  const int port = some_free_port();
  const std::vector<std::string> job = {"--heartbeat-timeout", "2", "--kill-grace", "5", "sleep", m};
  Child c0 = start(node(0, 3, port, job)), c1 = start(node(1, 3, port, job)), c2 = start(node(2, 3, port, job));
  ChildGuard g0{c0, m}, g1{c1, m}, g2{c2, m};
  REQUIRE(wait_marked(m, 6, 20).size() >= 6);  // three dlaunch, three ranks
  const auto killed = std::chrono::steady_clock::now();
  ::kill(c1.pid, SIGKILL);
  ::kill(c2.pid, SIGKILL);
  RunResult r0 = wait(c0, 30);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count();
  wait(c1, 5);
  wait(c2, 5);
  INFO(r0.err << "node 0 ended " << took << " s after the kill");
  CHECK(r0.code == 1);
  CHECK(r0.err.find("no heartbeat for 2 s") != std::string::npos);
  // Detection (2 s and a tick) and its own ranks' SIGTERM; lingering for the
  // second node took 5 + 5 s more.
  CHECK(took < 8);
  CHECK(wait_marked_gone(m, 5).empty());
}
