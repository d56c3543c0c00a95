#include "launcher/group_torch_store.h"

#include <future>

#include <boost/asio/post.hpp>

#include "wire/socket_owner.h"

namespace dl::launcher {

GroupTorchStore::GroupTorchStore(uint16_t port, hostfiles::Placement world, std::vector<std::string> hosts,
                                 std::vector<std::string> addrs, std::function<void(const std::string&)> refused,
                                 std::function<void(const std::string&)> log)
    : world_(std::move(world)), addrs_(std::move(addrs)), work_(io_.get_executor()) {
  TorchStore::Hooks h;
  // A local peer is checked by its socket's owner (rendezvous/c10d/c10d_store.h);
  // a remote one must be at a node's announced address.
  h.node_of = [this](const std::string& address) {
    for (size_t n = 0; n < addrs_.size(); ++n)
      if (addrs_[n] == address) return static_cast<int>(n);
    return wire::is_loopback_host(address) ? 0 : -1;
  };
  h.refused = std::move(refused);
  h.log = std::move(log);
  store_ = std::make_unique<TorchStore>(io_, "0.0.0.0", port, world_, std::move(hosts), std::move(h));
  port_ = store_->port();
  thread_ = std::thread([this] { io_.run(); });
}

GroupTorchStore::~GroupTorchStore() {
  work_.reset();
  io_.stop();
  if (thread_.joinable()) thread_.join();
  store_.reset();  // its loop has stopped: nothing else touches it
}

// Runs `f` on the store's thread and returns what it returned.
template <class F> auto GroupTorchStore::on_thread(F f) -> decltype(f()) {
  std::packaged_task<decltype(f())()> task(std::move(f));
  auto done = task.get_future();
  boost::asio::post(io_, [&task] { task(); });
  return done.get();
}

void GroupTorchStore::clear() {
  on_thread([this] { store_->clear(); });
}

std::vector<std::string> GroupTorchStore::unfinished() {
  return on_thread([this] { return store_->unfinished(); });
}

}  // namespace dl::launcher
