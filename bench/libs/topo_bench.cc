// topo_bench: what reading this host's CPU topology costs, machine/cpus.cc's
// sysfs reads against hwloc's topology load (CPUs only, as hwloc loads by
// default, and with its PCI devices, which GPU and NIC locality needs).
// Prints the first call in this process (what an agent pays: it reads the
// topology once) and the median of later calls, and checks that both see
// the same cores, sockets and NUMA nodes.
//
//   topo_bench [rounds]
#include <hwloc.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#include "machine/cpus.h"

namespace {

using clock_type = std::chrono::steady_clock;

double us_since(clock_type::time_point t0) {
  return std::chrono::duration<double, std::micro>(clock_type::now() - t0).count();
}

// The first call's time and the median of `rounds` more, in microseconds.
std::pair<double, double> first_and_median(const std::function<void()>& f, int rounds) {
  auto t0 = clock_type::now();
  f();
  const double first = us_since(t0);
  std::vector<double> t;
  for (int i = 0; i < rounds; ++i) {
    t0 = clock_type::now();
    f();
    t.push_back(us_since(t0));
  }
  std::sort(t.begin(), t.end());
  return {first, t[t.size() / 2]};
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
  std::printf("%-22s %10s %10s %7s\n", "#reader", "first_us", "median_us", "ratio");
  auto line = [&](const char* what, std::pair<double, double> t) {
    std::printf("%-22s %10.1f %10.1f %7.1f\n", what, t.first, t.second, t.second / sysfs.second);
  };
  line("sysfs (machine/cpus)", sysfs);
  line("hwloc, CPUs", cpu_only);
  line("hwloc, CPUs and PCI", with_io);
  const bool same = static_cast<int>(own.cores.size()) == hw.cores && static_cast<int>(own.packages.size()) == hw.packages &&
                    static_cast<int>(own.numa.size()) == hw.numa;
  if (!same) std::printf("# WRONG: sysfs and hwloc disagree on this host's cores, sockets or NUMA nodes\n");
  return same ? 0 : 1;
}
