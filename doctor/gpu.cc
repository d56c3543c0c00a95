#include "doctor/gpu.h"

#include <algorithm>

namespace dl::doctor {

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

bool hides_every_gpu(const std::string& v) {
  return v.empty() || v == "-1" || v == "none" || v == "NoDevFiles" || v == "void";
}

GpuVerdict judge_gpus(const std::string& host, const GpuView& v, int want) {
  GpuVerdict out;
  const std::string wants = ", --gpus-per-node wants " + std::to_string(want);
  if (want >= 0 && v.listed < want) {
    out.mark = Mark::kFail;
    out.cell = std::to_string(v.listed);
    out.what = host + ": sees " + std::to_string(v.listed) + " GPUs" + (v.has_smi ? "" : " (no nvidia-smi)") + wants;
    out.fix = v.smi_error.empty() ? "check the driver (nvidia-smi) on that host" : "nvidia-smi says: " + v.smi_error;
    return out;
  }
  if (v.listed == 0) {
    out.cell = "none";
    return out;
  }
  const std::string lists = host + ": nvidia-smi lists " + std::to_string(v.listed) + " GPU" + (v.listed == 1 ? "" : "s");
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
  out.what = host + ": CUDA sees " + of(usable, v.listed) + " GPUs nvidia-smi lists" + cvd;
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
    p.reason = "no host has a GPU (nvidia-smi lists none)";
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
