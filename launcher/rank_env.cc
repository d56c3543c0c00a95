#include "launcher/rank_env.h"

namespace dl::launcher {

CrossRanks::CrossRanks(const hostfiles::Placement& p) : index_(p.local_size.size()) {
  for (size_t n = 0; n < p.local_size.size(); ++n) {
    const auto size = static_cast<size_t>(p.local_size[n]);
    if (count_.size() < size) count_.resize(size, 0);
    index_[n].resize(size);
    for (size_t l = 0; l < size; ++l) index_[n][l] = count_[l]++;
  }
}

std::pair<int, int> CrossRanks::of(int node, int local_rank) const {
  const auto l = static_cast<size_t>(local_rank);
  return {index_.at(static_cast<size_t>(node)).at(l), count_.at(l)};
}

EnvMap shared_env(const JobEnv& job) {
  const auto& p = *job.placement;
  const std::string world = std::to_string(p.ranks.size()), nnodes = std::to_string(p.nodes.size());
  EnvMap e = {
      // torchrun
      {env::kWorldSize, world}, {env::kGroupWorldSize, nnodes}, {env::kRoleWorldSize, world}, {env::kRoleName, job.role},
      {env::kMasterAddr, job.master_addr}, {env::kMasterPort, std::to_string(job.master_port)},
      // OpenMPI, Intel MPI / MPICH Hydra (oneCCL reads these), Horovod
      {env::kOmpiSize, world}, {env::kPmiSize, world}, {env::kHorovodSize, world},
      // dlaunch's own runtime
      {env::kDlWorldSize, world}, {env::kDlNNodes, nnodes}, {env::kDlJobId, job.job_id}, {env::kDlToken, job.token},
  };
  if (!job.store_addr.empty()) e[env::kDlStoreAddr] = job.store_addr;
  // torchelastic's: the run id makes torch.distributed.is_torchelastic_launched()
  // true (Lightning then picks its TorchElastic environment); the run id stays
  // across restarts, the count says which attempt this is (docs/failures.md).
  e[env::kTorchelasticRunId] = job.job_id;
  e[env::kTorchelasticRestartCount] = std::to_string(job.restart_count);
  e[env::kTorchelasticMaxRestarts] = std::to_string(job.max_restarts);
  e[env::kDlRestartCount] = std::to_string(job.restart_count);
  if (job.agent_store) {
    e[env::kTorchelasticUseAgentStore] = "True";
    e[env::kDlTorchStore] = job.master_addr + ":" + std::to_string(job.master_port);
  }
  if (job.slurm) {
    // Under `srun ... dlaunch` every rank would inherit its dlaunch's task
    // identity (SLURM_PROCID 0 on a whole node of ranks), and Lightning and
    // ignite believe SLURM_PROCID over RANK. Say the same as RANK does.
    std::vector<int> per_node(p.local_size.begin(), p.local_size.end());
    e[env::kSlurmNTasks] = world, e[env::kSlurmNProcs] = world, e[env::kSlurmStepNumTasks] = world;
    e[env::kSlurmStepTasksPerNode] = e[env::kSlurmTasksPerNode] = slurm_tasks_per_node(per_node);
  }
  return e;
}

control::RankPlace rank_place(const JobEnv& job, int rank) {
  const auto& p = *job.placement;
  const auto& place = p.ranks.at(static_cast<size_t>(rank));
  auto [cross_rank, cross_size] = job.cross ? job.cross->of(place.node, place.local_rank)
                                            : CrossRanks(p).of(place.node, place.local_rank);
  return {rank, place.local_rank, cross_rank, cross_size, job.slurm};
}

std::string slurm_tasks_per_node(const std::vector<int>& per_node) {
  std::string out;
  for (size_t i = 0; i < per_node.size();) {
    size_t j = i;
    while (j < per_node.size() && per_node[j] == per_node[i]) ++j;
    out += (out.empty() ? "" : ",") + std::to_string(per_node[i]) +
           (j - i > 1 ? "(x" + std::to_string(j - i) + ")" : "");
    i = j;
  }
  return out;
}

std::vector<std::string> contradicted_vars(const EnvMap& inherited, const EnvMap& ours) {
  std::vector<std::string> out;
  for (const auto& [k, v] : inherited) {
    auto it = ours.find(k);
    bool replaced = it != ours.end() && it->second != v;
    bool removed = it == ours.end() && env::is_foreign_identity_var(k);
    // Slurm's task variables are rewritten on purpose (srun ... dlaunch --rdzv
    // env is the documented shape): no warning for those.
    const bool slurm = k.rfind("SLURM_", 0) == 0;
    if ((replaced || removed) && k != env::kDlToken && !slurm) out.push_back(k);
  }
  return out;
}

}  // namespace dl::launcher
