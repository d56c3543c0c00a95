#include <catch2/catch.hpp>

#include <map>

#include "errors/error.h"
#include "hostfiles/allocation.h"

using dl::hostfiles::Allocation;
using dl::hostfiles::check_within_allocation;
using dl::hostfiles::detect_allocation;
using dl::hostfiles::expand_slurm_counts;

namespace {
using Vars = std::map<std::string, std::string>;
using Files = std::map<std::string, std::string>;

std::optional<Allocation> detect(const Vars& vars, const Files& files = {}) {
  auto env = [&](const std::string& n) {
    auto it = vars.find(n);
    return it == vars.end() ? std::string() : it->second;
  };
  auto read = [&](const std::string& p) {
    auto it = files.find(p);
    if (it == files.end()) throw dl::IoError("cannot read the scheduler's host file '" + p + "': No such file");
    return it->second;
  };
  return detect_allocation(env, read);
}

// "host:slots host:slots" of an allocation, to compare in one line.
std::string hosts_of(const Allocation& a) {
  std::string s;
  for (const auto& h : a.hosts) s += (s.empty() ? "" : " ") + h.host + ":" + std::to_string(h.slots);
  return s;
}

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const dl::Error& e) {
    return e.what();
  }
  return "(no error)";
}
}  // namespace

TEST_CASE("allocation: none outside a scheduler", "[hostfiles][allocation]") {
  CHECK_FALSE(detect({{"HOME", "/root"}, {"SLURM_JOB_ID", "12"}}).has_value());
}

TEST_CASE("allocation: Slurm counts notation expands", "[hostfiles][allocation]") {
  CHECK(expand_slurm_counts("2(x3),1", "V") == std::vector<int>{2, 2, 2, 1});
  CHECK(expand_slurm_counts("4", "V") == std::vector<int>{4});
  CHECK(expand_slurm_counts("1,16(x2)", "V") == std::vector<int>{1, 16, 16});
  for (const char* bad : {"", "2(x)", "2(3)", "x", "2,,1", "0", "2(x0)", "2(x3", "-1", "2(x3)x"}) {
    INFO(bad);
    CHECK(error_of([&] { expand_slurm_counts(bad, "SLURM_TASKS_PER_NODE"); }).find("SLURM_TASKS_PER_NODE") == 0);
  }
}

TEST_CASE("allocation: Slurm nodes only: slots are each node's CPUs", "[hostfiles][allocation]") {
  auto a = detect({{"SLURM_JOB_ID", "77"}, {"SLURM_JOB_NODELIST", "n[1-3,5],m7"},
                   {"SLURM_JOB_CPUS_PER_NODE", "2(x3),4,1"}, {"SLURM_TASKS_PER_NODE", "1(x5)"}});
  REQUIRE(a);
  CHECK(a->scheduler == "Slurm");
  CHECK(a->job_id == "77");
  CHECK(hosts_of(*a) == "n1:2 n2:2 n3:2 n5:4 m7:1");
  CHECK(a->source == "SLURM_JOB_NODELIST=n[1-3,5],m7, SLURM_JOB_CPUS_PER_NODE=2(x3),4,1");
  CHECK(a->hosts[0].slots_given);
}

TEST_CASE("allocation: Slurm with tasks asked for (-n): slots are the tasks per node", "[hostfiles][allocation]") {
  auto a = detect({{"SLURM_JOB_ID", "78"}, {"SLURM_JOB_NODELIST", "gpu[01-02]"}, {"SLURM_NTASKS", "3"},
                   {"SLURM_JOB_CPUS_PER_NODE", "8(x2)"}, {"SLURM_TASKS_PER_NODE", "2,1"}});
  REQUIRE(a);
  CHECK(hosts_of(*a) == "gpu01:2 gpu02:1");
  CHECK(a->source.find("SLURM_TASKS_PER_NODE=2,1") != std::string::npos);
}

TEST_CASE("allocation: Slurm's older SLURM_NODELIST and no counts: one slot per node", "[hostfiles][allocation]") {
  auto a = detect({{"SLURM_NODELIST", "a,b"}});
  REQUIRE(a);
  CHECK(hosts_of(*a) == "a:1 b:1");
}

TEST_CASE("allocation: bad Slurm variables name themselves", "[hostfiles][allocation]") {
  CHECK(error_of([] { detect({{"SLURM_JOB_NODELIST", "n[3-1]"}}); }).find("SLURM_JOB_NODELIST") != std::string::npos);
  const auto e = error_of([] { detect({{"SLURM_JOB_NODELIST", "n[1-3]"}, {"SLURM_JOB_CPUS_PER_NODE", "2(x2)"}}); });
  CHECK(e.find("SLURM_JOB_CPUS_PER_NODE=2(x2) gives counts for 2 nodes") == 0);
  CHECK(e.find("names 3") != std::string::npos);
  CHECK(error_of([] { detect({{"SLURM_JOB_NODELIST", "n1"}, {"SLURM_JOB_CPUS_PER_NODE", "two"}}); })
            .find("expected a count") != std::string::npos);
}

