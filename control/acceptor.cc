#include "control/acceptor.h"

#include <fcntl.h>
#include <unistd.h>

namespace dl::control {

namespace ip = boost::asio::ip;

ControlAcceptor::ControlAcceptor(boost::asio::io_context& io, Hooks hooks)
    : io_(io), hooks_(std::move(hooks)), acceptor_(io), retry_(io) {}

uint16_t ControlAcceptor::listen(const std::string& bind_addr) {
  ip::tcp::endpoint ep(ip::make_address(bind_addr), 0);
  acceptor_.open(ep.protocol());
  ::fcntl(acceptor_.native_handle(), F_SETFD, FD_CLOEXEC);
  acceptor_.set_option(ip::tcp::acceptor::reuse_address(true));
  acceptor_.bind(ep);
  acceptor_.listen(boost::asio::socket_base::max_listen_connections);
  acceptor_.non_blocking(true);
  accepting_ = true;
  accept();
  return acceptor_.local_endpoint().port();
}

void ControlAcceptor::stop() {
  accepting_ = false;
  boost::system::error_code ec;
  acceptor_.close(ec);
  retry_.cancel();
}

void ControlAcceptor::accept() {
  acceptor_.async_wait(ip::tcp::acceptor::wait_read, [this](boost::system::error_code ec) {
    if (ec || !accepting_) return;
    accept_pending();
  });
}

// Every pending connection, less those of a peer over its limit of
// unauthenticated ones; out of descriptors, tries again shortly. Asio's
// reactor is edge-triggered: after a full batch (more may be pending) the
// next one is posted, not waited for, or a thousand agents connecting at
// once would leave the rest in the backlog until another one connected.
void ControlAcceptor::accept_pending() {
  auto batch = admission_.accept_pending(acceptor_.native_handle());
  if (hooks_.log)
    for (const auto& line : batch.notes) hooks_.log(line);
  for (auto& a : batch.admitted) {
    ip::tcp::socket sock(io_);
    boost::system::error_code ec;
    sock.assign(acceptor_.local_endpoint(ec).protocol(), a.fd, ec);
    if (ec) {
      ::close(a.fd);
      continue;
    }
    sock.set_option(ip::tcp::no_delay(true), ec);
    hooks_.accepted(Socket(std::move(sock)), std::move(a.slot));
  }
  if (!batch.starved && batch.taken >= wire::Admission::kMaxBatch)
    return boost::asio::post(io_, [this] {
      if (accepting_) accept_pending();
    });
  if (!batch.starved) return accept();
  retry_.expires_after(std::chrono::milliseconds(50));
  retry_.async_wait([this](boost::system::error_code ec) {
    if (!ec && accepting_) accept_pending();
  });
}

}  // namespace dl::control
