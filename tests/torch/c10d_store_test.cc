// torch's c10d store served by dlaunch, with Debian's torch 1.13: rank 0
// hosts no store (and does with --torch-store rank0), the report at
// --timeout names the rank that never arrived, the store outlives rank 0, a
// query the store does not serve ends the job at once.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <regex>

#include "tests/integration/run_command.h"
#include "tests/torch/ddp_result.h"
#include "wire/socket.h"

using namespace dl::it;
using namespace dl::torch_test;

namespace {
std::string probe() { return std::string(DLAUNCH_SOURCE_DIR) + "/tests/torch/c10d_probe.py"; }

RunResult run_probe(std::vector<std::string> flags, const std::string& mode, double timeout_s = 120) {
  const std::string m = new_marker();
  RunSpec s;
  s.argv = {bin("dlaunch")};
  s.argv.insert(s.argv.end(), flags.begin(), flags.end());
  s.argv.insert(s.argv.end(), {kPython, probe(), mode, m});
  Child c = start(s);
  ChildGuard guard{c, m};
  RunResult r = wait(c, timeout_s);
  CHECK_FALSE(r.timed_out);
  CHECK(wait_marked_gone(m, 10).empty());
  return r;
}

// rank -> the ports it listened on, from "c10d listeners-<when> rank=R ports=[...] master_port=P".
struct Listeners {
  std::map<int, std::string> ports;
  std::map<int, std::string> master_port;
};
Listeners listeners(const std::string& out, const std::string& when) {
  static const std::regex re(R"(c10d listeners-(\w+) rank=(\d+) ports=\[([0-9, ]*)\] master_port=(\d+))");
  Listeners l;
  for (std::sregex_iterator it(out.begin(), out.end(), re), end; it != end; ++it)
    if ((*it)[1] == when) l.ports[std::stoi((*it)[2])] = ", " + std::string((*it)[3]) + ",", l.master_port[std::stoi((*it)[2])] = (*it)[4];
  return l;
}
bool listens_on(const Listeners& l, int rank, const std::string& port) {
  return l.ports.at(rank).find(", " + port + ",") != std::string::npos;
}

// A loopback port free a moment ago, for a script that picks its own (a fixed 29500 would collide
// with tests running beside this one).
int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0);
  ::close(fd);
  return ntohs(a.sin_port);
}

// rank -> its "c10d own rank=R sum=S listens=L ... seconds=T" line (tests/torch/c10d_probe.py own).
struct OwnLine {
  int sum = 0;
  bool listens = false;
  double seconds = 0;
};
std::map<int, OwnLine> own_lines(const std::string& out) {
  static const std::regex re(R"(c10d own rank=(\d+) sum=(\d+) listens=(\d) addr=\S+ port=\d+ seconds=([0-9.]+))");
  std::map<int, OwnLine> l;
  for (std::sregex_iterator it(out.begin(), out.end(), re), end; it != end; ++it)
    l[std::stoi((*it)[1])] = {std::stoi((*it)[2]), (*it)[3] == "1", std::stod((*it)[4])};
  return l;
}
}  // namespace

TEST_CASE("torch c10d store: rank 0 hosts no store under dlaunch and does with --torch-store rank0",
          "[torch][slow]") {
  RunResult r = run_probe({"-n", "2"}, "listeners");
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  auto before = listeners(r.out, "before"), after = listeners(r.out, "after");
  REQUIRE(before.ports.size() == 2);
  REQUIRE(after.ports.size() == 2);
  CHECK(r.out.find("sum=2") != std::string::npos);
  CHECK(before.ports[0] == ", ,");  // nothing of rank 0's listens before gloo's
  CHECK_FALSE(listens_on(after, 0, after.master_port[0]));  // gloo's pairs only, never MASTER_PORT
  CHECK_FALSE(listens_on(after, 1, after.master_port[1]));

  RunResult t = run_probe({"-n", "2", "--torch-store", "rank0"}, "listeners");
  INFO(t.out << t.err);
  REQUIRE(t.code == 0);
  auto own = listeners(t.out, "after");
  REQUIRE(own.ports.size() == 2);
  CHECK(listens_on(own, 0, own.master_port[0]));  // torch's own arrangement: the test can tell
}

TEST_CASE("torch c10d store: --timeout names the rank that never reached init_process_group and its host",
          "[torch][slow]") {
  RunResult r = run_probe({"-n", "3", "--timeout", "25", "--stack-timeout", "0"}, "absent");
  INFO(r.out << r.err);
  CHECK(r.code != 0);
  CHECK_THAT(r.err, Catch::Contains("torch's rendezvous did not complete: 2 of 3 ranks' clients connected"));
  CHECK_THAT(r.err, Catch::Contains("never reached the rendezvous (no address published for gloo): rank 2 on localhost"));
  CHECK_THAT(r.err, Catch::Contains(": 2 of its 3 ranks connected"));
}

TEST_CASE("torch c10d store: the store outlives rank 0", "[torch][slow]") {
  RunResult r = run_probe({"-n", "2"}, "survive");
  INFO(r.out << r.err);
  CHECK(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("c10d survive rank=1 value=from rank 0"));
}

TEST_CASE("torch c10d store: a client that is none of the job's ranks is dropped, the job goes on", "[torch]") {
  RunResult r = run_probe({"-n", "1", "-v"}, "stranger", 50);
  INFO(r.out << r.err);
  CHECK(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("c10d stranger rank=0 still running"));
  CHECK_THAT(r.err, Catch::Contains("dropped a client at 127.0.0.1 that is none of the job's ranks") &&
                        Catch::Contains("query type 42"));
}

