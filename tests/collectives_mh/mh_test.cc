// Collectives across hosts of the namespace cluster: dlaunch runs in h0 and
// starts the ranks on h0..h2 over ssh, exactly as on a real cluster. Every
// test checks that no rank, agent or launcher is left on any host.
#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <thread>

#include "tests/multihost/multihost_util.h"

using dl::cluster::Cluster;
using namespace dl::multihost;
using namespace std::chrono_literals;

namespace {

struct PeerLine {
  std::string transport, addr;
};

// "CHECK rank=R peer=P transport=T host=H addr=A" lines: [R][P] -> (T, A).
std::map<int, std::map<int, PeerLine>> peer_lines(const std::string& out) {
  static const std::regex re(R"(CHECK rank=(\d+) peer=(\d+) transport=(\w+) host=\S* addr=(\S+))");
  std::map<int, std::map<int, PeerLine>> m;
  for (std::sregex_iterator it(out.begin(), out.end(), re), end; it != end; ++it)
    m[std::stoi((*it)[1])][std::stoi((*it)[2])] = PeerLine{(*it)[3], (*it)[4]};
  return m;
}

// Runs dlcoll-mh-check in `check` mode with dlaunch `opts`; requires every
// one of `n` ranks to report OK and returns the output.
std::string run_check(const Cluster& c, int n, const std::string& opts) {
  const std::string mark = unique_marker();
  auto r = run_dlaunch(c, "-n " + std::to_string(n) + " " + opts + " " + bin("dlcoll-mh-check") + " check " + mark,
                       180s);
  INFO(r.output);
  CHECK(r.status == 0);
  for (int rank = 0; rank < n; ++rank) CHECK(contains(r.output, "CHECK rank=" + std::to_string(rank) + " OK"));
  CHECK_FALSE(contains(r.output, "FAILED"));
  CHECK(wait_clean(c, mark) == "");
  return r.output;
}

// Host index of an address "10.A.B.k:port" of cluster c, or -1.
int host_of(const Cluster& c, const std::string& addr) {
  for (int h = 0; h < c.size(); ++h)
    if (addr.rfind(c.address(h) + ":", 0) == 0) return h;
  return -1;
}

std::string read_environ_var(int pid, const std::string& name) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/environ", std::ios::binary);
  std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::istringstream in(s);
  std::string kv;
  while (std::getline(in, kv, '\0'))
    if (kv.rfind(name + "=", 0) == 0) return kv.substr(name.size() + 1);
  return "";
}

}  // namespace

TEST_CASE("every collective, dtype and op across 2 and 3 hosts over TCP", "[collectives_mh][cluster][slow]") {
  Cluster c(3);
  for (int n : {2, 3}) {
    INFO(n << " ranks, one per host");
    auto out = run_check(c, n, "--npernode 1 -x DLAUNCH_SOCKET_IFNAME=eth0");
    auto peers = peer_lines(out);
    REQUIRE(peers.size() == size_t(n));
    for (int r = 0; r < n; ++r) {
      REQUIRE(peers[r].size() == size_t(n - 1));
      for (auto& [p, line] : peers[r]) {
        INFO("rank " << r << " -> rank " << p << ": " << line.transport << " " << line.addr);
        CHECK(line.transport == "tcp");
        CHECK(host_of(c, line.addr) == p);  // one rank per host, in hostfile order
      }
    }
  }
}

TEST_CASE("mixed shared memory and TCP: 2 hosts x 2 ranks and 3 hosts with 5 ranks",
          "[collectives_mh][cluster][slow]") {
  Cluster c(3);
  for (int n : {4, 5}) {
    INFO(n << " ranks, 2 slots per host");
    auto out = run_check(c, n, "");
    auto peers = peer_lines(out);
    REQUIRE(peers.size() == size_t(n));
    for (int r = 0; r < n; ++r)
      for (int p = 0; p < n; ++p) {
        if (p == r) continue;
        INFO("rank " << r << " -> rank " << p);
        REQUIRE(peers[r].count(p) == 1);
        // Slots fill in hostfile order: ranks 2k and 2k+1 share host k.
        CHECK(peers[r][p].transport == (r / 2 == p / 2 ? "shm" : "tcp"));
        CHECK(host_of(c, peers[r][p].addr) == p / 2);
      }
  }
}

