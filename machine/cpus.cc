#include "machine/cpus.h"

#include <charconv>
#include <string_view>

#include <sched.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <stdexcept>
#include <utility>

#include "machine/files.h"

namespace dl::machine {

using hostfiles::parse_cpu_list;

namespace {

int read_int(const std::string& path, int fallback) {
  const std::string s = first_line(path);
  try {
    return s.empty() ? fallback : std::stoi(s);
  } catch (const std::exception&) {
    return fallback;
  }
}

}  // namespace

std::vector<int> own_allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> out;
  if (::sched_getaffinity(0, sizeof set, &set) != 0) return out;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) out.push_back(c);
  return out;
}

CpuTopology read_cpu_topology(const std::vector<int>& allowed, const std::string& sysfs_root) {
  CpuTopology t;
  std::map<std::pair<int, int>, std::vector<int>> cores;  // (package, core id) -> threads
  for (int c : allowed) {
    const std::string dir = sysfs_root + "/devices/system/cpu/cpu" + std::to_string(c) + "/topology/";
    // Without topology files every CPU counts as a core of its own.
    const int pkg = read_int(dir + "physical_package_id", 0);
    const int core = read_int(dir + "core_id", 100000 + c);
    cores[{pkg, core}].push_back(c);
  }
  std::map<int, std::vector<int>> packages;
  for (auto& [key, threads] : cores) {
    t.cores.push_back(threads);
    auto& pkg = packages[key.first];
    pkg.insert(pkg.end(), threads.begin(), threads.end());
  }
  for (auto& [id, cpus] : packages) {
    std::sort(cpus.begin(), cpus.end());
    t.packages.push_back(cpus);
  }
  std::vector<int> node_ids;  // node directories may be sparse (node0, node2)
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(sysfs_root + "/devices/system/node", ec)) {
    const std::string name = e.path().filename().string();
    if (name.size() > 4 && name.rfind("node", 0) == 0 &&
        name.find_first_not_of("0123456789", 4) == std::string::npos)
      node_ids.push_back(std::stoi(name.substr(4)));
  }
  std::sort(node_ids.begin(), node_ids.end());
  for (int node : node_ids) {
    std::vector<int> cpus;
    try {
      cpus = parse_cpu_list(first_line(sysfs_root + "/devices/system/node/node" + std::to_string(node) + "/cpulist"));
    } catch (const std::invalid_argument&) {
      continue;
    }
    std::vector<int> usable;
    std::set_intersection(cpus.begin(), cpus.end(), allowed.begin(), allowed.end(), std::back_inserter(usable));
    if (!usable.empty()) t.numa.push_back(usable), t.numa_ids.push_back(node);
  }
  // No NUMA information: one node, of no id a GPU could name.
  if (t.numa.empty() && !allowed.empty()) t.numa.push_back(allowed), t.numa_ids.push_back(-1);
  return t;
}

namespace {
// "RUN WAIT SLICES": on a CPU; runnable, waiting for one (ns).
SchedTimes parse_sched_times(std::string_view text) {
  int64_t run = 0, wait = 0;
  const char* p = text.data();
  const char* end = p + text.size();
  auto r = std::from_chars(p, end, run);
  if (r.ec != std::errc() || r.ptr == end || *r.ptr != ' ') return {};
  auto w = std::from_chars(r.ptr + 1, end, wait);
  if (w.ec != std::errc()) return {};
  return {run, wait};
}

// "TID (COMM) S ...": COMM may hold spaces and parentheses; the state
// follows the last ')'.
char parse_task_state(std::string_view text) {
  const size_t close = text.rfind(')');
  return close != std::string_view::npos && close + 2 < text.size() && text[close + 1] == ' ' ? text[close + 2] : 0;
}
}  // namespace

SchedTimes sched_times(const std::string& schedstat) { return parse_sched_times(read_text(schedstat)); }

SchedTimes sched_times(const ProcFile& schedstat) {
  char buf[256];
  return parse_sched_times(schedstat.read(buf, sizeof buf));
}

int64_t runnable_wait_ns(const std::string& schedstat) { return sched_times(schedstat).waiting_ns; }

char task_state(const std::string& stat) { return parse_task_state(read_text(stat)); }

char task_state(const ProcFile& stat) {
  char buf[1024];  // the state is near the start; a line longer than this is cut, the state kept
  return parse_task_state(stat.read(buf, sizeof buf));
}

}  // namespace dl::machine
