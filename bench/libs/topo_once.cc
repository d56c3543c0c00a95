// topo_once: read this host's CPU topology once and exit, the start-up cost
// of each way (what an agent with --bind-to pays); built two ways
// (CMakeLists.txt): machine/cpus.cc, and hwloc linked as Debian ships it.
// bench/libs/run.sh times them with hyperfine.
#if DL_TOPO_HWLOC
#include <hwloc.h>
#else
#include "machine/cpus.h"
#endif

int main() {
#if DL_TOPO_HWLOC
  hwloc_topology_t topo;
  hwloc_topology_init(&topo);
  hwloc_topology_load(topo);
  const int cores = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);
  hwloc_topology_destroy(topo);
#else
  const int cores = static_cast<int>(dl::machine::read_cpu_topology(dl::machine::own_allowed_cpus()).cores.size());
#endif
  return cores > 0 ? 0 : 1;
}
