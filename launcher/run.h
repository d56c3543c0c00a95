#pragma once
// `dlaunch [run] ...`: parses the options, places the ranks (hostfile, -H or
// this machine), and runs the job: a Job for a hostfile launch, a node of a
// NodeGroup with --rdzv, or the rank map with --dry-run.
#include <string>
#include <vector>

namespace dl::launcher {

int run_command(const std::vector<std::string>& args);

}  // namespace dl::launcher
