// `dlaunch doctor` on the namespace cluster: GPUs and clocks. This machine
// has no GPU, so a host "has" GPUs through a stand-in nvidia-smi that only its
// sshd's sessions see (bind-mounted in its mount namespace); nothing else is
// faked: the CUDA probe, the peer, ssh and the launcher are the real ones.
// A host's clock is moved for its sessions by an LD_PRELOAD library
// (clock_shift.c): the kernel has one wall clock for every namespace.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "tests/doctor/doctor_util.h"

using dl::cluster::Cluster;
using namespace dl::doctor_test;

namespace {
// Gives `host` an nvidia-smi that lists `gpus` H100s (for `-L`, which GPU
// detection falls back to where the driver's /proc tree is missing, as here,
// and for the doctor's --query-gpu): a copy of
// /usr/local/sbin (on sshd's PATH) with the stand-in added, bind-mounted over
// /usr/local/sbin in that host's sshd mount namespace only.
void fake_nvidia_smi(const Cluster& c, int host, int gpus) {
  const std::string dir = c.dir() + "/sbin-" + c.host(host);
  std::filesystem::create_directories(dir);
  std::filesystem::copy("/usr/local/sbin", dir, std::filesystem::copy_options::recursive);
  {
    std::ofstream f(dir + "/nvidia-smi");
    f << "#!/bin/sh\n# dlaunch test stand-in: " << gpus << " GPUs for -L and --query-gpu=pci.bus_id,name,...\n"
      << "i=0; while [ $i -lt " << gpus << " ]; do\n"
      << "  if [ \"$1\" = -L ]; then echo \"GPU $i: NVIDIA H100 80GB HBM3 (UUID: GPU-fake-$i)\"\n"
      << "  else echo \"00000000:1$i:00.0, NVIDIA H100 80GB HBM3, 81559, 0, 550.54.15\"; fi\n"
      << "  i=$((i+1))\ndone\n";
  }
  std::filesystem::permissions(dir + "/nvidia-smi", std::filesystem::perms::owner_all);
  const std::string pid = read_file(c.dir() + "/" + c.host(host) + "/sshd.pid");
  auto m = dl::cluster::run_argv({"nsenter", "-t", pid.substr(0, pid.find('\n')), "-m", "mount", "--bind", dir, "/usr/local/sbin"});
  REQUIRE(m.status == 0);
  auto seen = c.run_in(c.host(0), "ssh -F " + c.ssh_config() + " " + c.host(host) + " 'nvidia-smi --query-gpu=index --format=csv | wc -l'");
  INFO(seen.output);
  REQUIRE(seen.status == 0);
}
}  // namespace

TEST_CASE("gpus per node: each host's GPUs (the driver's) against --gpus-per-node", "[doctor][cluster][slow]") {
  Cluster c(3);
  REQUIRE(contains(ssh_path(c), "/usr/local/sbin"));
  fake_nvidia_smi(c, 1, 2);
  auto r = run_doctor(c, "--quick --gpus-per-node 4");
  INFO(r.output);
  CHECK(r.status == 1);
  auto f = failures(r.output, "gpus");
  // h0 and h2 share one line: one problem, however many hosts share it.
  REQUIRE(f.size() == 2);
  CHECK(contains(r.output, kFail + " gpus: " + c.address(1) + ": sees 2 GPUs, --gpus-per-node wants 4;"));
  const std::string net = c.address(0).substr(0, c.address(0).rfind('.') + 1);
  CHECK(contains(r.output, kFail + " gpus: 2 hosts (" + net + "[1,3]): sees 0 GPUs (no nvidia-smi), --gpus-per-node wants 4;"));
  CHECK(count_failures(r.output) == 2);
  CHECK(contains(row_of(r.output, c.address(1)), kFail + " 2"));
  CHECK(leftovers(c) == "");

  SECTION("without --gpus-per-node a GPU-less host is fine, and the JSON lists the GPUs") {
    auto j = run_doctor(c, "--quick --json");
    INFO(j.output);
    auto doc = nlohmann::json::parse(j.output.substr(j.output.find('{')));
    CHECK(doc["hosts"][0]["checks"]["gpus"]["text"] == "none");
    CHECK(doc["hosts"][0]["checks"]["gpus"]["mark"] == "ok");
    REQUIRE(doc["hosts"][1]["facts"]["gpus"].size() == 2);
    CHECK(doc["hosts"][1]["facts"]["gpus"][1]["name"] == "NVIDIA H100 80GB HBM3");
    CHECK(doc["hosts"][1]["facts"]["gpus"][1]["vendor"] == "nvidia");
    CHECK(doc["hosts"][1]["facts"]["gpus"][1]["driver"] == "550.54.15");
    CHECK(doc["hosts"][1]["facts"]["gpus"][1]["memory_bytes"] == 81559ULL << 20);
    CHECK(leftovers(c) == "");
  }
}

