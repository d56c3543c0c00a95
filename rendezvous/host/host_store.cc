#include "rendezvous/host/host_store.h"

namespace dl::rdzv {

HostStore::HostStore(boost::asio::io_context& io, const std::string& door_path, const std::string& host, uint16_t port,
                     const std::string& token, ForwarderOptions opt, wire::Millis connect_timeout, LinkWhen when)
    : up_(std::make_unique<StoreUpstream>(io, host, port, token, connect_timeout)),
      fwd_(std::make_unique<StoreForwarder>(io, *up_, opt)) {
  if (when == LinkWhen::kNow) up_->connect();
  door_ = std::make_unique<StoreDoor>(io, door_path, token, *fwd_);
}

HostStore::~HostStore() {
  door_.reset();
  fwd_.reset();
  up_.reset();
}

}  // namespace dl::rdzv
