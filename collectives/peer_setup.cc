#include "collectives/peer_setup.h"

#include <unistd.h>

#include <cstdlib>

#include "collectives/shm/arena.h"
#include "collectives/shm/pair.h"
#include "collectives/tcp/address.h"
#include "collectives/tcp/mesh.h"
#include "collectives/tcp/pair.h"
#include "control/env_names.h"
#include "wire/handshake.h"
#include "wire/host.h"

namespace dl::coll {
namespace {

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

// Outside dlaunch there is no job token: rank 0 draws one for this
// communicator and shares it through the store.
std::string resolve_token(rdzv::Store& store, int rank, const Options& opt) {
  if (!opt.token.empty()) return opt.token;
  std::string t = env_or(env::kDlToken, "");
  if (!t.empty()) return t;
  const std::string key = opt.prefix + "/token";
  if (rank == 0) store.set(key, wire::new_token());
  store.wait({key}, opt.timeout);
  return store.get(key);
}

}  // namespace

std::vector<std::unique_ptr<Pair>> setup_pairs(rdzv::Store& store, int rank, int size, Options& opt,
                                               std::unique_ptr<shm::Arena>* arena) {
  std::vector<std::unique_ptr<Pair>> pairs(size);
  if (size == 1) return pairs;
  opt.token = resolve_token(store, rank, opt);
  opt.address = tcp::choose_address(opt.address, opt.interface);
  if (opt.host_id.empty()) opt.host_id = env_or(env::kDlHostId, wire::host_name());
  if (env_or("DLCOLL_SHM", "1") == "0") opt.use_shm = false;
  tcp::MeshConfig cfg{&store, opt.prefix, rank, size, opt.token, opt.address, opt.host_id, opt.timeout};
  auto mesh = tcp::connect_mesh(cfg);
  std::vector<bool> local(size, false);
  for (int r = 0; r < size; ++r)
    local[r] = opt.use_shm && r != rank && mesh[r].info.host == opt.host_id;
  // Every rank sees the same host ids, so all reach the same decision here.
  bool one_host = opt.use_shm && opt.tuning.shm_arena;
  for (int r = 0; r < size; ++r)
    if (r != rank && mesh[r].info.host != opt.host_id) one_host = false;
  if (arena && one_host) *arena = shm::Arena::connect(mesh, rank, size, opt.tuning.shm_slot_bytes, opt.timeout);
  auto shm_pairs = shm::connect_local(mesh, local, rank, opt.timeout);
  for (int r = 0; r < size; ++r) {
    if (r == rank) continue;
    if (local[r]) pairs[r] = std::move(shm_pairs[r]);
    else pairs[r] = std::make_unique<tcp::TcpPair>(std::move(mesh[r].sock), mesh[r].info);
  }
  return pairs;
}

}  // namespace dl::coll
