#pragma once
// torch's c10d store, served by dlaunch: a server of torch's TCPStore wire
// protocol (rendezvous/c10d/c10d_protocol.h) that the launcher runs for a job, so
// that every rank's init_process_group(env://) creates a TCPStore client
// (TORCHELASTIC_USE_AGENT_STORE=True) and no rank hosts the store
// (docs/rendezvous.md, "torch's c10d store").
//
// Who may connect: torch's client sends no token, so the store admits a
// peer on this host only when its socket belongs to this process's user
// (wire/socket_owner.h, asked once per connection), and a remote peer only
// when `remote_allowed` says its address is one of the job's hosts; others
// are closed at accept and logged (docs/security.md).
//
// Bounds: keys, values and keys per query (c10d::Limits), the keys and bytes
// held, the connections open, the input a query may take and the replies a
// client leaves unread, one query's reply, the keys parked WAITs hold. A
// client over them is closed and the refusal told to `refused`, as is a
// query the store does not serve: for one of the job's ranks the launcher
// fails the job at once with that reason rather than leave torch's client
// waiting; any other client is only dropped, with a line.
//
// Threading: everything runs on `io`'s one thread; clear(), seen() and
// stop() must be called there.
#include <boost/asio/io_context.hpp>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "rendezvous/c10d/c10d_protocol.h"

namespace dl::rdzv {

class C10dStore {
 public:
  struct Options {
    std::string bind_host = "127.0.0.1";  // "0.0.0.0" for a job across hosts
    uint16_t port = 0;                    // 0: a free one
    size_t max_connections = 1024;        // open at once (torch 1.x opens two per rank)
    size_t max_keys = 1u << 20;           // held at once
    size_t max_bytes = 256u << 20;        // keys and values held at once
    c10d::Limits limits;
    // Whether a peer at this address (not on this host) may connect; unset: none may.
    std::function<bool(const std::string& address)> remote_allowed;
    // A client was refused for what it sent (`why` names the query or the
    // bound and the dialect; `peer` its address; `rank`: whether it was one
    // of the job's ranks by what it did before, c10d::Keyspace::is_rank).
    std::function<void(const std::string& why, const std::string& peer, bool rank)> refused;
    // Peers closed at accept (another user, an unknown host): one line per
    // peer and second at most, with the count of those not told.
    std::function<void(const std::string&)> log;
  };

  // What the store saw of torch's rendezvous since the last clear().
  struct Seen {
    std::map<std::string, int> clients;  // by peer address: connections that sent a query
    std::set<int> ranks;                 // ranks that published their address (gloo's ".../rank_N" key)
    int64_t registered = 0;              // TCPStore clients counted in torch's "init/" key
    int64_t barrier = 0;                 // the highest count of torch's store-based barrier
    std::set<int> at_barrier;            // the ranks (of `ranks`) whose client added to it
  };

  // Binds bind_host:port (0: a free port) and starts accepting. Throws IoError
  // naming the address when it cannot bind.
  C10dStore(boost::asio::io_context& io, Options opts);
  ~C10dStore();
  C10dStore(const C10dStore&) = delete;
  C10dStore& operator=(const C10dStore&) = delete;

  uint16_t port() const { return port_; }
  // Forgets every key and what was seen (a restarted job's next attempt).
  void clear();
  Seen seen() const;
  // Closes the listener and every client. Idempotent.
  void stop();

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
  uint16_t port_ = 0;
};

}  // namespace dl::rdzv
