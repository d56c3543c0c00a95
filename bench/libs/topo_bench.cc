// topo_bench: what reading this host's CPU topology costs, machine/cpus.cc's
// sysfs reads against hwloc's topology load (CPUs only, as hwloc loads by
// default, and with its PCI devices, which GPU and NIC locality needs).
// Prints, in microseconds of wall and CPU time, the first call in this
// process (what an agent pays: it reads the topology once) and the median
// of later calls, and checks that both see the same cores, sockets and NUMA
// nodes. The ratio is of the median CPU times.
//
//   topo_bench [rounds]
#include <hwloc.h>
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#include "machine/cpus.h"

namespace {

double now_us(clockid_t clock) {
  timespec t;
  clock_gettime(clock, &t);
  return static_cast<double>(t.tv_sec) * 1e6 + static_cast<double>(t.tv_nsec) / 1e3;
}

// Wall and CPU microseconds of the first call of `f`, and the medians of
// `rounds` more (CPU: the process's, so that on a shared machine the other
// processes' turns are left out).
struct Times {
  double first_wall, first_cpu, wall, cpu;
};

Times first_and_median(const std::function<void()>& f, int rounds) {
  double w0 = now_us(CLOCK_MONOTONIC), c0 = now_us(CLOCK_PROCESS_CPUTIME_ID);
  f();
  Times t{now_us(CLOCK_MONOTONIC) - w0, now_us(CLOCK_PROCESS_CPUTIME_ID) - c0, 0, 0};
  std::vector<double> wall, cpu;
  for (int i = 0; i < rounds; ++i) {
    w0 = now_us(CLOCK_MONOTONIC), c0 = now_us(CLOCK_PROCESS_CPUTIME_ID);
    f();
    wall.push_back(now_us(CLOCK_MONOTONIC) - w0), cpu.push_back(now_us(CLOCK_PROCESS_CPUTIME_ID) - c0);
  }
  std::sort(wall.begin(), wall.end()), std::sort(cpu.begin(), cpu.end());
  t.wall = wall[wall.size() / 2], t.cpu = cpu[cpu.size() / 2];
  return t;
}

struct Counts {
  int cores = 0, packages = 0, numa = 0, pci = 0;
};

Counts hwloc_counts(bool io) {
  hwloc_topology_t topo;
  hwloc_topology_init(&topo);
  if (io) hwloc_topology_set_io_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
  hwloc_topology_load(topo);
  Counts c{hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE), hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PACKAGE),
           hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE), hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PCI_DEVICE)};
  hwloc_topology_destroy(topo);
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::max(1, std::atoi(argv[1])) : 50;
  const std::vector<int> allowed = dl::machine::own_allowed_cpus();
  dl::machine::CpuTopology own;
  Counts hw, hw_io;
  const auto sysfs = first_and_median([&] { own = dl::machine::read_cpu_topology(allowed); }, rounds);
  const auto cpu_only = first_and_median([&] { hw = hwloc_counts(false); }, rounds);
  const auto with_io = first_and_median([&] { hw_io = hwloc_counts(true); }, rounds);
  std::printf("# %zu CPUs usable; sysfs: %zu cores %zu sockets %zu NUMA; hwloc: %d cores %d sockets %d NUMA, %d PCI "
              "devices with I/O\n",
              allowed.size(), own.cores.size(), own.packages.size(), own.numa.size(), hw.cores, hw.packages, hw.numa,
              hw_io.pci);
  std::printf("%-22s %11s %10s %11s %10s %7s\n", "#reader", "first_wall", "first_cpu", "median_wall", "median_cpu",
              "ratio");
  auto line = [&](const char* what, const Times& t) {
    std::printf("%-22s %11.1f %10.1f %11.1f %10.1f %7.1f\n", what, t.first_wall, t.first_cpu, t.wall, t.cpu,
                t.cpu / sysfs.cpu);
  };
  line("sysfs (machine/cpus)", sysfs);
  line("hwloc, CPUs", cpu_only);
  line("hwloc, CPUs and PCI", with_io);
  const bool same = static_cast<int>(own.cores.size()) == hw.cores && static_cast<int>(own.packages.size()) == hw.packages &&
                    static_cast<int>(own.numa.size()) == hw.numa;
  if (!same) std::printf("# WRONG: sysfs and hwloc disagree on this host's cores, sockets or NUMA nodes\n");
  return same ? 0 : 1;
}
