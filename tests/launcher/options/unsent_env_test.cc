// The launch shell's variables that only this host's ranks get: which are
// named, and when the one warning is said (launcher/options/unsent_env.h).
#include <catch2/catch.hpp>

#include "launcher/launch_plan.h"
#include "launcher/options/unsent_env.h"

using namespace dl::launcher;
namespace hf = dl::hostfiles;

namespace {
using Names = std::vector<std::string>;

// A plan input of `hosts` (the first this machine when `first_local`) for `o`,
// run from a shell of `env`.
PlanInput input(const RunOptions& o, const EnvMap& env, std::vector<std::string> hosts, bool first_local = true) {
  PlanInput in;
  in.opts = &o;
  in.launcher_env = env;
  in.exports = resolve_exports(o.exports, env);
  for (size_t i = 0; i < hosts.size(); ++i) {
    PlanNode n;
    n.host = hosts[i];
    n.local = first_local && i == 0;
    in.nodes.push_back(n);
  }
  return in;
}

const EnvMap kShell = {{"HOME", "/root"},          {"STEPS", "60"},
                       {"NCCL_SOCKET_IFNAME", "eth0"}, {"GLOO_SOCKET_IFNAME", "eth0"},
                       {"NCCL_DEBUG", "INFO"},     {"TORCH_DISTRIBUTED_DEBUG", "DETAIL"},
                       {"OMP_NUM_THREADS", "4"},   {"CUDA_VISIBLE_DEVICES", "0,1"},
                       {"CUDA_VERSION", "12.4"},   {"CUDA_HOME", "/usr/local/cuda"},   {"TORCHELASTIC_RUN_ID", "x"},
                       {"DLAUNCH_SOCKET_IFNAME", "eth0"}, {"DLAUNCH_KILL_GRACE", "1"}};
}  // namespace

TEST_CASE("unsent_env: the families meant for every rank, less what -x sends", "[launcher]") {
  CHECK(unsent_names(kShell, {}) == Names{"DLAUNCH_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "NCCL_DEBUG",
                                          "NCCL_SOCKET_IFNAME", "OMP_NUM_THREADS", "TORCH_DISTRIBUTED_DEBUG"});
  // -x 'NCCL_*' and -x GLOO_SOCKET_IFNAME=eth1 send those; the rest are still named.
  const EnvMap sent = resolve_exports({"NCCL_*", "GLOO_SOCKET_IFNAME=eth1"}, kShell);
  CHECK(unsent_names(kShell, sent) == Names{"DLAUNCH_SOCKET_IFNAME", "OMP_NUM_THREADS", "TORCH_DISTRIBUTED_DEBUG"});
  CHECK(unsent_names(kShell, resolve_exports({"*"}, kShell)).empty());
  CHECK(unsent_names({{"HOME", "/root"}, {"STEPS", "60"}}, {}).empty());
}

TEST_CASE("unsent_env: one line for a job with remote hosts started over ssh, naming names and hosts",
          "[launcher]") {
  RunOptions o;
  o.launcher = dl::remote::StartMethod::kLibssh;
  o.exports = {"NCCL_*"};
  const std::string w = unsent_env_warning(input(o, kShell, {"h0", "h1", "h2", "h3", "h4"}));
  CHECK(w == "dlaunch: warning: DLAUNCH_SOCKET_IFNAME, GLOO_SOCKET_IFNAME, OMP_NUM_THREADS, TORCH_DISTRIBUTED_DEBUG "
             "are set here but not sent: only this host's ranks have them, not those on h1, h2, h3 and 1 more "
             "(their environment is their ssh login's); send them with -x NAME each, -x 'GLOO_*' for a family, or "
             "--export-all for every variable\n");
  EnvMap one = {{"NCCL_DEBUG", "INFO"}};
  o.exports.clear();
  CHECK(unsent_env_warning(input(o, one, {"h0", "h1"})) ==
        "dlaunch: warning: NCCL_DEBUG is set here but not sent: only this host's ranks have it, not those on h1 "
        "(their environment is their ssh login's); send it with -x NCCL_DEBUG, or --export-all for every variable\n");
  // Capped: 8 names, then a count.
  EnvMap many;
  for (int k = 0; k < 11; ++k) many["NCCL_V" + std::to_string(k + 10)] = "1";
  o.exports.clear();
  const std::string capped = unsent_env_warning(input(o, many, {"h0", "h1"}));
  CHECK_THAT(capped, Catch::Contains("NCCL_V17 and 3 more are set here") && Catch::Contains("-x 'NCCL_*'"));
  CHECK(std::count(capped.begin(), capped.end(), '\n') == 1);
}

