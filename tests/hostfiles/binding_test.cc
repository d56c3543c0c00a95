// The binding policy (hostfiles/binding.h): CPU lists, --bind-to plans and
// GPU binding by local rank. Pure; the agent's reading of the host is tested
// in tests/agent/.
#include <catch2/catch.hpp>

#include <optional>
#include <stdexcept>

#include "hostfiles/binding.h"

using namespace dl::hostfiles;
using V = std::vector<int>;
using Gpus = std::vector<std::string>;

TEST_CASE("cpu lists parse and format as the kernel writes them", "[hostfiles]") {
  CHECK(parse_cpu_list("0-3,8,10-11\n") == V{0, 1, 2, 3, 8, 10, 11});
  CHECK(parse_cpu_list("") == V{});
  CHECK(parse_cpu_list("5") == V{5});
  CHECK(parse_cpu_list("\t0-1 \n") == V{0, 1});  // as /proc/PID/status writes it
  CHECK(format_cpu_list({0, 1, 2, 3, 8, 10, 11}) == "0-3,8,10-11");
  CHECK(format_cpu_list({}) == "");
  CHECK_THROWS_AS(parse_cpu_list("3-1"), std::invalid_argument);
  CHECK_THROWS_AS(parse_cpu_list("a"), std::invalid_argument);
  CHECK_THROWS_AS(parse_cpu_list("1;2"), std::invalid_argument);
}

TEST_CASE("bind-to core: consecutive cores by local rank, all their threads", "[hostfiles]") {
  CpuTopology t;
  t.cores = {{0, 4}, {1, 5}, {2, 6}, {3, 7}};
  t.numa = {{0, 1, 4, 5}, {2, 3, 6, 7}};
  auto p = plan_cpus(CpuBind::kCore, t, 4, 1, "h1");
  CHECK(p == std::vector<V>{{0, 4}, {1, 5}, {2, 6}, {3, 7}});
  auto q = plan_cpus(CpuBind::kCore, t, 2, 2, "h1");
  CHECK(q == std::vector<V>{{0, 1, 4, 5}, {2, 3, 6, 7}});
  try {
    plan_cpus(CpuBind::kCore, t, 3, 2, "node7");
    FAIL("expected an error");
  } catch (const std::runtime_error& e) {
    const std::string m = e.what();
    CHECK(m.find("node7 has 4 usable cores") != std::string::npos);
    CHECK(m.find("need 6") != std::string::npos);
    CHECK(m.find("--bind-to numa or none") != std::string::npos);
  }
}

TEST_CASE("bind-to hwthread: consecutive hardware threads, core by core", "[hostfiles]") {
  CpuTopology t;
  t.cores = {{0, 4}, {1, 5}, {2, 6}, {3, 7}};
  CHECK(plan_cpus(CpuBind::kHwthread, t, 3, 1, "h1") == std::vector<V>{{0}, {4}, {1}});
  CHECK(plan_cpus(CpuBind::kHwthread, t, 2, 3, "h1") == std::vector<V>{{0, 1, 4}, {2, 5, 6}});
  CHECK(plan_cpus(CpuBind::kHwthread, t, 8, 1, "h1").back() == V{7});
  try {
    plan_cpus(CpuBind::kHwthread, t, 5, 2, "node3");
    FAIL("expected an error");
  } catch (const std::runtime_error& e) {
    CHECK(std::string(e.what()).find("node3 has 8 usable hardware threads") != std::string::npos);
    CHECK(std::string(e.what()).find("need 10") != std::string::npos);
  }
}

TEST_CASE("bind-to socket: local ranks in blocks over the sockets, each its whole socket", "[hostfiles]") {
  CpuTopology t;
  t.cores = {{0, 4}, {1, 5}, {2, 6}, {3, 7}};
  t.packages = {{0, 1, 4, 5}, {2, 3, 6, 7}};
  CHECK(plan_cpus(CpuBind::kSocket, t, 4, 1, "h") ==
        std::vector<V>{{0, 1, 4, 5}, {0, 1, 4, 5}, {2, 3, 6, 7}, {2, 3, 6, 7}});
  CHECK(plan_cpus(CpuBind::kSocket, t, 1, 1, "h") == std::vector<V>{{0, 1, 4, 5}});
  t.packages.clear();  // an agent that reports no sockets
  CHECK_THROWS_WITH(plan_cpus(CpuBind::kSocket, t, 1, 1, "node9"), Catch::Contains("node9 reported no sockets"));
}

