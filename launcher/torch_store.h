#pragma once
// The job's torch c10d store (rendezvous/c10d/c10d_store.h) as the launcher runs
// it: where it listens, which hosts may reach it, what fails the job, and
// what it tells when torch's rendezvous does not complete (--timeout).
// `--torch-store rank0` runs none: rank 0's torch hosts its own, as under
// torchrun without an agent store (docs/rendezvous.md, "torch's c10d store").
//
// Threading: the launcher's loop thread only.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "hostfiles/placement.h"
#include "rendezvous/c10d/c10d_store.h"

namespace dl::launcher {

class TorchStore {
 public:
  struct Hooks {
    // The node (index) whose host has this address, or -1: a remote peer
    // of no node is closed; a peer's connections are counted for its node.
    std::function<int(const std::string& address)> node_of;
    // A rank's torch sent what the store does not serve: the job fails with `why`.
    std::function<void(const std::string& why)> refused;
    std::function<void(const std::string&)> log;
  };
  // Listens on `bind_host`:`port` (the control server's address: loopback
  // for a job on this host only; `port` 0: a free one, per-node mode's node
  // 0: the group's MASTER_PORT). Throws IoError when it cannot.
  TorchStore(boost::asio::io_context& io, const std::string& bind_host, uint16_t port,
             const hostfiles::Placement& placement, std::vector<std::string> hosts, Hooks hooks);
  uint16_t port() const { return store_.port(); }
  // A new attempt (--max-restarts): no key of the last one stays.
  void clear() { store_.clear(); }
  // When torch's rendezvous began (some rank's client asked something) and
  // has not completed: lines naming the ranks that never connected or never
  // arrived, with their hosts; else none.
  std::vector<std::string> unfinished() const;

  // --spares: a lost host's node rank is another host's now.
  void rename_nodes(std::vector<std::string> hosts) { hosts_ = std::move(hosts); }

 private:
  const hostfiles::Placement& placement_;
  std::vector<std::string> hosts_;  // by node
  Hooks hooks_;
  rdzv::C10dStore store_;
};

}  // namespace dl::launcher
