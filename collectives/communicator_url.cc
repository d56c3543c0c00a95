// Communicator::from_url: identity from the environment, store from the URL
// (rendezvous/bootstrap.h).
#include <atomic>

#include "collectives/communicator.h"
#include "rendezvous/bootstrap.h"

namespace dl::coll {

std::unique_ptr<Communicator> Communicator::from_url(const std::string& url, Options options) {
  // Every rank makes the same sequence of calls, so the n-th communicator of
  // each process shares the n-th key prefix.
  static std::atomic<int> made{0};
  rdzv::Identity id = rdzv::identity_from_env(rdzv::process_environment());
  std::shared_ptr<rdzv::Store> store = rdzv::connect_store(url, id.rank, id.world_size, options.timeout);
  options.prefix += "/" + std::to_string(made++);
  return std::make_unique<Communicator>(std::move(store), id.rank, id.world_size, std::move(options));
}

}  // namespace dl::coll
