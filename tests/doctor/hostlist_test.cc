// Host lists as Slurm writes them (doctor/hostlist.h).
#include <catch2/catch.hpp>

#include "doctor/hostlist.h"
#include "hostfiles/hostfile.h"

using namespace dl::doctor;

TEST_CASE("hostlist: ranges of one prefix and width, in the order of first appearance", "[doctor]") {
  CHECK(compress_hosts({}) == "");
  CHECK(compress_hosts({"login"}) == "login");
  CHECK(compress_hosts({"node07"}) == "node07");
  CHECK(compress_hosts({"n03", "n01", "n02", "n10", "x"}) == "n[01-03,10],x");
  std::vector<std::string> many;
  for (int i = 101; i <= 137; ++i) many.push_back("node0" + std::to_string(i));
  CHECK(compress_hosts(many) == "node[0101-0137]");
  many.push_back("node0140");
  many.push_back("gpu1");
  many.push_back("gpu2");
  CHECK(compress_hosts(many) == "node[0101-0137,0140],gpu[1-2]");
  // Unpadded numbers of any width share a bracket; a padded one as wide joins it.
  CHECK(compress_hosts({"h9", "h10", "h11"}) == "h[9-11]");
  CHECK(compress_hosts({"node0999", "node1000"}) == "node[0999-1000]");
  // Different widths of padding are different hosts: n1 is not n01.
  CHECK(compress_hosts({"n01", "n1"}) == "n01,n1");
  // Text after the number, addresses, and a name listed twice.
  CHECK(compress_hosts({"r1n1.cluster", "r1n2.cluster", "r1n2.cluster"}) == "r1n[1-2].cluster");
  CHECK(compress_hosts({"10.0.0.1", "10.0.0.2", "10.0.0.4"}) == "10.0.0.[1-2,4]");
}

TEST_CASE("hostlist: what is compressed expands back to the same hosts (-H takes it)", "[doctor]") {
  std::vector<std::string> hosts;
  for (int i = 1; i <= 1024; ++i)
    if (i % 97 != 0) hosts.push_back("node" + std::string(i < 10 ? "000" : i < 100 ? "00" : i < 1000 ? "0" : "") + std::to_string(i));
  const std::string list = compress_hosts(hosts);
  INFO(list);
  CHECK(list.size() < 120);
  std::vector<std::string> back;
  for (const auto& e : dl::hostfiles::parse_host_list(list)) back.push_back(e.host);
  CHECK(back == hosts);
}

TEST_CASE("hostlist: a problem names one host as itself, several as a count and a list", "[doctor]") {
  CHECK(name_hosts({}) == "");
  CHECK(name_hosts({"h1"}) == "h1");
  CHECK(name_hosts({"h1", "h1"}) == "h1");
  CHECK(name_hosts({"node0102", "node0101"}) == "2 hosts (node[0101-0102])");
}
