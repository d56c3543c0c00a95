#include "machine/gpus.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>

#include "hostfiles/binding.h"
#include "machine/files.h"

namespace dl::machine {

namespace fs = std::filesystem;

std::vector<std::string> VendorGpus::ids() const {
  std::vector<std::string> out;
  for (const auto& g : gpus) out.push_back(g.id);
  return out;
}

std::vector<int> VendorGpus::numa() const {
  // Only nodes worth a hello field: an all-unknown list says nothing.
  if (std::none_of(gpus.begin(), gpus.end(), [](const Gpu& g) { return g.numa >= 0; })) return {};
  std::vector<int> out;
  for (const auto& g : gpus) out.push_back(g.numa);
  return out;
}

VendorGpus vendor_gpus(GpuVendor vendor, const std::vector<std::string>& ids, const std::vector<int>& numa) {
  VendorGpus v{vendor, {}};
  for (size_t i = 0; i < ids.size(); ++i) v.gpus.push_back({ids[i], "", numa.size() == ids.size() ? numa[i] : -1});
  return v;
}

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

// The NUMA node of the PCI device at `address` ("0000:18:00.0"); -1 for none.
int pci_numa_node(const GpuSources& src, const std::string& address) {
  return address.empty() ? -1 : read_numa_node(src.root + "/sys/bus/pci/devices/" + address + "/numa_node");
}

// Whether `program` is an executable file in a directory of $PATH: no shell
// started to learn that a host has no nvidia-smi.
bool on_path(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/bin:/bin";
  for (size_t at = 0; at <= dirs.size();) {
    const size_t end = std::min(dirs.find(':', at), dirs.size());
    const std::string dir = end > at ? dirs.substr(at, end - at) : ".";
    if (::access((dir + "/" + program).c_str(), X_OK) == 0) return true;
    at = end + 1;
  }
  return false;
}

std::vector<Gpu> nvidia_smi_gpus() {
  std::string text;
  if (FILE* p = ::popen("nvidia-smi -L 2>/dev/null", "r")) {
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) text.append(buf, n);
    ::pclose(p);
  }
  return vendor_gpus(GpuVendor::kNvidia, parse_nvidia_smi_list(text)).gpus;  // -L gives no PCI address
}

// NVIDIA: the driver makes one directory per GPU (named by PCI address) in
// /proc/driver/nvidia/gpus; reading it costs no process and no driver init,
// unlike nvidia-smi, which stays the fallback where /proc is not the driver's.
std::vector<Gpu> nvidia_gpus(const GpuSources& src) {
  const fs::path dir = fs::path(src.root + "/proc/driver/nvidia/gpus");
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return src.nvidia_smi && on_path("nvidia-smi") ? nvidia_smi_gpus() : std::vector<Gpu>{};
  std::vector<std::string> addresses;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (it->is_directory(ec)) addresses.push_back(it->path().filename().string());
  // PCI order, as nvidia-smi numbers them: the directory's own order is the file system's.
  std::sort(addresses.begin(), addresses.end());
  std::vector<Gpu> out;
  for (const auto& a : addresses) out.push_back({std::to_string(out.size()), a, pci_numa_node(src, a)});
  return out;
}

// A "name value" line of a KFD properties file.
std::optional<long> kfd_property(const std::string& props, const std::string& name) {
  const std::string key = name + " ";
  for (size_t at = props.find(key); at != std::string::npos; at = props.find(key, at + 1))
    if (at == 0 || props[at - 1] == '\n') return std::strtol(props.c_str() + at + key.size(), nullptr, 10);
  return std::nullopt;
}

// The PCI address of a KFD node: location_id is bus << 8 | devfn, domain its PCI domain.
std::string kfd_pci_address(const std::string& props) {
  const auto loc = kfd_property(props, "location_id");
  if (!loc) return "";
  char address[32];
  std::snprintf(address, sizeof address, "%04lx:%02lx:%02lx.%lx", kfd_property(props, "domain").value_or(0),
                (*loc >> 8) & 0xff, (*loc >> 3) & 0x1f, *loc & 0x7);
  return address;
}

// A KFD node's device memory: its banks of heap type 1 and 2 (the frame
// buffer, public and private; 0 is system memory).
std::uint64_t kfd_memory(const fs::path& node) {
  std::uint64_t bytes = 0;
  for (const auto& bank : numbered_entries(node / "mem_banks", "")) {
    const std::string props = read_text(bank / "properties");
    const long heap = kfd_property(props, "heap_type").value_or(0);
    if (heap == 1 || heap == 2) bytes += static_cast<std::uint64_t>(kfd_property(props, "size_in_bytes").value_or(0));
  }
  return bytes;
}