TEST_CASE("bind-to numa: local ranks in blocks over the nodes, and none binds nothing", "[hostfiles]") {
  CpuTopology t;
  t.cores = {{0}, {1}, {2}, {3}};
  t.numa = {{0, 1}, {2, 3}};
  CHECK(plan_cpus(CpuBind::kNuma, t, 4, 1, "h") == std::vector<V>{{0, 1}, {0, 1}, {2, 3}, {2, 3}});
  CHECK(plan_cpus(CpuBind::kNuma, t, 3, 1, "h") == std::vector<V>{{0, 1}, {0, 1}, {2, 3}});
  CHECK(plan_cpus(CpuBind::kNuma, t, 1, 1, "h") == std::vector<V>{{0, 1}});
  CHECK(plan_cpus(CpuBind::kNone, t, 2, 1, "h") == std::vector<V>{{}, {}});
  CHECK_THROWS_AS(plan_cpus(CpuBind::kNuma, CpuTopology{}, 2, 1, "h"), std::runtime_error);
}

TEST_CASE("bind-to numa: a rank whose GPU's node is known gets that node, the others blocks", "[hostfiles][numa]") {
  // Two sockets whose kernel ids are 0 and 1, GPUs 0,1 on node 1 and 2,3 on
  // node 0: block spreading by GPU order would put ranks 0,1 on the wrong socket.
  CpuTopology t;
  t.cores = {{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}};
  t.numa = {{0, 1, 2, 3}, {4, 5, 6, 7}};
  t.numa_ids = {0, 1};
  const std::vector<V> follow{{4, 5, 6, 7}, {4, 5, 6, 7}, {0, 1, 2, 3}, {0, 1, 2, 3}};
  CHECK(plan_cpus(CpuBind::kNuma, t, 4, 1, "h", {1, 1, 0, 0}) == follow);
  const std::vector<V> blocks{{0, 1, 2, 3}, {0, 1, 2, 3}, {4, 5, 6, 7}, {4, 5, 6, 7}};
  CHECK(plan_cpus(CpuBind::kNuma, t, 4, 1, "h") == blocks);                 // no GPU nodes: blocks, as before
  CHECK(plan_cpus(CpuBind::kNuma, t, 4, 1, "h", {-1, -1, -1, -1}) == blocks);  // all unknown
  // Unknown for some: those keep their block, the known ones follow their GPU.
  CHECK(plan_cpus(CpuBind::kNuma, t, 4, 1, "h", {1, -1, -1, 0}) == std::vector<V>{{4, 5, 6, 7}, {0, 1, 2, 3}, {4, 5, 6, 7},
                                                                          {0, 1, 2, 3}});
  // A node with no usable CPUs (outside the agent's cgroup, or memory only) is not in numa_ids: blocks.
  CHECK(plan_cpus(CpuBind::kNuma, t, 4, 1, "h", {3, 3, 3, 3}) == blocks);
  // Sparse ids: the match is by the kernel's id, not by position.
  t.numa_ids = {0, 2};
  CHECK(plan_cpus(CpuBind::kNuma, t, 2, 1, "h", {2, 0}) == std::vector<V>{{4, 5, 6, 7}, {0, 1, 2, 3}});
  CHECK(plan_cpus(CpuBind::kNuma, t, 2, 1, "h", {1, 1}) == std::vector<V>{{0, 1, 2, 3}, {4, 5, 6, 7}});
  // An older agent reported no ids: the GPU nodes cannot be matched.
  t.numa_ids.clear();
  CHECK(plan_cpus(CpuBind::kNuma, t, 4, 1, "h", {1, 1, 0, 0}) == blocks);
  // core binding ignores the GPU nodes.
  t.numa_ids = {0, 1};
  CHECK(plan_cpus(CpuBind::kCore, t, 2, 1, "h", {1, 1}) == std::vector<V>{{0}, {1}});
}

