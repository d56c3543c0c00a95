#pragma once
// `dlaunch [run] ...`: parses the options, places the ranks (hostfile, -H or
// this machine), and runs the job: a Job for a hostfile launch, a node of a
// NodeGroup with --rdzv, or the rank map with --dry-run.
#include <map>
#include <string>
#include <vector>

namespace dl::launcher {

// `preflight_failed`: the hosts --preflight failed (host -> what failed,
// doctor/preflight.h); each fails the health gate (RunOptions::preflight_failed).
int run_command(const std::vector<std::string>& args, std::map<std::string, std::string> preflight_failed = {});

}  // namespace dl::launcher
