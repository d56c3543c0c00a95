// --max-restarts and the scheduler's signals on real processes: shell ranks
// that record every run in files, so each test can count the attempts, read
// the restart count and MASTER_PORT each saw, and check that the earlier
// attempts left nothing behind (docs/failures.md).
#include <catch2/catch.hpp>

#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <sstream>
#include <set>
#include <thread>

#include "tests/integration/run_command.h"
#include "wire/socket.h"

using namespace dl::it;

namespace {
// The lines rank `r` wrote to DIR/runs.r, one per attempt it ran.
std::vector<std::string> runs(const TempDir& d, int r) {
  const std::string p = d.path + "/runs." + std::to_string(r);
  return std::filesystem::exists(p) ? lines(read_file(p)) : std::vector<std::string>{};
}

// Waits up to timeout_s for `path` to exist.
bool wait_file(const std::string& path, double timeout_s) {
  for (int i = 0; i < static_cast<int>(timeout_s * 20); ++i) {
    if (std::filesystem::exists(path)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return std::filesystem::exists(path);
}

// Each line: "<restart count> <TORCHELASTIC_RESTART_COUNT> <MASTER_PORT> <parent pid> <pid>".
const char* kRecord =
    "echo \"$DLAUNCH_RESTART_COUNT $TORCHELASTIC_RESTART_COUNT $MASTER_PORT $PPID $$\" >> \"$DIR/runs.$RANK\"; ";
}  // namespace

TEST_CASE("restart: a rank fails on the first attempt - the second runs every rank once more, on the same agent",
          "[integration][restart]") {
  const std::string m = new_marker();
  TempDir d;
  RunSpec s;
  // Attempt 0: rank 1 fails, the others sleep (carrying the marker) until the
  // teardown. Attempt 1: every rank waits for DIR/go, so the test can look at
  // the processes while the second attempt runs.
  s.argv = {bin("dlaunch"), "-n", "3", "--max-restarts", "2", "--kill-grace", "1", "/bin/sh", "-c",
            std::string(kRecord) +
                "if [ \"$DLAUNCH_RESTART_COUNT\" = 0 ]; then "
                "  if [ \"$RANK\" = 1 ]; then sleep 0.3; exit 3; fi; exec sleep \"$0\"; fi; "
                "while [ ! -e \"$DIR/go\" ]; do sleep 0.05; done",
            m};
  s.set_env = {{"DIR", d.path}};
  Child c = start(s);
  ChildGuard guard{c, m};
  // Every rank of attempt 1 runs ...
  for (int r = 0; r < 3; ++r)
    for (int i = 0; i < 200 && runs(d, r).size() < 2; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  // ... and the only marked processes are its three shells: no sleeper of attempt 0 is left.
  std::set<pid_t> second;
  for (int r = 0; r < 3; ++r) {
    auto l = runs(d, r);
    REQUIRE(l.size() == 2);
    second.insert(std::stoi(l[1].substr(l[1].rfind(' ') + 1)));
  }
  // A shell's child between its fork and the exec of `sleep 0.05` still
  // carries the shell's argv (the marker) for a moment: look again then.
  auto now = marked(m, c.pid);
  for (int i = 0; i < 20 && std::set<pid_t>(now.begin(), now.end()) != second; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    now = marked(m, c.pid);
  }
  CHECK(std::set<pid_t>(now.begin(), now.end()) == second);
  // Longer than --kill-grace: the SIGKILL that the last attempt's teardown
  // had scheduled must not reach this attempt's ranks.
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  write_file(d.path + "/go", "");
  RunResult res = wait(c, 30);
  INFO(res.out << res.err);
  CHECK_FALSE(res.timed_out);
  CHECK(res.code == 0);
  CHECK_THAT(res.err, Catch::Contains("dlaunch: attempt 1 of 3 failed: rank 1 on localhost"));
  CHECK_THAT(res.err, Catch::Contains("exited with code 3; restarting (1 more restart left)"));
  CHECK_THAT(res.err, Catch::Contains("dlaunch: attempt 2 of 3 succeeded"));
  std::string port0, port1;
  for (int r = 0; r < 3; ++r) {
    auto l = runs(d, r);
    INFO("rank " << r);
    REQUIRE(l.size() == 2);  // exactly twice
    std::istringstream a(l[0]), b(l[1]);
    std::string c0, t0, p0, pp0, c1, t1, p1, pp1;
    a >> c0 >> t0 >> p0 >> pp0;
    b >> c1 >> t1 >> p1 >> pp1;
    CHECK(c0 == "0");
    CHECK(t0 == "0");
    CHECK(c1 == "1");
    CHECK(t1 == "1");
    CHECK(p0 == p1);    // MASTER_PORT is dlaunch's c10d store, the same for every attempt (its keys cleared)
    CHECK(pp0 == pp1);  // the same agent started both: no new agent for a restart
    if (r == 0) port0 = p0, port1 = p1;
    CHECK(p0 == port0);  // every rank of an attempt agrees
    CHECK(p1 == port1);
  }
  CHECK(wait_marked_gone(m, 2).empty());
}

TEST_CASE("restart: restarts exhausted, the job exits with the last attempt's failure", "[integration][restart]") {
  const std::string m = new_marker();
  TempDir d;
  RunSpec s;
  s.argv = {bin("dlaunch"), "-n", "2", "--max_restarts=2", "--kill-grace", "1", "/bin/sh", "-c",
            std::string(kRecord) +
                "if [ \"$RANK\" = 0 ]; then sleep 0.2; exit $((4 + DLAUNCH_RESTART_COUNT)); fi; exec sleep \"$0\"",
            m};
  s.set_env = {{"DIR", d.path}};
  RunResult r = run(s, 60);
  INFO(r.err);
  CHECK(r.code == 6);
  CHECK_THAT(r.err, Catch::Contains("attempt 1 of 3 failed: rank 0 on localhost"));
  CHECK_THAT(r.err, Catch::Contains("exited with code 4; restarting (1 more restart left)"));
  CHECK_THAT(r.err, Catch::Contains("exited with code 5; restarting (the last restart)"));
  CHECK_THAT(r.err, Catch::Contains("dlaunch: attempt 3 of 3 failed: rank 0 on localhost"));
  CHECK_THAT(r.err, Catch::EndsWith("exited with code 6; no restarts left\n"));
  CHECK(runs(d, 0).size() == 3);
  CHECK(runs(d, 1).size() == 3);
  CHECK(wait_marked_gone(m, 2).empty());
}

TEST_CASE("restart: never after SIGINT, SIGTERM or --timeout, nor for a program that cannot start",
          "[integration][restart]") {
  const std::string m = new_marker();
  TempDir d;
  RunSpec s;
  s.argv = {bin("dlaunch"), "-n", "2", "--max-restarts", "3", "--kill-grace", "1"};
  const std::vector<std::string> sleeper = {"/bin/sh", "-c", std::string(kRecord) + "exec sleep \"$0\"", m};
  s.set_env = {{"DIR", d.path}};
  // The runs each rank may have recorded: `want` at most, and exactly `want`
  // where the test waited for the records.
  int want = 0;
  bool exact = true;
  SECTION("SIGINT or SIGTERM to dlaunch") {
    const auto [sig, code] = GENERATE(table<int, int>({{SIGINT, 130}, {SIGTERM, 143}}));
    INFO("signal " << sig);
    s.argv.insert(s.argv.end(), sleeper.begin(), sleeper.end());
    Child c = start(s);
    ChildGuard guard{c, m};
    REQUIRE(wait_marked(m, 2, 10, c.pid).size() >= 2);
    // A rank's shell carries the marker before it has written its run.
    REQUIRE(wait_file(d.path + "/runs.0", 5));
    REQUIRE(wait_file(d.path + "/runs.1", 5));
    ::kill(c.pid, sig);
    RunResult r = wait(c, 20);
    INFO(r.err);
    CHECK(r.code == code);
    CHECK_THAT(r.err, Catch::Contains("not restarted: dlaunch was stopped"));
    want = 1;
  }
  SECTION("--timeout") {
    // --stack-timeout 0: no report of where the ranks were, whose default
    // directory is left for the user (docs/hangs.md) and would be left here.
    s.argv.insert(s.argv.end(), {"--timeout", "1.5", "--stack-timeout", "0"});
    s.argv.insert(s.argv.end(), sleeper.begin(), sleeper.end());
    RunResult r = run(s, 30);
    INFO(r.err);
    CHECK(r.code == 124);
    CHECK_THAT(r.err, Catch::Contains("--timeout 1.5"));
    CHECK_THAT(r.err, !Catch::Contains("restarting"));
    // On a loaded machine a rank may not have written its run within 1.5 s.
    want = 1;
    exact = false;
  }
  SECTION("a program that does not exist") {
    s.argv.insert(s.argv.end(), {d.path + "/no-such-program", m});
    RunResult r = run(s, 30);
    INFO(r.err);
    CHECK(r.code == 127);
    CHECK_THAT(r.err, Catch::Contains("cannot start rank"));
    want = 0;
  }
  for (int r = 0; r < 2; ++r) {
    INFO("rank " << r);
    if (exact)
      CHECK(runs(d, r).size() == static_cast<size_t>(want));
    else
      CHECK(runs(d, r).size() <= static_cast<size_t>(want));
  }
  CHECK(wait_marked_gone(m, 2).empty());
}

// What MPI_Init does first, without an MPI library: MPICH's PMI-1 client
// writes "cmd=init" on PMI_FD, then asks its key-value space's name
// (PMI_KVS_Get_my_name), which is the attempt's namespace. Each rank
// appends "<attempt> <PMIX_NAMESPACE> <its PMI answer>" to DIR/mpi.RANK.
// With --mpi pmix (ASK_PMI=0) a PMI client would be refused: only
// PMIX_NAMESPACE is recorded.
const char* kAskKvs =
    "kvs=none; if [ \"$ASK_PMI\" = 1 ]; then "
    "  printf 'cmd=init pmi_version=1 pmi_subversion=1\\ncmd=get_my_kvsname\\n' >&$PMI_FD; "
    "  read -r -t 10 -u $PMI_FD init; read -r -t 10 -u $PMI_FD kvs; fi; "
    "echo \"$DLAUNCH_RESTART_COUNT ${PMIX_NAMESPACE:-none} $kvs\" >> \"$DIR/mpi.$RANK\"; ";

// A restarted MPI job is served in every attempt, each in a namespace of its
// own (docs/failures.md, "MPI jobs"): attempt 0's ranks and attempt 1's get
// the server's variables and PMI socket, never nothing (which would make an
// MPI program a size-1 singleton); PMIx and PMI name the same namespace.
TEST_CASE("restart: with --mpi auto, pmix or pmi every attempt's ranks are served, each attempt in a namespace of its "
          "own",
          "[integration][restart][mpi]") {
  const std::string mpi = GENERATE("auto", "pmix", "pmi");
  INFO("--mpi " << mpi);
  const std::string m = new_marker();
  TempDir d;
  RunSpec s;
  // Attempt 0: both ranks ask, then rank 1 fails once rank 0 has asked.
  s.argv = {bin("dlaunch"), "-n", "2", "--max-restarts", "1", "--kill-grace", "1", "--mpi", mpi, "/bin/bash", "-c",
            std::string(kAskKvs) +
                "if [ \"$DLAUNCH_RESTART_COUNT\" = 0 ]; then "
                "  if [ \"$RANK\" = 1 ]; then until [ -s \"$DIR/mpi.0\" ]; do sleep 0.05; done; exit 3; fi; "
                "  exec sleep \"$0\"; fi",
            m};
  s.set_env = {{"DIR", d.path}, {"ASK_PMI", mpi == "pmix" ? "0" : "1"}};
  RunResult r = run(s, 60);
  INFO(r.err);
  CHECK(r.code == 0);
  CHECK_THAT(r.err, Catch::Contains("attempt 1 of 2 failed: rank 1 on localhost (pid ") && Catch::Contains(") exited with code 3"));
  CHECK_THAT(r.err, Catch::Contains("attempt 2 of 2 succeeded"));
  for (int rank : {0, 1}) {
    const auto asked = std::filesystem::exists(d.path + "/mpi." + std::to_string(rank))
                           ? lines(read_file(d.path + "/mpi." + std::to_string(rank)))
                           : std::vector<std::string>{};
    INFO("rank " << rank << ": " << asked.size() << " lines");
    REQUIRE(asked.size() == 2);
    // "0 dl-1a2b3c4d cmd=my_kvsname kvsname=dl-1a2b3c4d rc=0": the attempt,
    // PMIx's namespace, PMI's answer ("none" where that wire is not served).
    const auto field = [](const std::string& line, size_t k) {
      std::istringstream in(line);
      std::string w;
      for (size_t i = 0; i <= k; ++i) in >> w;
      return w;
    };
    const auto kvs = [](const std::string& line) {
      const auto at = line.find("kvsname=");
      return at == std::string::npos ? std::string("none") : line.substr(at + 8, line.find(' ', at) - at - 8);
    };
    INFO(asked[0] << "\n" << asked[1]);
    CHECK(field(asked[0], 0) == "0");
    CHECK(field(asked[1], 0) == "1");
    const std::string first = mpi == "pmi" ? kvs(asked[0]) : field(asked[0], 1);
    CHECK(first.rfind("dl-", 0) == 0);
    for (int a : {0, 1}) {
      const std::string ns = a == 0 ? first : first + ".a1";
      CHECK(field(asked[a], 1) == (mpi == "pmi" ? "none" : ns));
      CHECK(kvs(asked[a]) == (mpi == "pmix" ? "none" : ns));
    }
  }
  CHECK(wait_marked_gone(m, 2).empty());
}

TEST_CASE("SIGUSR1 and SIGUSR2 to dlaunch reach every rank, which trap them - the job goes on and exits 0",
          "[integration][signals]") {
  const std::string m = new_marker();
  TempDir d;
  RunSpec s;
  // Each rank traps both, says it is ready, and polls for DIR/stop; a trap
  // runs between two of its short sleeps.
  s.argv = {bin("dlaunch"), "-n", "3", "/bin/sh", "-c",
            "trap 'echo \"rank $RANK got USR1\"; touch \"$DIR/usr1.$RANK\"' USR1; "
            "trap 'echo \"rank $RANK got USR2\"; touch \"$DIR/usr2.$RANK\"' USR2; "
            "touch \"$DIR/ready.$RANK\"; while [ ! -e \"$DIR/stop\" ]; do sleep 0.05; done; echo \"rank $RANK $0 done\"",
            m};
  s.set_env = {{"DIR", d.path}};
  Child c = start(s);
  ChildGuard guard{c, m};
  for (int r = 0; r < 3; ++r) REQUIRE(wait_file(d.path + "/ready." + std::to_string(r), 10));
  ::kill(c.pid, SIGUSR1);
  for (int r = 0; r < 3; ++r) CHECK(wait_file(d.path + "/usr1." + std::to_string(r), 10));
  ::kill(c.pid, SIGUSR2);
  for (int r = 0; r < 3; ++r) CHECK(wait_file(d.path + "/usr2." + std::to_string(r), 10));
  write_file(d.path + "/stop", "");
  RunResult r = wait(c, 20);
  INFO(r.out << r.err);
  CHECK_FALSE(r.timed_out);
  CHECK(r.code == 0);
  // dlaunch says nothing (the shells may: the signal reached their whole
  // process group, and a `sleep` of theirs died of it).
  for (const auto& l : lines(r.err)) CHECK_THAT(l, !Catch::StartsWith("dlaunch"));
  for (int k = 0; k < 3; ++k) {
    CHECK_THAT(r.out, Catch::Contains("rank " + std::to_string(k) + " got USR1"));
    CHECK_THAT(r.out, Catch::Contains("rank " + std::to_string(k) + " got USR2"));
    CHECK_THAT(r.out, Catch::Contains("rank " + std::to_string(k) + " " + m + " done"));
  }
  CHECK(wait_marked_gone(m, 2).empty());
}

namespace {
// dlaunch as node `k` of 2 meeting at 127.0.0.1:port (per-node mode), two ranks each.
RunSpec per_node(int k, int port, const std::vector<std::string>& rest) {
  RunSpec s;
  s.argv = {bin("dlaunch"), "--nnodes", "2", "--node-rank", std::to_string(k), "--rdzv",
            "tcp://127.0.0.1:" + std::to_string(port), "--nproc-per-node", "2"};
  s.argv.insert(s.argv.end(), rest.begin(), rest.end());
  s.set_env["DLAUNCH_TOKEN"] = "restart-per-node-test-token-0123456789";
  return s;
}
}  // namespace

TEST_CASE("restart, per-node mode: a rank on node 1 fails - both nodes restart together and succeed",
          "[integration][restart][per-node]") {
  const std::string m = new_marker();
  TempDir d;
  const int port = dl::wire::free_tcp_port(true);
  // Attempt 0: rank 3 (node 1) fails, the others sleep. Attempt 1: every rank records itself and exits 0.
  const std::vector<std::string> job = {
      "--max-restarts", "2", "--kill-grace", "1", "/bin/sh", "-c",
      std::string(kRecord) + "if [ \"$DLAUNCH_RESTART_COUNT\" = 0 ]; then "
                             "  if [ \"$RANK\" = 3 ]; then sleep 0.5; exit 5; fi; exec sleep \"$0\"; fi",
      m};
  RunSpec s0 = per_node(0, port, job), s1 = per_node(1, port, job);
  s0.set_env["DIR"] = s1.set_env["DIR"] = d.path;
  Child c0 = start(s0);
  Child c1 = start(s1);
  ChildGuard g0{c0, m}, g1{c1, m};
  RunResult r0 = wait(c0, 60), r1 = wait(c1, 60);
  INFO(r0.err << "---\n" << r1.err);
  CHECK(r0.code == 0);
  CHECK(r1.code == 0);
  CHECK_THAT(r1.err, Catch::Contains("attempt 1 of 3 failed: rank 3 on "));
  CHECK_THAT(r0.err, Catch::Contains("attempt 1 of 3 failed: node 1 ("));
  for (auto* err : {&r0.err, &r1.err}) CHECK_THAT(*err, Catch::Contains("attempt 2 of 3 succeeded"));
  std::set<std::string> ports;
  for (int r = 0; r < 4; ++r) {
    INFO("rank " << r);
    auto l = runs(d, r);
    REQUIRE(l.size() == 2);
    CHECK(l[0].rfind("0 0 ", 0) == 0);
    CHECK(l[1].rfind("1 1 ", 0) == 0);
    ports.insert(l[1].substr(4, l[1].find(' ', 4) - 4));
  }
  CHECK(ports.size() == 1);  // every rank of both nodes met at one new MASTER_PORT
  CHECK(wait_marked_gone(m, 3).empty());
}

TEST_CASE("restart, per-node mode: node 1 is told to stop (SIGTERM), so neither node restarts",
          "[integration][restart][per-node]") {
  const std::string m = new_marker();
  TempDir d;
  const int port = dl::wire::free_tcp_port(true);
  const std::vector<std::string> job = {"--max-restarts", "2", "--kill-grace", "1", "/bin/sh", "-c",
                                        std::string(kRecord) + "exec sleep \"$0\"", m};
  RunSpec s0 = per_node(0, port, job), s1 = per_node(1, port, job);
  s0.set_env["DIR"] = s1.set_env["DIR"] = d.path;
  Child c0 = start(s0);
  Child c1 = start(s1);
  ChildGuard g0{c0, m}, g1{c1, m};
  for (int r = 0; r < 4; ++r) REQUIRE(wait_file(d.path + "/runs." + std::to_string(r), 20));
  ::kill(c1.pid, SIGTERM);
  RunResult r0 = wait(c0, 60), r1 = wait(c1, 60);
  INFO(r0.err << "---\n" << r1.err);
  CHECK(r1.code == 143);
  CHECK(r0.code == 143);  // the other node's verdict
  CHECK_THAT(r0.err, Catch::Contains("did not restart"));
  for (int r = 0; r < 4; ++r) CHECK(runs(d, r).size() == 1);
  CHECK(wait_marked_gone(m, 3).empty());
}
