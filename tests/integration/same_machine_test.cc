// Two names for this machine in one -H list (localhost and its host name,
// its own address, 127.0.0.2): one host whose slots add up, so its ranks
// count LOCAL_RANK 0..3 once, not 0, 1 twice (two ranks on one GPU).
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <unistd.h>

#include <climits>
#include <regex>
#include <set>

#include "tests/integration/run_command.h"

using namespace dl::it;

namespace {
std::string host_name() {
  char name[HOST_NAME_MAX + 1] = {};
  ::gethostname(name, sizeof name - 1);
  return name;
}

// This machine's first IPv4 address outside 127/8, or "".
std::string own_address() {
  ifaddrs* ifs = nullptr;
  if (::getifaddrs(&ifs) != 0) return "";
  std::string out;
  for (ifaddrs* i = ifs; i && out.empty(); i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET) continue;
    const auto* a = reinterpret_cast<const sockaddr_in*>(i->ifa_addr);
    char buf[INET_ADDRSTRLEN];
    if ((ntohl(a->sin_addr.s_addr) >> 24) != 127 && ::inet_ntop(AF_INET, &a->sin_addr, buf, sizeof buf)) out = buf;
  }
  ::freeifaddrs(ifs);
  return out;
}

// Runs 4 ranks on -H localhost:2,<other>:2 and checks they are one host's.
void check_one_host(const std::string& other) {
  RunSpec s;
  s.argv = {bin("dlaunch"), "-v", "-H", "localhost:2," + other + ":2", "-n", "4", "--gpus-per-node", "0",
            "sh", "-c", "echo R=$RANK L=$LOCAL_RANK LW=$LOCAL_WORLD_SIZE N=$NODE_RANK NN=$GROUP_WORLD_SIZE"};
  s.unset_env = {"CUDA_VISIBLE_DEVICES"};
  RunResult r = run(s, 30);
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  CHECK(r.err.find("merged '" + other + "' into 'localhost': this machine") != std::string::npos);
  CHECK(r.err.find("agent on " + other) == std::string::npos);  // one agent: localhost's
  std::regex line(R"(R=(\d) L=(\d) LW=(\d) N=(\d) NN=(\d))");
  std::set<int> ranks, locals;
  for (std::sregex_iterator m(r.out.begin(), r.out.end(), line), end; m != end; ++m) {
    ranks.insert(std::stoi((*m)[1]));
    locals.insert(std::stoi((*m)[2]));
    CHECK((*m)[1] == (*m)[2]);  // one host: LOCAL_RANK is RANK
    CHECK((*m)[3] == "4");
    CHECK((*m)[4] == "0");
    CHECK((*m)[5] == "1");
  }
  CHECK(ranks == std::set<int>{0, 1, 2, 3});
  CHECK(locals == std::set<int>{0, 1, 2, 3});
}
}  // namespace

TEST_CASE("localhost and this machine's host name in one -H list are one host of 4 slots", "[integration][hosts]") {
  check_one_host(host_name());
}

TEST_CASE("localhost and 127.0.0.2 in one -H list are one host of 4 slots", "[integration][hosts]") {
  check_one_host("127.0.0.2");
}

TEST_CASE("localhost and this machine's own address in one -H list are one host of 4 slots", "[integration][hosts]") {
  const std::string addr = own_address();
  if (addr.empty()) {
    WARN("this machine has no IPv4 address outside 127/8");
    return;
  }
  check_one_host(addr);
}

TEST_CASE("a placement refused after this machine's names merged says they merged", "[integration][hosts]") {
  const std::string marker = new_marker();
  RunSpec s;
  s.argv = {bin("dlaunch"), "-H", "localhost:2," + host_name() + ":2", "--npernode", "2", "-n", "4", "sleep", marker};
  RunResult r = run(s, 30);
  INFO(r.err);
  CHECK(r.code == 2);
  CHECK(r.err.find("--npernode 2 on 1 hosts allows at most 2") != std::string::npos);
  CHECK(r.err.find("(hosts: merged '" + host_name() + "' into 'localhost': this machine") != std::string::npos);
  CHECK(wait_marked_gone(marker, 5).empty());
}
