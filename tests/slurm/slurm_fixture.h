#pragma once
// A real Slurm cluster for the tests (docs/testing-cluster.md, "Slurm"): the
// namespace cluster of tests/cluster with h0 as login node and slurmctld,
// h1..hK compute nodes with a slurmd each, one munged, all started by
// tests/slurm/slurm_cluster.sh and gone with the namespaces.
//
//   SlurmCluster s(4);                                  // 4 compute nodes, 2 CPUs each
//   auto r = s.run_login("salloc -N4 -K dlaunch -n 8 hostname");
#include <chrono>
#include <string>

#include "tests/cluster/cluster_fixture.h"

namespace dl::slurm_test {

class SlurmCluster {
 public:
  // Throws std::runtime_error with the scripts' own message when it cannot start.
  explicit SlurmCluster(int compute_nodes = 4);
  ~SlurmCluster() = default;  // the Cluster's down ends every daemon with its namespace

  const dl::cluster::Cluster& cluster() const { return c_; }
  const std::string& conf() const { return conf_; }   // SLURM_CONF
  std::string subnet() const;                         // "10.216.176.0/24"

  // Runs `shell_cmd` on the login node h0 with SLURM_CONF set and stdin from /dev/null.
  dl::cluster::RunResult run_login(const std::string& shell_cmd,
                                   std::chrono::milliseconds timeout = std::chrono::seconds(60)) const;
  // slurm_cluster.sh ARGS... on this cluster (kill-node).
  dl::cluster::RunResult script(const std::string& sub, const std::string& host) const;
  // Jobs slurmctld still knows as running or pending ("" when none).
  std::string active_jobs() const;

 private:
  dl::cluster::Cluster c_;
  std::string conf_;
};

}  // namespace dl::slurm_test
