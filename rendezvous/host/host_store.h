#pragma once
// A host's way to the job's store: its door (store_door.h), the forwarder
// behind it (store_forwarder.h) and the one store/2 link to the server
// (store_upstream.h), made and ended together on one io_context. The agent
// keeps one for its ranks (agent/store_door_service.h); bench/store-scale
// keeps one per simulated host.
//
// Threading: the io_context's one thread runs it; construct and destroy it
// where that thread is not running it, or on that thread.
#include <memory>
#include <string>

#include <boost/asio/io_context.hpp>

#include "rendezvous/host/store_door.h"
#include "rendezvous/host/store_forwarder.h"
#include "rendezvous/host/store_upstream.h"

namespace dl::rdzv {

// When the link to the server is made: at the first request that must go
// up (a host whose ranks never use the store costs the server nothing), or
// at once, blocking, before the door opens.
enum class LinkWhen { kFirstRequest, kNow };

class HostStore {
 public:
  // Listens at door_path, with the link to the server at host:port made
  // `when` (trying again until connect_timeout; StoreUpstream says what a
  // link that cannot be made does to its callers). Throws what StoreDoor
  // throws, and with kNow what StoreUpstream::connect throws.
  HostStore(boost::asio::io_context& io, const std::string& door_path, const std::string& host, uint16_t port,
            const std::string& token, ForwarderOptions opt, wire::Millis connect_timeout,
            LinkWhen when = LinkWhen::kFirstRequest);
  // Closes the door and its clients, then the link. Removes the socket file.
  ~HostStore();

  const std::string& door_path() const { return door_->path(); }
  StoreDoor& door() { return *door_; }
  StoreUpstream& upstream() { return *up_; }
  const StoreUpstream& upstream() const { return *up_; }
  const StoreForwarder& forwarder() const { return *fwd_; }

 private:
  std::unique_ptr<StoreUpstream> up_;
  std::unique_ptr<StoreForwarder> fwd_;
  std::unique_ptr<StoreDoor> door_;
};

}  // namespace dl::rdzv
