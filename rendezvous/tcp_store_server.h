#pragma once
// The TCP store server: a Boost.Asio server holding the store's state in
// memory, serving the store protocol (store_protocol.h) to any number of
// clients, one socket each, with no thread per client.
//
// Threading: the server's io_context must be run by one thread (the
// launcher's loop, `dlaunch store`'s, or BackgroundStoreServer's); the send
// helpers above are the server's own, joined when it goes. stop() and
// set_logger() may be called from any thread. Waits (get of a missing key,
// wait) are parked server-side and answered when their keys are set, or with
// the missing keys when the client's timeout passes.
//
// I/O: each socket is non-blocking; on readiness the server reads what is
// there (many pipelined requests at once), handles every whole request and
// answers them with one send. A request that releases many parked ones (a
// barrier's last arrival) sends their replies after it is executed, and
// from 256 sessions on shares those sends with helper threads (one per
// further core, up to 3; they only call send on sockets the server's thread
// then leaves alone until they are done): on loopback each send also runs
// the receiver's TCP input. Bytes that follow the handshake response in
// the same read are handled only after the client's HMAC has been checked;
// on a failed check they are dropped, never executed. Pending connections are
// accepted in batches, one readiness event for many.
//
// Failure: a client that fails the token handshake (or has not passed it
// within wire::kPreAuthDeadline of its accept, or of our answer when that
// came late), sends a malformed or oversized frame, or
// disconnects (even inside a wait) is closed; keys or values over the limits
// get an error reply. Either way every other client is served on and no
// stored data is lost. A peer may hold only so many connections that have
// not passed the handshake; over that they are closed as soon as accepted
// (wire/admission.h), so another user's idle connections cannot take the
// server's descriptors from the job's ranks.
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include <boost/asio/io_context.hpp>

namespace dl::rdzv {

class TcpStoreServer {
 public:
  // Binds bind_host:port (port 0 picks a free one; "" or "0.0.0.0" means all
  // IPv4 interfaces, "::" all interfaces) and starts accepting on `io`.
  // Throws IoError naming the address when it cannot bind. `token` is the
  // job token every client must hold.
  TcpStoreServer(boost::asio::io_context& io, const std::string& bind_host, uint16_t port, std::string token);
  // Stops (as stop()); pending handlers hold the state until they finish.
  ~TcpStoreServer();
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;

  uint16_t port() const { return port_; }
  // Connections accepted so far (admitted, authenticated or not). Thread-safe.
  uint64_t connections_accepted() const;
  // Removes every key that does not start with `keep` (launcher/attempts.h:
  // a restarted job's store). On the server's thread. Returns how many.
  size_t erase_all_but(const std::string& keep);
  // Stops accepting and closes every client. Thread-safe, idempotent.
  void stop();
  // Called (on the server's thread) with one line per refused or failed
  // client, e.g. "store: 10.0.0.5:4711 failed the token handshake: ...".
  // Set it before clients connect.
  void set_logger(std::function<void(const std::string&)> log);

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
  uint16_t port_ = 0;
};

// A TcpStoreServer with its own io_context on its own thread: for rank 0
// hosting a job's store, for `dlaunch store` and for tests.
class BackgroundStoreServer {
 public:
  BackgroundStoreServer(const std::string& bind_host, uint16_t port, std::string token);
  // Stops the server and joins the thread.
  ~BackgroundStoreServer();
  uint16_t port() const { return server_->port(); }
  TcpStoreServer& server() { return *server_; }

 private:
  boost::asio::io_context io_;
  std::unique_ptr<TcpStoreServer> server_;
  std::thread thread_;
};

}  // namespace dl::rdzv
