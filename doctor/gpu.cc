#include "doctor/gpu.h"

#include <sys/wait.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "doctor/facts.h"

namespace dl::doctor {

namespace {
// nvidia-smi's "00000000:18:00.0" as sysfs writes it, "0000:18:00.0".
std::string sysfs_bus_id(std::string id) {
  for (auto& c : id) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const size_t colon = id.find(':');
  return colon != std::string::npos && colon > 4 ? id.substr(colon - 4) : id;
}

std::string trimmed(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t\r");
  const size_t b = s.find_last_not_of(" \t\r");
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

// A MiB count of nvidia-smi's ("81559"), in bytes; 0 for "[N/A]" and the like.
std::uint64_t mib(const std::string& s) {
  char* end = nullptr;
  const unsigned long long v = std::strtoull(s.c_str(), &end, 10);
  return end == s.c_str() ? 0 : v << 20;
}

// The SmiGpu of `smi` for the `nth` NVIDIA GPU `g`: by PCI device, else by position.
const SmiGpu* smi_of(const machine::Gpu& g, size_t nth, const std::vector<SmiGpu>& smi) {
  if (g.pci_bus_id.empty()) return nth < smi.size() ? &smi[nth] : nullptr;
  for (const auto& s : smi)
    if (s.pci_bus_id == g.pci_bus_id) return &s;
  return nullptr;
}

GpuFact gpu_fact(machine::GpuVendor vendor, const machine::Gpu& g, const SmiGpu* smi) {
  GpuFact f;
  f.vendor = machine::word(vendor), f.id = g.id, f.pci_bus_id = g.pci_bus_id, f.numa = g.numa, f.memory_bytes = g.memory_bytes;
  if (!smi) return f;
  f.name = smi->name, f.memory_used_bytes = smi->memory_used_bytes, f.driver = smi->driver;
  if (smi->memory_bytes > 0) f.memory_bytes = smi->memory_bytes;
  return f;
}
}  // namespace

std::vector<SmiGpu> parse_smi_query(const std::string& text, std::string* error) {
  std::vector<SmiGpu> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> f;
    std::istringstream fields(line);
    for (std::string x; std::getline(fields, x, ',');) f.push_back(trimmed(x));
    if (f.size() == 5 && f[0].find(':') != std::string::npos)
      out.push_back({sysfs_bus_id(f[0]), f[1], mib(f[2]), mib(f[3]), f[4]});
    else if (error->empty() && !trimmed(line).empty())
      *error = trimmed(line);
  }
  return out;
}

std::vector<GpuFact> gpu_facts(const std::vector<machine::VendorGpus>& found, const std::vector<SmiGpu>& smi) {
  std::vector<GpuFact> out;
  for (const auto& v : found)
    for (size_t i = 0; i < v.gpus.size(); ++i)
      out.push_back(gpu_fact(v.vendor, v.gpus[i], machine::info(v.vendor).nvidia_tools ? smi_of(v.gpus[i], i, smi) : nullptr));
  return out;
}

std::vector<GpuFact> host_gpu_facts(machine::GpuSources src, std::string* tool, std::string* error) {
  src.env = nullptr;
  const auto found = machine::detect_gpus(-1, src);
  int status = 0;
  if (!src.nvidia_smi || first_output_line("command -v nvidia-smi", &status).empty() || status != 0)
    return gpu_facts(found, {});
  *tool = "nvidia-smi";
  std::string text;
  if (FILE* p = ::popen((std::string("timeout 15 ") + kSmiQuery + " 2>&1").c_str(), "r")) {
    char buf[4096];
    for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) text.append(buf, n);
    const int st = ::pclose(p);
    if (st != 0 && text.empty()) *error = "nvidia-smi exited with status " + std::to_string(WEXITSTATUS(st));
  }
  return gpu_facts(found, parse_smi_query(text, error));
}

void view_gpu_list(const std::vector<GpuFact>& gpus, GpuView& v) {
  v.listed = 0;
  if (gpus.empty()) return;
  v.vendor = gpus.front().vendor;
  for (const auto& g : gpus) v.listed += g.vendor == v.vendor ? 1 : 0;
}

namespace {
const char* const kUnsetCvd =
    "unset CUDA_VISIBLE_DEVICES in that host's environment (sshd's SetEnv, /etc/environment, the shell's rc file "
    "for non-interactive ssh): each rank's GPU is picked from LOCAL_RANK";

// Why CUDA sees none, and what to do, from what the probe said.
std::pair<std::string, std::string> why_none(const GpuView& v) {
  if (v.visible_devices && hides_every_gpu(*v.visible_devices))
    return {"CUDA_VISIBLE_DEVICES is set to '" + *v.visible_devices + "', which hides every GPU", kUnsetCvd};
  const std::string& e = v.cuda_error;
  const std::string& n = v.cuda_error_name;
  if (e.rfind("libcuda.so.1", 0) == 0)
    return {e, "install the NVIDIA driver's user-space library (libcuda.so.1) of the same version as its kernel "
               "module (nvidia-smi shows it) where the loader finds it (ldconfig)"};
  if (n == "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH" || n == "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE" ||
      n == "CUDA_ERROR_INSUFFICIENT_DRIVER")
    return {e, "the libcuda that loads does not match the kernel driver: drop a stale cuda-compat directory from "
               "LD_LIBRARY_PATH, or reboot after a driver upgrade (compare nvidia-smi with /proc/driver/nvidia/version)"};
  if (n == "CUDA_ERROR_NO_DEVICE")
    return {e, "check that /dev/nvidia* exist and are readable by the ssh user (in a container: its --gpus or "
               "device cgroup), and CUDA_VISIBLE_DEVICES"};
  return {e.empty() ? "the CUDA probe said nothing" : e,
          "check the driver: nvidia-smi, dmesg | grep -i nvrm, and that /dev/nvidia* are readable by the ssh user"};
}

std::string of(int usable, int listed) { return std::to_string(usable) + " of " + std::to_string(listed); }
}  // namespace

