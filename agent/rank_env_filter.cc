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
