#pragma once
// A host's GPUs in the agent's hello, both ways: the agent reports what
// detect_gpus() found, the launcher reads it back to bind ranks.
#include <vector>

#include "control/messages.h"
#include "machine/gpus.h"

namespace dl::machine {

// The hello's GPU fields from detect_gpus(): `gpus`, `gpu_vendor` and
// `gpu_numa` are the first vendor's; a host with two or more vendors also
// lists every vendor in `gpus_by_vendor` (vendor -> ids joined by commas), so
// --gpu-vendor can pick (the other vendors' NUMA nodes are not reported).
// PCI devices and memory stay on the host: binding needs ids and nodes.
void report_gpus(const std::vector<VendorGpus>& found, control::msg::Hello& hello);
// The inverse, on the launcher's side. A vendor word this launcher does not
// know cannot be bound, and counts as none.
std::vector<VendorGpus> reported_gpus(const control::msg::Hello& hello);

}  // namespace dl::machine
