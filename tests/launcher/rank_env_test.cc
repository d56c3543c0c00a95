#include <catch2/catch.hpp>

#include <algorithm>

#include "hostfiles/hostfile.h"
#include "hostfiles/placement.h"
#include "tests/launcher/rank_env_parts.h"

using dl::launcher::EnvMap;
using dl::launcher::JobEnv;
using dl::launcher::rank_env;

namespace {
dl::hostfiles::Placement two_nodes(dl::hostfiles::MapBy by = dl::hostfiles::MapBy::kSlot) {
  dl::hostfiles::PlacementOptions po;
  po.np = 5;
  po.map_by = by;
  return dl::hostfiles::place(dl::hostfiles::parse_host_list("node1:3,node2:2"), po);
}

JobEnv job(const dl::hostfiles::Placement* p) {
  JobEnv j;
  j.placement = p;
  j.job_id = "dl-abcd";
  j.master_addr = "10.0.0.1";
  j.master_port = 31337;
  j.store_addr = "10.0.0.9:4000";
  j.token = "secret-token";
  return j;
}
}  // namespace

TEST_CASE("rank_env: every variable of every rank on 2 uneven nodes", "[launcher]") {
  auto p = two_nodes();
  JobEnv j = job(&p);
  // rank -> node, local rank, local size, Horovod cross rank, cross size.
  // node1 runs 0,1,2 and node2 runs 3,4; local rank 2 exists on node1 only.
  struct Want { int node, local, lsize, cross_rank, cross_size; };
  const Want want[5] = {{0, 0, 3, 0, 2}, {0, 1, 3, 0, 2}, {0, 2, 3, 0, 1}, {1, 0, 2, 1, 2}, {1, 1, 2, 1, 2}};
  for (int r = 0; r < 5; ++r) {
    INFO("rank " << r);
    const Want& w = want[r];
    const std::string R = std::to_string(r), node = std::to_string(w.node), local = std::to_string(w.local),
                      lsize = std::to_string(w.lsize);
    const EnvMap expected = {
        {"RANK", R}, {"WORLD_SIZE", "5"}, {"LOCAL_RANK", local}, {"LOCAL_WORLD_SIZE", lsize},
        {"GROUP_RANK", node}, {"GROUP_WORLD_SIZE", "2"}, {"ROLE_RANK", R}, {"ROLE_WORLD_SIZE", "5"},
        {"ROLE_NAME", "default"}, {"NODE_RANK", node}, {"MASTER_ADDR", "10.0.0.1"}, {"MASTER_PORT", "31337"},
        {"OMPI_COMM_WORLD_RANK", R}, {"OMPI_COMM_WORLD_SIZE", "5"}, {"OMPI_COMM_WORLD_LOCAL_RANK", local},
        {"OMPI_COMM_WORLD_LOCAL_SIZE", lsize}, {"OMPI_COMM_WORLD_NODE_RANK", node},
        {"PMI_RANK", R}, {"PMI_SIZE", "5"}, {"MPI_LOCALRANKID", local}, {"MPI_LOCALNRANKS", lsize},
        {"HOROVOD_RANK", R}, {"HOROVOD_SIZE", "5"}, {"HOROVOD_LOCAL_RANK", local}, {"HOROVOD_LOCAL_SIZE", lsize},
        {"HOROVOD_CROSS_RANK", std::to_string(w.cross_rank)}, {"HOROVOD_CROSS_SIZE", std::to_string(w.cross_size)},
        {"DLAUNCH_RANK", R}, {"DLAUNCH_WORLD_SIZE", "5"}, {"DLAUNCH_LOCAL_RANK", local},
        {"DLAUNCH_LOCAL_WORLD_SIZE", lsize}, {"DLAUNCH_NODE_RANK", node}, {"DLAUNCH_NNODES", "2"},
        {"DLAUNCH_JOB_ID", "dl-abcd"}, {"DLAUNCH_HOST_ID", "dl-abcd/" + node}, {"DLAUNCH_TOKEN", "secret-token"},
        {"DLAUNCH_STORE_ADDR", "10.0.0.9:4000"}, {"DLAUNCH_RESTART_COUNT", "0"},
        {"TORCHELASTIC_RUN_ID", "dl-abcd"}, {"TORCHELASTIC_RESTART_COUNT", "0"}, {"TORCHELASTIC_MAX_RESTARTS", "0"},
    };
    CHECK(rank_env(j, r) == expected);
  }
}

