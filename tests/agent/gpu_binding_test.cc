// GPU detection (agent/gpu_binding.h) against fake /proc and /sys trees of
// each vendor, the agent's inherited visibility variables, and the hello's
// GPU fields both ways.
#include <catch2/catch.hpp>

#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>

#include "agent/cpu_binding.h"
#include "agent/gpu_binding.h"

using namespace dl::agent;
using Gpus = std::vector<std::string>;
namespace fs = std::filesystem;
namespace msg = dl::control::msg;

namespace {
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
    fs::remove_all(root, ec);
  }
  void write(const std::string& rel, const std::string& text) {
    const fs::path p = fs::path(root) / rel;
    fs::create_directories(p.parent_path());
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
  GpuSources sources() const {
    GpuSources s;
    s.root = root;
    s.env = [this](const std::string& k) -> std::optional<std::string> {
      auto it = env.find(k);
      return it == env.end() ? std::nullopt : std::optional<std::string>(it->second);
    };
    s.nvidia_smi = false;  // the test machine's own nvidia-smi, if any, must not count
    return s;
  }
  std::vector<VendorGpus> detect(int gpus_per_node = -1) const { return detect_gpus(gpus_per_node, sources()); }
};

Gpus count(int n) {
  Gpus g;
  for (int i = 0; i < n; ++i) g.push_back(std::to_string(i));
  return g;
}
}  // namespace

