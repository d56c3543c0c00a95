#pragma once
// The agent's contributors to a rank's environment: the last stage of the
// pipeline (launcher/rank_env.h, stage 4), after the launch's variables and
// the rank's identity. Each is a part of the agent that owns something a
// rank must be told of just before it starts, as flux's shell plugins each
// have a task_init: in order, the MPI side (its PMIx and PMI servers:
// PMIX_*, PMI_FD and the socket), torch's error files
// (TORCHELASTIC_ERROR_FILE) and the Python stack hook (PYTHONPATH,
// DLAUNCH_PYTHON_DIR). A later contributor's variable replaces an earlier
// one's. Agent::prepare_rank runs the list; the agent makes it once per
// launch (or per MPI_Comm_spawn, whose children take the PMIx variables the
// spawn gave in place of the MPI side's).
#include <map>
#include <string>

#include "mpi/mpi_hooks.h"

namespace dl::agent {

using EnvVars = std::map<std::string, std::string>;
using mpi::TaskEnv;

// A rank's environment as composed so far: the host's base (the launch's
// variables over the agent's own, agent/rank_environment.h: RankEnvBase's
// vars) under the rank's own layers up to here.
struct RankEnvSoFar {
  const EnvVars& base;
  const EnvVars& over;
  // The value of `name`, or null.
  const std::string* find(const std::string& name) const {
    if (auto it = over.find(name); it != over.end()) return &it->second;
    if (auto it = base.find(name); it != base.end()) return &it->second;
    return nullptr;
  }
};

class RankContributor {
 public:
  virtual ~RankContributor() = default;
  // What `rank` gets; `so_far` is its environment up to this contributor.
  // May throw Error: the rank is then refused with it, and the contributors
  // before this one are told (task_refused).
  virtual TaskEnv task_env(int rank, const RankEnvSoFar& so_far) = 0;
  // After task_env, exactly one of these, once the rank's fate is known:
  // it is about to be spawned with what it was given (the spawn closes the
  // agent's copy of an inherited socket), or it will not be.
  virtual void task_started(int /*rank*/) {}
  virtual void task_refused(int /*rank*/) {}
};

// Fixed variables, the same for every rank asked: a spawned child's PMIx
// variables (mpi/mpi_hooks.h, start_children's envs).
class FixedContribution final : public RankContributor {
 public:
  explicit FixedContribution(const mpi::EnvList& vars) : vars_(vars) {}
  TaskEnv task_env(int, const RankEnvSoFar&) override { return {vars_, -1}; }

 private:
  const mpi::EnvList& vars_;
};

}  // namespace dl::agent