bool nvidia_tools_see(const std::string& vendor) {
  const auto v = machine::gpu_vendor_named(vendor);
  return v && machine::info(*v).nvidia_tools;
}

bool hides_every_gpu(const std::string& v) {
  return v.empty() || v == "-1" || v == "none" || v == "NoDevFiles" || v == "void";
}

GpuVerdict judge_gpus(const std::string& host, const GpuView& v, int want) {
  GpuVerdict out;
  const std::string wants = ", --gpus-per-node wants " + std::to_string(want);
  const bool nvidia = nvidia_tools_see(v.vendor);
  if (want >= 0 && v.listed < want) {
    out.mark = Mark::kFail;
    out.cell = std::to_string(v.listed);
    out.what = host + ": sees " + std::to_string(v.listed) + (nvidia ? "" : " " + v.vendor) + " GPUs" +
               (v.has_smi || v.listed > 0 ? "" : " (no nvidia-smi)") + wants;
    out.fix = v.smi_error.empty() ? "check the driver (nvidia-smi) on that host" : "nvidia-smi says: " + v.smi_error;
    return out;
  }
  if (v.listed == 0) {
    out.cell = "none";
    return out;
  }
  if (!nvidia) {  // bound by a launch, but neither CUDA nor the NCCL check can use them
    out.cell = std::to_string(v.listed) + " " + v.vendor;
    return out;
  }
  const std::string lists = host + ": the driver lists " + std::to_string(v.listed) + " GPU" + (v.listed == 1 ? "" : "s");
  if (v.cuda == 0) {
    auto [why, fix] = why_none(v);
    out.mark = Mark::kFail;
    out.cell = of(0, v.listed);
    out.what = lists + " but CUDA sees none: " + why;
    out.fix = fix;
    return out;
  }
  int usable = v.cuda >= 0 ? std::min(v.listed, v.cuda) : v.listed;
  if (v.runtime == 0) {
    const auto says = [&](const char* part) { return v.runtime_error.find(part) != std::string::npos; };
    const bool missing = says("shared librar");
    const bool no_helper = says("No such file or directory") || says("not executable") || says("not a regular file");
    out.mark = Mark::kFail;
    out.cell = of(0, v.listed);
    out.what = lists + " and the CUDA driver sees " + std::to_string(usable) +
               ", but the CUDA runtime dlaunch's NCCL check was built with sees none: " + v.runtime_error;
    out.fix = missing     ? "install the CUDA runtime and NCCL that dlaunch was built with on that host, or add their "
                            "directory to LD_LIBRARY_PATH"
            : no_helper ? "install dlaunch with its dlaunch-nccl-check (built beside it with NCCL) at the same path on every host"
                        : "install a driver that supports the CUDA version dlaunch was built with (nvidia-smi shows "
                        "the newest CUDA its driver supports), or build dlaunch against an older CUDA (DLAUNCH_CUDA_ROOT)";
    return out;
  }
  if (v.runtime > 0) usable = std::min(usable, v.runtime);
  out.usable = usable;
  out.cell = usable < v.listed ? of(usable, v.listed) : std::to_string(usable);
  if (usable == v.listed && (want < 0 || usable >= want)) return out;
  const std::string cvd = v.visible_devices ? " (CUDA_VISIBLE_DEVICES=" + *v.visible_devices + ")" : "";
  out.what = host + ": CUDA sees " + of(usable, v.listed) + " GPUs the driver lists" + cvd;
  if (want >= 0 && usable < want) {
    out.mark = Mark::kFail;
    out.what += wants;
    out.fix = v.visible_devices ? kUnsetCvd : "check the driver: nvidia-smi -q shows why a GPU is unusable";
  } else {
    out.mark = Mark::kWarn;
    out.fix = std::string("if jobs there should use every GPU: ") + (v.visible_devices ? kUnsetCvd : "check the driver (nvidia-smi -q)");
  }
  return out;
}

NcclPlan plan_nccl(const std::vector<int>& hosts, const std::vector<int>& usable, bool built) {
  NcclPlan p;
  if (hosts.empty()) {
    p.reason = "no host passed the earlier stages";
    return p;
  }
  int with = 0, gpus = 0;
  for (int u : usable) with += u > 0 ? 1 : 0, gpus += std::max(u, 0);
  if (with == 0) {
    p.reason = "no host has an NVIDIA GPU CUDA can use";
    return p;
  }
  if (!built) {
    p.mark = Mark::kWarn;
    p.reason = "this dlaunch was built without the NCCL backend: the NCCL all_reduce over the " + std::to_string(gpus) +
               " GPUs of " + std::to_string(with) + (with == 1 ? " host" : " hosts") + " was not run";
    p.fix = "build dlaunch with -DDLAUNCH_NCCL=ON and DLAUNCH_CUDA_ROOT set to a CUDA toolkit with NCCL";
    return p;
  }
  p.run = true;
  for (size_t i = 0; i < hosts.size(); ++i) {
    if (usable[i] > 0) p.ranks.emplace_back(hosts[i], usable[i]), p.total += usable[i];
    else p.left_out.push_back(hosts[i]);
  }
  return p;
}

}  // namespace dl::doctor