TEST_CASE("torch c10d store: a query type it does not know ends the job at once naming it", "[torch]") {
  RunResult r = run_probe({"-n", "1"}, "unknown", 50);
  INFO(r.out << r.err);
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("query type 42") && Catch::Contains("torch 2.x, validated") &&
                        Catch::Contains("--torch-store rank0"));
}

// Per-node mode (one dlaunch per node, here two on this machine): node 0's
// dlaunch serves torch's store for both nodes, so no rank listens on
// MASTER_PORT, and the store outlives rank 0 on node 0.
namespace {
std::vector<RunResult> per_node_probe(const std::string& mode, std::vector<std::string> node0_flags = {}) {
  const int port = dl::wire::free_tcp_port(true);
  const std::string m = new_marker();
  std::vector<Child> nodes;
  for (int k = 0; k < 2; ++k) {
    RunSpec s;
    s.argv = {bin("dlaunch"), "--nnodes", "2", "--node-rank", std::to_string(k), "--rdzv",
              "tcp://127.0.0.1:" + std::to_string(port), "--nproc-per-node", "1", "-v"};
    if (k == 0) s.argv.insert(s.argv.end(), node0_flags.begin(), node0_flags.end());
    s.argv.insert(s.argv.end(), {kPython, probe(), mode, m});
    s.set_env["DLAUNCH_TOKEN"] = "torch-per-node-token-0123456789abcdef";
    nodes.push_back(start(s));
  }
  ChildGuard g0{nodes[0], m}, g1{nodes[1], m};
  std::vector<RunResult> out;
  for (auto& c : nodes) out.push_back(wait(c, 120));
  CHECK(wait_marked_gone(m, 10).empty());
  return out;
}
}  // namespace

TEST_CASE("torch c10d store: in per-node mode node 0's dlaunch serves it for every node", "[torch][per-node][slow]") {
  auto r = per_node_probe("listeners");
  INFO(r[0].out << r[0].err << "\n--- node 1\n" << r[1].out << r[1].err);
  REQUIRE(r[0].code == 0);
  REQUIRE(r[1].code == 0);
  const std::string all = r[0].out + r[1].out;
  auto after = listeners(all, "after");
  REQUIRE(after.ports.size() == 2);
  CHECK(all.find("sum=2") != std::string::npos);
  CHECK(after.master_port[0] == after.master_port[1]);
  CHECK_FALSE(listens_on(after, 0, after.master_port[0]));  // rank 0 hosts no store
  CHECK_FALSE(listens_on(after, 1, after.master_port[1]));

  // torch's own arrangement when node 0 asks for it.
  auto t = per_node_probe("listeners", {"--torch-store", "rank0"});
  INFO(t[0].out << t[0].err << "\n--- node 1\n" << t[1].out << t[1].err);
  REQUIRE(t[0].code == 0);
  auto rank0 = listeners(t[0].out + t[1].out, "after");
  REQUIRE(rank0.ports.size() == 2);
  CHECK(listens_on(rank0, 0, rank0.master_port[0]));
}

TEST_CASE("torch c10d store: in per-node mode the store outlives rank 0", "[torch][per-node][slow]") {
  auto r = per_node_probe("survive");
  INFO(r[0].out << r[0].err << "\n--- node 1\n" << r[1].out << r[1].err);
  CHECK(r[0].code == 0);
  CHECK(r[1].code == 0);
  CHECK_THAT(r[1].out, Catch::Contains("c10d survive rank=1 value=from rank 0"));
}

TEST_CASE("torch c10d store: a script that sets its own MASTER_ADDR and MASTER_PORT (oneCCL's) has rank 0 host it there",
          "[torch][slow]") {
  // Intel's oneCCL example sets MASTER_ADDR=127.0.0.1 and MASTER_PORT=29500 itself; that address is
  // not the store dlaunch serves, so torch must not wait there as its client (a silent hang until
  // the script's timeout) but host the store in rank 0, as under mpirun.
  for (const bool own_addr : {true, false}) {  // both, or only MASTER_PORT
    std::vector<std::string> flags = {"-n", "2", "--timeout", "90", "-x", "PROBE_PORT=" + std::to_string(free_port())};
    if (own_addr) flags.insert(flags.end(), {"-x", "PROBE_ADDR=127.0.0.1"});
    INFO("dlaunch " << flags[5] << (own_addr ? " " + flags.back() : ""));
    RunResult r = run_probe(flags, "own");
    INFO(r.out << r.err);
    CHECK(r.code == 0);
    auto l = own_lines(r.out);
    REQUIRE(l.size() == 2);
    CHECK(l[0].sum == 2);
    CHECK(l[1].sum == 2);
    CHECK(l[0].listens);  // rank 0's torch hosts the store on the script's port
    CHECK_FALSE(l[1].listens);
    CHECK(l[0].seconds < 30);  // within seconds, not at the script's 60 s timeout
    CHECK(l[1].seconds < 30);
  }
}

TEST_CASE("torch c10d store: a script that names the served store by another name still uses it", "[torch][slow]") {
  // localhost with dlaunch's MASTER_PORT is the store dlaunch serves on 127.0.0.1: every rank its client.
  RunResult r = run_probe({"-n", "2", "--timeout", "90", "-x", "PROBE_ADDR=localhost"}, "own");
  INFO(r.out << r.err);
  CHECK(r.code == 0);
  auto l = own_lines(r.out);
  REQUIRE(l.size() == 2);
  CHECK(l[0].sum == 2);
  CHECK_FALSE(l[0].listens);
  CHECK_FALSE(l[1].listens);
}
