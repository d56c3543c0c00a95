#include "mpi/mpi_hooks.h"

#include <iostream>

namespace dl::mpi {

void finish_spawn_launch(const MpiHooks& hooks, const control::msg::SpawnLaunch& m, const std::vector<EnvList>& envs,
                         const std::string& error) {
  if (!m.elsewhere) return hooks.start_children(m, envs, error);
  if (!error.empty())
    std::cerr << "dlaunch-agent: warning: cannot register " + m.nspace + " (spawned on " + *m.elsewhere + "): " +
                     error + "; this host's ranks cannot reach it\n";
  control::msg::SpawnKnown known{m.nspace, std::nullopt};
  if (!error.empty()) known.error = error;
  hooks.send(known);
}

}  // namespace dl::mpi
