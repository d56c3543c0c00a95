// The doctor's GPU judgements (doctor/gpu.h): stage 3's verdict on one host,
// stage 6's plan for the NCCL all_reduce.
#include <catch2/catch.hpp>

#include "doctor/gpu.h"

using namespace dl::doctor;

namespace {
GpuView listing(int n) {
  GpuView v;
  v.listed = n;
  v.has_smi = true;
  v.cuda = n;
  return v;
}
bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }
}  // namespace

TEST_CASE("gpus: no GPU is fine unless --gpus-per-node asks for some", "[doctor]") {
  GpuView none;
  auto v = judge_gpus("h1", none, -1);
  CHECK(v.mark == Mark::kOk);
  CHECK(v.cell == "none");
  CHECK(v.usable == 0);
  v = judge_gpus("h1", none, 2);
  CHECK(v.mark == Mark::kFail);
  CHECK(v.what == "h1: sees 0 GPUs (no nvidia-smi), --gpus-per-node wants 2");
  auto two = listing(2);
  v = judge_gpus("h1", two, 4);
  CHECK(v.mark == Mark::kFail);
  CHECK(v.what == "h1: sees 2 GPUs, --gpus-per-node wants 4");
  v = judge_gpus("h1", two, 2);
  CHECK(v.mark == Mark::kOk);
  CHECK(v.cell == "2");
  CHECK(v.usable == 2);
}

TEST_CASE("gpus: nvidia-smi lists GPUs but CUDA sees none, with the reason and its fix", "[doctor]") {
  auto v = listing(8);
  v.cuda = 0;
  v.visible_devices = "";
  v.cuda_error = "cuInit failed: CUDA_ERROR_NO_DEVICE (no CUDA-capable device is detected)";
  v.cuda_error_name = "CUDA_ERROR_NO_DEVICE";
  auto g = judge_gpus("h2", v, -1);
  CHECK(g.mark == Mark::kFail);
  CHECK(g.cell == "0 of 8");
  CHECK(g.what == "h2: nvidia-smi lists 8 GPUs but CUDA sees none: CUDA_VISIBLE_DEVICES is set to '', which hides every GPU");
  CHECK(has(g.fix, "unset CUDA_VISIBLE_DEVICES"));
  CHECK(g.usable == 0);
  v.visible_devices.reset();
  g = judge_gpus("h2", v, -1);
  CHECK(has(g.what, "CUDA sees none: cuInit failed: CUDA_ERROR_NO_DEVICE"));
  CHECK(has(g.fix, "/dev/nvidia*"));
  v.cuda_error = "libcuda.so.1 cannot be loaded (libcuda.so.1: cannot open shared object file)";
  v.cuda_error_name = "";
  g = judge_gpus("h2", v, -1);
  CHECK(has(g.fix, "install the NVIDIA driver's user-space library"));
  v.cuda_error = "cuInit failed: CUDA_ERROR_SYSTEM_DRIVER_MISMATCH";
  v.cuda_error_name = "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH";
  g = judge_gpus("h2", v, -1);
  CHECK(has(g.fix, "does not match the kernel driver"));
  CHECK(hides_every_gpu("-1"));
  CHECK(hides_every_gpu("NoDevFiles"));
  CHECK_FALSE(hides_every_gpu("0,1"));
}

TEST_CASE("gpus: the driver sees them, the runtime dlaunch was built with does not", "[doctor]") {
  auto v = listing(4);
  v.runtime = 0;
  v.runtime_error = "cudaGetDeviceCount: cudaErrorInsufficientDriver (CUDA driver version is insufficient for CUDA runtime version)";
  auto g = judge_gpus("h3", v, -1);
  CHECK(g.mark == Mark::kFail);
  CHECK(has(g.what, "the CUDA driver sees 4, but the CUDA runtime dlaunch's NCCL check was built with sees none: cudaGetDeviceCount"));
  CHECK(has(g.fix, "install a driver that supports the CUDA version dlaunch was built with"));
  v.runtime_error = "dlaunch-nccl-check: error while loading shared libraries: libnccl.so.2: cannot open shared object file: No such file or directory";
  g = judge_gpus("h3", v, -1);
  CHECK(has(g.fix, "install the CUDA runtime and NCCL"));
  v.runtime_error = "/opt/dl/bin/dlaunch-nccl-check: No such file or directory";
  g = judge_gpus("h3", v, -1);
  CHECK(has(g.fix, "install dlaunch with its dlaunch-nccl-check"));
}

TEST_CASE("gpus: CUDA sees only some (CUDA_VISIBLE_DEVICES): a warning, a failure when too few", "[doctor]") {
  auto v = listing(8);
  v.cuda = 2;
  v.visible_devices = "0,1";
  auto g = judge_gpus("h1", v, -1);
  CHECK(g.mark == Mark::kWarn);
  CHECK(g.cell == "2 of 8");
  CHECK(g.usable == 2);
  CHECK(g.what == "h1: CUDA sees 2 of 8 GPUs nvidia-smi lists (CUDA_VISIBLE_DEVICES=0,1)");
  g = judge_gpus("h1", v, 8);
  CHECK(g.mark == Mark::kFail);
  CHECK(has(g.what, "--gpus-per-node wants 8"));
  CHECK(has(g.fix, "unset CUDA_VISIBLE_DEVICES"));
  g = judge_gpus("h1", v, 2);
  CHECK(g.mark == Mark::kWarn);
}

TEST_CASE("nccl plan: which hosts, how many ranks, or why it is skipped", "[doctor]") {
  // No GPU anywhere: skipped, nothing wrong.
  auto p = plan_nccl({0, 1, 2}, {0, 0, 0}, true);
  CHECK_FALSE(p.run);
  CHECK(p.mark == Mark::kNotRun);
  CHECK(p.reason == "no host has a GPU (nvidia-smi lists none)");
  // GPUs, but a dlaunch without NCCL: skipped with a warning and the fix.
  p = plan_nccl({0, 1}, {8, 8}, false);
  CHECK_FALSE(p.run);
  CHECK(p.mark == Mark::kWarn);
  CHECK(p.reason == "this dlaunch was built without the NCCL backend: the NCCL all_reduce over the 16 GPUs of 2 hosts was not run");
  CHECK(has(p.fix, "-DDLAUNCH_NCCL=ON"));
  // One rank per usable GPU, GPU-less hosts left out (and named).
  p = plan_nccl({0, 2, 3, 5}, {8, 0, 4, 8}, true);
  CHECK(p.run);
  CHECK(p.ranks == std::vector<std::pair<int, int>>{{0, 8}, {3, 4}, {5, 8}});
  CHECK(p.total == 20);
  CHECK(p.left_out == std::vector<int>{2});
  // One host with one GPU still runs (NCCL and CUDA start, the element check holds).
  p = plan_nccl({4}, {1}, true);
  CHECK(p.run);
  CHECK(p.total == 1);
  // Nothing passed the earlier stages.
  p = plan_nccl({}, {}, true);
  CHECK_FALSE(p.run);
  CHECK(p.reason == "no host passed the earlier stages");
}
