#pragma once
// A host's one connection to the job's store server, speaking store/2
// (rendezvous/store_protocol.h): many requests outstanding at once, each
// under its own id, their replies taken in whatever order the server sends
// them. The forwarder (store_forwarder.h) sends its host's traffic over it.
//
// The link is made when it is first needed: the first call() starts the
// connect and the token handshake (wire/async_connect.h, trying again until
// connect_timeout) without blocking the io thread, and the calls made
// meanwhile wait, in order, to go up once it is made, each timeout they
// carry shortened by the time they waited; their number is bounded by the
// callers (the door lets each of its clients have one request at the back
// end at a time). A host whose ranks never use the store costs the server
// no connection. connect() makes the link at once, blocking, for those who
// measure it apart from the traffic (bench/store-scale).
//
// Its life is one State: kIdle, kConnecting, then kUp, or kUnreachable when
// the try failed; from kUnreachable the first call after a pause (2 s,
// doubled after each failed try in a row, up to 60 s) is kConnecting again;
// kBroken (from any of the others) is for good.
//
// Threading: everything runs on the io_context the link was made with,
// which one thread runs; call() only from that thread.
// Failure: when the server cannot be reached within connect_timeout, or
// does not hold the token, every waiting call, and every later one until
// the pause is over, is answered with a kError reply naming the store's
// address and what was waited for; the first call after it tries again (an
// agent's later launch, a restarted job, finds the store that came up
// meanwhile). When the connection breaks after it was made (the server
// stopped, or refused a frame) every outstanding call, and every later one,
// is answered with a kError reply naming the store and why, and the link is
// not made again: arrivals and adds are not idempotent, so a host
// reconnecting mid-job could count twice.
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

  enum class State { kIdle, kConnecting, kUp, kUnreachable, kBroken };

  // The link to the server at host:port; nothing is connected yet.
  StoreUpstream(boost::asio::io_context& io, const std::string& host, uint16_t port, const std::string& token,
                wire::Millis connect_timeout);
  // Outstanding and waiting calls are dropped unanswered.
  ~StoreUpstream();
  StoreUpstream(const StoreUpstream&) = delete;
  StoreUpstream& operator=(const StoreUpstream&) = delete;

  // Connects and passes the token handshake now, trying again
  // (wire/client_retry.h) until connect_timeout. Blocks. Throws as TcpStore's
  // constructor does. REQUIRES: state() is kIdle, and the io thread is not
  // running the io_context.
  void connect();
  // Sends r, making the link first if there is none yet; `done` gets its
  // reply (on the io thread, never inside this call).
  void call(const proto::Request& r, Done done);
  // `fn` hears why, each time a try to make the link fails (not when it
  // breaks later: the server going at the job's end is no news).
  void set_on_unreachable(std::function<void(const std::string&)> fn);
  State state() const;
  // Requests given and not answered yet (waiting for the link included).
  size_t outstanding() const;
  // Requests given to the link, those waiting for it included.
  uint64_t sent() const;
  // "store at host:port", for messages.
  const std::string& peer() const;
  // Closes the link (or stops making it); outstanding calls get a kError reply.
  void close();

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace dl::rdzv
