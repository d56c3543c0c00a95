#include "agent/rank_env_filter.h"

namespace dl::agent {

bool is_foreign_identity_var(const std::string& n) {
  static const char* prefixes[] = {"PMIX_", "PMI_", "OMPI_COMM_WORLD_", "OMPI_MCA_ess", "OMPI_MCA_orte_",
                                   "OMPI_MCA_pmix", "OMPI_UNIVERSE_SIZE", "OMPI_FIRST_RANKS", "HYDRA_", "MPI_LOCAL"};
  for (const char* p : prefixes)
    if (n.rfind(p, 0) == 0) return true;
  return false;
}

}  // namespace dl::agent

namespace dl::agent {

EnvVars compose_rank_env(EnvVars env, const EnvVars& common, const EnvVars& own,
                         const std::vector<std::pair<std::string, std::string>>& server_vars) {
  // Identity variables of an outer launcher (PMIx, PMI, OpenMPI's runtime)
  // would make the rank talk to it: they go before ours are added.
  for (auto it = env.begin(); it != env.end();) it = is_foreign_identity_var(it->first) ? env.erase(it) : std::next(it);
  for (const auto& [k, v] : common) env[k] = v;
  for (const auto& [k, v] : own) env[k] = v;
  for (const auto& [k, v] : server_vars) env[k] = v;
  return env;
}

}  // namespace dl::agent