TEST_CASE("unsent_env: no warning where every rank gets the shell's variables or none is left out", "[launcher]") {
  RunOptions o;
  o.launcher = dl::remote::StartMethod::kLibssh;
  // Only this host: its agent is dlaunch's child.
  CHECK(unsent_env_warning(input(o, kShell, {"localhost"})).empty());
  // Per-node mode: the other nodes are other dlaunchs' (each its own shell's).
  PlanInput per_node = input(o, kShell, {"n0", "n1"});
  per_node.nodes[1].external = true;
  CHECK(unsent_env_warning(per_node).empty());
  // srun passes the environment (its default --export=ALL), unless told otherwise.
  RunOptions slurm = o;
  slurm.launcher = dl::remote::StartMethod::kSlurm;
  CHECK(unsent_env_warning(input(slurm, kShell, {"h0", "h1"})).empty());
  EnvMap none = kShell;
  none["SLURM_EXPORT_ENV"] = "NONE";
  CHECK_THAT(unsent_env_warning(input(slurm, none, {"h0", "h1"})), Catch::Contains("SLURM_EXPORT_ENV keeps srun"));
  // Said for the first attempt only.
  PlanInput restart = input(o, kShell, {"h0", "h1"});
  restart.restart_count = 1;
  CHECK(unsent_env_warning(restart).empty());
  // --export-all sends everything.
  RunOptions all = o;
  all.exports = {"*"};
  CHECK(unsent_env_warning(input(all, kShell, {"h0", "h1"})).empty());
}

TEST_CASE("unsent_env: the launch plan says it with its warnings", "[launcher]") {
  std::vector<hf::HostEntry> entries = {hf::HostEntry{.host = "n0", .slots = 1}, hf::HostEntry{.host = "n1", .slots = 1}};
  const hf::Placement p = hf::place(entries, hf::PlacementOptions{});
  RunOptions o;
  o.launcher = dl::remote::StartMethod::kSsh;
  o.command = {"./a"};
  PlanInput in = input(o, {{"NCCL_SOCKET_IFNAME", "eth0"}}, {"n0", "n1"});
  in.placement = &p;
  for (const auto& r : p.ranks) in.nodes.at(static_cast<size_t>(r.node)).ranks.push_back(r.rank);
  for (size_t i = 0; i < in.nodes.size(); ++i) {
    dl::control::msg::Hello h;
    h.node = static_cast<int>(i);
    h.host = in.nodes[i].host;
    h.free_port = 29500;
    in.nodes[i].hello = h;
    in.nodes[i].reach_addr = "10.0.0." + std::to_string(i + 1);
  }
  in.control_host = "10.0.0.1";
  CHECK_THAT(plan_launch(in).warnings, Catch::Contains("NCCL_SOCKET_IFNAME is set here but not sent"));
}

TEST_CASE("unsent_env: -x '*' sends the shell's variables, never an outer launcher's wire-up unless named",
          "[launcher]") {
  const EnvMap shell = {{"STEPS", "60"}, {"PMI_FD", "9"}, {"PMIX_RANK", "3"}, {"PMIX_MCA_gds", "hash"},
                        {"PMI_DEBUG", "1"}};
  CHECK(resolve_exports({"*"}, shell) == EnvMap{{"PMIX_MCA_gds", "hash"}, {"PMI_DEBUG", "1"}, {"STEPS", "60"}});
  CHECK(resolve_exports({"PMI*"}, shell) == EnvMap{{"PMIX_MCA_gds", "hash"}, {"PMI_DEBUG", "1"}});
  CHECK(resolve_exports({"*", "PMI_FD"}, shell).count("PMI_FD") == 1);
}
