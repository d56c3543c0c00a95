#pragma once
// A rank's environment, composed by the agent. Pure: unit-tested without
// spawning anything (tests/agent/rank_environment_test.cc).
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace dl::agent {

using EnvVars = std::map<std::string, std::string>;

// A rank's complete environment: what the agent inherited less any outer
// launcher's identity (env::is_foreign_identity_var, control/env_names.h),
// then the launch's variables for every rank, then this rank's own, then the
// PMIx server's (PMIX_RANK, PMIX_SERVER_URI*, ...), each layer winning over
// the ones before it.
EnvVars compose_rank_env(EnvVars inherited, const EnvVars& common, const EnvVars& own,
                         const std::vector<std::pair<std::string, std::string>>& server_vars);

}  // namespace dl::agent
