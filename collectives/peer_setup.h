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
namespace shm {
class Arena;
}

// Returns one Pair per rank (nullptr at `rank`). Fills in opt.token,
// opt.address and opt.host_id with the values it resolved, so sub-groups
// reuse them. Throws as connect_mesh does.
// When `arena` is given and every rank shares this host (and shared memory
// is on), also sets up the one-host arena (shm/arena.h) into it; it stays
// null where that fails.
std::vector<std::unique_ptr<Pair>> setup_pairs(rdzv::Store& store, int rank, int size, Options& opt,
                                               std::unique_ptr<shm::Arena>* arena = nullptr);

}  // namespace dl::coll
