#pragma once
// Internal to mpi/pmix: this host's hwloc topology, discovered once per
// agent. libpmix gets the object at PMIx_server_init (PMIX_TOPOLOGY2, so it
// does not discover it a second time), and every rank gets it as XML in
// PMIX_LOCAL_TOPO, so that each OpenMPI rank does not rediscover it (mpirun
// does the same).
#include <string>

namespace dl::mpi::pmix {

class LocalTopology {
 public:
  // Discovers the topology (tens of ms: sysfs, PCI). On failure hwloc() is
  // null and xml() empty: libpmix and the ranks then discover it themselves.
  LocalTopology();
  ~LocalTopology();
  LocalTopology(const LocalTopology&) = delete;
  LocalTopology& operator=(const LocalTopology&) = delete;

  void* hwloc() const { return topo_; }  // hwloc_topology_t, or null
  const std::string& xml() const { return xml_; }

 private:
  void* topo_ = nullptr;
  std::string xml_;
};

}  // namespace dl::mpi::pmix
