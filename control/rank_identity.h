#pragma once
// A rank's own identity variables, in every dialect its program may read:
// written by the launcher when it spells a rank out (launcher/rank_env.h)
// and by the agent for a launch that carries msg::RankIdentity instead, so
// that both say exactly the same (docs/dlaunch.md lists them).
#include "control/messages.h"

namespace dl::control {

struct RankPlace {
  int rank = 0, local_rank = 0;
  int cross_rank = 0, cross_size = 0;  // Horovod's (launcher/rank_env.h, CrossRanks)
  bool slurm = false;                  // also Slurm's per-task variables
};

// A host's place in the job: what its ranks share of their identity.
struct HostPlace {
  int node = 0;        // its node index (NODE_RANK)
  int local_size = 0;  // its ranks (LOCAL_WORLD_SIZE)
  std::string job_id;  // the job's (DLAUNCH_HOST_ID is JOB_ID/NODE)
  bool slurm = false;  // also Slurm's per-node variables
};

// LOCAL_WORLD_SIZE, NODE_RANK, GROUP_RANK, OMPI_COMM_WORLD_LOCAL_SIZE, ...,
// DLAUNCH_HOST_ID for `p`, added to `env` where it has no value of the name yet.
void add_host_identity(EnvVars& env, const HostPlace& p);

// RANK, LOCAL_RANK, ROLE_RANK, OMPI_COMM_WORLD_RANK, ..., DLAUNCH_LOCAL_RANK
// for `p`, added to `env` where it has no value of the name yet.
void add_rank_identity(EnvVars& env, const RankPlace& p);

// What a launch left for the agent, filled in: the variables every host
// shares (`shared`, the latest launch_env) under the launch's own, each
// rank's argv from the launch's where the rank names none, and, with
// m.identity, each rank's identity variables (its local rank is its place in
// m.ranks) and, where it names the node, the host's (its local size is the
// launch's rank count, its job id the launch's or `shared`'s DLAUNCH_JOB_ID;
// they go under the launch's own variables and over `shared`). Afterwards
// m.argv and m.identity are absent and m reads as if the launcher had
// spelled every rank out. A RankIdentity shorter than the
// launch's ranks is a ProtocolError.
void complete_launch(msg::Launch& m, const EnvVars& shared = {});

}  // namespace dl::control
