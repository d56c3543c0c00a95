// plan_launch() is pure: from a placement, the options and the agents'
// hellos it decides every rank's identity, GPUs, CPUs, stdin and the MPI
// section, or refuses the job. Tested here without any process or socket.
#include <catch2/catch.hpp>

#include "control/rank_identity.h"
#include "launcher/dry_run.h"
#include "launcher/launch_plan.h"
#include "tests/launcher/rank_env_parts.h"

using namespace dl::launcher;
namespace msg = dl::control::msg;
namespace hf = dl::hostfiles;

namespace {
// Node i's hello: its free port is 29500 + 10 * i, so MASTER_PORT shows whose it is.
msg::Hello hello(int node, std::vector<std::string> gpus = {}, bool pmix = true) {
  msg::Hello h;
  h.version = "test";
  h.node = node;
  h.host = "n" + std::to_string(node);
  h.pid = 1000 + node;
  h.free_port = 29500 + 10 * node;
  h.gpus = std::move(gpus);
  h.gpu_vendor = "nvidia";  // whose GPUs a test sets later, unless it says otherwise
  h.pmix = pmix;
  return h;
}

// `hosts` hosts named n0, n1, ... with `slots` slots each, filled by slot (or round robin).
hf::Placement placement(int hosts, int slots, hf::MapBy by = hf::MapBy::kSlot) {
  std::vector<hf::HostEntry> entries;
  for (int i = 0; i < hosts; ++i) entries.push_back(hf::HostEntry{.host = "n" + std::to_string(i), .slots = slots});
  hf::PlacementOptions po;
  po.map_by = by;
  return hf::place(entries, po);
}

RunOptions parse(std::vector<std::string> args) {
  bool help = false;
  return parse_run_options(args, &help);
}

RunOptions options() {
  RunOptions o;
  o.command = {"./train", "--epochs", "3"};
  o.heartbeat_timeout_s = 7;
  return o;
}

// The planner's input for `p`: every node remote (reached at 10.0.0.<i+1>),
// with a hello, unless `local` says otherwise.
PlanInput input(const hf::Placement& p, const RunOptions& o, std::vector<bool> local = {}) {
  PlanInput in;
  in.placement = &p;
  in.opts = &o;
  for (size_t i = 0; i < p.nodes.size(); ++i) {
    PlanNode n;
    n.host = p.nodes[i].host;
    n.local = i < local.size() && local[i];
    n.hello = hello(static_cast<int>(i));
    n.reach_addr = n.local ? "127.0.0.1" : "10.0.0." + std::to_string(i + 1);
    in.nodes.push_back(std::move(n));
  }
  for (const auto& r : p.ranks) in.nodes.at(static_cast<size_t>(r.node)).ranks.push_back(r.rank);
  in.job_id = "dl-test";
  in.token = std::string(64, 't');
  in.control_host = "10.9.9.9";
  in.store_port = 4444;
  in.wdir = "/work/dir";
  return in;
}

// Rank `rank`'s launch in the plan (whichever node runs it), as sent, and
// as its agent completes it (control/rank_identity.h: argv and identity).
const msg::Launch& launch_of(const LaunchPlan& plan, int rank) {
  for (const auto& l : plan.launches)
    if (l)
      for (const auto& s : l->ranks)
        if (s.rank == rank) return *l;
  FAIL("rank " << rank << " is in no launch message");
  throw std::logic_error("unreachable");
}

msg::Launch completed(const LaunchPlan& plan, msg::Launch l) {
  dl::control::complete_launch(l, plan.shared.env);
  return l;
}

// Rank `rank`'s spec as its agent starts it.
msg::RankSpec spec_of(const LaunchPlan& plan, int rank) {
  for (auto& s : completed(plan, launch_of(plan, rank)).ranks)
    if (s.rank == rank) return s;
  throw std::logic_error("unreachable");
}

// Rank `rank`'s value of `name` as its agent composes it: the rank's own
// variables over its launch's (its host's, over every host's).
std::string env_of(const LaunchPlan& plan, int rank, const std::string& name) {
  const msg::Launch l = completed(plan, launch_of(plan, rank));
  const auto s = spec_of(plan, rank);
  if (auto it = s.env.find(name); it != s.env.end()) return it->second;
  auto it = l.env.find(name);
  return it == l.env.end() ? "<unset>" : it->second;
}
}  // namespace

TEST_CASE("launch plan: one message per node with every rank's identity", "[launcher][plan]") {
  const auto p = placement(2, 2);
  const auto o = options();
  auto in = input(p, o);
  in.nodes[1].hello->free_port = 31999;  // only node 0's free port may become MASTER_PORT
  const auto plan = plan_launch(in);
  REQUIRE(plan.refusal == LaunchPlan::Refusal::kNone);
  REQUIRE(plan.launches.size() == 2);
  REQUIRE(plan.launches[0]);
  REQUIRE(plan.launches[1]);
  // Each node gets exactly its own ranks, in order, with the command line and the job's settings.
  CHECK(plan.launches[0]->ranks.size() == 2);
  CHECK(plan.launches[0]->ranks[0].rank == 0);
  CHECK(plan.launches[0]->ranks[1].rank == 1);
  CHECK(plan.launches[1]->ranks[0].rank == 2);
  CHECK(plan.launches[1]->ranks[1].rank == 3);
  for (const auto& l : plan.launches) {
    CHECK(l->wdir == "/work/dir");
    CHECK(l->hb_ms == 1750);  // a quarter of --heartbeat-timeout 7
    CHECK(l->hb_timeout_ms == 7000);
    // One app: its command once, for every rank.
    CHECK(l->argv == std::vector<std::string>{"./train", "--epochs", "3"});
    for (const auto& s : completed(plan, *l).ranks) CHECK(s.argv == std::vector<std::string>{"./train", "--epochs", "3"});
  }
  // Rank 3 is the second rank of the second node.
  CHECK(env_of(plan, 3, "RANK") == "3");
  CHECK(env_of(plan, 3, "LOCAL_RANK") == "1");
  CHECK(env_of(plan, 3, "WORLD_SIZE") == "4");
  CHECK(env_of(plan, 3, "NODE_RANK") == "1");
  CHECK(env_of(plan, 0, "LOCAL_RANK") == "0");
  CHECK(env_of(plan, 0, "NODE_RANK") == "0");
  // Node 0 is remote: the ranks meet at its address as reached from here, on its free port;
  // the store is this launcher's, at the address remote agents reach it.
  for (int r = 0; r < 4; ++r) {
    CHECK(env_of(plan, r, "MASTER_ADDR") == "10.0.0.1");
    CHECK(env_of(plan, r, "MASTER_PORT") == "29500");
    CHECK(env_of(plan, r, "DLAUNCH_STORE_ADDR") == "10.9.9.9:4444");
    CHECK(env_of(plan, r, "DLAUNCH_JOB_ID") == "dl-test");
  }
}

