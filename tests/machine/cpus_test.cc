#include <catch2/catch.hpp>

#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

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

namespace {
// Spins on the calling thread's CPU clock for `ms`.
void spin_ms(int ms) {
  timespec t0{}, t{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
  do ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  while ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 < ms);
}
}  // namespace

TEST_CASE("ProcFile: a /proc file kept open reads anew each time", "[machine]") {
  SECTION("its thread's time on a CPU grows between two reads of one open schedstat") {
    const ProcFile f("/proc/thread-self/schedstat");
    REQUIRE(f.is_open());
    const SchedTimes before = sched_times(f);
    REQUIRE(before.on_cpu_ns >= 0);
    spin_ms(50);
    const SchedTimes after = sched_times(f);
    CHECK(after.on_cpu_ns - before.on_cpu_ns >= 40'000'000);
    // The same numbers as a fresh open of the file gives.
    CHECK(sched_times("/proc/thread-self/schedstat").on_cpu_ns >= after.on_cpu_ns);
  }
  SECTION("another thread's state, read through a file opened once, follows the thread") {
    std::mutex mu;
    std::condition_variable cv;
    int phase = 0;  // 1: the thread has opened its file; 2: stop spinning; 3: end
    ProcFile stat;
    std::atomic<bool> spinning{false};
    std::thread t([&] {
      {
        std::lock_guard<std::mutex> lock(mu);
        stat = ProcFile("/proc/thread-self/stat");
        phase = 1;
      }
      cv.notify_all();
      spinning = true;
      for (;;) {
        std::lock_guard<std::mutex> lock(mu);
        if (phase >= 2) break;
      }
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return phase == 3; });
    });
    {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return phase >= 1; });
    }
    while (!spinning) std::this_thread::yield();
    REQUIRE(stat.is_open());
    CHECK(task_state(stat) == 'R');  // spinning (running, or runnable on a busy machine)
    {
      std::lock_guard<std::mutex> lock(mu);
      phase = 2;
    }
    char state = 0;
    for (int i = 0; i < 200 && (state = task_state(stat)) != 'S'; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    CHECK(state == 'S');  // asleep in its wait, as the same open file now says
    {
      std::lock_guard<std::mutex> lock(mu);
      phase = 3;
    }
    cv.notify_all();
    t.join();
  }
  SECTION("a file that cannot be opened reads as nothing") {
    const ProcFile f("/proc/self/no-such-file");
    CHECK_FALSE(f.is_open());
    char buf[16];
    CHECK(f.read(buf, sizeof buf).empty());
    CHECK(sched_times(f).on_cpu_ns == -1);
    CHECK(task_state(f) == 0);
  }
}
