#include "launcher/rank_env.h"

namespace dl::launcher {

namespace {
// Horovod's cross rank/size: among the nodes that have a rank with this
// local rank, this node's index and their count.
std::pair<int, int> cross(const hostfiles::Placement& p, int node, int local_rank) {
  int index = 0, count = 0;
  for (size_t n = 0; n < p.local_size.size(); ++n) {
    if (p.local_size[n] > local_rank) {
      if (static_cast<int>(n) == node) index = count;
      ++count;
    }
  }
  return {index, count};
}
}  // namespace

EnvMap rank_env(const JobEnv& job, int rank) {
  const auto& p = *job.placement;
  const auto& place = p.ranks.at(static_cast<size_t>(rank));
  const std::string r = std::to_string(rank), world = std::to_string(p.ranks.size()),
                    local = std::to_string(place.local_rank),
                    lsize = std::to_string(p.local_size.at(static_cast<size_t>(place.node))),
                    node = std::to_string(place.node), nnodes = std::to_string(p.nodes.size());
  auto [cross_rank, cross_size] = cross(p, place.node, place.local_rank);
  EnvMap e = {
      // torchrun
      {"RANK", r}, {"WORLD_SIZE", world}, {"LOCAL_RANK", local}, {"LOCAL_WORLD_SIZE", lsize},
      {"GROUP_RANK", node}, {"GROUP_WORLD_SIZE", nnodes}, {"ROLE_RANK", r}, {"ROLE_WORLD_SIZE", world},
      {"ROLE_NAME", "default"}, {"NODE_RANK", node},
      {"MASTER_ADDR", job.master_addr}, {"MASTER_PORT", std::to_string(job.master_port)},
      // OpenMPI
      {"OMPI_COMM_WORLD_RANK", r}, {"OMPI_COMM_WORLD_SIZE", world}, {"OMPI_COMM_WORLD_LOCAL_RANK", local},
      {"OMPI_COMM_WORLD_LOCAL_SIZE", lsize}, {"OMPI_COMM_WORLD_NODE_RANK", node},
      // Intel MPI / MPICH Hydra (oneCCL reads these)
      {"PMI_RANK", r}, {"PMI_SIZE", world}, {"MPI_LOCALRANKID", local}, {"MPI_LOCALNRANKS", lsize},
      // Horovod
      {"HOROVOD_RANK", r}, {"HOROVOD_SIZE", world}, {"HOROVOD_LOCAL_RANK", local}, {"HOROVOD_LOCAL_SIZE", lsize},
      {"HOROVOD_CROSS_RANK", std::to_string(cross_rank)}, {"HOROVOD_CROSS_SIZE", std::to_string(cross_size)},
      // dlaunch's own runtime
      {"DLAUNCH_RANK", r}, {"DLAUNCH_WORLD_SIZE", world}, {"DLAUNCH_LOCAL_RANK", local},
      {"DLAUNCH_LOCAL_WORLD_SIZE", lsize}, {"DLAUNCH_NODE_RANK", node}, {"DLAUNCH_NNODES", nnodes},
      {"DLAUNCH_JOB_ID", job.job_id}, {"DLAUNCH_HOST_ID", job.job_id + "/" + node},
      {"DLAUNCH_TOKEN", job.token},
  };
  if (!job.store_addr.empty()) e["DLAUNCH_STORE_ADDR"] = job.store_addr;
  return e;
}

std::vector<std::string> contradicted_vars(const EnvMap& inherited, const EnvMap& ours) {
  std::vector<std::string> out;
  for (const auto& [k, v] : inherited) {
    auto it = ours.find(k);
    bool replaced = it != ours.end() && it->second != v;
    bool removed = it == ours.end() && agent::is_foreign_identity_var(k);
    if ((replaced || removed) && k != "DLAUNCH_TOKEN") out.push_back(k);
  }
  return out;
}

}  // namespace dl::launcher
