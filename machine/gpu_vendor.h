#pragma once
// The GPU vendors dlaunch binds ranks to, one table (gpu_vendor.cc): each
// vendor's word (--gpu-vendor, the hello, the doctor's facts), the variable
// its runtime reads once at start-up to decide which devices a process sees
// and in which order (device 0 is the first entry), and whether NVIDIA's
// tools (nvidia-smi, the CUDA driver) describe its GPUs. A new vendor is one
// row there and its driver tree's reader in gpus.cc.
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace dl::machine {

enum class GpuVendor { kNvidia, kAmd, kIntel };

struct GpuVendorInfo {
  GpuVendor vendor;
  const char* word;                 // "nvidia", "amd", "intel"
  const char* visibility_variable;  // CUDA_VISIBLE_DEVICES, ROCR_VISIBLE_DEVICES, ZE_AFFINITY_MASK
  bool nvidia_tools;                // nvidia-smi and the CUDA driver API see its GPUs
};

// Every vendor, in detection and default order (nvidia, amd, intel).
std::span<const GpuVendorInfo> gpu_vendors();
const GpuVendorInfo& info(GpuVendor v);
inline const char* word(GpuVendor v) { return info(v).word; }
inline const char* visibility_variable(GpuVendor v) { return info(v).visibility_variable; }

// The vendor whose word is `word`; nullopt for any other (a newer peer's, a typo).
std::optional<GpuVendor> gpu_vendor_named(std::string_view word);
// --gpu-vendor's value: throws UsageError naming the words there are.
GpuVendor parse_gpu_vendor(std::string_view word, std::string_view option);

}  // namespace dl::machine