TEST_CASE("launch plan: what a host's ranks share is sent once, and each rank still gets exactly rank_env",
          "[launcher][plan]") {
  // 3 hosts x 4 ranks, round robin, so a host's ranks are not consecutive.
  auto p = placement(3, 4, hf::MapBy::kNode);
  auto o = options();
  o.exports = {"MASTER_PORT=1", "NODE_RANK=9", "KEEP=me"};  // -x: identity wins over it, the rest passes
  auto in = input(p, o);
  in.exports = resolve_exports(o.exports, {});
  auto plan = plan_launch(in);
  JobEnv je;
  je.placement = &p, je.job_id = in.job_id, je.token = in.token, je.master_addr = "10.0.0.1";
  je.master_port = 29500, je.store_addr = "10.9.9.9:4444";
  for (int r = 0; r < 12; ++r) {
    INFO("rank " << r);
    for (const auto& [k, v] : rank_env(je, r)) CHECK(env_of(plan, r, k) == v);
    CHECK(env_of(plan, r, "KEEP") == "me");
    // Only what differs from rank to rank travels with each rank, and its
    // identity not even that: its agent writes it from the launch's identity.
    const msg::Launch& sent = launch_of(plan, r);
    for (const auto& s : sent.ranks) {
      CHECK(s.env.count("WORLD_SIZE") == 0);
      CHECK(s.env.count("DLAUNCH_TOKEN") == 0);
      CHECK(s.env.count("RANK") == 0);
      CHECK(s.argv.empty());
    }
    REQUIRE(sent.identity);
    CHECK(sent.identity->cross_rank.size() == sent.ranks.size());
    CHECK(spec_of(plan, r).env.at("RANK") == std::to_string(r));
    // Nor does the host's: the agent writes it from the node index.
    CHECK(sent.env.count("NODE_RANK") == 0);
    CHECK(sent.env.count("LOCAL_WORLD_SIZE") == 0);
    CHECK(sent.identity->node == p.ranks[static_cast<size_t>(r)].node);
    CHECK(env_of(plan, r, "NODE_RANK") == std::to_string(p.ranks[static_cast<size_t>(r)].node));
    CHECK(env_of(plan, r, "DLAUNCH_HOST_ID") == "dl-test/" + std::to_string(p.ranks[static_cast<size_t>(r)].node));
  }
  // The two parts never name the same variable (the merge would hide one).
  for (int r = 0; r < 12; ++r)
    for (const auto& [k, v] : rank_own_env(je, r)) CHECK(node_env(je, p.ranks[r].node).count(k) == 0);
}

TEST_CASE("launch plan: the heartbeat interval is a quarter of --heartbeat-timeout, within 100 ms and 10 s",
          "[launcher][plan]") {
  CHECK(heartbeat_interval_ms(10) == 2500);
  CHECK(heartbeat_interval_ms(3) == 750);
  CHECK(heartbeat_interval_ms(0.2) == 100);
  CHECK(heartbeat_interval_ms(600) == 10000);
}

TEST_CASE("launch plan: all-local jobs meet on the loopback", "[launcher][plan]") {
  const auto p = hf::place_local(3, 1);
  const auto o = options();
  auto in = input(p, o, {true});
  const auto plan = plan_launch(in);
  REQUIRE(plan.launches.size() == 1);
  REQUIRE(plan.launches[0]);
  CHECK(plan.launches[0]->ranks.size() == 3);
  for (int r = 0; r < 3; ++r) {
    CHECK(env_of(plan, r, "MASTER_ADDR") == "127.0.0.1");
    CHECK(env_of(plan, r, "MASTER_PORT") == "29500");
    CHECK(env_of(plan, r, "DLAUNCH_STORE_ADDR") == "127.0.0.1:4444");
    CHECK(env_of(plan, r, "LOCAL_RANK") == std::to_string(r));
  }
}

TEST_CASE("launch plan: a local node 0 with remote others is reached at the control host", "[launcher][plan]") {
  const auto p = placement(2, 1);
  const auto o = options();
  auto in = input(p, o, {true, false});
  const auto plan = plan_launch(in);
  REQUIRE(plan.refusal == LaunchPlan::Refusal::kNone);
  // 127.0.0.1 would send node 1's rank to itself: node 0 is this machine, as remote agents reach it.
  for (int r = 0; r < 2; ++r) {
    CHECK(env_of(plan, r, "MASTER_ADDR") == "10.9.9.9");
    CHECK(env_of(plan, r, "DLAUNCH_STORE_ADDR") == "10.9.9.9:4444");
  }
}

TEST_CASE("launch plan: --gpu-bind visible (the default): every rank sees its host's GPUs, LOCAL_RANK indexes them",
          "[launcher][plan][gpu]") {
  const auto p = placement(2, 2);
  auto o = options();
  auto in = input(p, o);
  in.nodes[0].hello->gpus = {"4", "5", "6", "7"};
  in.nodes[1].hello->gpus = {"0", "1"};

  SECTION("one GPU per rank: the whole list, in the host's order, and DLAUNCH_GPUS = the local rank") {
    const auto plan = plan_launch(in);
    REQUIRE(plan.refusal == LaunchPlan::Refusal::kNone);
    CHECK(env_of(plan, 0, "CUDA_VISIBLE_DEVICES") == "4,5,6,7");
    CHECK(env_of(plan, 1, "CUDA_VISIBLE_DEVICES") == "4,5,6,7");
    CHECK(env_of(plan, 2, "CUDA_VISIBLE_DEVICES") == "0,1");
    CHECK(env_of(plan, 3, "CUDA_VISIBLE_DEVICES") == "0,1");
    for (int r = 0; r < 4; ++r) CHECK(env_of(plan, r, "DLAUNCH_GPUS") == env_of(plan, r, "LOCAL_RANK"));
  }
  SECTION("--gpus-per-rank 2: local rank L owns indices 2L, 2L+1") {
    o.gpus_per_rank = 2;
    in.nodes[1].hello->gpus = {"0", "1", "2", "3"};
    const auto plan = plan_launch(in);
    REQUIRE(plan.refusal == LaunchPlan::Refusal::kNone);
    CHECK(env_of(plan, 0, "DLAUNCH_GPUS") == "0,1");
    CHECK(env_of(plan, 1, "DLAUNCH_GPUS") == "2,3");
    CHECK(env_of(plan, 1, "CUDA_VISIBLE_DEVICES") == "4,5,6,7");
    CHECK(env_of(plan, 3, "DLAUNCH_GPUS") == "2,3");
  }
  SECTION("visible, more ranks than GPUs on one host: they share it, with a warning naming that host") {
    in.nodes[1].hello->gpus = {"0"};
    const auto plan = plan_launch(in);
    REQUIRE(plan.refusal == LaunchPlan::Refusal::kNone);
    CHECK(env_of(plan, 3, "DLAUNCH_GPUS") == "0");
    CHECK_THAT(plan.warnings, Catch::Contains("host n1 has 1 GPU for 2 ranks") && Catch::Contains("(-n)"));
  }
  SECTION("isolate, more ranks than GPUs on one host: refused before anything starts, naming that host") {
    o.gpu_bind_mode = dl::hostfiles::GpuBind::kIsolate;
    in.nodes[1].hello->gpus = {"0"};
    const auto plan = plan_launch(in);
    CHECK(plan.refusal == LaunchPlan::Refusal::kBadRequest);
    CHECK_THAT(plan.why, Catch::Contains("host n1 has 1 GPU, but its 2 ranks") &&
                             Catch::Contains("--gpu-bind none") && Catch::Contains("--oversubscribe-gpus") &&
                             Catch::Contains("--gpus-per-rank"));
    for (const auto& l : plan.launches) CHECK_FALSE(l);
  }
  SECTION("--oversubscribe-gpus: the ranks of that host share its GPU") {
    in.nodes[1].hello->gpus = {"0"};
    o.oversubscribe_gpus = true;
    const auto plan = plan_launch(in);
    REQUIRE(plan.refusal == LaunchPlan::Refusal::kNone);
    CHECK(env_of(plan, 2, "CUDA_VISIBLE_DEVICES") == "0");
    CHECK(env_of(plan, 3, "DLAUNCH_GPUS") == "0");
  }
  SECTION("a host without GPUs sets none, and is no error") {
    in.nodes[1].hello->gpus.clear();
    const auto plan = plan_launch(in);
    REQUIRE(plan.refusal == LaunchPlan::Refusal::kNone);
    CHECK(env_of(plan, 0, "CUDA_VISIBLE_DEVICES") == "4,5,6,7");
    for (int r : {2, 3}) {
      CHECK(env_of(plan, r, "CUDA_VISIBLE_DEVICES") == "<unset>");
      CHECK(env_of(plan, r, "DLAUNCH_GPUS") == "<unset>");
    }
  }
}

