#include "launcher/dry_run.h"

#include <cstdio>

#include "agent/gpu_binding.h"
#include "hostfiles/binding.h"
#include "hostfiles/hostfile.h"
#include "remote/agent_starter.h"

namespace dl::launcher {

std::string rank_map_table(const hostfiles::Placement& p, const RunOptions& o) {
  std::vector<std::vector<std::string>> gpus(p.nodes.size());
  std::vector<bool> known(p.nodes.size(), true);
  for (size_t n = 0; n < p.nodes.size(); ++n) {
    if (o.gpus_per_node >= 0 || remote::is_local_host(p.nodes[n].host)) gpus[n] = agent::detect_gpus(o.gpus_per_node);
    else known[n] = false;
  }
  size_t w = 4;
  for (const auto& n : p.nodes) w = std::max(w, hostfiles::describe(n).size());
  std::string out;
  char line[512];
  std::snprintf(line, sizeof line, "%-6s %-*s %-6s %-6s %s\n", "rank", static_cast<int>(w), "host", "node", "local", "gpus");
  out += line;
  for (const auto& r : p.ranks) {
    const auto n = static_cast<size_t>(r.node);
    std::string g = "-";
    if (!o.gpu_bind) g = "(no binding)";
    else if (!known[n]) g = "?";
    else if (auto b = hostfiles::bind_gpus(gpus[n], r.local_rank, o.gpus_per_rank)) g = *b;
    std::snprintf(line, sizeof line, "%-6d %-*s %-6d %-6d %s\n", r.rank, static_cast<int>(w),
                  hostfiles::describe(p.nodes[n]).c_str(), r.node, r.local_rank, g.c_str());
    out += line;
  }
  return out;
}

}  // namespace dl::launcher
