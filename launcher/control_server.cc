#include "launcher/control_server.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>
#include <utility>

#include "errors/error.h"

namespace dl::launcher {

namespace ip = boost::asio::ip;
using control::Connection;

ControlServer::ControlServer(boost::asio::io_context& io, std::string token, size_t nodes, Handler& h)
    : io_(io), token_(std::move(token)), h_(h), acceptor_(io), accept_retry_(io), conns_(nodes) {}

uint16_t ControlServer::listen(const std::string& bind_addr) {
  ip::tcp::endpoint ep(ip::make_address(bind_addr), 0);
  acceptor_.open(ep.protocol());
  // Not inherited by the local agent and, through it, by every rank.
  ::fcntl(acceptor_.native_handle(), F_SETFD, FD_CLOEXEC);
  acceptor_.set_option(ip::tcp::acceptor::reuse_address(true));
  acceptor_.bind(ep);
  acceptor_.listen(boost::asio::socket_base::max_listen_connections);
  acceptor_.non_blocking(true);
  accept();
  return acceptor_.local_endpoint().port();
}

void ControlServer::stop_accepting() {
  accepting_ = false;
  boost::system::error_code ec;
  acceptor_.close(ec);
  accept_retry_.cancel();
}

void ControlServer::accept() {
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
void ControlServer::accept_pending() {
  auto batch = admission_.accept_pending(acceptor_.native_handle());
  for (const auto& line : batch.notes) h_.log("control port: " + line);
  for (auto& a : batch.admitted) {
    ip::tcp::socket sock(io_);
    boost::system::error_code ec;
    sock.assign(acceptor_.local_endpoint(ec).protocol(), a.fd, ec);
    if (ec) {
      ::close(a.fd);
      continue;
    }
    sock.set_option(ip::tcp::no_delay(true), ec);
    serve(std::move(sock), false, std::move(a.slot));
  }
  if (!batch.starved && batch.taken >= wire::Admission::kMaxBatch)
    return boost::asio::post(io_, [this] {
      if (accepting_) accept_pending();
    });
  if (!batch.starved) return accept();
  accept_retry_.expires_after(std::chrono::milliseconds(50));
  accept_retry_.async_wait([this](boost::system::error_code ec) {
    if (!ec && accepting_) accept_pending();
  });
}

void ControlServer::adopt(int fd) {
  boost::asio::generic::stream_protocol::socket sock(io_);
  boost::system::error_code ec;
  sock.assign(boost::asio::generic::stream_protocol(AF_UNIX, 0), fd, ec);
  if (ec) {
    ::close(fd);
    return h_.log("cannot use the local agent's control socket: " + ec.message());
  }
  serve(std::move(sock), true);
}

void ControlServer::serve(boost::asio::generic::stream_protocol::socket sock, bool authenticated,
                          wire::PreAuthSlot slot) {
  // The node this connection speaks for, once its hello was taken.
  auto node = std::make_shared<int>(-1);
  auto conn = std::make_shared<Connection>(std::move(sock), control::kMaxControlFrame);
  std::weak_ptr<Connection> w = conn;
  Connection::Callbacks cb;
  cb.frame = [this, w, node](wire::Frame& f) {
    if (auto c = w.lock()) on_frame(c, *node, f);
  };
  cb.closed = [this, node](const std::string& why, bool authenticated) {
    if (*node >= 0) return h_.on_closed(*node, why);
    if (!authenticated && why != "connection closed") h_.log("refused a control connection: " + why);
  };
  conn->set_callbacks(std::move(cb));
  if (authenticated) conn->start();
  else conn->start_server(token_, control::kControlTag, wire::kPreAuthDeadline, std::move(slot));
}

void ControlServer::on_frame(const std::shared_ptr<Connection>& c, int& node, wire::Frame& f) {
  if (f.type == wire::kJson) {
    auto m = control::decode_from_agent(f.payload);
    if (node >= 0) return h_.on_message(node, m);
    auto* hello = std::get_if<control::msg::Hello>(&m);
    if (!hello) throw RemoteError("expected hello");
    const int n = hello->node;
    // A node whose connection closed may be greeted again (an agent started
    // anew for a restart), if the handler takes it.
    if (n < 0 || static_cast<size_t>(n) >= conns_.size() || connected(n))
      throw RemoteError("agent claims node " + std::to_string(n) + ", which is not expected");
    // Bound before the handler hears of it: its answer may be to send (the launch).
    node = n;
    auto before = std::exchange(conns_[static_cast<size_t>(n)], c);
    if (auto why = h_.on_hello(*hello); !why.empty()) {
      node = -1;
      conns_[static_cast<size_t>(n)] = std::move(before);
      throw RemoteError(why);
    }
    return;
  }
  if (f.type == wire::kData) {
    if (node < 0) throw RemoteError("output before hello");
    return h_.on_output(node, control::parse_data(f.payload));
  }
  if (f.type == control::kFence) {
    if (node < 0) throw RemoteError("fence data before hello");
    auto fence = control::parse_fence(f.payload);
    return h_.on_fence(node, fence.id, fence.blob);
  }
  // Other frame types are reserved: ignored, as before.
}

void ControlServer::send(int node, std::string frame) {
  if (auto& c = conns_.at(static_cast<size_t>(node)); c && c->is_open()) c->send(std::move(frame));
}

void ControlServer::broadcast_frame(const std::string& frame) {
  for (auto& c : conns_)
    if (c && c->is_open()) c->send(frame);
}

bool ControlServer::connected(int node) const {
  const auto& c = conns_.at(static_cast<size_t>(node));
  return c && c->is_open();
}

ssh::TcpConnection ControlServer::addresses(int node) const {
  const auto& c = conns_.at(static_cast<size_t>(node));
  return c && c->is_open() ? ssh::describe_socket(c->native_handle()) : ssh::TcpConnection{};
}

bool ControlServer::any_open() const {
  for (const auto& c : conns_)
    if (c && c->is_open()) return true;
  return false;
}

void ControlServer::start_heartbeats(std::chrono::milliseconds interval, std::chrono::milliseconds timeout) {
  const std::string why = "no heartbeat for " + std::to_string(timeout.count() / 1000) +
                          " s: the host or its agent is frozen, or the network is down";
  for (auto& c : conns_)
    if (c && c->is_open()) c->start_heartbeats(interval, timeout, why);
}

void ControlServer::hold_reading() {
  for (auto& c : conns_)
    if (c) c->hold_reading();
}

size_t ControlServer::queued_bytes() const {
  size_t n = 0;
  for (auto& c : conns_)
    if (c && c->is_open()) n += c->queued_bytes();
  return n;
}

void ControlServer::resume_reading() {
  for (auto& c : conns_)
    if (c) c->resume_reading();
}

void ControlServer::stop_heartbeats() {
  for (auto& c : conns_)
    if (c) c->stop_heartbeats();
}

}  // namespace dl::launcher
