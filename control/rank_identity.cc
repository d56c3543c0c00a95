#include "control/rank_identity.h"

#include <string>

#include "control/env_names.h"

namespace dl::control {

void add_rank_identity(EnvVars& env, const RankPlace& p) {
  const std::string r = std::to_string(p.rank), local = std::to_string(p.local_rank);
  for (const char* name : {env::kRank, env::kRoleRank, env::kOmpiRank, env::kPmiRank, env::kHorovodRank, env::kDlRank})
    env.try_emplace(name, r);
  for (const char* name :
       {env::kLocalRank, env::kOmpiLocalRank, env::kMpiLocalRankId, env::kHorovodLocalRank, env::kDlLocalRank})
    env.try_emplace(name, local);
  env.try_emplace(env::kHorovodCrossRank, std::to_string(p.cross_rank));
  env.try_emplace(env::kHorovodCrossSize, std::to_string(p.cross_size));
  if (p.slurm) env.try_emplace(env::kSlurmProcId, r), env.try_emplace(env::kSlurmLocalId, local);
}

void add_host_identity(EnvVars& env, const HostPlace& p) {
  const std::string lsize = std::to_string(p.local_size), n = std::to_string(p.node);
  for (const char* name : {env::kLocalWorldSize, env::kOmpiLocalSize, env::kMpiLocalNRanks, env::kHorovodLocalSize,
                           env::kDlLocalWorldSize})
    env.try_emplace(name, lsize);
  for (const char* name : {env::kGroupRank, env::kNodeRank, env::kOmpiNodeRank, env::kDlNodeRank}) env.try_emplace(name, n);
  env.try_emplace(env::kDlHostId, p.job_id + "/" + n);
  if (p.slurm) env.try_emplace(env::kSlurmNodeId, n), env.try_emplace(env::kSlurmNTasksPerNode, lsize);
}

void complete_launch(msg::Launch& m, const EnvVars& shared) {
  if (m.identity && m.identity->node) {
    // The host's variables, over the shared ones (a -x NODE_RANK among them
    // is the job's to replace), under the launch's own.
    std::string job_id;
    if (auto own = m.env.find(env::kDlJobId); own != m.env.end()) job_id = own->second;
    else if (auto job = shared.find(env::kDlJobId); job != shared.end()) job_id = job->second;
    add_host_identity(m.env, {*m.identity->node, static_cast<int>(m.ranks.size()), job_id, m.identity->slurm});
  }
  for (const auto& [k, v] : shared) m.env.try_emplace(k, v);
  if (m.argv)
    for (auto& spec : m.ranks)
      if (spec.argv.empty()) spec.argv = *m.argv;
  m.argv.reset();
  if (!m.identity) return;
  const auto& id = *m.identity;
  if (id.cross_rank.size() < m.ranks.size() || id.cross_size.size() < m.ranks.size())
    throw ProtocolError("'launch' message: field 'identity' has " + std::to_string(id.cross_rank.size()) +
                        " cross ranks for " + std::to_string(m.ranks.size()) + " ranks");
  for (size_t i = 0; i < m.ranks.size(); ++i)
    add_rank_identity(m.ranks[i].env, {m.ranks[i].rank, static_cast<int>(i), id.cross_rank[i], id.cross_size[i], id.slurm});
  m.identity.reset();
}

}  // namespace dl::control
