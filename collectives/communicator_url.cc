// Communicator::from_url: identity from the environment, store from the URL
// (rendezvous/bootstrap.h).
#include <atomic>

#include "collectives/communicator.h"
#include "control/env_names.h"
#include "rendezvous/bootstrap.h"

namespace dl::coll {

std::unique_ptr<Communicator> Communicator::from_url(const std::string& url, Options options) {
  // Every rank makes the same sequence of calls, so the n-th communicator of
  // each process shares the n-th key prefix.
  static std::atomic<int> made{0};
  const rdzv::Environment env = rdzv::process_environment();
  rdzv::Identity id = rdzv::identity_from_env(env);
  std::shared_ptr<rdzv::Store> store = rdzv::connect_store(url, id.rank, id.world_size, options.timeout);
  // A restarted attempt (dlaunch --max-restarts) meets under keys of its
  // own: a store that outlived the last attempt (per-node mode's) may still
  // hold that attempt's addresses (docs/failures.md).
  if (auto rc = env.find(env::kDlRestartCount); rc != env.end() && rc->second != "0")
    options.prefix += "/attempt" + rc->second;
  options.prefix += "/" + std::to_string(made++);
  return std::make_unique<Communicator>(std::move(store), id.rank, id.world_size, std::move(options));
}

}  // namespace dl::coll
