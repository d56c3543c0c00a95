#include "agent/cpu_binding.h"

#include <sched.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <stdexcept>
#include <utility>

namespace dl::agent {
namespace {

std::string read_line(const std::string& path) {
  std::ifstream f(path);
  std::string s;
  std::getline(f, s);
  return s;
}

int read_int(const std::string& path, int fallback) {
  const std::string s = read_line(path);
  try {
    return s.empty() ? fallback : std::stoi(s);
  } catch (const std::exception&) {
    return fallback;
  }
}

}  // namespace

std::vector<int> parse_cpu_list(const std::string& text) {
  std::vector<int> out;
  const size_t first = text.find_first_not_of(" \t\n");
  std::string t = first == std::string::npos ? "" : text.substr(first, text.find_last_not_of(" \t\n") - first + 1);
  size_t pos = 0;
  auto number = [&](size_t& p) {
    size_t end = p;
    while (end < t.size() && t[end] >= '0' && t[end] <= '9') ++end;
    if (end == p || end - p > 6) throw std::invalid_argument("bad CPU list '" + text + "'");
    int v = std::stoi(t.substr(p, end - p));
    p = end;
    return v;
  };
  if (t.empty()) return out;
  while (pos < t.size()) {
    int a = number(pos), b = a;
    if (pos < t.size() && t[pos] == '-') ++pos, b = number(pos);
    if (b < a) throw std::invalid_argument("bad CPU list '" + text + "'");
    for (int c = a; c <= b; ++c) out.push_back(c);
    if (pos < t.size()) {
      if (t[pos] != ',') throw std::invalid_argument("bad CPU list '" + text + "'");
      ++pos;
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::string format_cpu_list(const std::vector<int>& cpus) {
  std::string s;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    s += (s.empty() ? "" : ",") + std::to_string(cpus[i]);
    if (j > i) s += "-" + std::to_string(cpus[j]);
    i = j + 1;
  }
  return s;
}

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
  for (auto& [key, threads] : cores) t.cores.push_back(threads);
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
      cpus = parse_cpu_list(read_line(sysfs_root + "/devices/system/node/node" + std::to_string(node) + "/cpulist"));
    } catch (const std::invalid_argument&) {
      continue;
    }
    std::vector<int> usable;
    std::set_intersection(cpus.begin(), cpus.end(), allowed.begin(), allowed.end(), std::back_inserter(usable));
    if (!usable.empty()) t.numa.push_back(usable);
  }
  if (t.numa.empty() && !allowed.empty()) t.numa.push_back(allowed);  // no NUMA information: one node
  return t;
}

std::vector<std::vector<int>> plan_cpus(const std::string& policy, const CpuTopology& topo, int local_world,
                                        int cpus_per_rank, const std::string& host) {
  std::vector<std::vector<int>> out(static_cast<size_t>(std::max(local_world, 0)));
  if (policy == "none" || local_world <= 0) return out;
  if (policy == "core") {
    const size_t need = static_cast<size_t>(local_world) * static_cast<size_t>(cpus_per_rank);
    if (topo.cores.size() < need)
      throw std::runtime_error(
          "--bind-to core: " + host + " has " + std::to_string(topo.cores.size()) + " usable cores, but " +
          std::to_string(local_world) + " ranks there x " + std::to_string(cpus_per_rank) +
          " --cpus-per-rank need " + std::to_string(need) +
          "; run fewer ranks per host, lower --cpus-per-rank, or use --bind-to numa or none");
    for (int l = 0; l < local_world; ++l) {
      auto& cpus = out[static_cast<size_t>(l)];
      for (int k = 0; k < cpus_per_rank; ++k) {
        const auto& core = topo.cores[static_cast<size_t>(l * cpus_per_rank + k)];
        cpus.insert(cpus.end(), core.begin(), core.end());
      }
      std::sort(cpus.begin(), cpus.end());
    }
    return out;
  }
  if (policy == "numa") {
    if (topo.numa.empty()) throw std::runtime_error("--bind-to numa: " + host + " reported no usable CPUs");
    const size_t nodes = topo.numa.size();
    for (int l = 0; l < local_world; ++l)
      out[static_cast<size_t>(l)] = topo.numa[static_cast<size_t>(l) * nodes / static_cast<size_t>(local_world)];
    return out;
  }
  throw std::runtime_error("--bind-to takes none, core or numa, got '" + policy + "'");
}

}  // namespace dl::agent
