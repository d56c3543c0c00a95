// GPU detection (machine/gpus.h) against fake /proc and /sys trees of
// each vendor, the inherited visibility variables, and the hello's GPU
// fields both ways (machine/gpu_report.h).
#include <catch2/catch.hpp>

#include <stdlib.h>

#include <algorithm>

#include "machine/cpus.h"
#include "machine/gpu_report.h"
#include "tests/machine/fake_host.h"

using namespace dl::machine;
using dl::hostfiles::CpuTopology;
using dl::machine_test::FakeHost;
using Gpus = std::vector<std::string>;
namespace msg = dl::control::msg;

namespace {
// What most cases compare: each vendor's ids and NUMA nodes (empty when none is known).
struct Seen {
  std::string vendor;
  Gpus ids;
  std::vector<int> numa = {};
  bool operator==(const Seen&) const = default;
};
std::vector<Seen> seen(const std::vector<VendorGpus>& found) {
  std::vector<Seen> out;
  for (const auto& f : found) out.push_back({word(f.vendor), f.ids(), f.numa()});
  return out;
}

Gpus count(int n) {
  Gpus g;
  for (int i = 0; i < n; ++i) g.push_back(std::to_string(i));
  return g;
}
}  // namespace

TEST_CASE("gpu: nvidia-smi -L output gives one index per GPU line", "[machine][gpu]") {
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

TEST_CASE("gpu detection: an empty host has none", "[machine][gpu]") {
  FakeHost h;
  CHECK(h.detect().empty());
}

TEST_CASE("gpu detection: NVIDIA from the driver's /proc directories, 4 and 8 GPUs", "[machine][gpu]") {
  for (int n : {4, 8}) {
    FakeHost h;
    h.nvidia(n);
    INFO(n << " GPUs");
    CHECK(seen(h.detect()) == std::vector<Seen>{{"nvidia", count(n)}});
  }
}

TEST_CASE("gpu detection: AMD from the KFD topology, GPU nodes only, 4 and 8 GPUs", "[machine][gpu]") {
  for (int n : {4, 8}) {
    FakeHost h;
    h.amd(n);
    INFO(n << " GPUs");
    CHECK(seen(h.detect()) == std::vector<Seen>{{"amd", count(n)}});
  }
  FakeHost cpu_only;
  cpu_only.amd(0);  // an APU-less CPU node alone is no GPU
  CHECK(cpu_only.detect().empty());
}

TEST_CASE("gpu detection: Intel from DRM render nodes of vendor 0x8086, 4 and 8 GPUs", "[machine][gpu]") {
  for (int n : {4, 8}) {
    FakeHost h;
    h.intel(n);
    INFO(n << " GPUs");
    CHECK(seen(h.detect()) == std::vector<Seen>{{"intel", count(n)}});
  }
  SECTION("other vendors' render nodes and the integrated GPU at 00:02.0 do not count") {
    FakeHost h;
    h.intel(2);
    h.write("sys/class/drm/renderD130/device/vendor", "0x1002\n");  // an AMD card's render node
    h.write("sys/class/drm/renderD131/device/vendor", "0x10de\n");  // an NVIDIA card's
    h.write("sys/class/drm/renderD132/device/vendor", "0x8086\n");
    h.write("sys/class/drm/renderD132/device/uevent", "DRIVER=i915\nPCI_SLOT_NAME=0000:00:02.0\n");
    CHECK(seen(h.detect()) == std::vector<Seen>{{"intel", count(2)}});
  }
  SECTION("a desktop with only its integrated GPU has none to bind") {
    FakeHost h;
    h.write("sys/class/drm/renderD128/device/vendor", "0x8086\n");
    h.write("sys/class/drm/renderD128/device/uevent", "PCI_SLOT_NAME=0000:00:02.0\n");
    CHECK(h.detect().empty());
  }
}

TEST_CASE("gpu detection: a mixed host lists every vendor, nvidia, amd, intel in that order", "[machine][gpu]") {
  FakeHost h;
  h.intel(2);
  h.amd(8);
  h.nvidia(4);
  const std::vector<Seen> want{{"nvidia", count(4)}, {"amd", count(8)}, {"intel", count(2)}};
  CHECK(seen(h.detect()) == want);
  // --gpus-per-node N keeps the vendors, with 0..N-1 each.
  CHECK(seen(h.detect(2)) == std::vector<Seen>{{"nvidia", count(2)}, {"amd", count(2)}, {"intel", count(2)}});
}

TEST_CASE("gpu numa: each GPU's NUMA node from its PCI device, every vendor", "[machine][gpu][numa]") {
  SECTION("nvidia: the /proc directory names the PCI device, GPUs count in PCI order") {
    FakeHost h;
    // GPUs 0,1 on node 1 and 2,3 on node 0 (written out of order: the listing's order must not matter).
    h.nvidia_at({{"0000:c1:00.0", 0}, {"0000:18:00.0", 1}, {"0000:e1:00.0", 0}, {"0000:2a:00.0", 1}});
    CHECK(seen(h.detect()) == std::vector<Seen>{{"nvidia", count(4), {1, 1, 0, 0}}});
  }
  SECTION("nvidia: a device without numa_node is unknown, and none known at all reports none") {
    FakeHost h;
    h.nvidia_at({{"0000:18:00.0", 1}, {"0000:2a:00.0", -1}});
    CHECK(seen(h.detect()) == std::vector<Seen>{{"nvidia", count(2), {1, -1}}});
    FakeHost none;
    none.nvidia(2);
    CHECK(seen(none.detect()) == std::vector<Seen>{{"nvidia", count(2), {}}});
  }
  SECTION("amd: a numa_node property, else the PCI device from domain and location_id") {
    FakeHost h;
    h.amd(0);
    h.write("sys/class/kfd/kfd/topology/nodes/1/properties", "simd_count 440\nnuma_node 1\n");
    // location_id 0xc100 = bus c1, device 0, function 0 (bus << 8 | devfn).
    h.write("sys/class/kfd/kfd/topology/nodes/2/properties", "simd_count 440\ndomain 0\nlocation_id 49408\n");
    h.write("sys/bus/pci/devices/0000:c1:00.0/numa_node", "0\n");
    h.write("sys/class/kfd/kfd/topology/nodes/3/properties", "simd_count 440\nlocation_id 4096\n");  // no numa_node
    CHECK(seen(h.detect()) == std::vector<Seen>{{"amd", count(3), {1, 0, -1}}});
  }
  SECTION("intel: the render node's device") {
    FakeHost h;
    h.intel(2);
    h.write("sys/class/drm/renderD128/device/numa_node", "1\n");
    h.write("sys/class/drm/renderD129/device/numa_node", "-1\n");  // the kernel's own "unknown"
    CHECK(seen(h.detect()) == std::vector<Seen>{{"intel", count(2), {1, -1}}});
  }
  SECTION("ids from a variable or --gpus-per-node name no known device: no nodes") {
    FakeHost h;
    h.nvidia_at({{"0000:18:00.0", 1}, {"0000:2a:00.0", 1}});
    CHECK(seen(h.detect(2)) == std::vector<Seen>{{"nvidia", count(2), {}}});
    h.env["CUDA_VISIBLE_DEVICES"] = "1,0";
    CHECK(seen(h.detect()) == std::vector<Seen>{{"nvidia", {"1", "0"}, {}}});
  }
}

TEST_CASE("gpu numa: --bind-to numa puts each rank on its GPU's node, from fake sysfs through the hello",
          "[machine][gpu][numa]") {
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
  const auto gpus = pick_gpus(reported_gpus(got), std::nullopt, "h");
  REQUIRE(gpus);
  const auto assigned = dl::hostfiles::plan_gpus(dl::hostfiles::GpuBind::kVisible, gpus->ids(), 4, 1, false, "h");
  std::vector<int> gpu_numa;
  for (const auto& a : assigned) gpu_numa.push_back(gpus->gpus.at(static_cast<size_t>(a.positions.at(0))).numa);
  CpuTopology reported{got.cpu->cores, got.cpu->numa, got.cpu->numa_ids};
  const auto cpus = dl::hostfiles::plan_cpus(dl::hostfiles::CpuBind::kNuma, reported, 4, 1, "h", gpu_numa);
  using V = std::vector<int>;
  CHECK(cpus == std::vector<V>{{4, 5, 6, 7}, {4, 5, 6, 7}, {0, 1, 2, 3}, {0, 1, 2, 3}});
}

TEST_CASE("gpu detection: each GPU's PCI device and its memory where sysfs says for every vendor", "[machine][gpu]") {
  SECTION("nvidia: the /proc directory's name, in PCI order; no memory in the driver's tree") {
    FakeHost h;
    h.nvidia_at({{"0000:c1:00.0", 0}, {"0000:18:00.0", 1}});
    const auto found = h.detect();
    REQUIRE(found.size() == 1);
    CHECK(found[0].gpus == std::vector<Gpu>{{"0", "0000:18:00.0", 1, 0}, {"1", "0000:c1:00.0", 0, 0}});
  }
  SECTION("amd: domain and location_id, and the node's frame-buffer memory banks (not system memory)") {
    FakeHost h;
    h.amd(0);
    h.write("sys/class/kfd/kfd/topology/nodes/1/properties", "simd_count 440\ndomain 1\nlocation_id 49417\n");
    h.write("sys/class/kfd/kfd/topology/nodes/1/mem_banks/0/properties", "heap_type 1\nsize_in_bytes 68702699520\n");
    h.write("sys/class/kfd/kfd/topology/nodes/1/mem_banks/1/properties", "heap_type 0\nsize_in_bytes 1000\n");
    h.write("sys/bus/pci/devices/0001:c1:01.1/numa_node", "1\n");
    const auto found = h.detect();
    REQUIRE(found.size() == 1);
    CHECK(found[0].gpus == std::vector<Gpu>{{"0", "0001:c1:01.1", 1, 68702699520ULL}});
  }
  SECTION("intel: the render node's PCI_SLOT_NAME") {
    FakeHost h;
    h.intel(2);
    const auto found = h.detect();
    REQUIRE(found.size() == 1);
    CHECK(found[0].gpus == std::vector<Gpu>{{"0", "0000:29:00.0"}, {"1", "0000:2a:00.0"}});
  }
  SECTION("ids a visibility variable chose name no device") {
    FakeHost h;
    h.nvidia_at({{"0000:18:00.0", 1}});
    h.env["CUDA_VISIBLE_DEVICES"] = "0";
    CHECK(h.detect().at(0).gpus == std::vector<Gpu>{{"0"}});
  }
}

TEST_CASE("gpu detection: the agent's own visibility variable wins over the driver's tree", "[machine][gpu]") {
  FakeHost h;
  h.nvidia(8);
  h.amd(4);
  h.env["CUDA_VISIBLE_DEVICES"] = "6,4,GPU-abc";  // as Slurm or a container chose: kept as given, in order
  h.env["ROCR_VISIBLE_DEVICES"] = "";            // set but empty: none of this vendor
  CHECK(seen(h.detect()) == std::vector<Seen>{{"nvidia", {"6", "4", "GPU-abc"}}});
  // No driver tree at all: the variable alone counts (how the integration tests give an agent GPUs).
  FakeHost bare;
  bare.env["ZE_AFFINITY_MASK"] = "0.0,0.1,1";
  CHECK(seen(bare.detect()) == std::vector<Seen>{{"intel", {"0.0", "0.1", "1"}}});
}

TEST_CASE("gpu detection: --gpus-per-node wins over detection", "[machine][gpu]") {
  FakeHost h;
  CHECK(seen(h.detect(3)) == std::vector<Seen>{{"nvidia", {"0", "1", "2"}}});  // nothing found: nvidia
  CHECK(h.detect(0).empty());
  h.amd(8);
  CHECK(seen(h.detect(2)) == std::vector<Seen>{{"amd", {"0", "1"}}});  // the vendor is still the host's
  h.env["CUDA_VISIBLE_DEVICES"] = "5,7";
  CHECK(h.detect(0).empty());
}

TEST_CASE("gpu detection: the roots come from DLAUNCH_SYSFS_ROOT", "[machine][gpu]") {
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
  CHECK(seen(found).back() == Seen{"amd", count(4)});
}

TEST_CASE("gpu hello: vendor and every vendor's list survive the wire, and a hello without its vendor is refused", "[machine][gpu]") {
  auto round_trip = [](const msg::Hello& h) {
    return std::get<msg::Hello>(dl::control::decode_from_agent(dl::control::encode(h)));
  };
  SECTION("one vendor: gpus and gpu_vendor, no per-vendor map") {
    msg::Hello h;
    report_gpus({vendor_gpus(GpuVendor::kAmd, count(4))}, h);
    CHECK(h.gpus == count(4));
    CHECK(h.gpu_vendor == "amd");
    CHECK_FALSE(h.gpus_by_vendor);
    CHECK(seen(reported_gpus(round_trip(h))) == std::vector<Seen>{{"amd", count(4)}});
  }
  SECTION("a mixed host: the first vendor in gpus, all of them in gpus_by_vendor, in detection order") {
    msg::Hello h;
    const std::vector<VendorGpus> found{vendor_gpus(GpuVendor::kNvidia, {"3", "1"}), vendor_gpus(GpuVendor::kIntel, count(2))};
    report_gpus(found, h);
    CHECK(h.gpus == Gpus{"3", "1"});
    CHECK(h.gpu_vendor == "nvidia");
    REQUIRE(h.gpus_by_vendor);
    CHECK(h.gpus_by_vendor->at("intel") == "0,1");
    CHECK(reported_gpus(round_trip(h)) == found);
  }
  SECTION("each GPU's NUMA node rides along with the first vendor's list, when known") {
    msg::Hello h;
    report_gpus({vendor_gpus(GpuVendor::kNvidia, count(2), {1, 0}), vendor_gpus(GpuVendor::kAmd, count(2), {0, 0})}, h);
    CHECK(h.gpu_numa == std::vector<int>{1, 0});
    const auto back = reported_gpus(round_trip(h));
    REQUIRE(back.size() == 2);
    CHECK(back[0].numa() == std::vector<int>{1, 0});
    CHECK(back[1].numa().empty());  // not reported for the other vendors
    msg::Hello old;
    report_gpus({vendor_gpus(GpuVendor::kNvidia, count(2))}, old);
    CHECK_FALSE(old.gpu_numa);
    CHECK(seen(reported_gpus(round_trip(old))) == std::vector<Seen>{{"nvidia", count(2)}});
    h.gpu_numa = std::vector<int>{1};  // not one per GPU: ignored rather than misread
    h.gpus_by_vendor.reset();
    CHECK(reported_gpus(h)[0].numa().empty());
  }
  SECTION("no GPUs: nothing reported") {
    msg::Hello h;
    h.gpus = {"stale"};
    report_gpus({}, h);
    CHECK(h.gpus.empty());
    CHECK(h.gpu_vendor.empty());
    CHECK(reported_gpus(round_trip(h)).empty());
  }
  SECTION("a hello without gpu_vendor is refused, naming the field: peers are one version, no vendor is guessed") {
    CHECK_THROWS_WITH(dl::control::decode_from_agent(
                          R"({"t":"hello","version":"0.9","node":0,"host":"a","pid":1,"free_port":2,"gpus":["0","1"],)"
                          R"("pmix":false,"machine":"","unhealthy":""})"),
                      "'hello' message: field 'gpu_vendor' is missing");
  }
  SECTION("a vendor this launcher cannot bind counts as no GPUs") {
    msg::Hello h;
    h.gpus = {"0"};
    h.gpu_vendor = "matrox";
    CHECK(reported_gpus(h).empty());
  }
}

TEST_CASE("gpu vendors: one table of words and visibility variables, in detection order", "[machine][gpu]") {
  std::vector<std::string> words, variables;
  for (const auto& v : gpu_vendors()) {
    words.push_back(v.word), variables.push_back(v.visibility_variable);
    CHECK(gpu_vendor_named(v.word) == v.vendor);
    CHECK(std::string(word(v.vendor)) == v.word);
  }
  CHECK(words == Gpus{"nvidia", "amd", "intel"});
  CHECK(variables == Gpus{"CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "ZE_AFFINITY_MASK"});
  CHECK(info(GpuVendor::kNvidia).nvidia_tools);
  CHECK_FALSE(info(GpuVendor::kAmd).nvidia_tools);
  CHECK_FALSE(gpu_vendor_named("matrox"));
  CHECK_FALSE(gpu_vendor_named("NVIDIA"));
  CHECK(parse_gpu_vendor("amd", "--gpu-vendor") == GpuVendor::kAmd);
  CHECK_THROWS_WITH(parse_gpu_vendor("matrox", "--gpu-vendor"),
                    "--gpu-vendor takes nvidia, amd or intel, got 'matrox'");
}

TEST_CASE("gpu vendor choice: the first found by default, --gpu-vendor picks, a missing vendor names the host",
          "[machine][gpu]") {
  const std::vector<VendorGpus> mixed{vendor_gpus(GpuVendor::kNvidia, count(4)), vendor_gpus(GpuVendor::kAmd, count(8))};
  CHECK(pick_gpus(mixed, std::nullopt, "h")->vendor == GpuVendor::kNvidia);
  CHECK(pick_gpus(mixed, GpuVendor::kAmd, "h") == mixed[1]);
  CHECK_FALSE(pick_gpus({}, std::nullopt, "h"));
  CHECK_FALSE(pick_gpus({}, GpuVendor::kIntel, "h"));  // no GPUs at all: nothing to bind, no error
  try {
    pick_gpus(mixed, GpuVendor::kIntel, "node3");
    FAIL("expected an error");
  } catch (const std::runtime_error& e) {
    CHECK(std::string(e.what()) ==
          "--gpu-vendor intel: host node3 has no intel GPUs, only 4 nvidia and 8 amd; drop --gpu-vendor to bind the "
          "GPUs it has, or --gpu-bind none to bind none");
  }
}
