#pragma once
// TCP transport: a Pair over one connected, token-authenticated socket,
// non-blocking, TCP_NODELAY, with large kernel buffers.
#include "collectives/pair.h"
#include "wire/socket.h"

namespace dl::coll::tcp {

class TcpPair : public Pair {
 public:
  // Takes ownership of a connected socket (already through the handshake).
  TcpPair(wire::Socket sock, PeerInfo peer);
  size_t try_send(const char* data, size_t n) override;
  size_t try_recv(char* data, size_t n) override;
  int poll_fd() const override { return sock_.fd(); }
  void check_alive() override {}
  void shutdown() override;
  const char* transport() const override { return "tcp"; }

 private:
  [[noreturn]] void fail(const char* doing, int err);
  wire::Socket sock_;
};

// Sets TCP_NODELAY, O_NONBLOCK and asks for `bytes` of send/receive buffer
// (SO_*BUFFORCE when permitted, else what net.core.*mem_max allows).
void tune_socket(int fd, int bytes);

}  // namespace dl::coll::tcp
