#pragma once
// Per-node mode's torch c10d store: node 0's dlaunch serves it for every
// node of the group (launcher/node_group.h), so that per-node jobs get what
// a launcher job gets (docs/rendezvous.md, "torch's c10d store"): no rank
// hosts it, it outlives rank 0 and every attempt, another local user cannot
// reach it, and a remote peer must come from an address a node announced.
//
// It runs on a thread of its own, not on the Job's loop: node 0's Job ends
// when its own ranks do, while the other nodes' ranks still use the store;
// the group keeps it until every node has left (NodeGroup::leave).
//
// Threading: every method may be called from any thread; `refused` is
// called on the store's thread.
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include "hostfiles/placement.h"
#include "launcher/torch_store.h"

namespace dl::launcher {

class GroupTorchStore {
 public:
  // Listens on every interface at `port` (0: a free one). `hosts` and
  // `addrs` by node rank: its host name, and its address as the others
  // reach it. `refused(why)`: one of the ranks sent what the store does not
  // serve (the job is to fail). Throws IoError when it cannot listen.
  GroupTorchStore(uint16_t port, hostfiles::Placement world, std::vector<std::string> hosts,
                  std::vector<std::string> addrs, std::function<void(const std::string&)> refused,
                  std::function<void(const std::string&)> log);
  ~GroupTorchStore();
  GroupTorchStore(const GroupTorchStore&) = delete;
  GroupTorchStore& operator=(const GroupTorchStore&) = delete;

  uint16_t port() const { return port_; }
  // Empties it for the next attempt; returns once done.
  void clear();
  // TorchStore::unfinished(), read on the store's thread.
  std::vector<std::string> unfinished();

 private:
  template <class F> auto on_thread(F f) -> decltype(f());

  hostfiles::Placement world_;
  std::vector<std::string> addrs_;
  boost::asio::io_context io_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_;
  std::unique_ptr<TorchStore> store_;
  uint16_t port_ = 0;
  std::thread thread_;
};

}  // namespace dl::launcher
