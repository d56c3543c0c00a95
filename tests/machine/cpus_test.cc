#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "machine/cpus.h"

using namespace dl::machine;
using dl::hostfiles::CpuTopology;
using V = std::vector<int>;

namespace {
// A sysfs tree in a temp dir: cpuN/topology/{core_id,physical_package_id}
// and nodeK/cpulist, as the kernel lays them out.
struct FakeSysfs {
  std::string root;
  FakeSysfs() {
    char tmpl[] = "/tmp/dlaunch-test-sysfs-XXXXXX";
    root = ::mkdtemp(tmpl);
  }
  ~FakeSysfs() { std::filesystem::remove_all(root); }
  void write(const std::string& rel, const std::string& text) {
    const auto p = std::filesystem::path(root) / rel;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p) << text << "\n";
  }
  void cpu(int c, int pkg, int core) {
    write("devices/system/cpu/cpu" + std::to_string(c) + "/topology/physical_package_id", std::to_string(pkg));
    write("devices/system/cpu/cpu" + std::to_string(c) + "/topology/core_id", std::to_string(core));
  }
};
}  // namespace

TEST_CASE("topology: hyperthread siblings form one core, NUMA nodes limited to the allowed CPUs", "[machine]") {
  // 2 packages x 2 cores x 2 threads; siblings numbered n and n+4, as on Intel.
  FakeSysfs fs;
  for (int c = 0; c < 8; ++c) fs.cpu(c, (c % 4) / 2, c % 2);
  fs.write("devices/system/node/node0/cpulist", "0-1,4-5");
  fs.write("devices/system/node/node2/cpulist", "2-3,6-7");  // sparse node numbers
  CpuTopology t = read_cpu_topology({0, 1, 2, 3, 4, 5, 6, 7}, fs.root);
  REQUIRE(t.cores.size() == 4);
  CHECK(t.cores[0] == V{0, 4});
  CHECK(t.cores[1] == V{1, 5});
  CHECK(t.cores[2] == V{2, 6});
  CHECK(t.cores[3] == V{3, 7});
  REQUIRE(t.numa.size() == 2);
  CHECK(t.numa[1] == V{2, 3, 6, 7});
  CHECK(t.numa_ids == V{0, 2});  // the kernel's ids, which GPUs' numa_node name, not positions
  REQUIRE(t.packages.size() == 2);  // sockets, for --bind-to socket and --rankfile's S:CORES
  CHECK(t.packages[0] == V{0, 1, 4, 5});
  CHECK(t.packages[1] == V{2, 3, 6, 7});
  // A taskset/cgroup that leaves only some CPUs: only those count.
  CpuTopology u = read_cpu_topology({2, 3}, fs.root);
  CHECK(u.cores.size() == 2);
  REQUIRE(u.numa.size() == 1);
  CHECK(u.numa[0] == V{2, 3});
  CHECK(u.numa_ids == V{2});  // node0 has no allowed CPU: left out, and node2 keeps its id
  CHECK(u.packages == std::vector<V>{{2, 3}});  // a socket with no allowed CPU is left out
}

TEST_CASE("topology without sysfs information: every CPU a core, one node", "[machine]") {
  FakeSysfs fs;
  CpuTopology t = read_cpu_topology({0, 1, 2}, fs.root);
  CHECK(t.cores.size() == 3);
  REQUIRE(t.numa.size() == 1);
  CHECK(t.numa[0] == V{0, 1, 2});
  CHECK(t.numa_ids == V{-1});  // no node a GPU could name
}

TEST_CASE("this machine's own topology covers exactly the CPUs we may use", "[machine]") {
  const V allowed = own_allowed_cpus();
  REQUIRE(!allowed.empty());
  CpuTopology t = read_cpu_topology(allowed);
  V seen;
  for (const auto& c : t.cores) seen.insert(seen.end(), c.begin(), c.end());
  std::sort(seen.begin(), seen.end());
  CHECK(seen == allowed);
  V in_nodes;
  for (const auto& n : t.numa) in_nodes.insert(in_nodes.end(), n.begin(), n.end());
  std::sort(in_nodes.begin(), in_nodes.end());
  CHECK(in_nodes == allowed);
}
