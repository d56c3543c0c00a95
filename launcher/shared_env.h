#pragma once
// A launch message carries each rank's identity variables (launcher/rank_env.h):
// about 45 per rank, of which most (WORLD_SIZE, MASTER_ADDR, the store, the
// token, the job id, ...) are the same for every rank of the host. Sent once
// per rank they were 75 KB of JSON for 64 ranks, encoded by the launcher and
// decoded by the agent before its first rank could start (docs/benchmarks.md).
#include "control/messages.h"

namespace dl::launcher {

// Moves each variable that every rank of `m` sets to the same value out of
// the ranks' own (RankSpec::env) into the host's (Launch::env). What each
// rank's environment ends up as is unchanged: the agent applies the host's
// variables, then the rank's own (agent/rank_environment.h,
// compose_rank_env), so a hoisted value replaces a host value it overrode
// anyway. Pure; does nothing for a message of fewer than two ranks.
void hoist_shared_env(control::msg::Launch& m);

}  // namespace dl::launcher
