#pragma once
// Which GPUs this host has, per vendor. One detector for every reader: the
// agent's hello (and so GPU binding by local rank), --dry-run and
// --nproc-per-node gpu on the launcher's host, and `dlaunch doctor`, so a
// launch and the doctor agree on what a GPU is. Which of them each local
// rank gets is policy (hostfiles/binding.h, applied by the launch plan).
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "machine/gpu_vendor.h"

namespace dl::machine {

// One GPU.
struct Gpu {
  // Its entry in its vendor's visibility variable
  // (visibility_variable(GpuVendor)): "0", "1", ... as the driver counts
  // them, or the entry the agent inherited ("4", "GPU-<uuid>", "0.1" tiles).
  std::string id;
  // Its PCI device, "0000:18:00.0"; "" when not known (an id from a
  // visibility variable, `nvidia-smi -L` or --gpus-per-node names no device).
  std::string pci_bus_id = {};
  // The NUMA node of its PCI device; -1 when not known.
  int numa = -1;
  // Its own memory in bytes; 0 when sysfs does not say (AMD's KFD does;
  // NVIDIA's and Intel's trees do not, and the doctor asks nvidia-smi).
  std::uint64_t memory_bytes = 0;
  bool operator==(const Gpu&) const = default;
};

// One vendor's GPUs, in the vendor's own order (what its runtime calls 0, 1, ...).
struct VendorGpus {
  GpuVendor vendor = GpuVendor::kNvidia;
  std::vector<Gpu> gpus;
  std::vector<std::string> ids() const;
  // Each GPU's NUMA node, parallel to ids(); empty when none is known.
  std::vector<int> numa() const;
  bool operator==(const VendorGpus&) const = default;
};

// GPUs of `vendor` with the given ids and, where `numa` is parallel to
// them, NUMA nodes (else unknown): what a hello or --gpus-per-node carries.
VendorGpus vendor_gpus(GpuVendor vendor, const std::vector<std::string>& ids,
                       const std::vector<int>& numa = {});

// Where detection looks. The real host by default; tests point `root` at a
// fake tree and `env` at a map.
struct GpuSources {
  // Prefix of /proc and /sys. host_gpu_sources() takes it from
  // DLAUNCH_SYSFS_ROOT, which only tests set (to give a real agent or doctor
  // peer a fake 8-GPU AMD host).
  std::string root;
  // The environment whose visibility variables choose GPUs; null: none does,
  // every GPU the drivers have counts (the doctor, which reports
  // CUDA_VISIBLE_DEVICES apart and asks CUDA what it makes of it).
  std::function<std::optional<std::string>(const std::string&)> env;
  // May run `nvidia-smi -L` when the NVIDIA driver's /proc tree is missing.
  bool nvidia_smi = true;
};
// The real host: root from DLAUNCH_SYSFS_ROOT (else ""), env from getenv.
GpuSources host_gpu_sources();

// Every vendor's GPUs, in the order nvidia, amd, intel, vendors without GPUs
// left out. For each vendor:
//   1. its visibility variable set in src.env (even empty): its entries, as a
//      scheduler (Slurm, a container) already chose them;
//   2. else its driver's tree, counted as 0..N-1:
//        nvidia  /proc/driver/nvidia/gpus/<PCI address> (one directory per
//                GPU, in PCI order as nvidia-smi and CUDA_DEVICE_ORDER=PCI_BUS_ID
//                count; no process to start), else `nvidia-smi -L` when the
//                directory is missing and src.nvidia_smi;
//        amd     /sys/class/kfd/kfd/topology/nodes/*/properties with
//                simd_count > 0 (the others are CPU nodes), by node number;
//                the PCI device from domain and location_id, the memory from
//                the node's mem_banks of device memory;
//        intel   /sys/class/drm/renderD*/device/vendor == 0x8086, by render
//                node number, leaving out the integrated GPU at PCI 0000:00:02.0
//                (a laptop's iGPU is no compute device to bind ranks to).
// Each GPU's NUMA node is its PCI device's numa_node in
// /sys/bus/pci/devices/<address>/ (AMD: the KFD properties' numa_node line
// first; Intel: the render node's device/).
// `gpus_per_node` >= 0 (given on the command line) replaces each vendor's
// GPUs with ids 0..N-1 of no known device (nvidia when none was found; no
// nvidia-smi), and 0 means none.
std::vector<VendorGpus> detect_gpus(int gpus_per_node, const GpuSources& src);
std::vector<VendorGpus> detect_gpus(int gpus_per_node);

// Parses `nvidia-smi -L` output into indices ("0", "1", ...).
std::vector<std::string> parse_nvidia_smi_list(const std::string& text);

// The GPUs one host's ranks are bound to: `vendor` (--gpu-vendor; nullopt =
// the first found), or nullopt when the host has no GPUs at all. A
// host that has GPUs, but none of `vendor`, throws std::runtime_error naming
// the host, what it has and the fix.
std::optional<VendorGpus> pick_gpus(const std::vector<VendorGpus>& found, std::optional<GpuVendor> vendor,
                                    const std::string& host);

}  // namespace dl::machine
