#pragma once
// The accepting end of control connections: a TCP port (port 0: the kernel
// picks) whose connections are admitted per peer (wire/admission.h: a
// bounded number of unauthenticated connections each) and handed on, each
// with its admission slot, to run the token handshake
// (Connection::start_server). The launcher's control server and a tree
// agent's relay (agent/relay.h) both accept through it.
#include <boost/asio.hpp>
#include <functional>
#include <string>

#include "wire/admission.h"

namespace dl::control {

class ControlAcceptor {
 public:
  using Socket = boost::asio::generic::stream_protocol::socket;
  struct Hooks {
    std::function<void(Socket sock, wire::PreAuthSlot slot)> accepted;
    std::function<void(const std::string& line)> log;  // admission's notes
  };
  ControlAcceptor(boost::asio::io_context& io, Hooks hooks);
  // Listens on `bind_addr` (numeric), port 0; returns the port. The socket is
  // close-on-exec: no rank inherits it.
  uint16_t listen(const std::string& bind_addr);
  void stop();

 private:
  void accept();
  void accept_pending();

  boost::asio::io_context& io_;
  Hooks hooks_;
  boost::asio::ip::tcp::acceptor acceptor_;
  wire::Admission admission_;
  // When accept ran out of descriptors, the timer of its next try.
  boost::asio::steady_timer retry_;
  bool accepting_ = false;
};

}  // namespace dl::control