TEST_CASE("rank_env: --map-by node interleaves ranks, local ranks follow", "[launcher]") {
  auto p = two_nodes(dl::hostfiles::MapBy::kNode);
  JobEnv j = job(&p);
  // Round robin: 0 node1, 1 node2, 2 node1, 3 node2, 4 node1.
  const int node[5] = {0, 1, 0, 1, 0}, local[5] = {0, 0, 1, 1, 2}, lsize[5] = {3, 2, 3, 2, 3};
  for (int r = 0; r < 5; ++r) {
    auto e = rank_env(j, r);
    INFO("rank " << r);
    CHECK(e["NODE_RANK"] == std::to_string(node[r]));
    CHECK(e["LOCAL_RANK"] == std::to_string(local[r]));
    CHECK(e["LOCAL_WORLD_SIZE"] == std::to_string(lsize[r]));
  }
}

TEST_CASE("rank_env: no store address, no DLAUNCH_STORE_ADDR", "[launcher]") {
  auto p = dl::hostfiles::place_local(2, 1);
  JobEnv j = job(&p);
  j.store_addr = "";
  auto e = rank_env(j, 1);
  CHECK(e.count("DLAUNCH_STORE_ADDR") == 0);
  CHECK(e["RANK"] == "1");
  CHECK(e["HOROVOD_CROSS_SIZE"] == "1");
  CHECK_THROWS(rank_env(j, 2));
}

TEST_CASE("contradicted_vars: replaced and removed identity variables, never the token", "[launcher]") {
  auto p = dl::hostfiles::place_local(2, 1);
  JobEnv j = job(&p);
  auto ours = rank_env(j, 0);
  EnvMap inherited = {
      {"RANK", "7"},                   // replaced with another value
      {"WORLD_SIZE", "2"},             // same value: no contradiction
      {"OMPI_COMM_WORLD_RANK", "7"},   // replaced
      {"PMIX_NAMESPACE", "slurm.1"},   // removed (an outer launcher's)
      {"PMI_FD", "5"},                 // removed
      {"HYDRA_CONTROL_FD", "9"},       // removed
      {"HOME", "/root"},               // not ours at all
      {"DLAUNCH_TOKEN", "outer"},      // replaced, but never named
      {"MY_RANK_NOTE", "x"},
  };
  auto got = dl::launcher::contradicted_vars(inherited, ours);
  std::sort(got.begin(), got.end());
  CHECK(got == std::vector<std::string>{"HYDRA_CONTROL_FD", "OMPI_COMM_WORLD_RANK", "PMIX_NAMESPACE", "PMI_FD", "RANK"});
  CHECK(dl::launcher::contradicted_vars({}, ours).empty());
}

TEST_CASE("rank_env: a restarted attempt's count and the maximum (--max-restarts)", "[launcher][restart]") {
  auto p = dl::hostfiles::place_local(2, 1);
  JobEnv j = job(&p);
  j.restart_count = 2, j.max_restarts = 5;
  auto e = rank_env(j, 1);
  CHECK(e["TORCHELASTIC_RESTART_COUNT"] == "2");
  CHECK(e["DLAUNCH_RESTART_COUNT"] == "2");
  CHECK(e["TORCHELASTIC_MAX_RESTARTS"] == "5");
  CHECK(e["TORCHELASTIC_RUN_ID"] == "dl-abcd");  // the run id stays
}

TEST_CASE("rank_env: torchelastic's variables and the agent store only when dlaunch serves it", "[launcher]") {
  auto p = dl::hostfiles::place_local(2, 1);
  JobEnv j = job(&p);
  for (int r = 0; r < 2; ++r) {
    auto e = rank_env(j, r);
    CHECK(e["TORCHELASTIC_RUN_ID"] == "dl-abcd");  // torch.distributed.is_torchelastic_launched()
    CHECK(e["TORCHELASTIC_RESTART_COUNT"] == "0");
    CHECK(e["TORCHELASTIC_MAX_RESTARTS"] == "0");
    CHECK(e["DLAUNCH_RESTART_COUNT"] == "0");
    // With it, torch's env:// connects to a store on MASTER_PORT as a client only.
    CHECK(e.count("TORCHELASTIC_USE_AGENT_STORE") == 0);
    CHECK(e.count("DLAUNCH_TORCH_STORE") == 0);
    // A path on the rank's host: its agent sets it.
    CHECK(e.count("TORCHELASTIC_ERROR_FILE") == 0);
  }
  j.agent_store = true;  // dlaunch serves torch's c10d store on MASTER_PORT
  for (int r = 0; r < 2; ++r) {
    auto e = rank_env(j, r);
    CHECK(e["TORCHELASTIC_USE_AGENT_STORE"] == "True");
    // Where it is served: the hook compares a script's own address with it.
    CHECK(e["DLAUNCH_TORCH_STORE"] == e["MASTER_ADDR"] + ":" + e["MASTER_PORT"]);
  }
}

