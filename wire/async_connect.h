#pragma once
// connect_authenticated (wire/client_retry.h) for event loops: a TCP
// connection to host:port that passed the job-token handshake, made on an
// io_context without blocking its thread, so a loop that also serves other
// peers (the agent's) goes on serving them while the server is slow or away.
// It tries as retry_until does (the same waits per try, the same jittered
// pauses between tries, the same message when time is up); a server that is
// not ours (AuthError) and a name that does not resolve end it at once.
//
// A host name (not an address) is resolved once, blocking, before the first
// try: getaddrinfo has no cancellable asynchronous form without a helper
// thread, and the names given here are those the caller reached moments ago.
//
// Threading: the io_context's one thread runs it; call start() and cancel()
// on that thread.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "wire/socket.h"

namespace dl::wire {

struct AsyncConnectTarget {
  std::string host;
  uint16_t port = 0;
  std::string token, tag;  // the job's token; the protocol tag (wire/handshake.h)
  std::string peer;        // names the server in messages, e.g. "store at host:port"
  Millis timeout{0};       // for all tries together
};

class AsyncConnect {
 public:
  // Called once, on the io thread: with an empty `error` and the connected,
  // authenticated socket (TCP_NODELAY set, the proof written); or with why
  // not, naming the peer: retry_timeout_message's text when time ran out.
  using Done = std::function<void(const std::string& error, boost::asio::ip::tcp::socket sock)>;

  // Starts connecting; `done` is called later, never inside this call.
  AsyncConnect(boost::asio::io_context& io, AsyncConnectTarget target, Done done);
  // cancel().
  ~AsyncConnect();
  AsyncConnect(const AsyncConnect&) = delete;
  AsyncConnect& operator=(const AsyncConnect&) = delete;

  // Stops trying and closes what it holds; `done` is not called. Idempotent.
  void cancel();

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace dl::wire
