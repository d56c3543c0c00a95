#pragma once
// The launcher's control server: accepts agents' connections on one port,
// holds one control::Connection per agent (token handshake with a deadline,
// send queue, heartbeats), binds each to its node by the agent's hello, and
// hands every decoded message to its handler. The Job is that handler; it
// never sees a socket, a frame or a JSON field.
#include <boost/asio.hpp>
#include <memory>
#include <string>
#include <vector>

#include "control/connection.h"
#include "control/messages.h"
#include "control/protocol.h"
#include "remote/ssh/tcp_connect.h"
#include "wire/admission.h"

namespace dl::launcher {

class ControlServer {
 public:
  struct Handler {
    virtual ~Handler() = default;
    // An authenticated agent says hello. Return "" to take it as node
    // m.node, else why it is refused (the connection is closed). A node
    // already greeted whose connection closed may say hello again.
    virtual std::string on_hello(const control::msg::Hello& m) = 0;
    // Anything after the hello, from node `node`. Throwing RemoteError
    // closes that connection (and on_closed reports it).
    virtual void on_message(int node, const control::FromAgent& m) = 0;
    virtual void on_output(int node, const control::DataChunk& c) = 0;
    virtual void on_fence(int node, uint64_t id, std::string_view blob) = 0;
    // Node `node`'s connection closed (after its hello), with why.
    virtual void on_closed(int node, const std::string& why) = 0;
    virtual void log(const std::string& line) = 0;
  };

  ControlServer(boost::asio::io_context& io, std::string token, size_t nodes, Handler& h);
  // Listens on `bind_addr`, port 0; returns the port.
  uint16_t listen(const std::string& bind_addr);
  void stop_accepting();
  // Takes `fd`, the launcher's end of a socketpair whose other end its own
  // child, the local agent, inherited: authenticated by construction (no
  // other process holds either end), so no handshake; the agent's hello
  // binds it to its node as on an accepted connection.
  void adopt(int fd);

  void send(int node, std::string frame);
  template <class M> void send(int node, const M& m) { send(node, control::frame(m)); }
  template <class M> void broadcast(const M& m) { broadcast_frame(control::frame(m)); }
  void broadcast_frame(const std::string& frame);

  // Whether node `node` has said hello and its connection is open.
  bool connected(int node) const;
  // Whether node `node` has ever said hello.
  bool greeted(int node) const { return conns_.at(static_cast<size_t>(node)) != nullptr; }
  bool any_open() const;
  // The numeric addresses of node `node`'s TCP connection (ssh::describe_socket):
  // remote_address the agent's end (its host as seen from here), local_address
  // ours (this launcher as that host reached it); empty when not connected.
  ssh::TcpConnection addresses(int node) const;
  // Every connected node: a heartbeat each `interval`, lost after `timeout` of silence.
  void start_heartbeats(std::chrono::milliseconds interval, std::chrono::milliseconds timeout);
  void stop_heartbeats();
  // Output backpressure: the agents' connections are not read (their
  // silence not counted) from hold_reading() until resume_reading().
  void hold_reading();
  void resume_reading();
  // Bytes queued on the agents' connections, not yet handed to the kernel.
  size_t queued_bytes() const;

 private:
  void accept();
  void accept_pending();
  void serve(boost::asio::generic::stream_protocol::socket sock, bool authenticated, wire::PreAuthSlot slot = {});
  void on_frame(const std::shared_ptr<control::Connection>& c, int& node, wire::Frame& f);

  boost::asio::io_context& io_;
  std::string token_;
  Handler& h_;
  boost::asio::ip::tcp::acceptor acceptor_;
  // Unauthenticated connections per peer (wire/admission.h), and when accept
  // ran out of descriptors, the timer of its next try.
  wire::Admission admission_;
  boost::asio::steady_timer accept_retry_;
  bool accepting_ = true;
  std::vector<std::shared_ptr<control::Connection>> conns_;  // by node, once it said hello
};

}  // namespace dl::launcher
