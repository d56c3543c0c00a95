#include <catch2/catch.hpp>

#include <cstdlib>

#include "agent/gpu_binding.h"

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

TEST_CASE("gpu: --gpus-per-node wins over detection", "[agent]") {
  CHECK(dl::agent::detect_gpus(3) == Gpus{"0", "1", "2"});
  CHECK(dl::agent::detect_gpus(0).empty());
}