namespace {
// The three columns of every local rank's plan, for compact expectations.
std::vector<std::string> visible_of(const std::vector<GpuAssignment>& a) {
  std::vector<std::string> out;
  for (const auto& x : a) out.push_back(x.visible);
  return out;
}
std::vector<std::string> devices_of(const std::vector<GpuAssignment>& a) {
  std::vector<std::string> out;
  for (const auto& x : a) out.push_back(x.devices);
  return out;
}
std::vector<Gpus> physical_of(const std::vector<GpuAssignment>& a) {
  std::vector<Gpus> out;
  for (const auto& x : a) out.push_back(x.physical);
  return out;
}
std::string shortage(GpuBind mode, const Gpus& gpus, int local_world, int per_rank,
                     const std::string& host) {
  try {
    plan_gpus(mode, gpus, local_world, per_rank, false, host);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "<no error>";
}
}  // namespace

TEST_CASE("gpu visible: every rank sees all the host's GPUs in its order and owns index LOCAL_RANK",
          "[hostfiles][gpu]") {
  const Gpus four{"0", "1", "2", "3"};
  const auto p = plan_gpus(GpuBind::kVisible, four, 4, 1, false, "h");
  CHECK(visible_of(p) == Gpus{"0,1,2,3", "0,1,2,3", "0,1,2,3", "0,1,2,3"});
  CHECK(devices_of(p) == Gpus{"0", "1", "2", "3"});  // cuda:LOCAL_RANK is the rank's own GPU
  CHECK(physical_of(p) == std::vector<Gpus>{{"0"}, {"1"}, {"2"}, {"3"}});
  // Fewer ranks than GPUs: they still see every GPU (as under torchrun), and own the first ones.
  const auto two = plan_gpus(GpuBind::kVisible, four, 2, 1, false, "h");
  CHECK(visible_of(two) == Gpus{"0,1,2,3", "0,1,2,3"});
  CHECK(devices_of(two) == Gpus{"0", "1"});
}

TEST_CASE("gpu visible: the host's own ids and order are kept, and the indices point into them", "[hostfiles][gpu]") {
  // A scheduler gave the agent GPUs 6,4,7,5 (CUDA_VISIBLE_DEVICES): device 0 is physical 6.
  const Gpus given{"6", "4", "7", "5"};
  const auto p = plan_gpus(GpuBind::kVisible, given, 4, 1, false, "h");
  CHECK(visible_of(p) == Gpus{"6,4,7,5", "6,4,7,5", "6,4,7,5", "6,4,7,5"});
  CHECK(devices_of(p) == Gpus{"0", "1", "2", "3"});
  CHECK(physical_of(p) == std::vector<Gpus>{{"6"}, {"4"}, {"7"}, {"5"}});
  // Positions in the host's list (what the GPU's NUMA node is looked up by), not the ids.
  CHECK(p[1].positions == V{1});
  CHECK(plan_gpus(GpuBind::kIsolate, given, 2, 2, false, "h")[1].positions == V{2, 3});
  CHECK(plan_gpus(GpuBind::kIsolate, {"0", "1"}, 3, 1, true, "h")[2].positions == V{0});  // shared round-robin
  const auto u = plan_gpus(GpuBind::kVisible, {"GPU-aa", "GPU-bb"}, 2, 1, false, "h");
  CHECK(u[1].visible == "GPU-aa,GPU-bb");
  CHECK(u[1].physical == Gpus{"GPU-bb"});
}

TEST_CASE("gpu visible: --gpus-per-rank K owns indices L*K .. L*K+K-1", "[hostfiles][gpu]") {
  const Gpus eight{"0", "1", "2", "3", "4", "5", "6", "7"};
  const auto p = plan_gpus(GpuBind::kVisible, eight, 4, 2, false, "h");
  CHECK(devices_of(p) == Gpus{"0,1", "2,3", "4,5", "6,7"});
  CHECK(visible_of(p)[3] == "0,1,2,3,4,5,6,7");
  CHECK(physical_of(p)[2] == Gpus{"4", "5"});
  const auto q = plan_gpus(GpuBind::kVisible, eight, 2, 4, false, "h");
  CHECK(devices_of(q) == Gpus{"0,1,2,3", "4,5,6,7"});
}

TEST_CASE("gpu isolate: every rank sees only its own GPUs, as device 0..K-1", "[hostfiles][gpu]") {
  const Gpus given{"4", "5", "6", "7"};
  const auto p = plan_gpus(GpuBind::kIsolate, given, 4, 1, false, "h");
  CHECK(visible_of(p) == Gpus{"4", "5", "6", "7"});
  CHECK(devices_of(p) == Gpus{"0", "0", "0", "0"});  // cuda:0 is the rank's own GPU
  CHECK(physical_of(p) == std::vector<Gpus>{{"4"}, {"5"}, {"6"}, {"7"}});
  const auto k = plan_gpus(GpuBind::kIsolate, given, 2, 2, false, "h");
  CHECK(visible_of(k) == Gpus{"4,5", "6,7"});
  CHECK(devices_of(k) == Gpus{"0,1", "0,1"});
}

TEST_CASE("gpu none, and a host without GPUs: nothing to set in any mode", "[hostfiles][gpu]") {
  CHECK(plan_gpus(GpuBind::kNone, {"0", "1"}, 2, 1, false, "h").empty());
  CHECK(plan_gpus(GpuBind::kNone, {"0"}, 8, 1, false, "h").empty());  // never too many ranks when nothing is bound
  for (GpuBind mode : {GpuBind::kVisible, GpuBind::kIsolate, GpuBind::kNone}) {
    INFO(to_string(mode));
    CHECK(plan_gpus(mode, {}, 4, 1, false, "h").empty());  // no GPUs is no error
    CHECK(plan_gpus(mode, {}, 4, 2, true, "h").empty());
  }
}

TEST_CASE("gpu: more ranks than GPUs on a host that has some is an error naming the host, counts and fixes",
          "[hostfiles][gpu]") {
  const Gpus four{"0", "1", "2", "3"};
  SECTION("isolate, 5 ranks on 4 GPUs") {
    const std::string m = shortage(GpuBind::kIsolate, four, 5, 1, "gpu07");
    CHECK(m == "--gpu-bind isolate: host gpu07 has 4 GPUs, but its 5 ranks x 1 GPU each (--gpus-per-rank 1) need 5; "
               "run at most 4 ranks on gpu07 (-n, --npernode), leave the GPUs alone with --gpu-bind none, or let "
               "ranks share them round-robin with --oversubscribe-gpus");
  }
  SECTION("isolate, 3 ranks x 2 on 4 GPUs: lowering --gpus-per-rank is a fix too") {
    const std::string m = shortage(GpuBind::kIsolate, four, 3, 2, "gpu07");
    CHECK_THAT(m, Catch::StartsWith("--gpu-bind isolate: host gpu07 has 4 GPUs, but its 3 ranks x 2 GPUs each "
                                    "(--gpus-per-rank 2) need 6; run at most 2 ranks on gpu07 (-n, --npernode) or "
                                    "lower --gpus-per-rank,"));
    CHECK_THAT(m, Catch::Contains("--gpu-bind none") && Catch::Contains("--oversubscribe-gpus"));
  }
  SECTION("one rank wanting more GPUs than the host has") {
    const std::string m = shortage(GpuBind::kIsolate, {"0"}, 1, 2, "box");
    CHECK_THAT(m, Catch::Contains("host box has 1 GPU, but its 1 rank x 2 GPUs each") &&
                      Catch::Contains("lower --gpus-per-rank to at most 1"));
  }
  SECTION("exactly as many as fit is fine") {
    CHECK(plan_gpus(GpuBind::kVisible, four, 4, 1, false, "h").size() == 4);
    CHECK(plan_gpus(GpuBind::kIsolate, four, 2, 2, false, "h").size() == 2);
  }
}

TEST_CASE("gpu: visible shares a host's GPUs round-robin when they are too few, with a warning naming the flag",
          "[hostfiles][gpu]") {
  const Gpus two{"0", "1"};
  const auto v = plan_gpus(GpuBind::kVisible, two, 3, 1, false, "h");
  CHECK(devices_of(v) == Gpus{"0", "1", "0"});
  const std::string w = gpu_sharing_warning(GpuBind::kVisible, 2, 3, 1, false, "h", "--nproc-per-node");
  CHECK_THAT(w, Catch::StartsWith("dlaunch: warning: --gpu-bind visible: host h has 2 GPUs for 3 ranks x 1,") &&
                    Catch::Contains("run at most 2 on h (--nproc-per-node)") && Catch::EndsWith("\n"));
  CHECK(gpu_sharing_warning(GpuBind::kVisible, 2, 2, 1, false, "h", "-n").empty());  // they fit
  CHECK(gpu_sharing_warning(GpuBind::kVisible, 2, 3, 1, true, "h", "-n").empty());   // --oversubscribe-gpus: meant
  CHECK(gpu_sharing_warning(GpuBind::kIsolate, 2, 3, 1, false, "h", "-n").empty());  // refused instead, by plan_gpus
  CHECK(gpu_sharing_warning(GpuBind::kVisible, 0, 3, 1, false, "h", "-n").empty());  // no GPUs, nothing shared
}

TEST_CASE("gpu: --oversubscribe-gpus lets ranks share GPUs round-robin by local rank", "[hostfiles][gpu]") {
  const Gpus two{"0", "1"};
  const auto v = plan_gpus(GpuBind::kVisible, two, 4, 1, true, "h");
  CHECK(visible_of(v) == Gpus{"0,1", "0,1", "0,1", "0,1"});
  CHECK(devices_of(v) == Gpus{"0", "1", "0", "1"});
  const auto i = plan_gpus(GpuBind::kIsolate, two, 4, 1, true, "h");
  CHECK(visible_of(i) == Gpus{"0", "1", "0", "1"});
  CHECK(devices_of(i) == Gpus{"0", "0", "0", "0"});
  const Gpus four{"0", "1", "2", "3"};
  const auto k = plan_gpus(GpuBind::kIsolate, four, 3, 2, true, "h");
  CHECK(visible_of(k) == Gpus{"0,1", "2,3", "0,1"});  // K consecutive, wrapping round
  // Never more GPUs per rank than the host has.
  const auto big = plan_gpus(GpuBind::kVisible, four, 2, 8, true, "h");
  CHECK(devices_of(big) == Gpus{"0,1,2,3", "0,1,2,3"});
  CHECK(plan_gpus(GpuBind::kIsolate, four, 1, 8, true, "h")[0].visible == "0,1,2,3");
}

TEST_CASE("gpu: each rank's own devices go in DLAUNCH_GPUS", "[hostfiles][gpu]") {
  CHECK(std::string(kDlaunchGpus) == "DLAUNCH_GPUS");
}
