#pragma once
// The address a job's ranks are given for their PMIx server, open before the
// server exists (docs/mpi.md, "Cost for non-MPI programs").
//
// A rank must have its server's address (PMIX_SERVER_URI*) when it starts,
// and libpmix's client gives up at once when nothing listens there (it
// retries connect() ten times without a pause). So the agent listens on a
// loopback port of its own from the start: a client's connect() completes in
// the kernel's backlog, and its handshake waits in the socket until the PMIx
// server is up. Then relay() connects each client to libpmix's own listener
// and copies bytes both ways until either side closes. Nothing is read from a
// client before the server is ready.
//
// No libpmix here. Threading: one thread runs relay(); pending() and port()
// may be called from any thread; the destructor closes every socket and must
// not run while relay() does.
#include <cstdint>

namespace dl::agent::pmix {

class FrontDoor {
 public:
  // Listens on 127.0.0.1, a free port (close-on-exec: ranks do not inherit
  // it). Throws IoError.
  FrontDoor();
  ~FrontDoor();
  FrontDoor(const FrontDoor&) = delete;
  FrontDoor& operator=(const FrontDoor&) = delete;

  uint16_t port() const { return port_; }
  int listen_fd() const { return listen_fd_; }

  // True when a client has connected and not been accepted yet.
  bool pending() const;

  // Accepts clients (those already waiting first; a client owned by another
  // user than the agent's is closed at once), connects each to
  // 127.0.0.1:`upstream_port` and copies bytes both ways. Returns when
  // `stop_fd` becomes readable. A client whose upstream connect fails is
  // closed (its PMIx_Init then fails with "unreachable").
  void relay(uint16_t upstream_port, int stop_fd);

  // Stops listening: clients that connect later are refused at once, and
  // those waiting in the backlog see the connection closed.
  void close_listener();

 private:
  int listen_fd_ = -1;
  uint16_t port_ = 0;
};

}  // namespace dl::agent::pmix
