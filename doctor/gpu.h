#pragma once
// The doctor's GPUs. A host's list is the launch's (machine/gpus.h: the same
// detector, so the doctor and a launch agree on what a GPU is), with what
// only nvidia-smi knows (name, driver, memory in use) added to each NVIDIA
// GPU. Then the judgements, pure (no I/O), so each is unit-tested alone:
// stage 3's verdict on what one host's driver and CUDA see, and stage 6's
// plan for the NCCL all_reduce (which hosts, how many ranks, or why not).

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "doctor/records.h"
#include "doctor/report.h"
#include "machine/gpus.h"

namespace dl::doctor {

// What nvidia-smi says of one GPU that sysfs does not.
struct SmiGpu {
  std::string pci_bus_id;  // as sysfs writes it, "0000:18:00.0" (nvidia-smi's 8-digit domain cut to 4)
  std::string name;        // "NVIDIA H100 80GB HBM3"
  std::uint64_t memory_bytes = 0;
  std::uint64_t memory_used_bytes = 0;
  std::string driver;      // "550.54.15"
};
// The command whose output parse_smi_query() reads.
inline constexpr const char* kSmiQuery =
    "nvidia-smi --query-gpu=pci.bus_id,name,memory.total,memory.used,driver_version --format=csv,noheader,nounits";
// One SmiGpu per line of kSmiQuery's output; the first line that is none
// (what nvidia-smi printed instead: "No devices were found", a driver
// mismatch) goes to *error.
std::vector<SmiGpu> parse_smi_query(const std::string& text, std::string* error);

// The facts' "gpus": every GPU of `found`, vendor by vendor, as
// {"vendor","id","pci_bus_id","numa","memory_bytes"}, and an NVIDIA GPU's
// "name","memory_bytes","memory_used_bytes","driver" from `smi` (matched by
// PCI device, else by position where the list has no PCI devices).
std::vector<GpuFact> gpu_facts(const std::vector<machine::VendorGpus>& found, const std::vector<SmiGpu>& smi);
// This host's: machine::detect_gpus() with no visibility variable (the facts
// report CUDA_VISIBLE_DEVICES apart, and CUDA's count shows what it hides),
// and kSmiQuery when NVIDIA GPUs are found and nvidia-smi is installed
// (*tool = "nvidia-smi"; what it printed instead of GPUs in *error).
std::vector<GpuFact> host_gpu_facts(machine::GpuSources src, std::string* tool, std::string* error);

// Whether nvidia-smi and the CUDA driver see the GPUs of the vendor a peer
// names `vendor` (machine/gpu_vendor.h); false for a word this build does not know.
bool nvidia_tools_see(const std::string& vendor);

// What one host reported about its GPUs (facts.h: "gpus", "cuda").
struct GpuView {
  std::string vendor = "nvidia";     // the first vendor found (its word), whose GPUs a launch binds
  int listed = 0;                    // its GPUs the driver lists (0: none)
  bool has_smi = false;              // nvidia-smi is installed
  std::string smi_error;             // what nvidia-smi said when it failed
  int cuda = -1;                     // devices the CUDA driver API counts; -1: not probed
  std::string cuda_error;            // why CUDA sees none ("libcuda.so.1 cannot be loaded: ...")
  std::string cuda_error_name;       // "CUDA_ERROR_NO_DEVICE", "" when not from cuInit
  std::optional<std::string> visible_devices;  // CUDA_VISIBLE_DEVICES there, unset = nullopt
  int runtime = -1;                  // devices dlaunch's CUDA runtime (the NCCL helper) counts; -1: not probed
  std::string runtime_error;         // why the runtime sees none (version mismatch, helper missing)
};

struct GpuVerdict {
  Mark mark = Mark::kOk;
  std::string cell;   // "2", "none", "0 of 8"
  std::string what;   // "" when ok
  std::string fix;
  int usable = 0;     // GPUs a job can use there (one NCCL rank each)
};

// `vendor` and `listed` from the facts' "gpus" (gpu_facts()).
void view_gpu_list(const std::vector<GpuFact>& gpus, GpuView& v);

// `want` is --gpus-per-node (-1: report only). `host` names the host in
// `what`. CUDA's view is judged for NVIDIA GPUs; another vendor's count
// only against `want`, and none is usable by the NCCL check.
GpuVerdict judge_gpus(const std::string& host, const GpuView& v, int want);

// True when CUDA_VISIBLE_DEVICES's value hides every GPU ("", "-1", "none", "NoDevFiles").
bool hides_every_gpu(const std::string& visible_devices);

// Stage 6's NCCL part, for the hosts that passed stages 1-5.
struct NcclPlan {
  bool run = false;
  std::vector<std::pair<int, int>> ranks;  // (host index, ranks there = its usable GPUs), hostfile order
  int total = 0;                           // ranks in all
  std::vector<int> left_out;               // passing hosts without a usable GPU, when others have one
  Mark mark = Mark::kNotRun;               // kNotRun: skipped, nothing wrong; kWarn: skipped but look
  std::string reason;                      // why it does not run (the summary line says it)
  std::string fix;
};

// `usable[i]` is the usable GPUs of host `hosts[i]`; `built` says whether this
// dlaunch has the NCCL backend (DLAUNCH_HAVE_NCCL).
NcclPlan plan_nccl(const std::vector<int>& hosts, const std::vector<int>& usable, bool built);

}  // namespace dl::doctor
