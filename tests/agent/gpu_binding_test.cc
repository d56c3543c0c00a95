#include <catch2/catch.hpp>

#include <cstdlib>

#include "agent/gpu_binding.h"

using dl::agent::bind_gpus;
using dl::agent::parse_nvidia_smi_list;
using Gpus = std::vector<std::string>;

TEST_CASE("gpu: nvidia-smi -L output gives one index per GPU line", "[agent]") {
  const std::string text =
      "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-0a1b)\n"
      "GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-2c3d)\n"
      "  MIG 1g.10gb     Device  0: (UUID: MIG-xyz)\n"
      "GPU 2: NVIDIA H100 80GB HBM3 (UUID: GPU-4e5f)\n";
  CHECK(parse_nvidia_smi_list(text) == Gpus{"0", "1", "2"});
  CHECK(parse_nvidia_smi_list("").empty());
  CHECK(parse_nvidia_smi_list("No devices were found\n").empty());
  CHECK(parse_nvidia_smi_list("GPU x: broken\nGPU 10: ok").size() == 1);
  CHECK(parse_nvidia_smi_list("see GPU 3: in the middle of a line\n").empty());
}

TEST_CASE("gpu: one GPU per rank, round-robin by local rank", "[agent]") {
  const Gpus two{"0", "1"};
  const char* want[] = {"0", "1", "0", "1"};
  for (int lr = 0; lr < 4; ++lr) CHECK(bind_gpus(two, lr, 1) == std::optional<std::string>(want[lr]));
}

TEST_CASE("gpu: --gpus-per-rank K gives K consecutive GPUs", "[agent]") {
  const Gpus four{"0", "1", "2", "3"};
  CHECK(bind_gpus(four, 0, 2) == "0,1");
  CHECK(bind_gpus(four, 1, 2) == "2,3");
  CHECK(bind_gpus(four, 2, 2) == "0,1");  // more ranks than fit: wrap round
  CHECK(bind_gpus(four, 0, 4) == "0,1,2,3");
  CHECK(bind_gpus(four, 1, 8) == "0,1,2,3");  // never more than the host has
}

TEST_CASE("gpu: binding keeps the host's own GPU names", "[agent]") {
  const Gpus given{"4", "5", "GPU-abc"};
  CHECK(bind_gpus(given, 0, 1) == "4");
  CHECK(bind_gpus(given, 2, 1) == "GPU-abc");
  CHECK(bind_gpus(given, 3, 1) == "4");
}

TEST_CASE("gpu: no GPUs, no binding", "[agent]") { CHECK_FALSE(bind_gpus({}, 0, 1).has_value()); }

TEST_CASE("gpu: --gpus-per-node wins over detection", "[agent]") {
  CHECK(dl::agent::detect_gpus(3) == Gpus{"0", "1", "2"});
  CHECK(dl::agent::detect_gpus(0).empty());
}
