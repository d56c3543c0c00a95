#include <catch2/catch.hpp>

#include <fstream>
#include <stdlib.h>
#include <unistd.h>

#include "errors/error.h"
#include "hostfiles/hostfile.h"

using namespace dl::hostfiles;

namespace {
std::string hosts_of(const std::vector<HostEntry>& v) {
  std::string s;
  for (const auto& e : v) s += (s.empty() ? "" : " ") + describe(e) + "=" + std::to_string(e.slots);
  return s;
}
}  // namespace

TEST_CASE("OpenMPI hostfile: slots, max_slots, comments, blanks, duplicates add up", "[hostfiles]") {
  auto h = parse_hostfile_text(
      "# the cluster\n"
      "node1 slots=2 max_slots=4   # first line\n"
      "\tnode2   slots=4\n"
      "\n"
      "   \n"
      "node1 slots=1 max-slots=2\n"
      "node3\n",
      "hosts");
  REQUIRE(h.size() == 3);
  CHECK(h[0].host == "node1");
  CHECK(h[0].slots == 3);
  CHECK(h[0].max_slots == 6);
  CHECK(h[0].slots_given);
  CHECK(h[0].origin == "hosts:2");
  CHECK(h[1].host == "node2");
  CHECK(h[1].slots == 4);
  CHECK(h[1].max_slots == 0);
  CHECK(h[1].origin == "hosts:3");
  CHECK(h[2].host == "node3");
  CHECK(h[2].slots == 1);
  CHECK_FALSE(h[2].slots_given);
  CHECK(h[2].origin == "hosts:7");
}

TEST_CASE("a duplicate without max_slots lifts the merged max", "[hostfiles]") {
  auto h = parse_hostfile_text("a slots=1 max_slots=2\na slots=2\n", "f");
  REQUIRE(h.size() == 1);
  CHECK(h[0].slots == 3);
  CHECK(h[0].max_slots == 0);
  auto bare = parse_hostfile_text("b\nb\nb\n", "f");
  REQUIRE(bare.size() == 1);
  CHECK(bare[0].slots == 3);
  CHECK_FALSE(bare[0].slots_given);
}

TEST_CASE("MPICH host:N and DeepSpeed host slots=N", "[hostfiles]") {
  CHECK(hosts_of(parse_hostfile_text("n1:4\nn2:1\nn1:2\n", "f")) == "n1=6 n2=1");
  CHECK(hosts_of(parse_hostfile_text("worker-1 slots=8\nworker-2 slots=8\n", "f")) == "worker-1=8 worker-2=8");
  CHECK(parse_hostfile_text("n1:4", "f")[0].slots_given);
}

TEST_CASE("users, ports and IPv6 addresses", "[hostfiles]") {
  auto h = parse_hostfile_text(
      "alice@node1 slots=2\n"
      "[node2]:2222 slots=3\n"
      "node3 port=2200\n"
      "bob@[fe80::1%eth0]:22:4\n"
      "alice@node1\n"
      "node1\n"
      "[node2]:2223\n"
      "carol@[node4]:2022 slots=2 max_slots=3\n",
      "hosts");
  REQUIRE(h.size() == 7);
  CHECK((h[0].user == "alice" && h[0].host == "node1" && h[0].port == 0 && h[0].slots == 3));
  CHECK((h[1].user.empty() && h[1].host == "node2" && h[1].port == 2222 && h[1].slots == 3));
  CHECK((h[2].host == "node3" && h[2].port == 2200 && h[2].slots == 1));
  CHECK((h[3].user == "bob" && h[3].host == "fe80::1%eth0" && h[3].port == 22 && h[3].slots == 4));
  CHECK(h[3].slots_given);
  CHECK((h[4].user.empty() && h[4].host == "node1" && h[4].origin == "hosts:6"));
  CHECK((h[5].host == "node2" && h[5].port == 2223));
  CHECK((h[6].user == "carol" && h[6].port == 2022 && h[6].slots == 2 && h[6].max_slots == 3));
  CHECK(describe(h[0]) == "alice@node1");
  CHECK(describe(h[1]) == "[node2]:2222");
  CHECK(describe(h[3]) == "bob@[fe80::1%eth0]:22");
  CHECK(describe(parse_host_list("[::1]")[0]) == "[::1]");
}