TEST_CASE("the driver lists GPUs but CUDA sees none: the reason and the fix, per host", "[doctor][cluster][slow]") {
  Cluster c(3);
  fake_nvidia_smi(c, 1, 2);
  fake_nvidia_smi(c, 2, 4);
  // h2's sessions hide every GPU from CUDA, a classic of job scripts and modules.
  REQUIRE(c.script({"setenv", c.id(), "h2", "CUDA_VISIBLE_DEVICES="}).status == 0);
  auto r = run_doctor(c, "--quick");
  INFO(r.output);
  CHECK(r.status == 1);
  auto f = failures(r.output, "gpus");
  REQUIRE(f.size() == 2);
  CHECK(contains(r.output, kFail + " gpus: " + c.address(2) + ": the driver lists 4 GPUs but CUDA sees none: "
                                   "CUDA_VISIBLE_DEVICES is set to '', which hides every GPU; unset CUDA_VISIBLE_DEVICES in that host's environment"));
  // h1: this machine has no NVIDIA driver, so the real probe finds no libcuda
  // (on a machine with one, cuInit finds no device behind the stand-in).
  const auto h1 = lines_starting(r.output, kFail + " gpus: " + c.address(1) + ": the driver lists 2 GPUs but CUDA sees none: ");
  REQUIRE(h1.size() == 1);
  CHECK((contains(h1[0], "libcuda.so.1 cannot be loaded") || contains(h1[0], "cuInit failed")));
  CHECK(contains(h1[0], "; "));  // a fix follows
  CHECK(contains(row_of(r.output, c.address(1)), kFail + " 0 of 2"));
  CHECK(contains(row_of(r.output, c.address(2)), kFail + " 0 of 4"));
  CHECK(contains(row_of(r.output, c.address(0)), "\u2713 none"));
  CHECK(count_failures(r.output) == 2);
  CHECK(leftovers(c) == "");
}

TEST_CASE("a host whose clock is 30 s behind is named, the others pass", "[doctor][cluster][slow]") {
  Cluster c(3);
  REQUIRE(c.script({"setenv", c.id(), "h2", std::string("LD_PRELOAD=") + DL_CLOCK_SHIFT_LIB, "DL_CLOCK_SHIFT_S=-30"}).status == 0);
  // The shift is real for every program of h2's sessions.
  auto d = c.run_in("h0", "a=$(date +%s); b=$(ssh -F " + c.ssh_config() + " h2 date +%s); echo $((a - b))");
  INFO(d.output);
  REQUIRE(d.status == 0);
  REQUIRE(std::abs(std::stoi(d.output) - 30) <= 2);
  auto r = run_doctor(c, "--quick");
  INFO(r.output);
  CHECK(r.status == 1);
  auto f = failures(r.output, "clock");
  REQUIRE(f.size() == 1);
  CHECK(contains(f[0], c.address(2) + ": its clock is -"));
  CHECK(contains(f[0], "s off the launcher's (more than --clock-threshold 1 s); synchronise the clocks"));
  CHECK(count_failures(r.output) == 1);
  CHECK(contains(row_of(r.output, c.address(2)), kFail + " -"));
  for (int h : {0, 1}) {
    const std::string row = row_of(r.output, c.address(h));
    CHECK((contains(row, "\u2713 +") || contains(row, "\u2713 -")));
  }

  SECTION("a looser --clock-threshold lets it pass") {
    auto ok = run_doctor(c, "--quick --clock-threshold 60");
    INFO(ok.output);
    CHECK(ok.status == 0);
    CHECK(failures(ok.output, "clock").empty());
    CHECK(leftovers(c) == "");
  }
}
