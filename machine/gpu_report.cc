#include "machine/gpu_report.h"

#include "hostfiles/binding.h"

namespace dl::machine {

void report_gpus(const std::vector<VendorGpus>& found, control::msg::Hello& hello) {
  hello.gpus.clear();
  hello.gpu_vendor.clear();
  hello.gpus_by_vendor.reset();
  hello.gpu_numa.reset();
  if (found.empty()) return;
  hello.gpus = found.front().ids();
  hello.gpu_vendor = word(found.front().vendor);
  if (auto numa = found.front().numa(); !numa.empty()) hello.gpu_numa = std::move(numa);
  if (found.size() < 2) return;
  hello.gpus_by_vendor.emplace();
  for (const auto& f : found) (*hello.gpus_by_vendor)[word(f.vendor)] = hostfiles::join_id_list(f.ids());
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
  const std::optional<GpuVendor> first = gpu_vendor_named(hello.gpu_vendor);
  if (hello.gpus_by_vendor) {
    // The map is ordered by name; detection order is the vendors' own order.
    for (const auto& v : gpu_vendors())
      if (auto it = hello.gpus_by_vendor->find(v.word); it != hello.gpus_by_vendor->end()) {
        const auto ids = hostfiles::split_id_list(it->second);
        // gpu_numa is the first vendor's, whose list is `gpus`.
        out.push_back(vendor_gpus(v.vendor, ids, v.vendor == first && ids == hello.gpus ? numa_of(hello) : std::vector<int>{}));
      }
    if (!out.empty()) return out;
  }
  if (!hello.gpus.empty() && first) out.push_back(vendor_gpus(*first, hello.gpus, numa_of(hello)));
  return out;
}

}  // namespace dl::machine
