#pragma once
// Which GPUs a host has, per vendor (the agent detects them and reports them
// in its hello; which of them each local rank gets is policy:
// hostfiles/binding.h, applied by the launch plan).
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "control/messages.h"

namespace dl::agent {

// One vendor's GPUs on a host, as entries of that vendor's visibility
// variable (hostfiles::gpu_visibility_variable): "0", "1", ... or the
// entries the agent inherited ("4,5", UUIDs, "0.1" tiles).
struct VendorGpus {
  std::string vendor;  // "nvidia", "amd" or "intel"
  std::vector<std::string> ids;
  // The NUMA node of each of `ids` (parallel; -1 unknown), from its PCI
  // device's numa_node; empty when none is known.
  std::vector<int> numa = {};
  bool operator==(const VendorGpus&) const = default;
};

// Where detection looks. The real host by default; tests point `root` at a
// fake tree and `env` at a map.
struct GpuSources {
  // Prefix of /proc and /sys. The agent takes it from DLAUNCH_SYSFS_ROOT,
  // which only tests set (to give a real agent a fake 8-GPU AMD host).
  std::string root;
  // The agent's environment (the vendors' visibility variables).
  std::function<std::optional<std::string>(const std::string&)> env;
  // May run `nvidia-smi -L` when the NVIDIA driver's /proc tree is missing.
  bool nvidia_smi = true;
};
// The real host: root from DLAUNCH_SYSFS_ROOT (else ""), env from getenv.
GpuSources host_gpu_sources();

// Every vendor's GPUs, in the order nvidia, amd, intel, vendors without GPUs
// left out. For each vendor:
//   1. its visibility variable set for the agent (even empty): its entries,
//      as a scheduler (Slurm, a container) already chose them;
//   2. else its driver's tree, counted as 0..N-1:
//        nvidia  /proc/driver/nvidia/gpus/* (one directory per GPU; no
//                process to start), else `nvidia-smi -L` when the directory
//                is missing and src.nvidia_smi;
//        amd     /sys/class/kfd/kfd/topology/nodes/*/properties with
//                simd_count > 0 (the others are CPU nodes), by node number;
//        intel   /sys/class/drm/renderD*/device/vendor == 0x8086, by render
//                node number, leaving out the integrated GPU at PCI 0000:00:02.0
//                (a laptop's iGPU is no compute device to bind ranks to).
// `gpus_per_node` >= 0 (given on the command line) replaces each vendor's ids
// with 0..N-1 (nvidia when none was found; no nvidia-smi), and 0 means none.
// Each GPU's NUMA node (`numa`) comes from its PCI device, numa_node in
// /sys/bus/pci/devices/<address>/ (NVIDIA: the /proc directory's name; AMD:
// a numa_node line of the KFD properties, else domain and location_id
// there; Intel: the render node's device/); ids from a visibility variable,
// nvidia-smi or --gpus-per-node have none (which device an id names is
// not known), nor has a vendor whose every node is unknown.
// NVIDIA GPUs count in PCI address order, as nvidia-smi and
// CUDA_DEVICE_ORDER=PCI_BUS_ID do.
std::vector<VendorGpus> detect_gpus(int gpus_per_node, const GpuSources& src);
std::vector<VendorGpus> detect_gpus(int gpus_per_node);

// Parses `nvidia-smi -L` output into indices ("0", "1", ...).
std::vector<std::string> parse_nvidia_smi_list(const std::string& text);

// The hello's GPU fields from detect_gpus(): `gpus`, `gpu_vendor` and
// `gpu_numa` are the first vendor's; a host with two or more vendors also
// lists every vendor in `gpus_by_vendor` (vendor -> ids joined by commas), so
// --gpu-vendor can pick (the other vendors' NUMA nodes are not reported).
void report_gpus(const std::vector<VendorGpus>& found, control::msg::Hello& hello);
// The inverse, on the launcher's side. A hello without gpu_vendor (an older
// agent) reports NVIDIA GPUs.
std::vector<VendorGpus> reported_gpus(const control::msg::Hello& hello);

// The GPUs one host's ranks are bound to: `vendor` ("" = the first found,
// --gpu-vendor otherwise), or nullopt when the host has no GPUs at all. A
// host that has GPUs, but none of `vendor`, throws std::runtime_error naming
// the host, what it has and the fix.
std::optional<VendorGpus> pick_gpus(const std::vector<VendorGpus>& found, const std::string& vendor,
                                    const std::string& host);

}  // namespace dl::agent
