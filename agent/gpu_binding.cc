#include "agent/gpu_binding.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "agent/rank_process.h"
#include "hostfiles/binding.h"

namespace dl::agent {

namespace fs = std::filesystem;

std::vector<std::string> parse_nvidia_smi_list(const std::string& text) {
  std::vector<std::string> gpus;
  size_t pos = 0;
  while ((pos = text.find("GPU ", pos)) != std::string::npos) {
    size_t colon = text.find(':', pos);
    bool at_line_start = pos == 0 || text[pos - 1] == '\n';
    if (colon != std::string::npos && at_line_start) {
      std::string idx = text.substr(pos + 4, colon - pos - 4);
      if (!idx.empty() && idx.find_first_not_of("0123456789") == std::string::npos) gpus.push_back(idx);
    }
    pos += 4;
  }
  return gpus;
}

namespace {

std::vector<std::string> count_up(size_t n) {
  std::vector<std::string> ids;
  for (size_t i = 0; i < n; ++i) ids.push_back(std::to_string(i));
  return ids;
}

std::string read_text(const fs::path& p) {
  std::ifstream f(p);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

// The entries of `dir` whose name is `prefix` followed by a number, by that
// number (renderD128 before renderD1000, node 2 before node 10).
std::vector<fs::path> numbered_entries(const fs::path& dir, const std::string& prefix) {
  std::vector<std::pair<long, fs::path>> found;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) continue;
    const std::string num = name.substr(prefix.size());
    if (num.size() > 9 || num.find_first_not_of("0123456789") != std::string::npos) continue;
    found.emplace_back(std::stol(num), it->path());
  }
  std::sort(found.begin(), found.end());
  std::vector<fs::path> out;
  for (auto& [n, p] : found) out.push_back(std::move(p));
  return out;
}

// A numa_node file's node; -1 (the kernel's own word for it) when missing or unreadable.
int read_numa_node(const fs::path& p) {
  const std::string t = read_text(p);
  char* end = nullptr;
  const long v = std::strtol(t.c_str(), &end, 10);
  return end == t.c_str() || v < 0 || v > 1 << 20 ? -1 : static_cast<int>(v);
}

// The NUMA node of the PCI device at `address` ("0000:18:00.0").
int pci_numa_node(const GpuSources& src, const std::string& address) {
  return read_numa_node(src.root + "/sys/bus/pci/devices/" + address + "/numa_node");
}

// Ids counted 0..N-1 with each one's NUMA node.
struct Counted {
  std::vector<std::string> ids;
  std::vector<int> numa;
  void add(int node) { ids.push_back(std::to_string(ids.size())), numa.push_back(node); }
};

// NVIDIA: the driver makes one directory per GPU (named by PCI address) in
// /proc/driver/nvidia/gpus; reading it costs no process and no driver init,
// unlike nvidia-smi, which stays the fallback where /proc is not the driver's.
std::optional<Counted> nvidia_gpus(const GpuSources& src) {
  const fs::path dir = fs::path(src.root + "/proc/driver/nvidia/gpus");
  std::error_code ec;
  if (fs::is_directory(dir, ec)) {
    std::vector<std::string> addresses;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
      if (it->is_directory(ec)) addresses.push_back(it->path().filename().string());
    // PCI order, as nvidia-smi numbers them: the directory's own order is the file system's.
    std::sort(addresses.begin(), addresses.end());
    Counted c;
    for (const auto& a : addresses) c.add(pci_numa_node(src, a));
    return c;
  }
  if (!src.nvidia_smi) return std::nullopt;
  const char* path = std::getenv("PATH");
  if (resolve_program("nvidia-smi", path ? path : "/usr/bin:/bin").code != 0) return std::nullopt;
  std::string text;
  if (FILE* p = ::popen("nvidia-smi -L 2>/dev/null", "r")) {
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) text.append(buf, n);
    ::pclose(p);
  }
  Counted c;
  c.ids = parse_nvidia_smi_list(text);
  c.numa.assign(c.ids.size(), -1);  // nvidia-smi -L gives no PCI address
  return c;
}

// A "name value" line of a KFD properties file.
std::optional<long> kfd_property(const std::string& props, const std::string& name) {
  const std::string key = name + " ";
  for (size_t at = props.find(key); at != std::string::npos; at = props.find(key, at + 1))
    if (at == 0 || props[at - 1] == '\n') return std::strtol(props.c_str() + at + key.size(), nullptr, 10);
  return std::nullopt;
}

// AMD: ROCm numbers its GPUs (ROCR_VISIBLE_DEVICES indices) in KFD topology
// node order, skipping the CPU nodes, which have no SIMDs.
Counted amd_gpus(const GpuSources& src) {
  Counted c;
  for (const auto& node : numbered_entries(src.root + "/sys/class/kfd/kfd/topology/nodes", "")) {
    const std::string props = read_text(node / "properties");
    if (kfd_property(props, "simd_count").value_or(0) <= 0) continue;
    int numa = -1;
    if (auto n = kfd_property(props, "numa_node")) numa = *n >= 0 ? static_cast<int>(*n) : -1;
    else if (auto loc = kfd_property(props, "location_id")) {
      // location_id is the PCI bus/device/function (bus << 8 | devfn); domain its PCI domain.
      char address[32];
      std::snprintf(address, sizeof address, "%04lx:%02lx:%02lx.%lx", kfd_property(props, "domain").value_or(0),
                    (*loc >> 8) & 0xff, (*loc >> 3) & 0x1f, *loc & 0x7);
      numa = pci_numa_node(src, address);
    }
    c.add(numa);
  }
  return c;
}

