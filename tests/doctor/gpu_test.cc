// The doctor's GPUs (doctor/gpu.h): the host's list, the one a launch sees
// plus nvidia-smi's extras; stage 3's verdict on one host, stage 6's plan for
// the NCCL all_reduce.
#include <catch2/catch.hpp>

#include "control/protocol.h"
#include "doctor/gpu.h"
#include "machine/gpu_report.h"
#include "tests/machine/fake_host.h"

using namespace dl::doctor;
using dl::machine_test::FakeHost;

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

TEST_CASE("gpus: the driver lists GPUs but CUDA sees none, with the reason and its fix", "[doctor]") {
  auto v = listing(8);
  v.cuda = 0;
  v.visible_devices = "";
  v.cuda_error = "cuInit failed: CUDA_ERROR_NO_DEVICE (no CUDA-capable device is detected)";
  v.cuda_error_name = "CUDA_ERROR_NO_DEVICE";
  auto g = judge_gpus("h2", v, -1);
  CHECK(g.mark == Mark::kFail);
  CHECK(g.cell == "0 of 8");
  CHECK(g.what == "h2: the driver lists 8 GPUs but CUDA sees none: CUDA_VISIBLE_DEVICES is set to '', which hides every GPU");
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
  CHECK(g.what == "h1: CUDA sees 2 of 8 GPUs the driver lists (CUDA_VISIBLE_DEVICES=0,1)");
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
  CHECK(p.reason == "no host has an NVIDIA GPU CUDA can use");
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

TEST_CASE("gpus: another vendor's GPUs count against --gpus-per-node and none is usable by the NCCL check",
          "[doctor]") {
  GpuView v;
  v.vendor = "amd";
  v.listed = 8;
  auto g = judge_gpus("h1", v, -1);
  CHECK(g.mark == Mark::kOk);
  CHECK(g.cell == "8 amd");
  CHECK(g.usable == 0);
  v.listed = 4;
  g = judge_gpus("h1", v, 8);
  CHECK(g.mark == Mark::kFail);
  CHECK(g.what == "h1: sees 4 amd GPUs, --gpus-per-node wants 8");
}

TEST_CASE("gpus: nvidia-smi's query gives each GPU's PCI device as sysfs writes it with its name and memory and driver",
          "[doctor]") {
  std::string error;
  const auto smi = parse_smi_query(
      "00000000:18:00.0, NVIDIA H100 80GB HBM3, 81559, 3, 550.54.15\n"
      "00000000:2A:00.0, NVIDIA H100 80GB HBM3, [N/A], [N/A], 550.54.15\n",
      &error);
  REQUIRE(smi.size() == 2);
  CHECK(smi[0].pci_bus_id == "0000:18:00.0");
  CHECK(smi[0].name == "NVIDIA H100 80GB HBM3");
  CHECK(smi[0].memory_bytes == 81559ULL << 20);
  CHECK(smi[0].memory_used_bytes == 3ULL << 20);
  CHECK(smi[0].driver == "550.54.15");
  CHECK(smi[1].pci_bus_id == "0000:2a:00.0");
  CHECK(smi[1].memory_bytes == 0);
  CHECK(error.empty());
  CHECK(parse_smi_query("Failed to initialize NVML: Driver/library version mismatch\n", &error).empty());
  CHECK(error == "Failed to initialize NVML: Driver/library version mismatch");
}

TEST_CASE("gpus: nvidia-smi's facts join the detected GPUs by PCI device else by position and other vendors' stay bare",
          "[doctor]") {
  using dl::machine::Gpu;
  using dl::machine::VendorGpus;
  const std::vector<SmiGpu> smi{{"0000:2a:00.0", "B", 2ULL << 20, 1ULL << 20, "550"},
                                {"0000:18:00.0", "A", 4ULL << 20, 0, "550"}};
  const std::vector<VendorGpus> found{{dl::machine::GpuVendor::kNvidia, {Gpu{"0", "0000:18:00.0", 1}, Gpu{"1", "0000:2a:00.0", 0}}},
                                      {dl::machine::GpuVendor::kAmd, {Gpu{"0", "0000:c1:00.0", 1, 64ULL << 30}}}};
  const auto j = gpu_facts(found, smi);
  REQUIRE(j.size() == 3);
  CHECK(j[0].name == "A");
  CHECK(j[0].memory_bytes == 4ULL << 20);
  CHECK(j[0].numa == 1);
  CHECK(j[1].name == "B");
  CHECK(j[1].memory_used_bytes == 1ULL << 20);
  CHECK(j[2].vendor == "amd");
  CHECK(j[2].memory_bytes == 64ULL << 30);
  CHECK_FALSE(j[2].name.has_value());
  // nvidia-smi -L's GPUs have no PCI device: the query's lines in order.
  const auto by_position = gpu_facts({dl::machine::vendor_gpus(dl::machine::GpuVendor::kNvidia, {"0", "1"})}, smi);
  CHECK(by_position[0].name == "B");
  CHECK(by_position[1].name == "A");
}

TEST_CASE("gpus: the doctor and a launch see the same GPUs from the same host for every vendor", "[doctor]") {
  FakeHost h;
  h.nvidia_at({{"0000:c1:00.0", 0}, {"0000:18:00.0", 1}});
  h.amd(3);
  h.write("sys/class/kfd/kfd/topology/nodes/2/properties", "simd_count 440\nnuma_node 1\n");
  h.intel(2);
  // What a launch binds: the agent's hello, over the wire, read back by the launcher.
  dl::control::msg::Hello hello;
  dl::machine::report_gpus(dl::machine::detect_gpus(-1, h.sources()), hello);
  hello = std::get<dl::control::msg::Hello>(dl::control::decode_from_agent(dl::control::encode(hello)));
  const auto launch = dl::machine::reported_gpus(hello);
  // What the doctor's peer reports there (nvidia-smi aside: the test machine's, if any, must not count).
  std::string tool, error;
  const auto doctor = host_gpu_facts(h.sources(), &tool, &error);
  std::vector<std::string> seen_by_launch, seen_by_doctor;
  for (const auto& v : launch)
    for (const auto& g : v.gpus) seen_by_launch.push_back(std::string(word(v.vendor)) + " " + g.id);
  for (const auto& g : doctor) seen_by_doctor.push_back(g.vendor + " " + g.id);
  CHECK(seen_by_launch == std::vector<std::string>{"nvidia 0", "nvidia 1", "amd 0", "amd 1", "amd 2", "intel 0", "intel 1"});
  CHECK(seen_by_doctor == seen_by_launch);
  // The NUMA nodes a launch binds by are the doctor's too (the hello carries the first vendor's).
  CHECK(launch[0].numa() == std::vector<int>{1, 0});
  CHECK(doctor[0].numa == 1);
  CHECK(doctor[1].numa == 0);
  GpuView v;
  view_gpu_list(doctor, v);
  CHECK(v.vendor == word(launch[0].vendor));
  CHECK(v.listed == static_cast<int>(launch[0].gpus.size()));
  SECTION("a visibility variable narrows what a launch binds; the doctor lists the driver's GPUs and reports the variable apart") {
    h.env["CUDA_VISIBLE_DEVICES"] = "1";
    CHECK(dl::machine::detect_gpus(-1, h.sources())[0].ids() == std::vector<std::string>{"1"});
    CHECK(host_gpu_facts(h.sources(), &tool, &error).size() == doctor.size());
  }
}
