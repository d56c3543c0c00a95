#pragma once
#include <string>

namespace dl::agent {

// True for inherited variables that belong to an outer launcher's identity
// (PMIx, PMI wire-up, OpenMPI's runtime, Hydra): the agent removes them from
// every rank's environment before adding dlaunch's own, so a rank started
// by a dlaunch that itself runs under srun or mpirun never talks to the
// outer launcher.
bool is_foreign_identity_var(const std::string& name);

}  // namespace dl::agent

#include <map>
#include <utility>
#include <vector>

namespace dl::agent {

using EnvVars = std::map<std::string, std::string>;

// A rank's complete environment, pure: what the agent inherited less any
// outer launcher's identity (is_foreign_identity_var), then the launch's
// variables for every rank, then this rank's own, then the PMIx server's
// (PMIX_RANK, PMIX_SERVER_URI*, ...), each layer winning over the ones
// before it.
EnvVars compose_rank_env(EnvVars inherited, const EnvVars& common, const EnvVars& own,
                         const std::vector<std::pair<std::string, std::string>>& server_vars);

}  // namespace dl::agent
