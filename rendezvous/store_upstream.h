#pragma once
// A host's one connection to the job's store server, speaking store/2
// (rendezvous/store_protocol.h): many requests outstanding at once, each
// under its own id, their replies taken in whatever order the server sends
// them. The forwarder (store_forwarder.h) sends its host's traffic over it.
//
// Threading: everything runs on the io_context the link was made with,
// which one thread runs; call() only from that thread.
// Failure: the constructor throws as TcpStore's does when the server cannot
// be reached or does not hold the token. When the connection breaks later
// (the server stopped, or refused a frame) every outstanding call, and every
// later one, is answered with a kError reply naming the store and why; the
// link is not made again.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <boost/asio/io_context.hpp>

#include "rendezvous/store_protocol.h"
#include "wire/socket.h"

namespace dl::rdzv {

class StoreUpstream {
 public:
  using Done = std::function<void(const proto::Reply&)>;

  // Connects to host:port and passes the token handshake, trying again
  // (wire/client_retry.h) until connect_timeout. Blocks.
  StoreUpstream(boost::asio::io_context& io, const std::string& host, uint16_t port, const std::string& token,
                wire::Millis connect_timeout);
  ~StoreUpstream();
  StoreUpstream(const StoreUpstream&) = delete;
  StoreUpstream& operator=(const StoreUpstream&) = delete;

  // Sends r; `done` gets its reply (on the io thread, never inside this call).
  void call(const proto::Request& r, Done done);
  // Requests sent and not answered yet.
  size_t outstanding() const;
  // Requests sent since the link was made.
  uint64_t sent() const;
  // "store at host:port", for messages.
  const std::string& peer() const;
  // Closes the link; outstanding calls get a kError reply.
  void close();

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace dl::rdzv
