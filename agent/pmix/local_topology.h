#pragma once
// Internal to agent/pmix: this host's hwloc topology as XML, discovered once
// by the agent and handed to every rank as PMIX_LOCAL_TOPO, so that each
// OpenMPI rank does not rediscover it (mpirun does the same).
#include <string>

namespace dl::agent::pmix {

// The XML, or "" when hwloc fails (ranks then discover it themselves).
std::string local_topology_xml();

}  // namespace dl::agent::pmix
