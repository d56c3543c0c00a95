#include "remote/ssh/tcp_connect.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "errors/error.h"

namespace dl::ssh {

namespace {
using Clock = std::chrono::steady_clock;

std::string numeric(const sockaddr_storage& sa) {
  char buf[INET6_ADDRSTRLEN] = "?";
  if (sa.ss_family == AF_INET)
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in&>(sa).sin_addr, buf, sizeof buf);
  else if (sa.ss_family == AF_INET6)
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6&>(sa).sin6_addr, buf, sizeof buf);
  return buf;
}

// One attempt: 0 when connected, else the errno (ETIMEDOUT when the deadline passed).
int try_connect(int fd, const addrinfo* ai, Clock::time_point deadline) {
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  if (::connect(fd, ai->ai_addr, ai->ai_addrlen) != 0 && errno != EINPROGRESS) return errno;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return ETIMEDOUT;
    pollfd p{fd, POLLOUT, 0};
    int n = poll(&p, 1, static_cast<int>(left));
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) return ETIMEDOUT;
    int err = 0;
    socklen_t len = sizeof err;
    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err == 0) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    return err;
  }
}

}  // namespace

void throw_connect_error(int err, const std::string& who, uint16_t port, std::chrono::milliseconds timeout) {
  switch (err) {
    case ECONNREFUSED:
      throw IoError(who + ": connection refused: is sshd running there, and on this port? "
                          "(check the host's sshd, or Port in ~/.ssh/config / host:port in the hostfile)");
    case ETIMEDOUT:
      throw TimeoutError(who + ": unreachable: no answer within " + std::to_string(timeout.count()) +
                         " ms (host down, wrong address, or a firewall dropping port " + std::to_string(port) + "?)");
    case ENETUNREACH:
    case EHOSTUNREACH:
    case EHOSTDOWN:
      throw IoError(who + ": unreachable: " + strerror(err) +
                    " (wrong address, or no route from this machine: check the hostfile and `ip route`)");
    default:
      throw IoError(who + ": cannot connect: " + strerror(err));
  }
}

void throw_resolve_error(const std::string& host, const std::string& why, const std::string& who) {
  throw IoError(who + ": cannot resolve host name '" + host + "': " + why +
                " (check the hostfile, /etc/hosts or HostName in ~/.ssh/config)");
}

TcpConnection tcp_connect(const std::string& host, uint16_t port, std::chrono::milliseconds timeout,
                          const std::string& who) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res);
  if (rc != 0) throw_resolve_error(host, gai_strerror(rc), who);
  auto deadline = Clock::now() + timeout;
  int last = ETIMEDOUT;
  for (addrinfo* ai = res; ai; ai = ai->ai_next) {
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) { last = errno; continue; }
    last = try_connect(fd, ai, deadline);
    if (last == 0) {
      freeaddrinfo(res);
      int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      TcpConnection c = describe_socket(fd);
      c.fd = fd;
      return c;
    }
    ::close(fd);
    if (last == ETIMEDOUT) break;  // the deadline is shared: no time left for others
  }
  freeaddrinfo(res);
  throw_connect_error(last, who, port, timeout);
}

TcpConnection describe_socket(int fd) {
  TcpConnection c;
  sockaddr_storage sa{};
  socklen_t len = sizeof sa;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len) == 0) c.local_address = numeric(sa);
  len = sizeof sa;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&sa), &len) == 0) c.remote_address = numeric(sa);
  return c;
}

}  // namespace dl::ssh
