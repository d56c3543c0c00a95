#pragma once
// The launcher's control server: accepts agents' connections on one port,
// holds one control::Connection per agent (token handshake with a deadline,
// send queue, heartbeats), binds each to its node by the agent's hello, and
// hands every decoded message to its handler: the real AgentLinks
// (launcher/agent_links.h). In a launch tree one connection speaks for its
// agent and every node beneath it (kRouted frames, control/protocol.h): a
// node is bound by its relayed hello, only to the connection of the root
// set_routes() gave it, and is gone when that connection closes or its
// parent says it was lost (agent_lost).
#include <boost/asio.hpp>
#include <memory>
#include <string>
#include <vector>

#include "control/acceptor.h"
#include "control/connection.h"
#include "launcher/agent_links.h"
#include "control/messages.h"
#include "control/protocol.h"
#include "remote/ssh/tcp_connect.h"
#include "wire/admission.h"

namespace dl::launcher {

class ControlServer final : public AgentLinks {
 public:
  using Handler = AgentLinks::Handler;

  ControlServer(boost::asio::io_context& io, std::string token, size_t nodes, Handler& h);
  uint16_t listen(const std::string& bind_addr) override;
  void stop_accepting() override;
  // The local agent's socketpair is authenticated by construction (no other
  // process holds either end), so no handshake; the agent's hello binds it
  // to its node as on an accepted connection.
  void adopt(int fd) override;
  void send(int node, std::string frame) override;
  using AgentLinks::send;
  using AgentLinks::broadcast;
  void broadcast_frame(const std::string& frame) override;
  bool connected(int node) const override;
  // Whether node `node` has ever said hello.
  bool greeted(int node) const { return conns_.at(static_cast<size_t>(node)) != nullptr; }
  bool any_open() const override;
  // ssh::describe_socket of the node's connection.
  ssh::TcpConnection addresses(int node) const override;
  void set_routes(std::vector<int> root_of, std::vector<std::string> hosts) override;
  void start_heartbeats(std::chrono::milliseconds interval, std::chrono::milliseconds timeout) override;
  void stop_heartbeats() override;
  void hold_reading() override;
  void resume_reading() override;
  size_t queued_bytes() const override;

 private:
  void serve(boost::asio::generic::stream_protocol::socket sock, bool authenticated, wire::PreAuthSlot slot = {});
  void on_frame(const std::shared_ptr<control::Connection>& c, int& node, wire::Frame& f);
  // A frame of node `node`, which says hello on connection `c` (its own or,
  // relayed, its root's).
  void on_node_frame(const std::shared_ptr<control::Connection>& c, int node, wire::Frame& f, bool routed);
  void on_conn_closed(const std::shared_ptr<control::Connection>& c, int node, const std::string& why);
  void lost(int node, const std::string& why);
  // Each open connection once (a root's carries its subtree's nodes too).
  template <class F> void each_connection(F f) const;

  boost::asio::io_context& io_;
  std::string token_;
  Handler& h_;
  control::ControlAcceptor acceptor_;
  std::vector<std::shared_ptr<control::Connection>> conns_;  // by node, once it said hello: its own or its root's
  void set_up(size_t node, bool up);
  std::vector<char> up_;       // by node: said hello, not lost since (set_up)
  size_t up_count_ = 0;        // how many of up_ are set
  std::vector<char> routed_;   // by node: its frames are relayed (kRouted) on conns_[node]
  std::vector<int> root_of_;   // by node: whose connection must carry it (-1: its own)
  std::vector<char> has_below_;  // by node: a root with nodes beneath it
  std::vector<std::string> hosts_;  // by node: the job's name of its host (set_routes)
};

}  // namespace dl::launcher