// AMD: ROCm numbers its GPUs (ROCR_VISIBLE_DEVICES indices) in KFD topology
// node order, skipping the CPU nodes, which have no SIMDs.
std::vector<Gpu> amd_gpus(const GpuSources& src) {
  std::vector<Gpu> out;
  for (const auto& node : numbered_entries(src.root + "/sys/class/kfd/kfd/topology/nodes", "")) {
    const std::string props = read_text(node / "properties");
    if (kfd_property(props, "simd_count").value_or(0) <= 0) continue;
    Gpu g{std::to_string(out.size()), kfd_pci_address(props), -1, kfd_memory(node)};
    const auto numa = kfd_property(props, "numa_node");
    g.numa = numa ? (*numa >= 0 ? static_cast<int>(*numa) : -1) : pci_numa_node(src, g.pci_bus_id);
    out.push_back(std::move(g));
  }
  return out;
}

// A uevent file's PCI_SLOT_NAME ("0000:29:00.0"), or "".
std::string pci_slot_name(const std::string& uevent) {
  const std::string key = "PCI_SLOT_NAME=";
  const size_t at = uevent.find(key);
  if (at == std::string::npos) return "";
  const size_t end = uevent.find('\n', at);
  return uevent.substr(at + key.size(), end == std::string::npos ? std::string::npos : end - at - key.size());
}

// Intel: Level Zero GPUs are DRM render nodes of vendor 0x8086.
std::vector<Gpu> intel_gpus(const GpuSources& src) {
  std::vector<Gpu> out;
  for (const auto& node : numbered_entries(src.root + "/sys/class/drm", "renderD")) {
    if (read_text(node / "device" / "vendor").rfind("0x8086", 0) != 0) continue;
    const std::string address = pci_slot_name(read_text(node / "device" / "uevent"));
    // The integrated GPU always sits at 00:02.0; binding ranks to it would
    // make every CPU-only job on an Intel desktop fail as "too few GPUs".
    if (address == "0000:00:02.0") continue;
    out.push_back({std::to_string(out.size()), address, read_numa_node(node / "device" / "numa_node")});
  }
  return out;
}

// Each vendor's driver tree (a vendor without a case is a compile warning).
std::vector<Gpu> driver_gpus(GpuVendor vendor, const GpuSources& src) {
  switch (vendor) {
    case GpuVendor::kNvidia: return nvidia_gpus(src);
    case GpuVendor::kAmd: return amd_gpus(src);
    case GpuVendor::kIntel: return intel_gpus(src);
  }
  return {};
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
  GpuSources quick = src;
  quick.nvidia_smi = src.nvidia_smi && gpus_per_node < 0;  // --gpus-per-node: only the vendor matters
  std::vector<VendorGpus> found;
  for (const auto& vi : gpu_vendors()) {
    const GpuVendor vendor = vi.vendor;
    VendorGpus v{vendor, {}};
    // Which physical device a variable's entry names is not known here: no PCI device, no NUMA node.
    if (auto var = src.env ? src.env(vi.visibility_variable) : std::nullopt)
      v = vendor_gpus(vendor, hostfiles::split_id_list(*var));
    else
      v.gpus = driver_gpus(vendor, quick);
    if (!v.gpus.empty()) found.push_back(std::move(v));
  }
  if (gpus_per_node > 0) {
    if (found.empty()) found.push_back({GpuVendor::kNvidia, {}});
    for (auto& f : found) f = vendor_gpus(f.vendor, count_up(static_cast<size_t>(gpus_per_node)));
  }
  return found;
}

std::vector<VendorGpus> detect_gpus(int gpus_per_node) { return detect_gpus(gpus_per_node, host_gpu_sources()); }

std::optional<VendorGpus> pick_gpus(const std::vector<VendorGpus>& found, std::optional<GpuVendor> vendor,
                                    const std::string& host) {
  if (found.empty()) return std::nullopt;
  if (!vendor) return found.front();
  std::string has;
  for (const auto& f : found) {
    if (f.vendor == *vendor) return f;
    has += (has.empty() ? "" : " and ") + std::to_string(f.gpus.size()) + " " + word(f.vendor);
  }
  const std::string asked = word(*vendor);
  throw std::runtime_error("--gpu-vendor " + asked + ": host " + host + " has no " + asked + " GPUs, only " + has +
                           "; drop --gpu-vendor to bind the GPUs it has, or --gpu-bind none to bind none");
}

}  // namespace dl::machine
