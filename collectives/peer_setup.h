#pragma once
// Builds a communicator's Pairs: resolves token, address and host id
// (options.h), connects the TCP mesh through the Store (tcp/mesh.h), then
// moves peers on the same host onto shared memory (shm/pair.h) when enabled.
#include <memory>
#include <vector>

#include "collectives/options.h"
#include "collectives/pair.h"
#include "rendezvous/store.h"

namespace dl::coll {

// Returns one Pair per rank (nullptr at `rank`). Fills in opt.token,
// opt.address and opt.host_id with the values it resolved, so sub-groups
// reuse them. Throws as connect_mesh does.
std::vector<std::unique_ptr<Pair>> setup_pairs(rdzv::Store& store, int rank, int size, Options& opt);

}  // namespace dl::coll