TEST_CASE("allocation: PBS node file, a host once per slot", "[hostfiles][allocation]") {
  auto a = detect({{"PBS_NODEFILE", "/var/pbs/aux/9.srv"}, {"PBS_JOBID", "9.srv"}},
                  {{"/var/pbs/aux/9.srv", "c1\nc1\nc2\n\nc1\nc3.cluster  \n"}});
  REQUIRE(a);
  CHECK(a->scheduler == "PBS");
  CHECK(a->job_id == "9.srv");
  CHECK(hosts_of(*a) == "c1:3 c2:1 c3.cluster:1");
  CHECK(a->source == "PBS_NODEFILE=/var/pbs/aux/9.srv");
  CHECK(a->hosts[1].origin == "/var/pbs/aux/9.srv:3");
}

TEST_CASE("allocation: bad PBS node files say file:line", "[hostfiles][allocation]") {
  CHECK(error_of([] { detect({{"PBS_NODEFILE", "/nf"}}, {{"/nf", "c1\nc2 c3\n"}}); }).find("/nf:2: expected one host") == 0);
  CHECK(error_of([] { detect({{"PBS_NODEFILE", "/nf"}}, {{"/nf", "c1\nc$2\n"}}); }).find("/nf:2: ") == 0);
  CHECK(error_of([] { detect({{"PBS_NODEFILE", "/nf"}}, {{"/nf", "\n\n"}}); }) == "/nf: no hosts in the file that PBS_NODEFILE names");
  CHECK(error_of([] { detect({{"PBS_NODEFILE", "/gone"}}); }).find("'/gone'") != std::string::npos);
}

TEST_CASE("allocation: LSF host file, else LSB_MCPU_HOSTS", "[hostfiles][allocation]") {
  auto a = detect({{"LSB_DJOB_HOSTFILE", "/lsf/h"}, {"LSB_MCPU_HOSTS", "x 1"}, {"LSB_JOBID", "5"}},
                  {{"/lsf/h", "l1\nl2\nl2\n"}});
  REQUIRE(a);
  CHECK(a->scheduler == "LSF");
  CHECK(hosts_of(*a) == "l1:1 l2:2");
  auto b = detect({{"LSB_MCPU_HOSTS", "hostA 2 hostB 4 hostA 1"}});
  REQUIRE(b);
  CHECK(hosts_of(*b) == "hostA:3 hostB:4");
  CHECK(b->source == "LSB_MCPU_HOSTS=hostA 2 hostB 4 hostA 1");
  CHECK(error_of([] { detect({{"LSB_MCPU_HOSTS", "hostA 2 hostB"}}); }).find("expected pairs") != std::string::npos);
  CHECK(error_of([] { detect({{"LSB_MCPU_HOSTS", "hostA two"}}); }).find("got 'two'") != std::string::npos);
}

TEST_CASE("allocation: Slurm wins over PBS and LSF", "[hostfiles][allocation]") {
  auto a = detect({{"SLURM_JOB_NODELIST", "s1"}, {"PBS_NODEFILE", "/nf"}, {"LSB_MCPU_HOSTS", "l 1"}}, {{"/nf", "p\n"}});
  REQUIRE(a);
  CHECK(a->scheduler == "Slurm");
}

TEST_CASE("allocation: a hostfile inside it may name only its hosts", "[hostfiles][allocation]") {
  auto a = detect({{"SLURM_JOB_ID", "3"}, {"SLURM_JOB_NODELIST", "n[1-2],x.site"}});
  REQUIRE(a);
  auto host = [](std::string h) {
    dl::hostfiles::HostEntry e;
    e.host = std::move(h);
    return e;
  };
  check_within_allocation({host("n2"), host("n1.cluster"), host("x")}, "-H", *a);  // short names match qualified ones
  const auto e = error_of([&] { check_within_allocation({host("n1"), host("n9")}, "hostfile 'hosts'", *a); });
  CHECK(e == "hostfile 'hosts' names 'n9', which is not a host of Slurm job 3 (its hosts: n1, n2, x.site); "
             "name only those hosts, or drop --hostfile/-H to use them all");
  // Addresses match only exactly: 10.0.0.1 is not "10".
  auto b = detect({{"SLURM_JOB_NODELIST", "10"}});
  CHECK(error_of([&] { check_within_allocation({host("10.0.0.1")}, "-H", *b); }).find("'10.0.0.1'") != std::string::npos);
}
