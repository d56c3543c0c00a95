#pragma once
#include <string>

#include "hostfiles/placement.h"
#include "launcher/options.h"

namespace dl::launcher {

// The rank map `--dry-run` prints: rank, host, node rank, local rank, GPUs.
// GPUs come from --gpus-per-node, else from detecting this machine's for
// local hosts, else "?" (a remote host is not contacted).
std::string rank_map_table(const hostfiles::Placement& p, const RunOptions& o);

}  // namespace dl::launcher
