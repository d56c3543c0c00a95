#include "hostfiles/usable_cpus.h"

#include <sched.h>
#include <stdlib.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

using dl::hostfiles::cpus_of_cpu_max;
using dl::hostfiles::usable_cpus;

namespace {
// A fake cgroup v2 tree in a fresh directory, removed afterwards.
struct FakeCgroups {
  std::string root;
  FakeCgroups() {
    char dir[] = "/tmp/dl-cgroup-XXXXXX";
    REQUIRE(mkdtemp(dir) != nullptr);
    root = dir;
  }
  ~FakeCgroups() { std::filesystem::remove_all(root); }
  // Writes `cpu_max` as the cpu.max of cgroup `path` ("/" or "/a/b").
  void set(const std::string& path, const std::string& cpu_max) {
    std::filesystem::create_directories(root + path);
    std::ofstream(root + path + "/cpu.max") << cpu_max;
  }
};
}  // namespace

TEST_CASE("cpu.max: a quota is CPUs rounded up, 'max' is none", "[hostfiles]") {
  CHECK(cpus_of_cpu_max("200000 100000\n") == 2);
  CHECK(cpus_of_cpu_max("150000 100000\n") == 2);  // 1.5 CPUs: a second process gets half of one
  CHECK(cpus_of_cpu_max("50000 100000") == 1);
  CHECK(cpus_of_cpu_max("1 100000") == 1);
  CHECK(cpus_of_cpu_max("max 100000\n") == 0);
  for (const char* bad : {"", "\n", "200000", "x 100000", "200000 0", "-5 100000", "200000 100000 7", "2e5 1e5"}) {
    INFO(bad);
    CHECK(cpus_of_cpu_max(bad) == 0);
  }
}

TEST_CASE("usable CPUs: the affinity lowered by the smallest quota of the cgroup and those above it", "[hostfiles]") {
  FakeCgroups cg;
  const std::string self = "0::/job.slice/step\n";
  // No cpu.max anywhere (cgroup v1, no cpu controller): the affinity.
  CHECK(usable_cpus(8, self, cg.root) == 8);
  CHECK(usable_cpus(8, "4:cpu:/x\n", cg.root) == 8);  // v1 only: no "0::" line
  cg.set("/job.slice/step", "max 100000\n");
  CHECK(usable_cpus(8, self, cg.root) == 8);
  cg.set("/job.slice", "250000 100000\n");  // a parent's limit counts (a container's often sits there)
  CHECK(usable_cpus(8, self, cg.root) == 3);
  CHECK(usable_cpus(2, self, cg.root) == 2);  // never more than the affinity mask
  cg.set("/job.slice/step", "100000 100000\n");
  CHECK(usable_cpus(8, self, cg.root) == 1);
  // A process in the root of its namespace (a container): that root's own file.
  cg.set("/", "400000 100000\n");
  CHECK(usable_cpus(8, "0::/\n", cg.root) == 4);
  // At least 1, whatever the mask said.
  CHECK(usable_cpus(0, "", cg.root) == 1);
}

TEST_CASE("usable CPUs of this process: at least 1, at most its affinity mask", "[hostfiles]") {
  const int n = usable_cpus();
  CHECK(n >= 1);
  cpu_set_t set;
  REQUIRE(sched_getaffinity(0, sizeof set, &set) == 0);
  CHECK(n <= CPU_COUNT(&set));
}