TEST_CASE("ranges in hostfiles expand with the line's fields", "[hostfiles]") {
  auto h = parse_hostfile_text("gpu[01-02] slots=8\nrack[1-2]-n[1-2]:2\n[node[1-2]]:2222\nu@c[9-10]\n", "hosts");
  CHECK(hosts_of(h) == "gpu01=8 gpu02=8 rack1-n1=2 rack1-n2=2 rack2-n1=2 rack2-n2=2 [node1]:2222=1 "
                       "[node2]:2222=1 u@c9=1 u@c10=1");
  CHECK(h[1].origin == "hosts:1");
  CHECK(h[5].origin == "hosts:2");
  CHECK(hosts_of(parse_hostfile_text("n[1,1,2]\n", "f")) == "n1=2 n2=1");
}

TEST_CASE("CRLF line endings and a missing final newline are fine", "[hostfiles]") {
  CHECK(hosts_of(parse_hostfile_text("a slots=2\r\nb:3\r\nc", "f")) == "a=2 b=3 c=1");
}

TEST_CASE("host lists for -H: host, host:N, users, ports, ranges, duplicates", "[hostfiles]") {
  auto h = parse_host_list("n[1-2]:2,n3,bob@gpu[01-02],[::1]:22:4,n1:3,[n3]:2200");
  CHECK(hosts_of(h) == "n1=5 n2=2 n3=1 bob@gpu01=1 bob@gpu02=1 [::1]:22=4 [n3]:2200=1");
  for (const auto& e : h) CHECK(e.origin == "-H");
  CHECK_FALSE(h[2].slots_given);
  CHECK(h[0].slots_given);
}

TEST_CASE("parse_hostfile reads a file and names it when it cannot", "[hostfiles]") {
  char dir[] = "/tmp/dl_hostfiles_XXXXXX";
  REQUIRE(mkdtemp(dir) != nullptr);
  std::string path = std::string(dir) + "/hosts";
  {
    std::ofstream(path) << "node1 slots=2\nnode2 slots=x\n";
  }
  CHECK_THROWS_WITH(parse_hostfile(path), path + ":2:13: 'slots=' needs a positive number, got 'x'");
  {
    std::ofstream(path) << "node1 slots=2\n";
  }
  auto h = parse_hostfile(path);
  REQUIRE(h.size() == 1);
  CHECK(h[0].origin == path + ":1");
  std::string missing = std::string(dir) + "/missing";
  CHECK_THROWS_AS(parse_hostfile(missing), dl::UsageError);
  CHECK_THROWS_WITH(parse_hostfile(missing), "hostfile " + missing + ": cannot read it (No such file or directory); "
                                             "give a file of host lines ('node1 slots=4')");
  CHECK_THROWS_WITH(parse_hostfile("/dev/zero"), "hostfile /dev/zero: is a character device, not a regular file; "
                                                 "give a file of host lines ('node1 slots=4')");
  unlink(path.c_str());
  rmdir(dir);
}

TEST_CASE("entries that name this machine merge into the first of them with the slots added", "[hostfiles]") {
  auto local = [](const std::string& h) { return h == "localhost" || h == "myhost" || h == "127.0.0.2"; };
  std::vector<std::string> merged;
  auto v = merge_local(parse_host_list("node1:1,localhost:2,node2:1,myhost:2,127.0.0.2:1"), local, &merged);
  CHECK(hosts_of(v) == "node1=1 localhost=5 node2=1");
  CHECK(merged == std::vector<std::string>{"'myhost' into 'localhost'", "'127.0.0.2' into 'localhost'"});

  SECTION("max_slots add up too, and none on any entry lifts it") {
    const char* both_max = "localhost slots=1 max_slots=2\nmyhost slots=1 max_slots=3\n";
    auto w = merge_local(parse_hostfile_text(both_max, "h"), local);
    REQUIRE(w.size() == 1);
    CHECK(w[0].max_slots == 5);
    w = merge_local(parse_hostfile_text("localhost slots=1 max_slots=2\nmyhost slots=1\n", "h"), local);
    CHECK(w[0].max_slots == 0);
  }
  SECTION("other hosts stay as they are") {
    merged.clear();
    CHECK(hosts_of(merge_local(parse_host_list("node1:2,node2:2"), local, &merged)) == "node1=2 node2=2");
    CHECK(merged.empty());
  }
}