TEST_CASE("launch plan: --gpu-bind isolate gives each rank only its own GPUs, none touches nothing",
          "[launcher][plan][gpu]") {
  const auto p = placement(2, 2);
  auto o = options();
  auto in = input(p, o);
  in.nodes[0].hello->gpus = {"4", "5", "6", "7"};
  in.nodes[1].hello->gpus = {"0", "1"};

  SECTION("isolate: one GPU per rank, device 0 is its own, LOCAL_RANK stays the true local rank") {
    o.gpu_bind_mode = dl::hostfiles::GpuBind::kIsolate;
    const auto plan = plan_launch(in);
    REQUIRE(plan.refusal == LaunchPlan::Refusal::kNone);
    CHECK(env_of(plan, 0, "CUDA_VISIBLE_DEVICES") == "4");
    CHECK(env_of(plan, 1, "CUDA_VISIBLE_DEVICES") == "5");
    CHECK(env_of(plan, 2, "CUDA_VISIBLE_DEVICES") == "0");
    CHECK(env_of(plan, 3, "CUDA_VISIBLE_DEVICES") == "1");
    CHECK(env_of(plan, 3, "LOCAL_RANK") == "1");
    for (int r = 0; r < 4; ++r) CHECK(env_of(plan, r, "DLAUNCH_GPUS") == "0");
  }
  SECTION("isolate --gpus-per-rank 2: consecutive pairs of the node's own GPU ids") {
    o.gpu_bind_mode = dl::hostfiles::GpuBind::kIsolate;
    o.gpus_per_rank = 2;
    in.nodes[1].hello->gpus = {"0", "1", "2", "3"};
    const auto plan = plan_launch(in);
    CHECK(env_of(plan, 0, "CUDA_VISIBLE_DEVICES") == "4,5");
    CHECK(env_of(plan, 1, "CUDA_VISIBLE_DEVICES") == "6,7");
    CHECK(env_of(plan, 1, "DLAUNCH_GPUS") == "0,1");
  }
  SECTION("none (--gpu-bind none, or --no-gpu-bind's gpu_bind = false): nobody's GPU variables are touched") {
    o.gpu_bind_mode = dl::hostfiles::GpuBind::kNone;
    auto plan = plan_launch(in);
    for (int r = 0; r < 4; ++r) CHECK(env_of(plan, r, "CUDA_VISIBLE_DEVICES") == "<unset>");
    o.gpu_bind_mode = dl::hostfiles::GpuBind::kVisible;
    o.gpu_bind_mode = dl::hostfiles::GpuBind::kNone;
    in.nodes[1].hello->gpus = {"0"};  // not even too many ranks for the GPUs: nothing is bound
    plan = plan_launch(in);
    REQUIRE(plan.refusal == LaunchPlan::Refusal::kNone);
    for (int r = 0; r < 4; ++r) {
      CHECK(env_of(plan, r, "CUDA_VISIBLE_DEVICES") == "<unset>");
      CHECK(env_of(plan, r, "DLAUNCH_GPUS") == "<unset>");
    }
  }
}

