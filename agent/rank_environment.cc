#include "agent/rank_environment.h"

#include "control/env_names.h"

namespace dl::agent {

EnvVars compose_rank_env(EnvVars env, const EnvVars& common, const EnvVars& own,
                         const std::vector<std::pair<std::string, std::string>>& server_vars) {
  // Identity variables of an outer launcher (PMIx, PMI, OpenMPI's runtime)
  // would make the rank talk to it: they go before ours are added.
  for (auto it = env.begin(); it != env.end();)
    it = env::is_foreign_identity_var(it->first) ? env.erase(it) : std::next(it);
  for (const auto& [k, v] : common) env[k] = v;
  for (const auto& [k, v] : own) env[k] = v;
  for (const auto& [k, v] : server_vars) env[k] = v;
  return env;
}

}  // namespace dl::agent
