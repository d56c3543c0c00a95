#include "hostfiles/binding.h"

#include <algorithm>
#include <stdexcept>

namespace dl::hostfiles {

const std::vector<std::pair<std::string, CpuBind>>& cpu_bind_words() {
  static const std::vector<std::pair<std::string, CpuBind>> words = {{"none", CpuBind::kNone},
                                                                     {"core", CpuBind::kCore},
                                                                     {"hwthread", CpuBind::kHwthread},
                                                                     {"socket", CpuBind::kSocket},
                                                                     {"numa", CpuBind::kNuma}};
  return words;
}

const std::vector<std::pair<std::string, GpuBind>>& gpu_bind_words() {
  static const std::vector<std::pair<std::string, GpuBind>> words = {
      {"visible", GpuBind::kVisible}, {"isolate", GpuBind::kIsolate}, {"none", GpuBind::kNone}};
  return words;
}

namespace {
template <class E>
const char* word_of(const std::vector<std::pair<std::string, E>>& words, E value) {
  for (const auto& [word, v] : words)
    if (v == value) return word.c_str();
  return "?";
}
}  // namespace

const char* to_string(CpuBind policy) { return word_of(cpu_bind_words(), policy); }
const char* to_string(GpuBind mode) { return word_of(gpu_bind_words(), mode); }

std::vector<std::string> split_id_list(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find(',', start);
    if (end == std::string::npos) end = s.size();
    if (end > start) out.push_back(s.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

std::string join_id_list(const std::vector<std::string>& ids) {
  std::string out;
  for (const auto& s : ids) out += (out.empty() ? "" : ",") + s;
  return out;
}

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

std::vector<std::vector<int>> plan_cpus(CpuBind policy, const CpuTopology& topo, int local_world,
                                        int cpus_per_rank, const std::string& host, const std::vector<int>& gpu_numa) {
  std::vector<std::vector<int>> out(static_cast<size_t>(std::max(local_world, 0)));
  if (policy == CpuBind::kNone || local_world <= 0) return out;
  if (policy == CpuBind::kCore) {
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
  if (policy == CpuBind::kHwthread) {
    std::vector<int> threads;  // core by core
    for (const auto& core : topo.cores) threads.insert(threads.end(), core.begin(), core.end());
    const size_t need = static_cast<size_t>(local_world) * static_cast<size_t>(cpus_per_rank);
    if (threads.size() < need)
      throw std::runtime_error("--bind-to hwthread: " + host + " has " + std::to_string(threads.size()) +
                               " usable hardware threads, but " + std::to_string(local_world) + " ranks there x " +
                               std::to_string(cpus_per_rank) + " --cpus-per-rank need " + std::to_string(need) +
                               "; run fewer ranks per host, lower --cpus-per-rank, or use --bind-to numa or none");
    for (size_t l = 0; l < out.size(); ++l) {
      const auto first = threads.begin() + static_cast<long>(l * static_cast<size_t>(cpus_per_rank));
      out[l].assign(first, first + cpus_per_rank);
      std::sort(out[l].begin(), out[l].end());
    }
    return out;
  }
  if (policy == CpuBind::kSocket) {
    if (topo.packages.empty())
      throw std::runtime_error("--bind-to socket: " + host + " reported no sockets; "
                               "use --bind-to numa or core");
    const size_t sockets = topo.packages.size();
    for (size_t l = 0; l < out.size(); ++l) out[l] = topo.packages[l * sockets / static_cast<size_t>(local_world)];
    return out;
  }
  // CpuBind::kNuma
  if (topo.numa.empty()) throw std::runtime_error("--bind-to numa: " + host + " reported no usable CPUs");
  const size_t nodes = topo.numa.size();
  for (int l = 0; l < local_world; ++l) {
    const size_t li = static_cast<size_t>(l);
    size_t node = li * nodes / static_cast<size_t>(local_world);
    // The GPU's node, when the host reported it and it has CPUs we may use.
    const int want = li < gpu_numa.size() ? gpu_numa[li] : -1;
    if (want >= 0 && topo.numa_ids.size() == nodes)
      if (auto it = std::find(topo.numa_ids.begin(), topo.numa_ids.end(), want); it != topo.numa_ids.end())
        node = static_cast<size_t>(it - topo.numa_ids.begin());
    out[li] = topo.numa[node];
  }
  return out;
}

namespace {

// Too many ranks for a host's GPUs: the counts, and every way out.
std::string gpu_shortage(GpuBind mode, const std::string& host, int gpus, int local_world, int per_rank) {
  const std::string s = local_world == 1 ? "" : "s";
  std::string m = std::string("--gpu-bind ") + to_string(mode) + ": host " + host + " has " + std::to_string(gpus) + " GPU" +
                  (gpus == 1 ? "" : "s") + ", but its " + std::to_string(local_world) + " rank" + s + " x " +
                  std::to_string(per_rank) + " GPU" + (per_rank == 1 ? "" : "s") + " each (--gpus-per-rank " +
                  std::to_string(per_rank) + ") need " + std::to_string(local_world * per_rank) + "; ";
  const int fit = gpus / per_rank;
  if (fit == 0)
    m += "lower --gpus-per-rank to at most " + std::to_string(gpus);
  else
    m += "run at most " + std::to_string(fit) + " rank" + (fit == 1 ? "" : "s") + " on " + host +
         " (-n, --npernode)" + (per_rank > 1 ? " or lower --gpus-per-rank" : "");
  return m + ", leave the GPUs alone with --gpu-bind none, or let ranks share them round-robin with "
             "--oversubscribe-gpus";
}
}  // namespace

std::vector<GpuAssignment> plan_gpus(GpuBind mode, const std::vector<std::string>& gpus, int local_world,
                                     int per_rank, bool oversubscribe, const std::string& host) {
  std::vector<GpuAssignment> out;
  if (mode == GpuBind::kNone || gpus.empty() || local_world <= 0) return out;
  const int n = static_cast<int>(gpus.size());
  const int want = std::max(per_rank, 1);
  // Two ranks on one GPU is rarely meant: NCCL refuses it, and memory runs out.
  if (static_cast<long>(local_world) * want > n && !oversubscribe && mode != GpuBind::kVisible)
    throw std::runtime_error(gpu_shortage(mode, host, n, local_world, want));
  const int k = std::min(want, n);  // shared round-robin, but never more GPUs than the host has
  const std::string all = join_id_list(gpus);
  for (int l = 0; l < local_world; ++l) {
    GpuAssignment a;
    std::vector<std::string> indices;
    for (int i = 0; i < k; ++i) {
      const int idx = (l * k + i) % n;
      a.physical.push_back(gpus[static_cast<size_t>(idx)]);
      a.positions.push_back(idx);
      indices.push_back(std::to_string(mode == GpuBind::kVisible ? idx : i));
    }
    a.visible = mode == GpuBind::kVisible ? all : join_id_list(a.physical);
    a.devices = join_id_list(indices);
    out.push_back(std::move(a));
  }
  return out;
}

std::string gpu_sharing_warning(GpuBind mode, int gpus, int local_world, int per_rank, bool oversubscribe,
                                const std::string& host, const std::string& flag) {
  const int want = std::max(per_rank, 1);
  if (mode != GpuBind::kVisible || oversubscribe || gpus == 0 || static_cast<long>(local_world) * want <= gpus) return "";
  const int fit = std::max(gpus / want, 1);
  return "dlaunch: warning: --gpu-bind visible: host " + host + " has " + std::to_string(gpus) + " GPU" +
         (gpus == 1 ? "" : "s") + " for " + std::to_string(local_world) + " ranks x " + std::to_string(want) +
         ", so ranks share GPUs round-robin (right for a CPU job such as gloo; NCCL refuses two ranks on one GPU); "
         "for a GPU of its own each, run at most " + std::to_string(fit) + " on " + host + " (" + flag +
         "); --oversubscribe-gpus says the sharing is meant and drops this line\n";
}

}  // namespace dl::hostfiles
