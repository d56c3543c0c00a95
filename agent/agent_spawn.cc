// The agent's side of MPI_Comm_spawn: the launcher placed the children of a
// rank's spawn request here, and the MPI side registered their PMIx
// namespace (mpi/mpi_side.h); start them as ranks of the job (output, exits
// and teardown as for any rank). docs/mpi.md, "Spawning".
#include "agent/agent.h"

#include "errors/error.h"

namespace dl::agent {

namespace msg = control::msg;

void Agent::start_children(const msg::SpawnLaunch& m, const std::vector<EnvList>& envs, const std::string& error) {
  resolved_.clear(), wdirs_.clear();
  std::string why = error;
  if (why.empty() && (!launch_ || envs.size() != m.children.size())) why = "no MPI job runs on this host";
  if (!why.empty()) {
    for (const auto& c : m.children) ranks_.refuse(c.rank, 1, "cannot start a spawned process: " + why);
    return;
  }
  EnvVars inherited = own_environment();
  MpiSide::scrub_rank_env(inherited);
  for (size_t k = 0; k < m.children.size(); ++k) start_child(m.children[k], *launch_, inherited, envs[k]);
}

}  // namespace dl::agent
