#include "hostfiles/usable_cpus.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <sstream>

namespace dl::hostfiles {

namespace {

// A positive integer filling `s`, or 0.
long long positive(std::string_view s) {
  long long v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  return ec == std::errc() && end == s.data() + s.size() && v > 0 ? v : 0;
}

std::string read_small_file(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return in ? text.str() : "";
}

// The cgroup v2 path in /proc/self/cgroup's text ("0::/user.slice/x" ->
// "/user.slice/x"), or "" when it names none.
std::string v2_path(std::string_view proc_cgroup) {
  std::istringstream in{std::string(proc_cgroup)};
  for (std::string line; std::getline(in, line);)
    if (line.rfind("0::/", 0) == 0) return line.substr(3);
  return "";
}

int affinity_cpus() {
  cpu_set_t set;
  if (::sched_getaffinity(0, sizeof set, &set) == 0) return CPU_COUNT(&set);
  return static_cast<int>(std::max(1L, ::sysconf(_SC_NPROCESSORS_ONLN)));
}

}  // namespace

int cpus_of_cpu_max(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  const auto space = text.find(' ');
  if (space == std::string_view::npos) return 0;
  const long long quota = positive(text.substr(0, space)), period = positive(text.substr(space + 1));
  if (quota == 0 || period == 0) return 0;
  return static_cast<int>(std::min<long long>((quota + period - 1) / period, 1 << 20));
}

int usable_cpus(int affinity, std::string_view proc_cgroup, const std::string& cgroup_root) {
  int cpus = std::max(1, affinity);
  std::string path = v2_path(proc_cgroup);
  if (path.empty()) return cpus;
  // From the process's own cgroup up to the root (path "/"), each level's quota.
  for (;;) {
    if (path.size() > 1 && path.back() == '/') path.pop_back();
    if (const int q = cpus_of_cpu_max(read_small_file(cgroup_root + path + "/cpu.max")); q > 0) cpus = std::min(cpus, q);
    if (path.size() <= 1) break;
    path.erase(path.rfind('/') + 1);
  }
  return cpus;
}

int usable_cpus() { return usable_cpus(affinity_cpus(), read_small_file("/proc/self/cgroup"), "/sys/fs/cgroup"); }

}  // namespace dl::hostfiles
