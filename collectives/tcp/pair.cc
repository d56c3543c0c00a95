#include "collectives/tcp/pair.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "errors/error.h"

namespace dl::coll::tcp {

void tune_socket(int fd, int bytes) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (::setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &bytes, sizeof bytes) != 0)
    ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof bytes);
  if (::setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &bytes, sizeof bytes) != 0)
    ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof bytes);
  int fl = ::fcntl(fd, F_GETFL);
  ::fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

TcpPair::TcpPair(wire::Socket sock, PeerInfo peer) : Pair(std::move(peer)), sock_(std::move(sock)) {
  tune_socket(sock_.fd(), 4 << 20);
}

void TcpPair::fail(const char* doing, int err) {
  if (err == 0)
    throw RemoteError(peer_.describe() + " closed its connection (it exited, crashed or aborted its communicator)");
  throw RemoteError(std::string(doing) + " " + peer_.describe() + " failed: " + std::strerror(err) +
                    " (that rank probably died)");
}

size_t TcpPair::try_send(const char* data, size_t n) {
  if (n == 0) return 0;
  for (;;) {
    ssize_t k = ::send(sock_.fd(), data, n, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (k >= 0) return static_cast<size_t>(k);
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    if (errno == EPIPE || errno == ECONNRESET) fail("sending to", 0);
    fail("sending to", errno);
  }
}

size_t TcpPair::try_recv(char* data, size_t n) {
  if (n == 0) return 0;
  for (;;) {
    ssize_t k = ::recv(sock_.fd(), data, n, MSG_DONTWAIT);
    if (k > 0) return static_cast<size_t>(k);
    if (k == 0) fail("receiving from", 0);
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    if (errno == ECONNRESET) fail("receiving from", 0);
    fail("receiving from", errno);
  }
}

void TcpPair::shutdown() {
  if (sock_.valid()) ::shutdown(sock_.fd(), SHUT_RDWR);
}

}  // namespace dl::coll::tcp
