#include "tests/slurm/slurm_fixture.h"

#include <stdexcept>

namespace dl::slurm_test {

namespace {
std::string script_path() { return std::string(DLAUNCH_SOURCE_DIR) + "/tests/slurm/slurm_cluster.sh"; }
}  // namespace

SlurmCluster::SlurmCluster(int compute_nodes) : c_(compute_nodes + 1) {
  auto r = dl::cluster::run_argv({script_path(), "up", c_.id()}, std::chrono::seconds(60));
  if (r.status != 0) throw std::runtime_error("slurm_cluster.sh up failed (" + std::to_string(r.status) + "): " + r.output);
  const auto at = r.output.find("SLURM_CONF=");
  if (at == std::string::npos) throw std::runtime_error("slurm_cluster.sh up printed no SLURM_CONF: " + r.output);
  conf_ = r.output.substr(at + 11);
  conf_ = conf_.substr(0, conf_.find('\n'));
}

std::string SlurmCluster::subnet() const {
  const std::string a = c_.address(0);
  return a.substr(0, a.rfind('.')) + ".0/24";
}

dl::cluster::RunResult SlurmCluster::run_login(const std::string& shell_cmd, std::chrono::milliseconds timeout) const {
  return c_.run_in("h0", "export SLURM_CONF=" + conf_ + "; " + shell_cmd + " </dev/null", timeout);
}

dl::cluster::RunResult SlurmCluster::script(const std::string& sub, const std::string& host) const {
  return dl::cluster::run_argv({script_path(), sub, c_.id(), host});
}

std::string SlurmCluster::active_jobs() const {
  auto r = run_login("squeue -h -t PENDING,RUNNING -o '%i %T'", std::chrono::seconds(20));
  return r.status == 0 ? r.output : "squeue failed: " + r.output;
}

}  // namespace dl::slurm_test
