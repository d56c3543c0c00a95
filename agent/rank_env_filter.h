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
