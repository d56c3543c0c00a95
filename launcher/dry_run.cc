#include "launcher/dry_run.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>

#include "errors/error.h"
#include "hostfiles/binding.h"
#include "hostfiles/hostfile.h"
#include "hostfiles/rankfile.h"
#include "machine/cpus.h"
#include "machine/gpus.h"
#include "remote/agent_starter.h"
#include "wire/host.h"

namespace dl::launcher {

namespace {

// One rank's GPU columns, and its CPUs with --bind-to.
struct GpuCells {
  std::string visible = "-", devices = "-", physical = "-", cpus = "-";
};

// --bind-to on a host that is this machine: the CPUs each local rank would
// be pinned to, planned as at launch from this machine's topology (GPU NUMA
// nodes included when the GPU columns were planned). A remote host's are
// known once its agent reports its topology: "?". `slots` are the local
// ranks' rankfile slots (--rankfile).
void plan_local_cpus(const RunOptions& o, const std::string& host, std::vector<GpuCells>& mine,
                     const std::vector<int>& gpu_numa, const std::vector<std::string>& slots) {
  static const hostfiles::CpuTopology topo = machine::read_cpu_topology(machine::own_allowed_cpus());
  try {
    if (!o.rankfile.empty()) {
      for (size_t l = 0; l < mine.size(); ++l)
        if (!slots[l].empty())
          mine[l].cpus = hostfiles::format_cpu_list(hostfiles::rankfile_cpus(slots[l], topo, host, o.rankfile));
      return;
    }
    const auto per_local =
        hostfiles::plan_cpus(o.bind_to, topo, static_cast<int>(mine.size()), o.cpus_per_rank, host, gpu_numa);
    for (size_t l = 0; l < per_local.size(); ++l) mine[l].cpus = hostfiles::format_cpu_list(per_local[l]);
  } catch (const std::runtime_error& e) {
    throw UsageError(e.what());  // the launch refuses the same way: exit 2
  }
}
// MPMD: the app column, "1 ./worker a b" (its number, program and arguments).
std::string app_cell(const RunOptions& o, int rank) {
  const int app = app_of_rank(o.apps, rank);
  std::string cell = std::to_string(app);
  for (const auto& w : o.apps.at(static_cast<size_t>(app)).command) cell += " " + w;
  return cell;
}

// A table line (ending in '\n') with a last column `cell`, unless it is "".
std::string with_app(std::string line, const std::string& cell) {
  if (cell.empty()) return line;
  line.pop_back();
  while (!line.empty() && line.back() == ' ') line.pop_back();
  return line + "  " + cell + "\n";
}
}  // namespace

std::string rank_map_table(const hostfiles::Placement& p, const RunOptions& o) {
  const bool bind = o.gpu_bind_mode != hostfiles::GpuBind::kNone;
  // Detect once: every local host is this machine (and --gpus-per-node stands for every host).
  std::optional<std::vector<machine::VendorGpus>> here;
  std::map<std::string, std::string> variables;  // variable -> vendor, for the note under the table
  std::vector<std::vector<GpuCells>> cells(p.nodes.size());  // by node, by local rank
  std::vector<std::vector<std::string>> slots(p.nodes.size());  // --rankfile's, by node, by local rank
  for (size_t n = 0; n < p.nodes.size(); ++n) slots[n].resize(n < p.local_size.size() ? p.local_size[n] : 0);
  if (!o.rankfile.empty())
    for (const auto& r : p.ranks) slots.at(static_cast<size_t>(r.node)).at(static_cast<size_t>(r.local_rank)) = r.cpus;
  for (size_t n = 0; n < p.nodes.size(); ++n) {
    const int local_world = n < p.local_size.size() ? p.local_size[n] : 0;
    const std::string host = hostfiles::describe(p.nodes[n]);
    auto& mine = cells[n];
    mine.assign(static_cast<size_t>(local_world), GpuCells{});
    const bool local = wire::is_local_host(p.nodes[n].host);
    if (pins_cpus(o)) {
      if (local) plan_local_cpus(o, host, mine, {}, slots[n]);
      else for (auto& c : mine) c.cpus = "?";
    }
    if (!bind) {
      for (auto& c : mine) c.visible = c.devices = c.physical = "unbound";
      continue;
    }
    if (o.gpus_per_node < 0 && !local) {
      for (auto& c : mine) c.visible = c.devices = c.physical = "?";
      continue;
    }
    if (!here) here = machine::detect_gpus(o.gpus_per_node);
    try {
      const auto gpus = machine::pick_gpus(*here, o.gpu_vendor, host);
      if (!gpus) continue;
      const auto per_local =
          hostfiles::plan_gpus(o.gpu_bind_mode, gpus->ids(), local_world, o.gpus_per_rank, o.oversubscribe_gpus, host);
      std::fputs(hostfiles::gpu_sharing_warning(o.gpu_bind_mode, static_cast<int>(gpus->gpus.size()), local_world,
                                                o.gpus_per_rank, o.oversubscribe_gpus, host, o.per_node_flag)
                     .c_str(),
                 stderr);
      variables[machine::visibility_variable(gpus->vendor)] = machine::word(gpus->vendor);
      std::vector<int> gpu_numa;  // by local rank: its first GPU's NUMA node, for --bind-to numa
      for (size_t l = 0; l < per_local.size(); ++l) {
        mine[l].visible = per_local[l].visible, mine[l].devices = per_local[l].devices;
        mine[l].physical = hostfiles::join_id_list(per_local[l].physical);
        int node = -1;
        for (const auto& g : gpus->gpus)
          if (!per_local[l].physical.empty() && g.id == per_local[l].physical.front()) node = g.numa;
        gpu_numa.push_back(node);
      }
      if (o.bind_to == hostfiles::CpuBind::kNuma && local) plan_local_cpus(o, host, mine, gpu_numa, slots[n]);
    } catch (const std::runtime_error& e) {
      throw UsageError(e.what());  // the launch would refuse the same way: exit 2
    }
  }
  size_t w = 4, vw = 7;
  for (const auto& n : p.nodes) w = std::max(w, hostfiles::describe(n).size());
  for (const auto& node : cells)
    for (const auto& c : node) vw = std::max(vw, c.visible.size());
  std::string out;
  char line[1024];
  const bool cpus = pins_cpus(o);
  const bool mpmd = o.apps.size() > 1;
  size_t pw = 8;
  for (const auto& node : cells)
    for (const auto& c : node) pw = std::max(pw, c.physical.size());
  std::snprintf(line, sizeof line, "%-6s %-*s %-6s %-6s %-*s %-12s %-*s%s\n", "rank", static_cast<int>(w), "host",
                "node", "local", static_cast<int>(vw), "visible", "DLAUNCH_GPUS", static_cast<int>(cpus ? pw : 0),
                "physical", cpus ? " cpus" : "");
  out += with_app(line, mpmd ? "app" : "");
  for (const auto& r : p.ranks) {
    const auto n = static_cast<size_t>(r.node);
    const GpuCells& c = cells[n].at(static_cast<size_t>(r.local_rank));
    std::snprintf(line, sizeof line, "%-6d %-*s %-6d %-6d %-*s %-12s %-*s%s%s\n", r.rank, static_cast<int>(w),
                  hostfiles::describe(p.nodes[n]).c_str(), r.node, r.local_rank, static_cast<int>(vw),
                  c.visible.c_str(), c.devices.c_str(), static_cast<int>(cpus ? pw : 0), c.physical.c_str(),
                  cpus ? " " : "", cpus ? c.cpus.c_str() : "");
    out += with_app(line, mpmd ? app_cell(o, r.rank) : "");
  }
  if (bind && o.gpus_per_node < 0 && std::any_of(p.nodes.begin(), p.nodes.end(), [](const hostfiles::HostEntry& h) {
        return !wire::is_local_host(h.host);
      }))
    out += "GPUs: ? = a remote host's, known once its agent reports them (or give --gpus-per-node)\n";
  if (cpus && std::any_of(p.nodes.begin(), p.nodes.end(),
                          [](const hostfiles::HostEntry& h) { return !wire::is_local_host(h.host); }))
    out += "CPUs: ? = a remote host's, planned once its agent reports its cores (--report-bindings shows them)\n";
  if (!bind) out += "GPUs: not bound (--gpu-bind none): every rank inherits the visibility variables as they are\n";
  if (!p.spares.empty()) {
    std::string names;
    for (const auto& h : p.spares) names += (names.empty() ? "" : ", ") + hostfiles::describe(h);
    out += "spares: " + names + " (no ranks; each takes a lost host's ranks at a restart, --spares " +
           std::to_string(p.spares.size()) + ")\n";
  }
  for (const auto& [var, vendor] : variables)
    out += "GPUs: visible is " + var + " (" + vendor + ", --gpu-bind " + hostfiles::to_string(o.gpu_bind_mode) +
           "); DLAUNCH_GPUS indexes it\n";
  return out;
}

std::string binding_report(const LaunchPlan& plan, const std::vector<std::string>& hosts, const RunOptions& o) {
  const bool bind = o.gpu_bind_mode != hostfiles::GpuBind::kNone;
  std::map<int, std::string> lines;
  for (size_t n = 0; n < plan.launches.size(); ++n) {
    if (!plan.launches[n]) continue;
    const std::string host = n < hosts.size() ? hosts[n] : "node " + std::to_string(n);
    const control::msg::Launch& launch = *plan.launches[n];
    for (const auto& spec : launch.ranks) {
      // The rank's own value, else its host's (launcher/rank_env.h, stages 2 and 3).
      auto value = [&](const std::string& name) -> const std::string* {
        if (auto it = spec.env.find(name); it != spec.env.end()) return &it->second;
        if (auto it = launch.env.find(name); it != launch.env.end()) return &it->second;
        return nullptr;
      };
      std::string gpus = bind ? "no GPUs" : "GPUs not bound (--gpu-bind none)";
      const std::string* devices = value(hostfiles::kDlaunchGpus);
      for (const auto& v : machine::gpu_vendors()) {
        const std::string* var = value(v.visibility_variable);
        if (!var || !devices) continue;
        // The physical ids are what the rank's indices name in what it sees.
        const auto seen = hostfiles::split_id_list(*var);
        std::vector<std::string> physical;
        for (const auto& i : hostfiles::split_id_list(*devices)) {
          const size_t idx = std::stoul(i);
          physical.push_back(idx < seen.size() ? seen[idx] : "?");
        }
        gpus = "GPUs " + *devices + " (physical " + hostfiles::join_id_list(physical) + ") of " + v.visibility_variable +
               "=" + *var;
      }
      std::string text = "dlaunch: rank " + std::to_string(spec.rank) + " on " + host + ": " + gpus;
      if (spec.cpus) text += "; CPUs " + hostfiles::format_cpu_list(*spec.cpus);
      else if (!pins_cpus(o)) text += "; CPUs not bound (--bind-to none)";
      lines[spec.rank] = text + "\n";
    }
  }
  std::string out;
  for (const auto& [rank, text] : lines) out += text;
  return out;
}

}  // namespace dl::launcher