TEST_CASE("rank_env: inside Slurm the per-task SLURM_* variables agree with RANK", "[launcher][slurm]") {
  auto p = two_nodes();  // node1 runs 0,1,2; node2 runs 3,4
  JobEnv j = job(&p);
  SECTION("outside Slurm none are set") {
    for (int r = 0; r < 5; ++r) {
      auto e = rank_env(j, r);
      for (const auto& [k, v] : e) CHECK(k.rfind("SLURM_", 0) != 0);
    }
  }
  SECTION("inside") {
    j.slurm = true;
    const int node[5] = {0, 0, 0, 1, 1}, local[5] = {0, 1, 2, 0, 1}, lsize[5] = {3, 3, 3, 2, 2};
    for (int r = 0; r < 5; ++r) {
      INFO("rank " << r);
      auto e = rank_env(j, r);
      CHECK(e["SLURM_PROCID"] == std::to_string(r));
      CHECK(e["SLURM_PROCID"] == e["RANK"]);
      CHECK(e["SLURM_LOCALID"] == std::to_string(local[r]));
      CHECK(e["SLURM_NODEID"] == std::to_string(node[r]));
      CHECK(e["SLURM_NTASKS"] == "5");
      CHECK(e["SLURM_NPROCS"] == "5");
      CHECK(e["SLURM_STEP_NUM_TASKS"] == "5");
      CHECK(e["SLURM_NTASKS_PER_NODE"] == std::to_string(lsize[r]));
      CHECK(e["SLURM_STEP_TASKS_PER_NODE"] == "3,2");
      CHECK(e["SLURM_TASKS_PER_NODE"] == "3,2");
      // Job-level ones are the job's, whatever the rank: not dlaunch's to set.
      CHECK(e.count("SLURM_JOB_ID") == 0);
      CHECK(e.count("SLURM_JOB_NODELIST") == 0);
    }
  }
}

TEST_CASE("slurm_tasks_per_node: Slurm's run-length spelling", "[launcher][slurm]") {
  using dl::launcher::slurm_tasks_per_node;
  CHECK(slurm_tasks_per_node({4}) == "4");
  CHECK(slurm_tasks_per_node({2, 2}) == "2(x2)");
  CHECK(slurm_tasks_per_node({2, 2, 3}) == "2(x2),3");
  CHECK(slurm_tasks_per_node({3, 2, 2, 2, 1}) == "3,2(x3),1");
  CHECK(slurm_tasks_per_node({}).empty());
}

TEST_CASE("contradicted_vars: Slurm's task variables are rewritten on purpose, without a warning", "[launcher][slurm]") {
  auto p = dl::hostfiles::place_local(2, 1);
  JobEnv j = job(&p);
  j.slurm = true;
  auto ours = rank_env(j, 1);
  EnvMap inherited = {{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}, {"SLURM_TASK_PID", "77"}, {"RANK", "0"}};
  CHECK(dl::launcher::contradicted_vars(inherited, ours) == std::vector<std::string>{"RANK"});
}

TEST_CASE("contradicted_vars: a name that only starts like an identity is the user's, never warned about",
          "[launcher]") {
  auto p = dl::hostfiles::place_local(2, 1);
  JobEnv j = job(&p);
  auto ours = rank_env(j, 0);
  // The identity table (control/env_names.h) lists PMI's names one by one:
  // a script's own PMI_ENV_PORT, or MPI_LOCAL_SCRATCH, is neither PMI's nor
  // Hydra's, whatever its first letters.
  EnvMap inherited = {{"PMI_ENV_PORT", "7001"}, {"PMI_RANKS_FILE", "/x"}, {"MPI_LOCAL_SCRATCH", "/tmp"},
                      {"OMPI_COMM_WORLD_NOTE", "x"}, {"PMI_PORT", "h:1"}, {"MPI_LOCALRANKID", "1"}};
  auto got = dl::launcher::contradicted_vars(inherited, ours);
  std::sort(got.begin(), got.end());
  // PMI_PORT: removed (PMI's socket); MPI_LOCALRANKID: replaced (ours is 0).
  CHECK(got == std::vector<std::string>{"MPI_LOCALRANKID", "PMI_PORT"});
  for (const char* mine : {"PMI_ENV_PORT", "PMI_RANKS_FILE", "MPI_LOCAL_SCRATCH", "OMPI_COMM_WORLD_NOTE"}) {
    INFO(mine);
    CHECK_FALSE(dl::env::is_foreign_identity_var(mine));
  }
}
