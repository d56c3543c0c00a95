#pragma once
#include <string>
#include <vector>

#include "hostfiles/placement.h"
#include "launcher/launch_plan.h"
#include "launcher/options/options.h"

namespace dl::launcher {

// The rank map `--dry-run` prints: rank, host, node rank, local rank, and
// each rank's GPUs under --gpu-bind: the value of its vendor's visibility
// variable (`visible`), DLAUNCH_GPUS (its own devices as indices of those),
// and the host's ids of those devices (`physical`); a note after the table
// names each variable. GPUs come from --gpus-per-node, else from detecting
// this machine's for local hosts, else "?" (a remote host is not contacted).
// Throws UsageError where the real launch would refuse (more ranks than
// GPUs on a known host).
std::string rank_map_table(const hostfiles::Placement& p, const RunOptions& o);

// --report-bindings: one line per rank, by rank, read back from the launch
// messages (what the agents are sent, so what the ranks get):
//   dlaunch: rank 1 on gpu07: GPUs 1 (physical 1) of CUDA_VISIBLE_DEVICES=0,1,2,3; CPUs 2,6
// `hosts` names the plan's nodes by index; without --bind-to (or a
// rankfile) the CPUs are "; CPUs not bound (--bind-to none)".
std::string binding_report(const LaunchPlan& plan, const std::vector<std::string>& hosts, const RunOptions& o);

}  // namespace dl::launcher