TEST_CASE("gpu: nvidia-smi -L output gives one index per GPU line", "[agent][gpu]") {
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

TEST_CASE("gpu detection: an empty host has none", "[agent][gpu]") {
  FakeHost h;
  CHECK(h.detect().empty());
}

TEST_CASE("gpu detection: NVIDIA from the driver's /proc directories, 4 and 8 GPUs", "[agent][gpu]") {
  for (int n : {4, 8}) {
    FakeHost h;
    h.nvidia(n);
    INFO(n << " GPUs");
    CHECK(h.detect() == std::vector<VendorGpus>{{"nvidia", count(n)}});
  }
}

TEST_CASE("gpu detection: AMD from the KFD topology, GPU nodes only, 4 and 8 GPUs", "[agent][gpu]") {
  for (int n : {4, 8}) {
    FakeHost h;
    h.amd(n);
    INFO(n << " GPUs");
    CHECK(h.detect() == std::vector<VendorGpus>{{"amd", count(n)}});
  }
  FakeHost cpu_only;
  cpu_only.amd(0);  // an APU-less CPU node alone is no GPU
  CHECK(cpu_only.detect().empty());
}

TEST_CASE("gpu detection: Intel from DRM render nodes of vendor 0x8086, 4 and 8 GPUs", "[agent][gpu]") {
  for (int n : {4, 8}) {
    FakeHost h;
    h.intel(n);
    INFO(n << " GPUs");
    CHECK(h.detect() == std::vector<VendorGpus>{{"intel", count(n)}});
  }
  SECTION("other vendors' render nodes and the integrated GPU at 00:02.0 do not count") {
    FakeHost h;
    h.intel(2);
    h.write("sys/class/drm/renderD130/device/vendor", "0x1002\n");  // an AMD card's render node
    h.write("sys/class/drm/renderD131/device/vendor", "0x10de\n");  // an NVIDIA card's
    h.write("sys/class/drm/renderD132/device/vendor", "0x8086\n");
    h.write("sys/class/drm/renderD132/device/uevent", "DRIVER=i915\nPCI_SLOT_NAME=0000:00:02.0\n");
    CHECK(h.detect() == std::vector<VendorGpus>{{"intel", count(2)}});
  }
  SECTION("a desktop with only its integrated GPU has none to bind") {
    FakeHost h;
    h.write("sys/class/drm/renderD128/device/vendor", "0x8086\n");
    h.write("sys/class/drm/renderD128/device/uevent", "PCI_SLOT_NAME=0000:00:02.0\n");
    CHECK(h.detect().empty());
  }
}

TEST_CASE("gpu detection: a mixed host lists every vendor, nvidia, amd, intel in that order", "[agent][gpu]") {
  FakeHost h;
  h.intel(2);
  h.amd(8);
  h.nvidia(4);
  const std::vector<VendorGpus> want{{"nvidia", count(4)}, {"amd", count(8)}, {"intel", count(2)}};
  CHECK(h.detect() == want);
  // --gpus-per-node N keeps the vendors, with 0..N-1 each.
  CHECK(h.detect(2) == std::vector<VendorGpus>{{"nvidia", count(2)}, {"amd", count(2)}, {"intel", count(2)}});
}

TEST_CASE("gpu numa: each GPU's NUMA node from its PCI device, every vendor", "[agent][gpu][numa]") {
  SECTION("nvidia: the /proc directory names the PCI device, GPUs count in PCI order") {
    FakeHost h;
    // GPUs 0,1 on node 1 and 2,3 on node 0 (written out of order: the listing's order must not matter).
    h.nvidia_at({{"0000:c1:00.0", 0}, {"0000:18:00.0", 1}, {"0000:e1:00.0", 0}, {"0000:2a:00.0", 1}});
    CHECK(h.detect() == std::vector<VendorGpus>{{"nvidia", count(4), {1, 1, 0, 0}}});
  }
  SECTION("nvidia: a device without numa_node is unknown, and none known at all reports none") {
    FakeHost h;
    h.nvidia_at({{"0000:18:00.0", 1}, {"0000:2a:00.0", -1}});
    CHECK(h.detect() == std::vector<VendorGpus>{{"nvidia", count(2), {1, -1}}});
    FakeHost none;
    none.nvidia(2);
    CHECK(none.detect() == std::vector<VendorGpus>{{"nvidia", count(2), {}}});
  }
  SECTION("amd: a numa_node property, else the PCI device from domain and location_id") {
    FakeHost h;
    h.amd(0);
    h.write("sys/class/kfd/kfd/topology/nodes/1/properties", "simd_count 440\nnuma_node 1\n");
    // location_id 0xc100 = bus c1, device 0, function 0 (bus << 8 | devfn).
    h.write("sys/class/kfd/kfd/topology/nodes/2/properties", "simd_count 440\ndomain 0\nlocation_id 49408\n");
    h.write("sys/bus/pci/devices/0000:c1:00.0/numa_node", "0\n");
    h.write("sys/class/kfd/kfd/topology/nodes/3/properties", "simd_count 440\nlocation_id 4096\n");  // no numa_node
    CHECK(h.detect() == std::vector<VendorGpus>{{"amd", count(3), {1, 0, -1}}});
  }
  SECTION("intel: the render node's device") {
    FakeHost h;
    h.intel(2);
    h.write("sys/class/drm/renderD128/device/numa_node", "1\n");
    h.write("sys/class/drm/renderD129/device/numa_node", "-1\n");  // the kernel's own "unknown"
    CHECK(h.detect() == std::vector<VendorGpus>{{"intel", count(2), {1, -1}}});
  }
  SECTION("ids from a variable or --gpus-per-node name no known device: no nodes") {
    FakeHost h;
    h.nvidia_at({{"0000:18:00.0", 1}, {"0000:2a:00.0", 1}});
    CHECK(h.detect(2) == std::vector<VendorGpus>{{"nvidia", count(2), {}}});
    h.env["CUDA_VISIBLE_DEVICES"] = "1,0";
    CHECK(h.detect() == std::vector<VendorGpus>{{"nvidia", {"1", "0"}, {}}});
  }
}

TEST_CASE("gpu numa: --bind-to numa puts each rank on its GPU's node, from fake sysfs through the hello",
          "[agent][gpu][numa]") {
  // GPUs 0,1 on node 1 and 2,3 on node 0: spreading by GPU order would put ranks 0,1 on node 0.
  FakeHost h;
  h.two_sockets();
  h.nvidia_at({{"0000:18:00.0", 1}, {"0000:2a:00.0", 1}, {"0000:c1:00.0", 0}, {"0000:e1:00.0", 0}});
  msg::Hello hello;
  report_gpus(h.detect(), hello);
  const CpuTopology topo = read_cpu_topology({0, 1, 2, 3, 4, 5, 6, 7}, h.root + "/sys");
  hello.cpu = msg::CpuReport{topo.cores, topo.numa, topo.numa_ids};
  const auto got = std::get<msg::Hello>(dl::control::decode_from_agent(dl::control::encode(hello)));
  REQUIRE(got.gpu_numa == std::vector<int>{1, 1, 0, 0});
  REQUIRE(got.cpu->numa_ids == std::vector<int>{0, 1});
  // What the launch plan does with it: GPUs by local rank, then each rank's first GPU's node.
  const auto gpus = pick_gpus(reported_gpus(got), "", "h");
  REQUIRE(gpus);
  const auto assigned = dl::hostfiles::plan_gpus(dl::hostfiles::GpuBind::kVisible, gpus->ids, 4, 1, false, "h");
  std::vector<int> gpu_numa;
  for (const auto& a : assigned) gpu_numa.push_back(gpus->numa.at(static_cast<size_t>(a.positions.at(0))));
  CpuTopology reported{got.cpu->cores, got.cpu->numa, *got.cpu->numa_ids};
  const auto cpus = dl::hostfiles::plan_cpus(dl::hostfiles::CpuBind::kNuma, reported, 4, 1, "h", gpu_numa);
  using V = std::vector<int>;
  CHECK(cpus == std::vector<V>{{4, 5, 6, 7}, {4, 5, 6, 7}, {0, 1, 2, 3}, {0, 1, 2, 3}});
}

TEST_CASE("gpu detection: the agent's own visibility variable wins over the driver's tree", "[agent][gpu]") {
  FakeHost h;
  h.nvidia(8);
  h.amd(4);
  h.env["CUDA_VISIBLE_DEVICES"] = "6,4,GPU-abc";  // as Slurm or a container chose: kept as given, in order
  h.env["ROCR_VISIBLE_DEVICES"] = "";            // set but empty: none of this vendor
  CHECK(h.detect() == std::vector<VendorGpus>{{"nvidia", {"6", "4", "GPU-abc"}}});
  // No driver tree at all: the variable alone counts (how the integration tests give an agent GPUs).
  FakeHost bare;
  bare.env["ZE_AFFINITY_MASK"] = "0.0,0.1,1";
  CHECK(bare.detect() == std::vector<VendorGpus>{{"intel", {"0.0", "0.1", "1"}}});
}

TEST_CASE("gpu detection: --gpus-per-node wins over detection", "[agent][gpu]") {
  FakeHost h;
  CHECK(h.detect(3) == std::vector<VendorGpus>{{"nvidia", {"0", "1", "2"}}});  // nothing found: nvidia
  CHECK(h.detect(0).empty());
  h.amd(8);
  CHECK(h.detect(2) == std::vector<VendorGpus>{{"amd", {"0", "1"}}});  // the vendor is still the host's
  h.env["CUDA_VISIBLE_DEVICES"] = "5,7";
  CHECK(h.detect(0).empty());
}

TEST_CASE("gpu detection: the roots come from DLAUNCH_SYSFS_ROOT", "[agent][gpu]") {
  FakeHost h;
  h.amd(4);
  ::setenv("DLAUNCH_SYSFS_ROOT", h.root.c_str(), 1);
  ::unsetenv("ROCR_VISIBLE_DEVICES");
  const auto s = host_gpu_sources();
  ::unsetenv("DLAUNCH_SYSFS_ROOT");
  CHECK(s.root == h.root);
  auto src = s;
  src.nvidia_smi = false;
  const auto found = detect_gpus(-1, src);
  REQUIRE_FALSE(found.empty());
  CHECK(std::find(found.begin(), found.end(), VendorGpus{"amd", count(4)}) != found.end());
}

TEST_CASE("gpu hello: vendor and every vendor's list survive the wire, and an old hello means nvidia", "[agent][gpu]") {
  auto round_trip = [](const msg::Hello& h) {
    return std::get<msg::Hello>(dl::control::decode_from_agent(dl::control::encode(h)));
  };
  SECTION("one vendor: gpus and gpu_vendor, no per-vendor map") {
    msg::Hello h;
    report_gpus({{"amd", count(4)}}, h);
    CHECK(h.gpus == count(4));
    CHECK(h.gpu_vendor == "amd");
    CHECK_FALSE(h.gpus_by_vendor);
    CHECK(reported_gpus(round_trip(h)) == std::vector<VendorGpus>{{"amd", count(4)}});
  }
  SECTION("a mixed host: the first vendor in gpus, all of them in gpus_by_vendor, in detection order") {
    msg::Hello h;
    const std::vector<VendorGpus> found{{"nvidia", {"3", "1"}}, {"intel", count(2)}};
    report_gpus(found, h);
    CHECK(h.gpus == Gpus{"3", "1"});
    CHECK(h.gpu_vendor == "nvidia");
    REQUIRE(h.gpus_by_vendor);
    CHECK(h.gpus_by_vendor->at("intel") == "0,1");
    CHECK(reported_gpus(round_trip(h)) == found);
  }
  SECTION("each GPU's NUMA node rides along with the first vendor's list; an older hello has none") {
    msg::Hello h;
    report_gpus({{"nvidia", count(2), {1, 0}}, {"amd", count(2), {0, 0}}}, h);
    CHECK(h.gpu_numa == std::vector<int>{1, 0});
    const auto back = reported_gpus(round_trip(h));
    REQUIRE(back.size() == 2);
    CHECK(back[0].numa == std::vector<int>{1, 0});
    CHECK(back[1].numa.empty());  // not reported for the other vendors
    msg::Hello old;
    report_gpus({{"nvidia", count(2)}}, old);
    CHECK_FALSE(old.gpu_numa);
    CHECK(reported_gpus(round_trip(old)) == std::vector<VendorGpus>{{"nvidia", count(2)}});
    h.gpu_numa = std::vector<int>{1};  // not one per GPU: ignored rather than misread
    h.gpus_by_vendor.reset();
    CHECK(reported_gpus(h)[0].numa.empty());
  }
  SECTION("no GPUs: nothing reported") {
    msg::Hello h;
    h.gpus = {"stale"};
    report_gpus({}, h);
    CHECK(h.gpus.empty());
    CHECK_FALSE(h.gpu_vendor);
    CHECK(reported_gpus(round_trip(h)).empty());
  }
  SECTION("an older agent's hello has gpus without a vendor: nvidia") {
    const auto h = std::get<msg::Hello>(dl::control::decode_from_agent(
        R"({"t":"hello","version":"0.9","node":0,"host":"a","pid":1,"free_port":2,"gpus":["0","1"],"pmix":false})"));
    CHECK(reported_gpus(h) == std::vector<VendorGpus>{{"nvidia", {"0", "1"}}});
  }
  SECTION("a vendor this launcher cannot bind counts as no GPUs") {
    msg::Hello h;
    h.gpus = {"0"};
    h.gpu_vendor = "matrox";
    CHECK(reported_gpus(h).empty());
  }
}

TEST_CASE("gpu vendor choice: the first found by default, --gpu-vendor picks, a missing vendor names the host",
          "[agent][gpu]") {
  const std::vector<VendorGpus> mixed{{"nvidia", count(4)}, {"amd", count(8)}};
  CHECK(pick_gpus(mixed, "", "h")->vendor == "nvidia");
  CHECK(pick_gpus(mixed, "amd", "h") == VendorGpus{"amd", count(8)});
  CHECK_FALSE(pick_gpus({}, "", "h"));
  CHECK_FALSE(pick_gpus({}, "intel", "h"));  // no GPUs at all: nothing to bind, no error
  try {
    pick_gpus(mixed, "intel", "node3");
    FAIL("expected an error");
  } catch (const std::runtime_error& e) {
    CHECK(std::string(e.what()) ==
          "--gpu-vendor intel: host node3 has no intel GPUs, only 4 nvidia and 8 amd; drop --gpu-vendor to bind the "
          "GPUs it has, or --gpu-bind none to bind none");
  }
}
