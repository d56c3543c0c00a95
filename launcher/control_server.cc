#include "launcher/control_server.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>
#include <utility>

#include "control/tree_words.h"
#include "errors/error.h"

namespace dl::launcher {

using control::Connection;

ControlServer::ControlServer(boost::asio::io_context& io, std::string token, size_t nodes, Handler& h)
    : io_(io), token_(std::move(token)), h_(h),
      acceptor_(io, control::ControlAcceptor::Hooks{
                        [this](control::ControlAcceptor::Socket s, wire::PreAuthSlot slot) {
                          serve(std::move(s), false, std::move(slot));
                        },
                        [this](const std::string& line) { h_.log("control port: " + line); }}),
      conns_(nodes), up_(nodes, 0), routed_(nodes, 0), root_of_(nodes, -1), has_below_(nodes, 0), hosts_(nodes) {}

uint16_t ControlServer::listen(const std::string& bind_addr) { return acceptor_.listen(bind_addr); }

void ControlServer::stop_accepting() { acceptor_.stop(); }

void ControlServer::set_routes(std::vector<int> root_of, std::vector<std::string> hosts) {
  root_of.resize(conns_.size(), -1);
  root_of_ = std::move(root_of);
  hosts.resize(conns_.size());
  hosts_ = std::move(hosts);
  for (int r : root_of_)
    if (r >= 0) has_below_.at(static_cast<size_t>(r)) = 1;
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
  auto conn = control::node_connection(
      std::move(sock), [this](const std::shared_ptr<Connection>& c, int& node, wire::Frame& f) { on_frame(c, node, f); },
      [this](const std::shared_ptr<Connection>& c, int node, const std::string& why, bool authenticated) {
        if (node >= 0) return on_conn_closed(c, node, why);
        if (!authenticated && why != "connection closed") h_.log("refused a control connection: " + why);
      });
  if (authenticated) conn->start();
  else conn->start_server(token_, control::kControlTag, wire::kPreAuthDeadline, std::move(slot));
}

void ControlServer::on_frame(const std::shared_ptr<Connection>& c, int& node, wire::Frame& f) {
  if (node < 0) {
    // The first frame: this connection's own agent's hello.
    if (f.type != wire::kJson) throw RemoteError("expected hello");
    auto m = control::decode_from_agent(f.payload);
    auto* hello = std::get_if<control::msg::Hello>(&m);
    if (!hello) throw RemoteError("expected hello");
    const int n = hello->node;
    if (n < 0 || static_cast<size_t>(n) >= conns_.size() || connected(n) || root_of_[static_cast<size_t>(n)] >= 0)
      throw RemoteError("agent claims node " + std::to_string(n) + ", which is not expected");
    node = n;
    return on_node_frame(c, n, f, false);
  }
  if (f.type == control::kRouted) {
    auto r = control::parse_routed(f.payload);
    const size_t n = r.node;
    if (!has_below_[static_cast<size_t>(node)] || n >= conns_.size() || root_of_[n] != node)
      throw RemoteError("relayed a frame of node " + std::to_string(r.node) + ", which is not beneath it");
    return on_node_frame(c, static_cast<int>(n), r.inner, true);
  }
  on_node_frame(c, node, f, false);
}

void ControlServer::on_node_frame(const std::shared_ptr<Connection>& c, int node, wire::Frame& f, bool routed) {
  const auto i = static_cast<size_t>(node);
  if (f.type == wire::kJson) {
    auto m = control::decode_from_agent(f.payload);
    if (auto* hello = std::get_if<control::msg::Hello>(&m); hello && (!up_[i] || conns_[i] != c)) {
      if (hello->node != node) throw RemoteError("a relayed hello of node " + std::to_string(hello->node) +
                                                 " in a frame of node " + std::to_string(node));
      // A node whose connection closed may be greeted again (an agent started
      // anew for a restart), if the handler takes it. Bound before the
      // handler hears of it: its answer may be to send (the launch).
      auto before = std::exchange(conns_[i], c);
      set_up(i, true), routed_[i] = routed;
      if (auto why = h_.on_hello(*hello); !why.empty()) {
        conns_[i] = std::move(before);
        set_up(i, false);
        if (routed) return h_.log("refused the agent on " + hello->host + ": " + why);
        throw RemoteError(why);
      }
      return;
    }
    if (!up_[i]) return;  // a relayed node already lost: its last words are moot
    if (auto* l = std::get_if<control::msg::AgentLost>(&m)) {
      const auto n = static_cast<size_t>(l->node);
      if (n >= conns_.size() || root_of_[n] < 0 || conns_[n] != c)
        throw RemoteError("agent_lost of node " + std::to_string(l->node) + ", which is not beneath it");
      if (up_[n]) lost(l->node, l->why);
      return;
    }
    return h_.on_message(node, m);
  }
  if (!up_[i]) return;
  if (f.type == wire::kData) return h_.on_output(node, control::parse_data(f.payload));
  if (f.type == control::kFence) {
    auto fence = control::parse_fence(f.payload);
    return h_.on_fence(node, fence.id, fence.blob);
  }
  // Other frame types are reserved: ignored, as before.
}

void ControlServer::lost(int node, const std::string& why) {
  set_up(static_cast<size_t>(node), false);
  h_.on_closed(node, why);
}

// An agent's own connection closed: it is gone, and so is every node it
// relayed for (their agents lose theirs and end their ranks).
void ControlServer::on_conn_closed(const std::shared_ptr<Connection>& c, int node, const std::string& why) {
  const auto i = static_cast<size_t>(node);
  if (conns_[i] != c) return;  // a connection replaced since (a restart)
  std::vector<int> beneath;
  for (size_t n = 0; n < conns_.size(); ++n)
    if (routed_[n] && up_[n] && conns_[n] == c) beneath.push_back(static_cast<int>(n));
  std::vector<std::string> names;
  for (int n : beneath) names.push_back(hosts_[static_cast<size_t>(n)]);
  if (up_[i]) lost(node, control::lost_with_beneath(why, names));
  for (int n : beneath)
    if (up_[static_cast<size_t>(n)]) lost(n, control::lost_with_relay(hosts_[i], why));
}

template <class F> void ControlServer::each_connection(F f) const {
  for (size_t n = 0; n < conns_.size(); ++n)
    if (conns_[n] && !routed_[n] && conns_[n]->is_open()) f(n, conns_[n]);
}

void ControlServer::send(int node, std::string frame) {
  const auto i = static_cast<size_t>(node);
  auto& c = conns_.at(i);
  if (!c || !c->is_open() || !up_[i]) return;
  if (routed_[i]) c->send(control::routed_frame(static_cast<uint32_t>(node), frame));
  else c->send(std::move(frame));
}

void ControlServer::broadcast_frame(const std::string& frame) {
  std::string everyone;  // for a root: this frame for it and every node beneath
  each_connection([&](size_t n, const std::shared_ptr<Connection>& c) {
    if (!has_below_[n]) return c->send(frame);
    if (everyone.empty()) everyone = control::routed_frame(control::kEveryNode, frame);
    c->send(everyone);
  });
}

bool ControlServer::connected(int node) const {
  const auto i = static_cast<size_t>(node);
  const auto& c = conns_.at(i);
  return c && c->is_open() && up_[i];
}

ssh::TcpConnection ControlServer::addresses(int node) const {
  const auto i = static_cast<size_t>(node);
  const auto& c = conns_.at(i);
  return connected(node) && !routed_[i] ? ssh::describe_socket(c->native_handle()) : ssh::TcpConnection{};
}

void ControlServer::set_up(size_t node, bool up) {
  if (static_cast<bool>(up_[node]) == up) return;
  up_[node] = up;
  up ? ++up_count_ : --up_count_;
}

// Counted, not scanned: the Job asks after each node it loses, and a root
// lost at 8,192 hosts is 256 nodes lost at once.
bool ControlServer::any_open() const { return up_count_ > 0; }

void ControlServer::start_heartbeats(std::chrono::milliseconds interval, std::chrono::milliseconds timeout) {
  const std::string why = "no heartbeat for " + std::to_string(timeout.count() / 1000) +
                          " s: the host or its agent is frozen, or the network is down";
  each_connection([&](size_t, const std::shared_ptr<Connection>& c) { c->start_heartbeats(interval, timeout, why); });
}

void ControlServer::hold_reading() {
  for (size_t n = 0; n < conns_.size(); ++n)
    if (conns_[n] && !routed_[n]) conns_[n]->hold_reading();
}

size_t ControlServer::queued_bytes() const {
  size_t q = 0;
  each_connection([&](size_t, const std::shared_ptr<Connection>& c) { q += c->queued_bytes(); });
  return q;
}

void ControlServer::resume_reading() {
  for (size_t n = 0; n < conns_.size(); ++n)
    if (conns_[n] && !routed_[n]) conns_[n]->resume_reading();
}

void ControlServer::stop_heartbeats() {
  for (size_t n = 0; n < conns_.size(); ++n)
    if (conns_[n] && !routed_[n]) conns_[n]->stop_heartbeats();
}

}  // namespace dl::launcher
