#pragma once
// A fake host for GPU and CPU detection (machine/gpus.h, machine/cpus.h): a
// directory standing for / with whatever /proc and /sys entries a test
// writes, and the environment as a map. Removed with the object.
#include <stdlib.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "machine/gpus.h"

namespace dl::machine_test {

// A fake host: a directory standing for / with whatever /proc and /sys
// entries a test writes, and the agent's environment as a map.
struct FakeHost {
  std::string root;
  std::map<std::string, std::string> env;
  FakeHost() {
    char tmpl[] = "/tmp/dl-gpu-test.XXXXXX";
    root = ::mkdtemp(tmpl);
  }
  ~FakeHost() {
    std::error_code ec;
    std::filesystem::remove_all(root, ec);
  }
  void write(const std::string& rel, const std::string& text) {
    const std::filesystem::path p = std::filesystem::path(root) / rel;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p) << text;
  }
  // The NVIDIA driver: one directory per GPU, named by PCI address, holding `information`.
  void nvidia(int n) {
    for (int i = 0; i < n; ++i) {
      char bus[32];
      std::snprintf(bus, sizeof bus, "0000:%02x:00.0", 0x18 + 0x10 * i);
      write(std::string("proc/driver/nvidia/gpus/") + bus + "/information", "Model: Fake H100\n");
    }
  }
  // NVIDIA GPUs at the PCI addresses given, each on NUMA node `numa` (-1: no numa_node file).
  void nvidia_at(const std::vector<std::pair<std::string, int>>& gpus) {
    for (const auto& [address, numa] : gpus) {
      write("proc/driver/nvidia/gpus/" + address + "/information", "Model: Fake H100\n");
      if (numa >= 0) write("sys/bus/pci/devices/" + address + "/numa_node", std::to_string(numa) + "\n");
    }
  }
  // Two sockets of 4 CPUs each, node0 = CPUs 0-3, node1 = 4-7.
  void two_sockets() {
    for (int c = 0; c < 8; ++c) {
      write("sys/devices/system/cpu/cpu" + std::to_string(c) + "/topology/physical_package_id", std::to_string(c / 4));
      write("sys/devices/system/cpu/cpu" + std::to_string(c) + "/topology/core_id", std::to_string(c % 4));
    }
    write("sys/devices/system/node/node0/cpulist", "0-3\n");
    write("sys/devices/system/node/node1/cpulist", "4-7\n");
  }
  // KFD topology: node 0 is the CPU (no SIMDs), then `n` GPU nodes; numbered
  // past 9 so that ordering by name would be wrong.
  void amd(int n) {
    write("sys/class/kfd/kfd/topology/nodes/0/properties", "cpu_cores_count 64\nsimd_count 0\nmem_banks_count 1\n");
    for (int i = 1; i <= n; ++i)
      write("sys/class/kfd/kfd/topology/nodes/" + std::to_string(i) + "/properties",
            "cpu_cores_count 0\nsimd_count 440\nmax_waves_per_simd 8\n");
  }
  // DRM render nodes of vendor 0x8086 on their own PCI buses, and a card0 beside them (not a render node).
  void intel(int n, int first_minor = 128) {
    write("sys/class/drm/card0/device/vendor", "0x8086\n");
    for (int i = 0; i < n; ++i) {
      const std::string node = "sys/class/drm/renderD" + std::to_string(first_minor + i) + "/device/";
      write(node + "vendor", "0x8086\n");
      char slot[64];
      std::snprintf(slot, sizeof slot, "PCI_SLOT_NAME=0000:%02x:00.0\n", 0x29 + i);
      write(node + "uevent", std::string("DRIVER=i915\n") + slot);
    }
  }
  dl::machine::GpuSources sources() const {
    dl::machine::GpuSources s;
    s.root = root;
    s.env = [this](const std::string& k) -> std::optional<std::string> {
      auto it = env.find(k);
      return it == env.end() ? std::nullopt : std::optional<std::string>(it->second);
    };
    s.nvidia_smi = false;  // the test machine's own nvidia-smi, if any, must not count
    return s;
  }
  std::vector<dl::machine::VendorGpus> detect(int gpus_per_node = -1) const {
    return dl::machine::detect_gpus(gpus_per_node, sources());
  }
};

}  // namespace dl::machine_test