TEST_CASE("launch plan: each vendor's GPUs go in its own variable, and --gpu-vendor picks on a mixed host",
          "[launcher][plan][gpu]") {
  const auto p = placement(3, 2);
  auto o = options();
  auto in = input(p, o);
  in.nodes[0].hello->gpus = {"0", "1"}, in.nodes[0].hello->gpu_vendor = "nvidia";
  in.nodes[1].hello->gpus = {"0", "1", "2", "3"}, in.nodes[1].hello->gpu_vendor = "amd";
  in.nodes[2].hello->gpus = {"0", "1"}, in.nodes[2].hello->gpu_vendor = "intel";
  const std::vector<std::string> vars{"CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "ZE_AFFINITY_MASK"};

  SECTION("one vendor per host: only that vendor's variable is set") {
    const auto plan = plan_launch(in);
    REQUIRE(plan.refusal == LaunchPlan::Refusal::kNone);
    const std::vector<std::string> want{"0,1", "0,1,2,3", "0,1"};
    for (int node = 0; node < 3; ++node)
      for (int v = 0; v < 3; ++v) {
        INFO("node " << node << ", " << vars[static_cast<size_t>(v)]);
        CHECK(env_of(plan, 2 * node + 1, vars[static_cast<size_t>(v)]) ==
              (v == node ? want[static_cast<size_t>(node)] : "<unset>"));
      }
    CHECK(env_of(plan, 3, "DLAUNCH_GPUS") == "1");
  }
  SECTION("isolate on AMD: ROCR_VISIBLE_DEVICES is the rank's own GPU") {
    o.gpu_bind_mode = dl::hostfiles::GpuBind::kIsolate;
    const auto plan = plan_launch(in);
    CHECK(env_of(plan, 3, "ROCR_VISIBLE_DEVICES") == "1");
    CHECK(env_of(plan, 5, "ZE_AFFINITY_MASK") == "1");
    CHECK(env_of(plan, 5, "DLAUNCH_GPUS") == "0");
  }
  SECTION("a host with two vendors: the first by default, the other with --gpu-vendor") {
    in.nodes[1].hello->gpus = {"0", "1"}, in.nodes[1].hello->gpu_vendor = "nvidia";
    in.nodes[1].hello->gpus_by_vendor = dl::control::EnvVars{{"nvidia", "0,1"}, {"amd", "0,1,2,3"}};
    auto plan = plan_launch(in);
    CHECK(env_of(plan, 3, "CUDA_VISIBLE_DEVICES") == "0,1");
    CHECK(env_of(plan, 3, "ROCR_VISIBLE_DEVICES") == "<unset>");
    o.gpu_vendor = dl::machine::GpuVendor::kAmd;
    in.nodes[0].hello->gpus.clear();  // a host without GPUs is fine whatever --gpu-vendor says
    in.nodes[2].hello->gpus.clear();
    plan = plan_launch(in);
    REQUIRE(plan.refusal == LaunchPlan::Refusal::kNone);
    CHECK(env_of(plan, 3, "ROCR_VISIBLE_DEVICES") == "0,1,2,3");
    CHECK(env_of(plan, 3, "CUDA_VISIBLE_DEVICES") == "<unset>");
  }
  SECTION("--gpu-vendor naming a vendor a host lacks, where it has others: refused, naming the host") {
    o.gpu_vendor = dl::machine::GpuVendor::kAmd;
    const auto plan = plan_launch(in);
    CHECK(plan.refusal == LaunchPlan::Refusal::kBadRequest);
    CHECK_THAT(plan.why, Catch::Contains("--gpu-vendor amd: host n0 has no amd GPUs, only 2 nvidia"));
  }
}

TEST_CASE("launch plan: GPUs go by local rank, not by global rank, under --map-by node", "[launcher][plan][gpu]") {
  // Round robin: node 0 runs ranks 0 and 2, node 1 runs 1 and 3.
  const auto p = placement(2, 2, hf::MapBy::kNode);
  auto o = options();
  o.gpu_bind_mode = dl::hostfiles::GpuBind::kIsolate;
  auto in = input(p, o);
  in.nodes[0].hello->gpus = {"0", "1"};
  in.nodes[1].hello->gpus = {"0", "1"};
  auto plan = plan_launch(in);
  CHECK(env_of(plan, 2, "LOCAL_RANK") == "1");
  CHECK(env_of(plan, 2, "CUDA_VISIBLE_DEVICES") == "1");
  CHECK(env_of(plan, 1, "CUDA_VISIBLE_DEVICES") == "0");
  CHECK(env_of(plan, 3, "CUDA_VISIBLE_DEVICES") == "1");
  o.gpu_bind_mode = dl::hostfiles::GpuBind::kVisible;
  plan = plan_launch(in);
  CHECK(env_of(plan, 2, "DLAUNCH_GPUS") == "1");
  CHECK(env_of(plan, 1, "DLAUNCH_GPUS") == "0");
  CHECK(env_of(plan, 3, "DLAUNCH_GPUS") == "1");
}

TEST_CASE("resolve_exports: NAME=VALUE sets, NAME passes the launcher's value, a missing NAME is skipped",
          "[launcher][plan]") {
  const EnvMap lookup = {{"HOME_DIR", "/home/me"}, {"EMPTY_HERE", ""}};
  const auto got = resolve_exports({"OMP_NUM_THREADS=4", "HOME_DIR", "NOT_SET_ANYWHERE", "EQ=a=b", "BLANK=", "EMPTY_HERE"},
                                   lookup);
  // Only the first '=' separates; an empty value is a value; an unset NAME is not exported as "".
  const EnvMap want = {{"OMP_NUM_THREADS", "4"}, {"HOME_DIR", "/home/me"}, {"EQ", "a=b"}, {"BLANK", ""},
                       {"EMPTY_HERE", ""}};
  CHECK(got == want);
  CHECK(resolve_exports({}, lookup).empty());
}

TEST_CASE("launch plan: -x exports are sent once for every node, in the shared launch_env", "[launcher][plan]") {
  const auto p = placement(2, 1);
  const auto o = options();
  auto in = input(p, o);
  in.exports = resolve_exports({"NCCL_DEBUG=INFO", "FROM_SHELL", "UNSET"}, EnvMap{{"FROM_SHELL", "yes"}});
  const auto plan = plan_launch(in);
  const EnvMap want = {{"NCCL_DEBUG", "INFO"}, {"FROM_SHELL", "yes"}};
  for (const auto& [k, v] : want) CHECK(plan.shared.env.at(k) == v);
  CHECK(plan.shared.env.count("UNSET") == 0);
  for (const auto& l : plan.launches) {
    REQUIRE(l);
    // Not repeated in each host's launch, yet each host's agent has them.
    for (const auto& [k, v] : want) CHECK(l->env.count(k) == 0);
    for (const auto& [k, v] : want) CHECK(completed(plan, *l).env.at(k) == v);
  }
  // Exports are the host's, for every rank: not repeated in each rank's own variables.
  CHECK(spec_of(plan, 0).env.count("NCCL_DEBUG") == 0);
  CHECK(env_of(plan, 0, "NCCL_DEBUG") == "INFO");
}

TEST_CASE("launch plan: only the --stdin rank gets stdin", "[launcher][plan]") {
  const auto p = placement(2, 2);
  auto o = options();
  auto in = input(p, o);
  auto open_ranks = [&] {
    std::vector<int> out;
    const auto plan = plan_launch(in);
    for (int r = 0; r < 4; ++r)
      if (spec_of(plan, r).stdin_open) out.push_back(r);
    return out;
  };
  CHECK(open_ranks() == std::vector<int>{0});  // the default, --stdin 0
  o.stdin_rank = 2;
  CHECK(open_ranks() == std::vector<int>{2});
  o.stdin_rank = kNoStdin;
  CHECK(open_ranks().empty());
}

TEST_CASE("launch plan: --mpi auto, pmix, pmi, none and per-node mode", "[launcher][plan][mpi]") {
  const auto p = placement(3, 1);
  auto o = options();
  auto in = input(p, o);

  SECTION("auto with every agent serving PMIx: an MPI section on every node, PMIx and PMI") {
    const auto plan = plan_launch(in);
    REQUIRE(plan.refusal == LaunchPlan::Refusal::kNone);
    CHECK(plan.mpi);
    CHECK(plan.serve == dl::control::MpiServe::kPmixAndPmi);
    REQUIRE(plan.mpi_map);
    CHECK(plan.mpi_map->node_hosts == std::vector<std::string>{"n0", "n1", "n2"});
    CHECK(plan.mpi_map->node_ranks == std::vector<std::vector<int>>{{0}, {1}, {2}});
    for (size_t i = 0; i < 3; ++i) {
      REQUIRE(plan.launches[i]);
      REQUIRE(plan.launches[i]->mpi);
      const auto& m = *plan.launches[i]->mpi;
      CHECK(m.nspace == "dl-test");
      CHECK(m.world_size == 3);
      CHECK(m.universe_size == 3);
      CHECK(m.node_rank == static_cast<int>(i));
      // The job's map goes once (mpi_map), not in each launch.
      CHECK(m.node_hosts.empty());
      CHECK(m.node_ranks.empty());
      CHECK(m.serve == "pmix,pmi");  // on the wire
      CHECK(m.served() == dl::control::MpiServe::kPmixAndPmi);
    }
  }
  SECTION("auto with one agent without PMIx: PMI only, and no refusal") {
    in.nodes[1].hello->pmix = false;
    const auto plan = plan_launch(in);
    CHECK(plan.refusal == LaunchPlan::Refusal::kNone);
    CHECK(plan.mpi);
    for (const auto& l : plan.launches) {
      REQUIRE(l);
      REQUIRE(l->mpi);
      CHECK(l->mpi->serve == "pmi");
      CHECK(l->mpi->served() == dl::control::MpiServe::kPmi);
    }
  }
  SECTION("auto with --max-restarts: served in every attempt, each attempt in a namespace of its own") {
    o.max_restarts = 2;
    for (int attempt : {0, 1, 2}) {
      INFO("attempt " << attempt);
      in.restart_count = attempt;
      const auto plan = plan_launch(in);
      CHECK(plan.refusal == LaunchPlan::Refusal::kNone);
      CHECK(plan.mpi);
      CHECK(plan.serve == dl::control::MpiServe::kPmixAndPmi);  // never "refuse": a restarted MPI job is served
      for (const auto& l : plan.launches) {
        REQUIRE(l);
        REQUIRE(l->mpi);
        CHECK(l->mpi->serve == "pmix,pmi");
        CHECK(l->mpi->nspace == (attempt == 0 ? std::string("dl-test") : "dl-test.a" + std::to_string(attempt)));
        CHECK(l->mpi->world_size == 3);
      }
    }
    CHECK(dl::launcher::mpi_nspace("dl-x", 0) == "dl-x");
    CHECK(dl::launcher::mpi_nspace("dl-x", 12) == "dl-x.a12");
  }
  SECTION("pmi: PMI only, even where every agent could serve PMIx") {
    o.mpi = dl::launcher::MpiMode::kPmi;
    const auto plan = plan_launch(in);
    CHECK(plan.refusal == LaunchPlan::Refusal::kNone);
    REQUIRE(plan.launches[0]->mpi);
    CHECK(plan.launches[0]->mpi->serve == "pmi");
  }
  SECTION("pmix with one agent without PMIx: refused, naming that host") {
    o.mpi = dl::launcher::MpiMode::kPmix;
    in.nodes[2].hello->pmix = false;
    const auto plan = plan_launch(in);
    CHECK(plan.refusal == LaunchPlan::Refusal::kNoPmix);
    CHECK(plan.hosts == "n2");
    CHECK_THAT(plan.why, Catch::Contains("--mpi pmix") && Catch::Contains("n2") && Catch::Contains("--mpi none"));
    CHECK_THAT(plan.why, !Catch::Contains("n0") && !Catch::Contains("n1"));
    for (const auto& l : plan.launches) CHECK_FALSE(l);  // nothing is launched
  }
  SECTION("pmix with two agents without PMIx: both named, in node order") {
    o.mpi = dl::launcher::MpiMode::kPmix;
    in.nodes[0].hello->pmix = false;
    in.nodes[2].hello->pmix = false;
    const auto plan = plan_launch(in);
    CHECK(plan.refusal == LaunchPlan::Refusal::kNoPmix);
    CHECK(plan.hosts == "n0, n2");
  }
  SECTION("pmix with every agent serving PMIx: MPI, PMIx only (PMI clients are refused)") {
    o.mpi = dl::launcher::MpiMode::kPmix;
    const auto plan = plan_launch(in);
    CHECK(plan.refusal == LaunchPlan::Refusal::kNone);
    CHECK(plan.mpi);
    REQUIRE(plan.launches[0]->mpi);
    CHECK(plan.launches[0]->mpi->serve == "pmix");
    CHECK(plan.launches[0]->mpi->served() == dl::control::MpiServe::kPmix);
  }
  SECTION("none: no MPI even where every agent could") {
    o.mpi = dl::launcher::MpiMode::kNone;
    const auto plan = plan_launch(in);
    CHECK(plan.refusal == LaunchPlan::Refusal::kNone);
    CHECK_FALSE(plan.mpi);
    for (const auto& l : plan.launches) CHECK_FALSE(l->mpi);
  }
}

TEST_CASE("launch plan: per-node mode plans only its own node, with the shared identity", "[launcher][plan][per-node]") {
  const auto p = placement(3, 2);
  auto o = options();
  o.mpi = dl::launcher::MpiMode::kPmix;  // even pmix: per-node mode has no fences between nodes, so never MPI (and no refusal)
  auto in = input(p, o);
  // This dlaunch runs node 1; nodes 0 and 2 are other dlaunches' and sent no hello.
  in.nodes[0].external = true, in.nodes[0].hello.reset();
  in.nodes[2].external = true, in.nodes[2].hello.reset();
  in.shared = SharedIdentity{"head.example", "head.example:29400", 23456};
  in.store_port = 0;
  const auto plan = plan_launch(in);
  REQUIRE(plan.refusal == LaunchPlan::Refusal::kNone);
  CHECK(plan.serve == dl::control::MpiServe::kRefuse);  // no MPI served: a rank's MPI_Init ends the job, never a singleton
  REQUIRE(plan.launches.size() == 3);
  CHECK_FALSE(plan.launches[0]);  // external nodes get no launch message
  CHECK_FALSE(plan.launches[2]);
  REQUIRE(plan.launches[1]);
  REQUIRE(plan.launches[1]->mpi);
  CHECK(plan.launches[1]->mpi->serve == "refuse");
  REQUIRE(plan.launches[1]->ranks.size() == 2);
  CHECK(plan.launches[1]->ranks[0].rank == 2);
  for (int r : {2, 3}) {
    CHECK(env_of(plan, r, "MASTER_ADDR") == "head.example");
    CHECK(env_of(plan, r, "MASTER_PORT") == "23456");
    CHECK(env_of(plan, r, "DLAUNCH_STORE_ADDR") == "head.example:29400");
    CHECK(env_of(plan, r, "WORLD_SIZE") == "6");
    CHECK(env_of(plan, r, "NODE_RANK") == "1");
  }
}

TEST_CASE("launch plan: --bind-to core gives each local rank its cores from the hello", "[launcher][plan][cpu]") {
  const auto p = placement(2, 2, hf::MapBy::kNode);  // node 0: ranks 0, 2; node 1: ranks 1, 3
  auto o = options();
  o.bind_to = dl::hostfiles::CpuBind::kCore;
  auto in = input(p, o);
  // Four cores, each with two hardware threads (n, n+4), on both hosts.
  for (auto& n : in.nodes) n.hello->cpu = msg::CpuReport{{{0, 4}, {1, 5}, {2, 6}, {3, 7}}, {{0, 1, 2, 3, 4, 5, 6, 7}}};

  SECTION("one core per rank, with all its hardware threads") {
    const auto plan = plan_launch(in);
    REQUIRE(plan.refusal == LaunchPlan::Refusal::kNone);
    CHECK(spec_of(plan, 0).cpus == std::vector<int>{0, 4});
    CHECK(spec_of(plan, 2).cpus == std::vector<int>{1, 5});  // local rank 1 of node 0
    CHECK(spec_of(plan, 1).cpus == std::vector<int>{0, 4});
    CHECK(spec_of(plan, 3).cpus == std::vector<int>{1, 5});
  }
  SECTION("--cpus-per-rank 2: two consecutive cores each, sorted") {
    o.cpus_per_rank = 2;
    const auto plan = plan_launch(in);
    REQUIRE(plan.refusal == LaunchPlan::Refusal::kNone);
    CHECK(spec_of(plan, 0).cpus == std::vector<int>{0, 1, 4, 5});
    CHECK(spec_of(plan, 2).cpus == std::vector<int>{2, 3, 6, 7});
  }
  SECTION("too few cores on one host: a bad request naming that host") {
    in.nodes[1].hello->cpu->cores = {{0}};
    const auto plan = plan_launch(in);
    CHECK(plan.refusal == LaunchPlan::Refusal::kBadRequest);
    CHECK_THAT(plan.why, Catch::Contains("--bind-to core") && Catch::Contains("n1"));
    for (const auto& l : plan.launches) CHECK_FALSE(l);
  }
  SECTION("a hello without a CPU report counts as no cores") {
    in.nodes[0].hello->cpu.reset();
    const auto plan = plan_launch(in);
    CHECK(plan.refusal == LaunchPlan::Refusal::kBadRequest);
    CHECK_THAT(plan.why, Catch::Contains("n0"));
  }
  SECTION("--bind-to none: no CPU lists at all") {
    o.bind_to = dl::hostfiles::CpuBind::kNone;
    const auto plan = plan_launch(in);
    for (int r = 0; r < 4; ++r) CHECK_FALSE(spec_of(plan, r).cpus);
  }
}

TEST_CASE("launch plan: --bind-to numa puts each rank on the NUMA node of its GPU", "[launcher][plan][cpu][numa]") {
  const auto p = placement(1, 4);
  auto o = options();
  o.bind_to = dl::hostfiles::CpuBind::kNuma;
  auto in = input(p, o);
  // Two sockets (kernel ids 0 and 1); GPUs 0,1 hang off node 1 and 2,3 off node 0.
  in.nodes[0].hello->cpu = msg::CpuReport{{{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}}, {{0, 1, 2, 3}, {4, 5, 6, 7}},
                                          std::vector<int>{0, 1}};
  in.nodes[0].hello->gpus = {"0", "1", "2", "3"};
  in.nodes[0].hello->gpu_numa = std::vector<int>{1, 1, 0, 0};
  const std::vector<int> node0{0, 1, 2, 3}, node1{4, 5, 6, 7};

  SECTION("known nodes: local ranks 0,1 on node 1, 2,3 on node 0") {
    const auto plan = plan_launch(in);
    REQUIRE(plan.refusal == LaunchPlan::Refusal::kNone);
    CHECK(spec_of(plan, 0).cpus == node1);
    CHECK(spec_of(plan, 1).cpus == node1);
    CHECK(spec_of(plan, 2).cpus == node0);
    CHECK(spec_of(plan, 3).cpus == node0);
  }
  SECTION("isolate follows the rank's own GPU too") {
    o.gpu_bind_mode = dl::hostfiles::GpuBind::kIsolate;
    in.nodes[0].hello->gpu_numa = std::vector<int>{0, 1, 0, 1};
    const auto plan = plan_launch(in);
    CHECK(spec_of(plan, 0).cpus == node0);
    CHECK(spec_of(plan, 1).cpus == node1);
  }
  SECTION("unknown nodes (GPUs given by a variable, no node ids), or no GPU binding: blocks by local rank") {
    for (int pass = 0; pass < 3; ++pass) {
      if (pass == 0) in.nodes[0].hello->gpu_numa.reset();
      if (pass == 1) in.nodes[0].hello->cpu->numa_ids.clear();
      if (pass == 2) o.gpu_bind_mode = dl::hostfiles::GpuBind::kNone;
      const auto plan = plan_launch(in);
      INFO("pass " << pass);
      CHECK(spec_of(plan, 0).cpus == node0);
      CHECK(spec_of(plan, 1).cpus == node0);
      CHECK(spec_of(plan, 2).cpus == node1);
      CHECK(spec_of(plan, 3).cpus == node1);
    }
  }
}

TEST_CASE("inherited_identity_warning: names what the ranks get other values for", "[launcher][plan]") {
  const auto p = placement(1, 2);
  const auto o = options();
  auto in = input(p, o);
  in.nodes[0].hello->gpus = {"0", "1"};
  const auto plan = plan_launch(in);
  REQUIRE(plan.launches[0]);
  const auto& launch = *plan.launches[0];
  const std::string tail = " (is dlaunch running inside srun or mpirun?)\n";

  // Replaced (RANK, OMPI_COMM_WORLD_SIZE: ours differ) and removed (PMIX_RANK, an outer launcher's
  // identity, env::is_foreign_identity_var) both count, listed in name order.
  CHECK(inherited_identity_warning(launch, {{"RANK", "5"}, {"PMIX_RANK", "5"}, {"OMPI_COMM_WORLD_SIZE", "16"}}) ==
        "dlaunch: warning: the ranks get dlaunch's own values instead of the inherited OMPI_COMM_WORLD_SIZE, "
        "PMIX_RANK, RANK" + tail);
  // Slurm's own variables are neither set nor removed by dlaunch: the ranks keep them, nothing contradicts.
  CHECK(inherited_identity_warning(launch, {{"SLURM_PROCID", "3"}, {"SLURM_NTASKS", "8"}}).empty());
  // The same values as ours (rank 0's) contradict nothing; neither does an unrelated variable.
  CHECK(inherited_identity_warning(launch, {{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"HOME", "/root"}}).empty());
  CHECK(inherited_identity_warning(launch, {}).empty());
  // CUDA_VISIBLE_DEVICES never counts: binding a host's GPUs is not a contradiction.
  CHECK(env_of(plan, 0, "CUDA_VISIBLE_DEVICES") == "0,1");
  CHECK(inherited_identity_warning(launch, {{"CUDA_VISIBLE_DEVICES", "3,4"}}).empty());
  CHECK(inherited_identity_warning(launch, {{"DLAUNCH_GPUS", "5"}, {"ROCR_VISIBLE_DEVICES", "1"}}).empty());
  // The token is a secret, never echoed, even when it differs.
  CHECK(inherited_identity_warning(launch, {{"DLAUNCH_TOKEN", "other"}}).empty());
  // A launch message without ranks has nothing to contradict.
  CHECK(inherited_identity_warning(msg::Launch{}, {{"RANK", "5"}}).empty());
  // What the user chose (-x, --env-file) is no inherited identity; nor is TERM.
  CHECK(inherited_identity_warning(launch, {{"RANK", "5"}, {"FOO", "shell"}}, {{"FOO", "bar"}}) ==
        "dlaunch: warning: the ranks get dlaunch's own values instead of the inherited RANK" + tail);
  CHECK(inherited_identity_warning(launch, {{"TERM", "xterm"}}).empty());
  // A variable that merely starts with PMI_ is no identity: the ranks keep it, nothing contradicts.
  CHECK(inherited_identity_warning(launch, {{"PMI_ENV_PORT", "7001"}}).empty());
  CHECK(inherited_identity_warning(launch, {{"PMI_ENV_PORT", "7001"}, {"PMI_SIZE", "9"}}) ==
        "dlaunch: warning: the ranks get dlaunch's own values instead of the inherited PMI_SIZE" + tail);
}

TEST_CASE("plan_launch: TERM=dumb for the ranks when dlaunch's output reaches no terminal", "[launcher][plan]") {
  const auto p = placement(1, 1);
  auto o = options();
  auto in = input(p, o);
  in.output_terminal = true;
  CHECK(plan_launch(in).shared.env.count("TERM") == 0);
  in.output_terminal = false;
  CHECK(plan_launch(in).shared.env.at("TERM") == "dumb");
  in.exports["TERM"] = "xterm";  // the user's -x TERM wins
  CHECK(plan_launch(in).shared.env.at("TERM") == "xterm");
  in.exports.clear();
  o.output_pty = false;  // a pipe is no terminal: nothing to undo
  CHECK(plan_launch(in).shared.env.count("TERM") == 0);
}

TEST_CASE("launch plan: OMP_NUM_THREADS=1 where several ranks share a host, unless the user chose", "[launcher][plan]") {
  // n0 runs 3 ranks, n1 one.
  std::vector<hf::HostEntry> entries{hf::HostEntry{.host = "n0", .slots = 3}, hf::HostEntry{.host = "n1", .slots = 1}};
  const auto p = hf::place(entries, hf::PlacementOptions{});
  const auto o = options();
  SECTION("nothing set: the shared host's ranks get 1 and dlaunch says so") {
    auto in = input(p, o);
    in.launcher_env = {{"HOME", "/root"}};
    const auto plan = plan_launch(in);
    REQUIRE(plan.launches[0]);
    REQUIRE(plan.launches[1]);
    CHECK(plan.launches[0]->env.at("OMP_NUM_THREADS") == "1");
    CHECK(plan.launches[1]->env.count("OMP_NUM_THREADS") == 0);  // alone on its host: all its cores
    CHECK(plan.notice.find("OMP_NUM_THREADS=1") != std::string::npos);
    CHECK(plan.notice.find('\n') == plan.notice.size() - 1);  // one line
  }
  SECTION("set in dlaunch's environment: untouched") {
    auto in = input(p, o);
    in.launcher_env = {{"OMP_NUM_THREADS", "4"}};
    const auto plan = plan_launch(in);
    CHECK(plan.launches[0]->env.count("OMP_NUM_THREADS") == 0);  // the ranks inherit the 4
    CHECK(plan.notice.empty());
  }
  SECTION("given with -x: the user's value") {
    auto in = input(p, o);
    in.exports = {{"OMP_NUM_THREADS", "2"}};
    const auto plan = plan_launch(in);
    CHECK(plan.shared.env.at("OMP_NUM_THREADS") == "2");
    CHECK(plan.launches[0]->env.count("OMP_NUM_THREADS") == 0);
    CHECK(plan.notice.empty());
  }
  SECTION("one rank per host: nothing to say") {
    const auto p1 = placement(2, 1);
    auto in = input(p1, o);
    const auto plan = plan_launch(in);
    for (const auto& l : plan.launches) CHECK(l->env.count("OMP_NUM_THREADS") == 0);
    CHECK(plan.notice.empty());
  }
}

TEST_CASE("launch plan: SLURM_JOB_ID in dlaunch's environment makes each rank's SLURM_PROCID its RANK",
          "[launcher][plan][slurm]") {
  const auto p = placement(2, 2);
  const auto o = options();
  auto in = input(p, o);
  SECTION("inside Slurm") {
    in.launcher_env = {{"SLURM_JOB_ID", "4242"}, {"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}};
    const auto plan = plan_launch(in);
    for (int r = 0; r < 4; ++r) {
      INFO("rank " << r);
      CHECK(env_of(plan, r, "SLURM_PROCID") == std::to_string(r));
      CHECK(env_of(plan, r, "SLURM_LOCALID") == env_of(plan, r, "LOCAL_RANK"));
      CHECK(env_of(plan, r, "SLURM_NODEID") == env_of(plan, r, "NODE_RANK"));
      CHECK(env_of(plan, r, "SLURM_NTASKS") == "4");
      CHECK(env_of(plan, r, "SLURM_JOB_ID") == "<unset>");  // the job's own: inherited as it is
    }
  }
  SECTION("outside") {
    const auto plan = plan_launch(in);
    CHECK(env_of(plan, 3, "SLURM_PROCID") == "<unset>");
  }
}

TEST_CASE("binding_report: one line per rank, by rank, with what it sees, the physical ids and its CPUs",
          "[launcher][plan][gpu]") {
  const auto p = placement(2, 2, hf::MapBy::kNode);  // node 0: ranks 0, 2; node 1: ranks 1, 3
  auto o = options();
  auto in = input(p, o);
  in.nodes[0].hello->gpus = {"6", "4"};
  in.nodes[1].hello->gpus = {"0", "1"}, in.nodes[1].hello->gpu_vendor = "amd";
  const std::vector<std::string> hosts{"n0", "n1"};

  SECTION("visible: the index and the physical id it names") {
    const auto plan = plan_launch(in);
    REQUIRE(plan.refusal == LaunchPlan::Refusal::kNone);
    CHECK(binding_report(plan, hosts, o) ==
          "dlaunch: rank 0 on n0: GPUs 0 (physical 6) of CUDA_VISIBLE_DEVICES=6,4; CPUs not bound (--bind-to none)\n"
          "dlaunch: rank 1 on n1: GPUs 0 (physical 0) of ROCR_VISIBLE_DEVICES=0,1; CPUs not bound (--bind-to none)\n"
          "dlaunch: rank 2 on n0: GPUs 1 (physical 4) of CUDA_VISIBLE_DEVICES=6,4; CPUs not bound (--bind-to none)\n"
          "dlaunch: rank 3 on n1: GPUs 1 (physical 1) of ROCR_VISIBLE_DEVICES=0,1; CPUs not bound (--bind-to none)\n");
  }
  SECTION("isolate with --bind-to core: CPUs too; a host without GPUs says so") {
    o.gpu_bind_mode = dl::hostfiles::GpuBind::kIsolate;
    o.bind_to = dl::hostfiles::CpuBind::kCore;
    for (auto& n : in.nodes) n.hello->cpu = msg::CpuReport{{{0, 4}, {1, 5}}, {{0, 1, 4, 5}}};
    in.nodes[1].hello->gpus.clear();
    const auto plan = plan_launch(in);
    REQUIRE(plan.refusal == LaunchPlan::Refusal::kNone);
    CHECK(binding_report(plan, hosts, o) ==
          "dlaunch: rank 0 on n0: GPUs 0 (physical 6) of CUDA_VISIBLE_DEVICES=6; CPUs 0,4\n"
          "dlaunch: rank 1 on n1: no GPUs; CPUs 0,4\n"
          "dlaunch: rank 2 on n0: GPUs 0 (physical 4) of CUDA_VISIBLE_DEVICES=4; CPUs 1,5\n"
          "dlaunch: rank 3 on n1: no GPUs; CPUs 1,5\n");
  }
  SECTION("none: not bound, and without --bind-to the CPUs say so too (not just \"no GPUs\")") {
    o.gpu_bind_mode = dl::hostfiles::GpuBind::kNone;
    const auto plan = plan_launch(in);
    CHECK_THAT(binding_report(plan, hosts, o),
               Catch::StartsWith("dlaunch: rank 0 on n0: GPUs not bound (--gpu-bind none); CPUs not bound (--bind-to none)\n"));
  }
}

TEST_CASE("resolve_exports: a PREFIX pattern passes every launcher variable that starts so, and only those",
          "[launcher][plan]") {
  const EnvMap env = {{"NCCL_DEBUG", "INFO"}, {"NCCL_IB_HCA", "mlx5"}, {"NCCL", "bare"}, {"NCCLX_OTHER", "no"},
                      {"MY_NCCL_X", "no"}, {"PATH", "/bin"}};
  CHECK(resolve_exports({"NCCL_*"}, env) == EnvMap{{"NCCL_DEBUG", "INFO"}, {"NCCL_IB_HCA", "mlx5"}});
  // A later NAME=VALUE wins over what a pattern brought; a pattern that matches nothing adds nothing.
  CHECK(resolve_exports({"NCCL_*", "NCCL_DEBUG=WARN", "FI_*"}, env) ==
        EnvMap{{"NCCL_DEBUG", "WARN"}, {"NCCL_IB_HCA", "mlx5"}});
  // '*' alone is every variable.
  CHECK(resolve_exports({"*"}, env) == env);
}

TEST_CASE("two entries whose agents report one machine are refused naming both", "[launcher][plan]") {
  hf::Placement p = placement(3, 2);
  p.nodes[0].host = "node1", p.nodes[1].host = "10.1.1.7", p.nodes[2].host = "node2";
  for (auto& e : p.nodes) e.origin = "-H";
  const RunOptions o = options();
  PlanInput in = input(p, o);
  in.nodes[0].hello->machine = "m1/b1/net:40";
  in.nodes[0].hello->host = "node1.cluster";
  in.nodes[2].hello->machine = "m1/b1/net:41";  // another network namespace: another host

  SECTION("distinct identities: launched") {
    in.nodes[1].hello->machine = "m2/b2/net:40";
    CHECK(plan_launch(in).refusal == LaunchPlan::Refusal::kNone);
  }
  SECTION("unknown identities (no /proc) are compared with nothing") {
    in.nodes[0].hello->machine = "";
    in.nodes[1].hello->machine.clear();
    CHECK(plan_launch(in).refusal == LaunchPlan::Refusal::kNone);
  }
  SECTION("-H entries: both named, and the -H that lists the machine once") {
    in.nodes[1].hello->machine = "m1/b1/net:40";
    const LaunchPlan plan = plan_launch(in);
    CHECK(plan.refusal == LaunchPlan::Refusal::kBadRequest);
    CHECK(plan.why.find("-H entries 'node1' and '10.1.1.7' are the same machine") != std::string::npos);
    CHECK(plan.why.find("'node1.cluster'") != std::string::npos);
    CHECK(plan.why.find("e.g. -H node1:4") != std::string::npos);
    for (const auto& l : plan.launches) CHECK(!l);
  }
  SECTION("hostfile lines: named with their file and line") {
    p.nodes[0].origin = "hosts:1", p.nodes[1].origin = "hosts:3";
    in.nodes[1].hello->machine = "m1/b1/net:40";
    const LaunchPlan plan = plan_launch(in);
    CHECK(plan.refusal == LaunchPlan::Refusal::kBadRequest);
    CHECK(plan.why.find("hosts 'node1' (hosts:1) and '10.1.1.7' (hosts:3) are the same machine") != std::string::npos);
    CHECK(plan.why.find("'node1 slots=4'") != std::string::npos);
  }
}

TEST_CASE("launch plan: what every rank of a host has alike is said once in its launch, the rest with each rank",
          "[launcher][plan]") {
  SECTION("--gpu-bind visible: the host's GPU list once, each rank's own devices with it") {
    const auto p = placement(2, 2);
    auto o = options();
    auto in = input(p, o);
    in.nodes[0].hello->gpus = {"4", "5"};
    in.nodes[1].hello->gpus = {"0", "1"};
    const auto plan = plan_launch(in);
    REQUIRE(plan.refusal == LaunchPlan::Refusal::kNone);
    CHECK(plan.launches[0]->env.at("CUDA_VISIBLE_DEVICES") == "4,5");
    CHECK(plan.launches[1]->env.at("CUDA_VISIBLE_DEVICES") == "0,1");
    for (int r = 0; r < 4; ++r) {
      INFO("rank " << r);
      const auto& sent = launch_of(plan, r);
      for (const auto& s : sent.ranks) CHECK(s.env.count("CUDA_VISIBLE_DEVICES") == 0);
      CHECK(env_of(plan, r, "DLAUNCH_GPUS") == env_of(plan, r, "LOCAL_RANK"));
    }
  }
  SECTION("isolate: each rank's own GPU stays its own") {
    const auto p = placement(1, 2);
    auto o = options();
    o.gpu_bind_mode = dl::hostfiles::GpuBind::kIsolate;
    auto in = input(p, o);
    in.nodes[0].hello->gpus = {"4", "5"};
    const auto plan = plan_launch(in);
    REQUIRE(plan.refusal == LaunchPlan::Refusal::kNone);
    CHECK(plan.launches[0]->env.count("CUDA_VISIBLE_DEVICES") == 0);
    CHECK(spec_of(plan, 0).env.at("CUDA_VISIBLE_DEVICES") == "4");
    CHECK(spec_of(plan, 1).env.at("CUDA_VISIBLE_DEVICES") == "5");
  }
  SECTION("MPMD: a host that runs one app context says it once: program, MPI_APPNUM, its -x, its --wdir") {
    RunOptions o = parse({"-x", "G=1", "-n", "2", "./server", ":", "-n", "2", "-x", "W=2", "-x", "OMP_NUM_THREADS=3",
                          "--wdir", "/w", "./worker"});
    o.heartbeat_timeout_s = 7;
    const auto p = placement(2, 2);
    auto in = input(p, o);
    in.exports = resolve_exports(o.exports, {});
    const auto plan = plan_launch(in);
    REQUIRE(plan.refusal == LaunchPlan::Refusal::kNone);
    const msg::Launch& server = *plan.launches[0];
    const msg::Launch& worker = *plan.launches[1];
    CHECK(server.argv == std::optional<std::vector<std::string>>(std::vector<std::string>{"./server"}));
    CHECK(server.env.at("MPI_APPNUM") == "0");
    CHECK(server.env.at("G") == "1");
    CHECK(server.wdir == "/work/dir");
    CHECK(worker.argv == std::optional<std::vector<std::string>>(std::vector<std::string>{"./worker"}));
    CHECK(worker.env.at("MPI_APPNUM") == "1");
    CHECK(worker.env.at("PMIX_APPNUM") == "1");
    CHECK(worker.env.at("W") == "2");
    CHECK(worker.env.count("G") == 0);
    CHECK(worker.wdir == "/w");
    for (const auto* l : {&server, &worker})
      for (const auto& s : l->ranks) {
        CHECK(s.env.empty());
        CHECK(s.argv.empty());
        CHECK_FALSE(s.wdir);
      }
    // As a rank's own variable would: the context's -x wins over the host's
    // OMP_NUM_THREADS=1, and the agent's completion gives every rank its program.
    CHECK(env_of(plan, 3, "OMP_NUM_THREADS") == "3");
    CHECK(env_of(plan, 1, "OMP_NUM_THREADS") == "1");
    CHECK(spec_of(plan, 2).argv == std::vector<std::string>{"./worker"});
    CHECK(spec_of(plan, 0).argv == std::vector<std::string>{"./server"});
  }
}