// Intel: Level Zero GPUs are DRM render nodes of vendor 0x8086.
Counted intel_gpus(const GpuSources& src) {
  Counted c;
  for (const auto& node : numbered_entries(src.root + "/sys/class/drm", "renderD")) {
    if (read_text(node / "device" / "vendor").rfind("0x8086", 0) != 0) continue;
    // The integrated GPU always sits at 00:02.0; binding ranks to it would
    // make every CPU-only job on an Intel desktop fail as "too few GPUs".
    if (read_text(node / "device" / "uevent").find("PCI_SLOT_NAME=0000:00:02.0") != std::string::npos) continue;
    c.add(read_numa_node(node / "device" / "numa_node"));
  }
  return c;
}
}  // namespace

GpuSources host_gpu_sources() {
  GpuSources s;
  if (const char* r = std::getenv("DLAUNCH_SYSFS_ROOT")) s.root = r;
  s.env = [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    return v ? std::optional<std::string>(v) : std::nullopt;
  };
  return s;
}

std::vector<VendorGpus> detect_gpus(int gpus_per_node, const GpuSources& src) {
  if (gpus_per_node == 0) return {};
  std::vector<VendorGpus> found;
  for (const std::string vendor : hostfiles::kGpuVendors) {
    std::optional<Counted> got;
    // Which physical device a variable's entry names is not known here: no NUMA node.
    if (auto v = src.env ? src.env(hostfiles::gpu_visibility_variable(vendor)) : std::nullopt)
      got = Counted{hostfiles::split_id_list(*v), {}};
    else if (vendor == "nvidia") {
      GpuSources quick = src;
      quick.nvidia_smi = src.nvidia_smi && gpus_per_node < 0;  // --gpus-per-node: only the vendor matters
      got = nvidia_gpus(quick);
    } else if (vendor == "amd") got = amd_gpus(src);
    else got = intel_gpus(src);
    if (!got || got->ids.empty()) continue;
    // Only nodes worth a hello field: an all-unknown list says nothing.
    if (std::none_of(got->numa.begin(), got->numa.end(), [](int n) { return n >= 0; })) got->numa.clear();
    found.push_back({vendor, std::move(got->ids), std::move(got->numa)});
  }
  if (gpus_per_node > 0) {
    if (found.empty()) found.push_back({"nvidia", {}, {}});
    for (auto& f : found) f.ids = count_up(static_cast<size_t>(gpus_per_node)), f.numa.clear();
  }
  return found;
}

std::vector<VendorGpus> detect_gpus(int gpus_per_node) { return detect_gpus(gpus_per_node, host_gpu_sources()); }

void report_gpus(const std::vector<VendorGpus>& found, control::msg::Hello& hello) {
  hello.gpus.clear();
  hello.gpu_vendor.reset();
  hello.gpus_by_vendor.reset();
  hello.gpu_numa.reset();
  if (found.empty()) return;
  hello.gpus = found.front().ids;
  hello.gpu_vendor = found.front().vendor;
  if (!found.front().numa.empty()) hello.gpu_numa = found.front().numa;
  if (found.size() < 2) return;
  hello.gpus_by_vendor.emplace();
  for (const auto& f : found) (*hello.gpus_by_vendor)[f.vendor] = hostfiles::join_id_list(f.ids);
}

namespace {
// The hello's gpu_numa, when it matches `gpus` entry for entry (else nothing: a node for the wrong GPU misleads).
std::vector<int> numa_of(const control::msg::Hello& hello) {
  if (!hello.gpu_numa || hello.gpu_numa->size() != hello.gpus.size()) return {};
  return *hello.gpu_numa;
}
}  // namespace

std::vector<VendorGpus> reported_gpus(const control::msg::Hello& hello) {
  std::vector<VendorGpus> out;
  if (hello.gpus_by_vendor) {
    // The map is ordered by name; detection order is the vendors' own order.
    for (const std::string vendor : hostfiles::kGpuVendors)
      if (auto it = hello.gpus_by_vendor->find(vendor); it != hello.gpus_by_vendor->end())
        out.push_back({vendor, hostfiles::split_id_list(it->second), {}});
    if (!out.empty()) {
      // gpu_numa is the first vendor's, whose list is `gpus`.
      for (auto& f : out)
        if (f.vendor == hello.gpu_vendor.value_or("nvidia") && f.ids == hello.gpus) f.numa = numa_of(hello);
      return out;
    }
  }
  // A vendor this launcher has no variable for (a newer agent's) cannot be bound: as if it had no GPUs.
  const std::string vendor = hello.gpu_vendor.value_or("nvidia");
  if (!hello.gpus.empty() && hostfiles::gpu_visibility_variable(vendor))
    out.push_back({vendor, hello.gpus, numa_of(hello)});
  return out;
}

std::optional<VendorGpus> pick_gpus(const std::vector<VendorGpus>& found, const std::string& vendor,
                                    const std::string& host) {
  if (found.empty()) return std::nullopt;
  if (vendor.empty()) return found.front();
  std::string has;
  for (const auto& f : found) {
    if (f.vendor == vendor) return f;
    has += (has.empty() ? "" : " and ") + std::to_string(f.ids.size()) + " " + f.vendor;
  }
  throw std::runtime_error("--gpu-vendor " + vendor + ": host " + host + " has no " + vendor + " GPUs, only " + has +
                           "; drop --gpu-vendor to bind the GPUs it has, or --gpu-bind none to bind none");
}

}  // namespace dl::agent
