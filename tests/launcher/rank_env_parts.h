#pragma once
// A rank's variables as the launcher's part of the pipeline and the agent's
// identity writers give them together (launcher/rank_env.h, stages 1 to 3
// with no launch variables): what the tests compare a plan, a launch or an
// agent's result with. The launcher never composes a whole rank's
// environment itself: the agent writes each host's and rank's identity.
#include "control/rank_identity.h"
#include "launcher/rank_env.h"

namespace dl::launcher {

// Node `node`'s identity variables (stage 2's, written as its agent writes them).
inline EnvMap host_env(const JobEnv& job, int node) {
  EnvMap e;
  control::add_host_identity(e, {node, job.placement->local_size.at(static_cast<size_t>(node)), job.job_id, job.slurm});
  return e;
}

// What every rank on `node` gets alike: the job's and the host's.
inline EnvMap node_env(const JobEnv& job, int node) {
  EnvMap e = shared_env(job);
  e.merge(host_env(job, node));
  return e;
}

// `rank`'s identity variables (stage 3's, written as its agent writes them).
inline EnvMap rank_own_env(const JobEnv& job, int rank) {
  EnvMap e;
  control::add_rank_identity(e, rank_place(job, rank));
  return e;
}

// Every variable dlaunch sets for `rank` from the placement: node_env and
// rank_own_env together (no name is in both).
inline EnvMap rank_env(const JobEnv& job, int rank) {
  const auto& place = job.placement->ranks.at(static_cast<size_t>(rank));
  EnvMap e = node_env(job, place.node);
  e.merge(rank_own_env(job, rank));
  return e;
}

}  // namespace dl::launcher
