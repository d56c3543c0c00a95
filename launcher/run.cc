#include "launcher/run.h"

#include <cstdlib>
#include <iostream>
#include <thread>

#include "agent/gpu_binding.h"
#include "errors/error.h"
#include "hostfiles/hostfile.h"
#include "hostfiles/placement.h"
#include "launcher/dry_run.h"
#include "launcher/job.h"
#include "launcher/node_group.h"
#include "launcher/options.h"

namespace dl::launcher {

namespace {
hostfiles::Placement plan(const RunOptions& o) {
  if (!o.hostfile.empty() && !o.hosts.empty())
    throw UsageError("give either --hostfile or -H, not both");
  std::vector<hostfiles::HostEntry> hosts;
  if (!o.hostfile.empty()) hosts = hostfiles::parse_hostfile(o.hostfile);
  else if (!o.hosts.empty()) hosts = hostfiles::parse_host_list(o.hosts);
  if (hosts.empty()) return hostfiles::place_local(o.np > 0 ? o.np : (o.per_node > 0 ? o.per_node : 1));
  hostfiles::PlacementOptions po;
  po.np = o.np;
  po.map_by = o.map_by == "node" ? hostfiles::MapBy::kNode : hostfiles::MapBy::kSlot;
  po.per_node = o.per_node;
  po.oversubscribe = o.oversubscribe;
  return hostfiles::place(hosts, po);
}

// torchrun's --nproc-per-node gpu|cpu|auto, counted on this host: the GPUs
// as an agent here would detect them (--gpus-per-node, CUDA_VISIBLE_DEVICES,
// the driver), the CPUs as the OS counts them.
void resolve_torchrun_words(RunOptions& o) {
  if (!o.nproc_per_node_kind.empty()) {
    int gpus = 0;
    if (o.nproc_per_node_kind != "cpu") {
      const auto found = agent::detect_gpus(o.gpus_per_node);
      if (!found.empty()) gpus = static_cast<int>(found.front().ids.size());
    }
    o.per_node = resolve_nproc_per_node(o.nproc_per_node_kind, gpus, static_cast<int>(std::thread::hardware_concurrency()));
  }
  // A .py program runs under Python, as with torchrun; $PYTHON names another
  // interpreter than the python3 on the ranks' PATH.
  const char* py = std::getenv("PYTHON");
  o.command = program_argv(o, py && *py ? py : "python3");
  for (auto& app : o.apps) app.command = program_argv(o, app.command, py && *py ? py : "python3");
}
}  // namespace

int run_command(const std::vector<std::string>& args) {
  bool help = false;
  RunOptions o = parse_run_options(args, &help);
  if (help) {
    std::cout << run_options_help();
    return 0;
  }
  if (o.version) {
    std::cout << "dlaunch " DLAUNCH_VERSION "\n";
    return 0;
  }
  resolve_torchrun_words(o);
  if (!o.rdzv.empty()) return run_per_node(std::move(o));
  hostfiles::Placement p = plan(o);
  if (o.dry_run) {
    std::cout << rank_map_table(p, o);
    return 0;
  }
  Job job(std::move(o), std::move(p));
  return job.run();
}

}  // namespace dl::launcher
