#include "machine/gpu_vendor.h"

#include "errors/error.h"

namespace dl::machine {

namespace {
// AMD's is ROCm's, below HIP: it also hides the GPUs from OpenCL and HSA users.
constexpr GpuVendorInfo kVendors[] = {
    {GpuVendor::kNvidia, "nvidia", "CUDA_VISIBLE_DEVICES", true},
    {GpuVendor::kAmd, "amd", "ROCR_VISIBLE_DEVICES", false},
    {GpuVendor::kIntel, "intel", "ZE_AFFINITY_MASK", false},
};
}  // namespace

std::span<const GpuVendorInfo> gpu_vendors() { return kVendors; }

const GpuVendorInfo& info(GpuVendor v) {
  for (const auto& i : kVendors)
    if (i.vendor == v) return i;
  return kVendors[0];  // unreachable: every enumerator has its row
}

std::optional<GpuVendor> gpu_vendor_named(std::string_view word) {
  for (const auto& i : kVendors)
    if (word == i.word) return i.vendor;
  return std::nullopt;
}

GpuVendor parse_gpu_vendor(std::string_view word, std::string_view option) {
  if (auto v = gpu_vendor_named(word)) return *v;
  std::string words;
  for (size_t i = 0; i < std::size(kVendors); ++i)
    words += std::string(i == 0 ? "" : i + 1 == std::size(kVendors) ? " or " : ", ") + kVendors[i].word;
  throw UsageError(std::string(option) + " takes " + words + ", got '" + std::string(word) + "'");
}

}  // namespace dl::machine
