#pragma once
// A host's store door: an AF_UNIX socket in the job's private directory
// where the host's ranks reach the job's store (docs/rendezvous.md,
// "Per-host aggregation"). It speaks store/1 to them exactly as the server
// does, so TcpStore is their client unchanged, and hands each request to a
// back end (the forwarder, store_forwarder.h), one request per client at a
// time, its replies in order.
//
// Who gets in: the socket file is the owner's only (0600, in a 0700
// directory), a connection whose peer (SO_PEERCRED) is another user is closed
// at once, and then the client must pass the job-token handshake within
// wire::kPreAuthDeadline. At most kMaxDoorClients at once; over that a new
// one is closed. A malformed or oversized frame closes its client with a
// kErrorText saying why, as the server does.
//
// Threading: one thread runs the io_context given; stop() from any thread.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <boost/asio/io_context.hpp>

#include "rendezvous/store_protocol.h"

namespace dl::rdzv {

inline constexpr size_t kMaxDoorClients = 4096;

// What the door asks of whoever answers its clients' requests.
class StoreBackend {
 public:
  using Done = std::function<void(const proto::Reply&)>;
  virtual ~StoreBackend() = default;
  // Answers r (checked against the limits already) through `done`, once, on
  // the io thread, possibly later and never inside this call. `client`
  // expires when the client that asked has gone: a back end holding its
  // request may then forget it.
  virtual void execute(const proto::Request& r, Done done, std::weak_ptr<void> client) = 0;
};

class StoreDoor {
 public:
  // Listens on `path` (removed first if it is a stale socket; the directory
  // must exist). Throws IoError naming the path.
  StoreDoor(boost::asio::io_context& io, std::string path, std::string token, StoreBackend& backend);
  // Stops (closing every client at once: destroy it on the io thread, or
  // where that thread is not running) and removes the socket file.
  ~StoreDoor();
  StoreDoor(const StoreDoor&) = delete;
  StoreDoor& operator=(const StoreDoor&) = delete;

  const std::string& path() const;
  // Clients connected now (authenticated or not). On the io thread.
  size_t clients() const;
  // Stops accepting and closes every client. Thread-safe, idempotent.
  void stop();
  // One line per refused client, e.g. "store door: uid 1001 refused".
  void set_logger(std::function<void(const std::string&)> log);

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace dl::rdzv
