#pragma once
// The doctor's GPU judgements, pure (no I/O), so each is unit-tested alone:
// stage 3's verdict on what one host's nvidia-smi and CUDA see, and stage 6's
// plan for the NCCL all_reduce (which hosts, how many ranks, or why not).
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "doctor/report.h"

namespace dl::doctor {

// What one host reported about its GPUs (facts.h: "gpus", "cuda").
struct GpuView {
  int listed = 0;                    // GPUs nvidia-smi lists (0: none, or no nvidia-smi)
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

// `want` is --gpus-per-node (-1: report only). `host` names the host in `what`.
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
