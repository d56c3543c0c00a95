#include "launcher/shared_env.h"

#include <string>
#include <vector>

namespace dl::launcher {

void hoist_shared_env(control::msg::Launch& m) {
  if (m.ranks.size() < 2) return;
  std::vector<std::string> shared;
  for (const auto& [k, v] : m.ranks.front().env) {
    bool everywhere = true;
    for (size_t r = 1; r < m.ranks.size() && everywhere; ++r) {
      auto it = m.ranks[r].env.find(k);
      everywhere = it != m.ranks[r].env.end() && it->second == v;
    }
    if (everywhere) shared.push_back(k);
  }
  for (const auto& k : shared) {
    m.env[k] = m.ranks.front().env.at(k);
    for (auto& r : m.ranks) r.env.erase(k);
  }
}

}  // namespace dl::launcher