TEST_CASE("DLAUNCH_SOCKET_IFNAME and NCCL_SOCKET_IFNAME pick the published interface",
          "[collectives_mh][cluster][slow]") {
  Cluster c(2);
  // lo on two ranks of h0 (TCP forced): they publish and use 127.0.0.1.
  auto out = run_check(c, 2, "--npernode 2 -x DLCOLL_SHM=0 -x DLAUNCH_SOCKET_IFNAME=lo");
  auto peers = peer_lines(out);
  CHECK(peers[0][1].addr.rfind("127.0.0.1:", 0) == 0);
  CHECK(peers[1][0].addr.rfind("127.0.0.1:", 0) == 0);
  CHECK(peers[0][1].transport == "tcp");
  // NCCL's variable is honoured too (prefix match: "eth" selects eth0).
  out = run_check(c, 2, "--npernode 1 -x NCCL_SOCKET_IFNAME=eth");
  peers = peer_lines(out);
  CHECK(host_of(c, peers[0][1].addr) == 1);
  CHECK(host_of(c, peers[1][0].addr) == 0);
  // An interface no host has: every rank fails saying which and what there is.
  const std::string mark = unique_marker();
  auto r = run_dlaunch(c, "-n 2 --npernode 1 -x DLAUNCH_SOCKET_IFNAME=nosuch9 " + bin("dlcoll-mh-check") + " check " +
                              mark, 60s);
  INFO(r.output);
  CHECK(r.status == 1);
  // The first rank to fail names the variable and lists the interfaces; the
  // other may be stopped by dlaunch's fail-fast before it prints.
  CHECK(std::regex_search(r.output, std::regex("CHECK rank=[01] FAILED: \\$DLAUNCH_SOCKET_IFNAME='nosuch9' "
                                               "matches no interface.*lo \\(127.0.0.1\\), eth0 \\(10\\.")));
  CHECK_FALSE(contains(r.output, " OK checks="));
  CHECK(wait_clean(c, mark) == "");
}

TEST_CASE("dlaunch bench checks every collective on 6 ranks across 3 hosts", "[collectives_mh][cluster][slow]") {
  Cluster c(3);
  for (std::string op : {"all_reduce", "all_gather", "broadcast", "reduce_scatter", "all_to_all", "reduce"}) {
    INFO(op);
    // Odd dtype and op on one of them, a root on another host on another.
    std::string extra = op == "all_reduce" ? " -d bfloat16 -o max" : op == "broadcast" || op == "reduce" ? " -r 3" : "";
    auto r = run_dlaunch(c, "-n 6 " + bin("dlaunch") + " bench --op " + op + extra +
                                " -b 8 -e 2M -f 8 --iters 2 --warmup 1 -c 1", 180s);
    INFO(r.output);
    CHECK(r.status == 0);
    CHECK(contains(r.output, "6 ranks"));
    CHECK(contains(r.output, "Out of bounds values : 0 OK"));
    // Reached the last size (2 MiB, less a remainder for the per-rank ops).
    CHECK(std::regex_search(r.output, std::regex("\\n +20971[0-9][0-9] +[0-9]+ ")));
  }
  CHECK(wait_clean(c, "dlaunch bench") == "");
}

TEST_CASE("a rank SIGKILLed mid-collective on h1: every other rank fails naming it, nothing hangs",
          "[collectives_mh][cluster][slow]") {
  Cluster c(3);
  const std::string mark = unique_marker();
  char tmpl[] = "/tmp/dlcoll-mh-XXXXXX";
  REQUIRE(::mkdtemp(tmpl) != nullptr);
  const std::string dir = tmpl;
  // --kill-grace 20: if the survivors hung, dlaunch would need 20 s to end them.
  auto f = start_dlaunch(c, "-n 6 --kill-grace 20 " + bin("dlcoll-mh-check") + " loop " + mark + " " + dir, 90s);
  // Every rank has finished one all_reduce: all are inside the loop.
  const auto until = std::chrono::steady_clock::now() + 30s;
  auto running = [&] {
    for (int r = 0; r < 6; ++r)
      if (::access((dir + "/running." + std::to_string(r)).c_str(), F_OK) != 0) return false;
    return true;
  };
  while (!running() && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(50ms);
  bool all_running = running();
  int victim = -1;
  for (int pid : pids_matching(c, "h1", mark))
    if (read_environ_var(pid, "RANK") == "3") victim = pid;
  if (!all_running || victim < 0) {
    for (int pid : pids_matching(c, "h1", mark)) ::kill(pid, SIGKILL);
    auto r = f.get();
    std::filesystem::remove_all(dir);
    FAIL("the ranks did not all enter the loop (or rank 3 was not found on h1): " << r.output);
  }
  std::this_thread::sleep_for(200ms);
  const auto t0 = std::chrono::steady_clock::now();
  REQUIRE(::kill(victim, SIGKILL) == 0);
  auto r = f.get();
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::filesystem::remove_all(dir);
  INFO(r.output);
  // dlaunch's verdict is the first failure it hears of: rank 3's SIGKILL, or
  // a survivor's exit code 3 when that reaches the launcher first.
  CHECK((r.status == 128 + SIGKILL || r.status == 3));
  // Either way the verdict names the killed rank: as the first failure, or
  // after a survivor's as a rank that failed by itself before the teardown.
  CHECK(std::regex_search(r.output, std::regex("dlaunch: .*rank 3 on \\S+ \\(pid \\d+\\) was killed by signal 9 \\(Killed\\)")));
  for (int rank : {0, 1, 2, 4, 5}) {
    // The survivor's own collective failed, naming the dead rank (directly,
    // or as the first failure of the communicator).
    std::regex re("LOOP rank=" + std::to_string(rank) + " failed after \\d+ iterations: .*rank 3 on host");
    CHECK(std::regex_search(r.output, re));
  }
  CHECK_FALSE(contains(r.output, "saw no failure"));
  CHECK(took < 10);  // well before the 20 s kill grace: they ended on their own
  CHECK(wait_clean(c, mark) == "");
}
