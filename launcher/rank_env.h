#pragma once
// A rank's environment, one pipeline. Each stage adds to what the stages
// before it gave, and where two name a variable the later one wins:
//
//   0. inherited  the agent's own environment, less any outer launcher's
//                 identity (env::is_foreign_identity_var: one table, in
//                 control/env_names.h), Slurm's task-only variables and
//                 what the agent set for itself (MpiSide::scrub_rank_env).
//   1. job        what every rank of the job shares: shared_env() below
//                 (the sizes, the rendezvous, the job's id and token,
//                 torchelastic's), over the -x exports, with TERM and the
//                 one app's MPI_APPNUM. plan_launch sends it once to every
//                 agent (LaunchPlan::shared, msg::LaunchEnv).
//   2. host       what every rank of one host shares: its identity
//                 (LOCAL_WORLD_SIZE, NODE_RANK, DLAUNCH_HOST_ID, ...), which
//                 the agent writes from the launch's node index
//                 (control::complete_launch, add_host_identity), under the
//                 launch's own variables (OMP_NUM_THREADS, and what
//                 plan_launch finds every rank of the host has alike: one
//                 app's variables, one GPU list).
//   3. rank       what differs from rank to rank: its identity (RANK,
//                 LOCAL_RANK, OMPI_COMM_WORLD_RANK, Horovod's cross rank,
//                 ...), which the agent writes from the launch's
//                 msg::RankIdentity (control::add_rank_identity, from
//                 rank_place() here), under the rank's own variables in the
//                 launch (its GPUs, its app's).
//   4. the agent's contributors, in order, each task_env(rank)
//                 (agent/rank_contributor.h): the MPI side (PMIX_*, PMI_FD),
//                 torch's error file (TORCHELASTIC_ERROR_FILE), the Python
//                 stack hook (PYTHONPATH, DLAUNCH_PYTHON_DIR).
//
// Stages 0 to 2 are composed once per host (agent/rank_environment.h,
// rank_env_base), so that each rank costs only stages 3 and 4. Every name
// is in docs/dlaunch.md. This file holds the launcher's part: stage 1 and
// what stage 3 is written from. Pure: no I/O, unit-tested.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "control/env_names.h"
#include "control/rank_identity.h"
#include "hostfiles/placement.h"

namespace dl::launcher {

using EnvMap = std::map<std::string, std::string>;

// Horovod's cross rank and size of every rank (among the nodes that have a
// rank of its local rank, its node's index and their count), computed in one
// pass over the placement: asked rank by rank, it was a pass over every node
// for each rank (8 million steps at 1,024 hosts x 8).
class CrossRanks {
 public:
  explicit CrossRanks(const hostfiles::Placement& p);
  // (cross rank, cross size) of local rank `local_rank` on `node`.
  std::pair<int, int> of(int node, int local_rank) const;

 private:
  std::vector<std::vector<int>> index_;  // by node, by local rank
  std::vector<int> count_;               // by local rank
};

struct JobEnv {
  const hostfiles::Placement* placement = nullptr;
  // The placement's cross ranks; null: computed by rank_place when asked.
  std::shared_ptr<const CrossRanks> cross;
  std::string job_id;
  std::string master_addr;   // rank 0's host as the other hosts reach it
  int master_port = 0;       // free on rank 0's host, not one of dlaunch's own
  std::string store_addr;    // host:port of the job's store, "" = none
  std::string token;         // the job token (DLAUNCH_TOKEN)
  bool slurm = false;        // dlaunch runs inside a Slurm job: rewrite the per-task SLURM_* variables
  int restart_count = 0;     // --max-restarts: which attempt this is (0 = the first)
  int max_restarts = 0;      // --max-restarts
  std::string role = "default";  // --role: ROLE_NAME
  bool agent_store = false;      // MASTER_ADDR:MASTER_PORT is dlaunch's c10d store (TORCHELASTIC_USE_AGENT_STORE)
};

// Stage 1: what every rank of the job shares, in every dialect (torchrun's,
// torchelastic's but TORCHELASTIC_ERROR_FILE, OpenMPI's, Intel MPI/Hydra's,
// Horovod's, DLAUNCH_*; inside Slurm also Slurm's job-wide task counts). No
// name of a host's or a rank's identity is among them.
EnvMap shared_env(const JobEnv& job);
// What stage 3's identity is written from (control::add_rank_identity):
// `rank`'s local rank and Horovod's cross rank and size.
control::RankPlace rank_place(const JobEnv& job, int rank);

// Slurm's spelling of the ranks per node, as in SLURM_STEP_TASKS_PER_NODE:
// {2,2,3} -> "2(x2),3".
std::string slurm_tasks_per_node(const std::vector<int>& per_node);


// Names in `inherited` that dlaunch will replace with a different value or
// remove; the launcher warns once with this list.
std::vector<std::string> contradicted_vars(const EnvMap& inherited, const EnvMap& ours);

}  // namespace dl::launcher
