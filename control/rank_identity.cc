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

void complete_launch(msg::Launch& m, const EnvVars& shared) {
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
