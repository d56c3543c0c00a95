#pragma once
#include <memory>
// Every rank's identity, in every dialect its program may read, from one
// source of truth (the Placement). Pure: no I/O, unit-tested.
#include <map>
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
  // The placement's cross ranks; null: computed by rank_own_env when asked.
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

// The variables dlaunch sets for `rank`: torchrun's (torchelastic's included,
// but not TORCHELASTIC_ERROR_FILE, a path on the rank's host that its agent
// sets), OpenMPI's, Intel MPI/Hydra's, Horovod's and DLAUNCH_*; inside Slurm
// also Slurm's per-task ones, agreeing with RANK. (CUDA_VISIBLE_DEVICES is
// added by the caller, which knows each host's GPUs.) Listed in docs/dlaunch.md.
EnvMap rank_env(const JobEnv& job, int rank);

// rank_env in two parts, so that a launch composes the part its ranks share
// once per host instead of once per rank (launch_plan.cc): node_env is what
// every rank on `node` gets alike (the job's and the host's sizes, the
// rendezvous, the job's id and token), rank_own_env what differs from rank to
// rank (its ranks, local ranks, Horovod's cross rank). No name is in both, and
// rank_env(job, r) is their union.
EnvMap node_env(const JobEnv& job, int node);
EnvMap rank_own_env(const JobEnv& job, int rank);
// node_env in two parts: what every host of the job shares (the sizes, the
// rendezvous, the job's id and token: sent once, msg::LaunchEnv) and what is
// `node`'s own (its local size, node rank, host id). No name is in both.
EnvMap shared_env(const JobEnv& job);
EnvMap host_env(const JobEnv& job, int node);
// What rank_own_env is written from (control::add_rank_identity, which the
// agent runs for a launch that leaves the identity to it).
control::RankPlace rank_place(const JobEnv& job, int rank);

// Slurm's spelling of the ranks per node, as in SLURM_STEP_TASKS_PER_NODE:
// {2,2,3} -> "2(x2),3".
std::string slurm_tasks_per_node(const std::vector<int>& per_node);


// Names in `inherited` that dlaunch will replace with a different value or
// remove; the launcher warns once with this list.
std::vector<std::string> contradicted_vars(const EnvMap& inherited, const EnvMap& ours);

}  // namespace dl::launcher
