#include "mpi/pmix/local_topology.h"

#include <hwloc.h>

namespace dl::mpi::pmix {

LocalTopology::LocalTopology() {
  hwloc_topology_t topo;
  if (hwloc_topology_init(&topo) != 0) return;
  hwloc_topology_set_flags(topo, HWLOC_TOPOLOGY_FLAG_INCLUDE_DISALLOWED);
  hwloc_topology_set_io_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
  char* xml = nullptr;
  int len = 0;
  if (hwloc_topology_load(topo) != 0) {
    hwloc_topology_destroy(topo);
    return;
  }
  if (hwloc_topology_export_xmlbuffer(topo, &xml, &len, 0) == 0) {
    xml_.assign(xml);
    hwloc_free_xmlbuffer(topo, xml);
  }
  topo_ = topo;
}

LocalTopology::~LocalTopology() {
  if (topo_ != nullptr) hwloc_topology_destroy(static_cast<hwloc_topology_t>(topo_));
}

}  // namespace dl::mpi::pmix
