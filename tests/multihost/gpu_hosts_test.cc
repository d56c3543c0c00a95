// --gpu-bind across hosts with different GPU counts, on the namespace cluster
// (tests/cluster): host A (h1) has 2 GPUs and host B (h2) 4. This machine has
// no GPU, so each host's agent finds its own through a fake NVIDIA driver
// tree: DLAUNCH_SYSFS_ROOT, set for that host's ssh sessions only
// (cluster.sh setenv), as per-host as real hardware is, unlike the job-wide
// --gpus-per-node. The launcher runs in h0, which has no slots. Each rank
// resolves its device as torch does: the visible list from
// CUDA_VISIBLE_DEVICES, indexed by LOCAL_RANK (visible) or 0 (isolate).
#include <catch2/catch.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "tests/multihost/multihost_util.h"

using dl::cluster::Cluster;
using namespace dl::multihost;

namespace {
// Prints "host=H rank=R local=L phys=P" per rank, P the physical id the
// torch idiom picks; exits 3 where torch would say "invalid device ordinal".
const char* kResolve = R"PY(import os, socket, sys
visible = [x for x in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if x]
idx = int(os.environ["LOCAL_RANK"]) if sys.argv[1] == "visible" else 0
if idx >= len(visible):
    print(f"rank={os.environ['RANK']} error=invalid device ordinal {idx} of {len(visible)}", flush=True)
    sys.exit(3)
print(f"host={socket.gethostname()} rank={os.environ['RANK']} local={os.environ['LOCAL_RANK']} phys={visible[idx]}",
      flush=True)
)PY";

// Gives `host` a fake NVIDIA driver tree with `gpus` GPUs for its ssh sessions.
void give_gpus(const Cluster& c, int host, int gpus) {
  const std::string root = c.dir() + "/sysfs-" + c.host(host);
  for (int i = 0; i < gpus; ++i) {
    char address[32];
    std::snprintf(address, sizeof address, "0000:%02x:00.0", 0x18 + 0x10 * i);
    std::filesystem::create_directories(root + "/proc/driver/nvidia/gpus/" + address);
    std::ofstream(root + "/proc/driver/nvidia/gpus/" + address + "/information") << "Model: Fake H100\n";
  }
  auto r = c.script({"setenv", c.id(), c.host(host), "DLAUNCH_SYSFS_ROOT=" + root});
  INFO(r.output);
  REQUIRE(r.status == 0);
}

// A hostfile naming A (h1) with `a_slots` and B (h2) with `b_slots`.
std::string hostfile(const Cluster& c, int a_slots, int b_slots) {
  const std::string path = c.dir() + "/gpu-hostfile-" + std::to_string(a_slots) + "-" + std::to_string(b_slots);
  std::ofstream(path) << c.address(1) << " slots=" << a_slots << "\n" << c.address(2) << " slots=" << b_slots << "\n";
  return path;
}

dl::cluster::RunResult run(const Cluster& c, const std::string& hosts, const std::string& args) {
  return c.run_in("h0", bin("dlaunch") + " --hostfile " + hosts + " --ssh-config " + c.ssh_config() + " " + args +
                            " </dev/null",
                  std::chrono::seconds(60));
}

struct Line {
  std::string host;
  int local = -1;
  std::string phys;
};

std::map<int, Line> parse(const std::string& out) {
  std::map<int, Line> m;
  std::istringstream in(out);
  std::string l;
  while (std::getline(in, l)) {
    std::istringstream words(l);
    std::map<std::string, std::string> kv;
    for (std::string w; words >> w;)
      if (auto eq = w.find('='); eq != std::string::npos) kv[w.substr(0, eq)] = w.substr(eq + 1);
    if (kv.count("rank") && kv.count("phys") && kv.count("host"))
      m[std::stoi(kv["rank"])] = Line{kv["host"], std::stoi(kv["local"]), kv["phys"]};
  }
  return m;
}
}  // namespace

TEST_CASE("gpu hosts: 2 GPUs on A and 4 on B, every rank gets a distinct GPU of its own host",
          "[multihost][cluster][gpu][slow]") {
  Cluster c(3);
  give_gpus(c, 1, 2);
  give_gpus(c, 2, 4);
  const std::string script = c.dir() + "/resolve.py";
  std::ofstream(script) << kResolve;
  const std::string hosts = hostfile(c, 2, 4);

  for (const std::string mode : {"visible", "isolate"}) {
    INFO("--gpu-bind " << mode);
    auto r = run(c, hosts, "-n 6 --gpu-bind " + mode + " python3 " + script + " " + mode);
    INFO(r.output);
    REQUIRE(r.status == 0);
    const auto lines = parse(r.output);
    REQUIRE(lines.size() == 6);
    // Ranks 0,1 on A (h1) and 2..5 on B (h2), by hostfile order; each host's GPUs are 0..N-1.
    std::map<std::string, std::set<std::string>> used;
    for (const auto& [rank, line] : lines) {
      INFO("rank " << rank << " on " << line.host << " phys " << line.phys);
      const bool on_a = rank < 2;
      CHECK(line.host == (on_a ? "h1" : "h2"));
      CHECK(line.local == (on_a ? rank : rank - 2));
      const std::set<std::string> valid = on_a ? std::set<std::string>{"0", "1"}
                                               : std::set<std::string>{"0", "1", "2", "3"};
      CHECK(valid.count(line.phys) == 1);
      CHECK(used[line.host].insert(line.phys).second);  // no two ranks of a host share a GPU
    }
    CHECK(used["h1"].size() == 2);
    CHECK(used["h2"].size() == 4);
  }
  CHECK(wait_clean(c, "resolve.py").empty());
}

TEST_CASE("gpu hosts: isolate, more ranks than the smaller host has GPUs is refused, naming that host",
          "[multihost][cluster][gpu][slow]") {
  Cluster c(3);
  give_gpus(c, 1, 2);
  give_gpus(c, 2, 4);
  // B's 4 slots fit its 4 GPUs; A's 3 do not fit its 2.
  const std::string mark = unique_marker();
  auto r = run(c, hostfile(c, 3, 4), "-n 7 --gpu-bind isolate sleep " + mark);
  INFO(r.output);
  CHECK(r.status == 2);
  CHECK(contains(r.output, "host " + c.address(1) + " has 2 GPUs, but its 3 ranks"));
  CHECK_FALSE(contains(r.output, "host " + c.address(2) + " has"));
  CHECK(wait_clean(c, mark).empty());  // refused before any rank started, and the agents are gone
}
