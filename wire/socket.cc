#include "wire/socket.h"

#include "wire/coding.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <random>
#include <cstring>
#include <thread>
#include <vector>

#include "errors/error.h"

namespace dl::wire {

using Clock = std::chrono::steady_clock;

Socket& Socket::operator=(Socket&& o) noexcept {
  if (this != &o) {
    close();
    fd_ = o.release();
  }
  return *this;
}

void Socket::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

static int remaining_ms(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<Millis>(deadline - Clock::now()).count();
  return left < 0 ? 0 : static_cast<int>(left);
}

namespace {

// One address to try; numeric hosts ("127.0.0.1", "::1") skip getaddrinfo.
struct Address {
  sockaddr_storage sa{};
  socklen_t len = 0;
  int family = AF_INET;
};

std::vector<Address> resolve(const std::string& host, uint16_t port) {
  Address a;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&a.sa);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&a.sa);
  if (::inet_pton(AF_INET, host.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET, v4->sin_port = htons(port), a.len = sizeof *v4, a.family = AF_INET;
    return {a};
  }
  if (::inet_pton(AF_INET6, host.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6, v6->sin6_port = htons(port), a.len = sizeof *v6, a.family = AF_INET6;
    return {a};
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res);
  if (rc != 0) throw UnresolvedHost("cannot resolve " + host + ": " + gai_strerror(rc));
  std::vector<Address> out;
  for (addrinfo* ai = res; ai; ai = ai->ai_next) {
    Address x;
    std::memcpy(&x.sa, ai->ai_addr, ai->ai_addrlen);
    x.len = ai->ai_addrlen, x.family = ai->ai_family;
    out.push_back(x);
  }
  ::freeaddrinfo(res);
  return out;
}

timeval to_timeval(Millis t) {
  return {static_cast<time_t>(t.count() / 1000), static_cast<suseconds_t>((t.count() % 1000) * 1000)};
}

// One blocking connect bounded by SO_SNDTIMEO (Linux applies it to connect):
// fewer system calls than a non-blocking connect with poll, getsockopt and
// two fcntl. The send timeout is cleared again afterwards, so a later send to
// a slow reader blocks as on any socket. Returns the fd or -1, errno set.
int try_connect(const Address& a, Millis left) {
  int fd = ::socket(a.family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  const timeval tv = to_timeval(std::max(left, Millis(1))), none{};
  const int one = 1;
  if (::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) != 0 ||
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0 ||
      ::connect(fd, reinterpret_cast<const sockaddr*>(&a.sa), a.len) != 0 ||
      ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &none, sizeof none) != 0) {
    int e = errno;
    ::close(fd);
    errno = (e == EINPROGRESS || e == EAGAIN) ? ETIMEDOUT : e;
    return -1;
  }
  return fd;
}

}  // namespace

Socket connect_tcp(const std::string& host, uint16_t port, Millis timeout, Refused refused) {
  const auto deadline = Clock::now() + timeout;
  const auto addresses = resolve(host, port);
  int last_err = 0;
  for (int attempt = 0;; ++attempt) {
    for (const auto& a : addresses) {
      int fd = try_connect(a, std::chrono::duration_cast<Millis>(deadline - Clock::now()));
      if (fd >= 0) return Socket(fd);
      last_err = errno;
    }
    if (last_err == ECONNREFUSED && refused == Refused::kFinal)
      throw NotListening("nothing listens at " + host + ":" + std::to_string(port) + " (connection refused)");
    if (Clock::now() >= deadline) break;
    // Refused or unreachable: the server may not be up yet; back off briefly,
    // at random within [d/2, d] so that clients refused together spread out.
    const int d = std::min(5 << std::min(attempt, 5), 100);
    thread_local std::mt19937 gen(std::random_device{}());
    std::this_thread::sleep_for(Millis(std::uniform_int_distribution<int>(d / 2, d)(gen)));
  }
  throw TimeoutError("could not connect to " + host + ":" + std::to_string(port) + " within " +
                     std::to_string(timeout.count()) + " ms: " + std::strerror(last_err));
}

Socket connect_unix(const std::string& path) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  if (path.size() >= sizeof a.sun_path)
    throw IoError("socket path " + path + " is over " + std::to_string(sizeof a.sun_path - 1) + " bytes");
  std::memcpy(a.sun_path, path.data(), path.size());
  Socket s(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!s.valid() || ::connect(s.fd(), reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0)
    throw IoError("could not connect to " + path + ": " + std::strerror(errno));
  return s;
}

void write_all_fd(int fd, std::string_view b) {
  while (!b.empty()) {
    ssize_t n = ::write(fd, b.data(), b.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) {
        pollfd p{fd, POLLOUT, 0};
        ::poll(&p, 1, 1000);
        continue;
      }
      return;
    }
    b.remove_prefix(static_cast<size_t>(n));
  }
}

void send_all(const Socket& s, std::string_view bytes, const std::string& peer) {
  while (!bytes.empty()) {
    ssize_t n = ::send(s.fd(), bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_errno("sending to " + peer);
    }
    bytes.remove_prefix(static_cast<size_t>(n));
  }
}

void recv_exact(const Socket& s, char* out, size_t n, Millis timeout, const std::string& peer) {
  const auto deadline = Clock::now() + timeout;
  while (n > 0) {
    pollfd p{s.fd(), POLLIN, 0};
    int r = ::poll(&p, 1, remaining_ms(deadline));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) throw_errno("waiting for " + peer);
    if (r == 0) {
      throw TimeoutError("timed out after " + std::to_string(timeout.count()) + " ms waiting for " + peer);
    }
    ssize_t got = ::recv(s.fd(), out, n, 0);
    if (got < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      throw_errno("reading from " + peer);
    }
    if (got == 0) throw RemoteError(peer + " closed the connection");
    out += got;
    n -= static_cast<size_t>(got);
  }
}

void write_frame(const Socket& s, uint8_t type, std::string_view payload, const std::string& peer) {
  send_all(s, encode_frame(type, payload), peer);
}

Frame read_frame(const Socket& s, size_t max_payload, Millis timeout, const std::string& peer) {
  char h[kHeaderSize];
  recv_exact(s, h, kHeaderSize, timeout, peer);
  const FrameHeader fh = decode_frame_header(h);
  const size_t len = fh.length;
  if (len > max_payload) {
    throw RemoteError(peer + " sent a frame of " + std::to_string(len) + " bytes, over the limit of " +
                      std::to_string(max_payload));
  }
  Frame f;
  f.type = fh.type;
  f.payload.resize(len);
  recv_exact(s, f.payload.data(), len, timeout, peer);
  return f;
}

void open_standard_descriptors() {
  for (int fd = 0; fd <= 2; ++fd) {
    if (::fcntl(fd, F_GETFD) >= 0 || errno != EBADF) continue;
    // The lowest free number is `fd` itself (every lower one is open).
    const int got = ::open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
    if (got >= 0 && got != fd) ::close(got);  // cannot happen; keep nothing stray
  }
}

namespace {
rlimit g_descriptor_limit_at_start{};
bool g_descriptor_limit_raised = false;
}  // namespace

rlim_t descriptor_limit_target(rlim_t hard) { return hard == RLIM_INFINITY ? kDescriptorLimitCap : hard; }

void raise_descriptor_limit() {
  rlimit r{};
  if (g_descriptor_limit_raised || ::getrlimit(RLIMIT_NOFILE, &r) != 0) return;
  const rlim_t want = descriptor_limit_target(r.rlim_max);
  if (r.rlim_cur != RLIM_INFINITY && r.rlim_cur >= want) return;
  rlimit raised{want, r.rlim_max};
  if (::setrlimit(RLIMIT_NOFILE, &raised) != 0) return;
  g_descriptor_limit_at_start = r;
  g_descriptor_limit_raised = true;
}

void restore_descriptor_limit() noexcept {
  if (g_descriptor_limit_raised) ::setrlimit(RLIMIT_NOFILE, &g_descriptor_limit_at_start);
}

std::pair<uint16_t, uint16_t> named_port_range(int ephemeral_first) {
  const int last = std::min(ephemeral_first - 1, 29999);
  if (last < 10000 + 1023) return {0, 0};  // too little room: leave it to the kernel
  return {static_cast<uint16_t>(10000), static_cast<uint16_t>(last)};
}

namespace {
// Binds a fresh socket to `port` (0: the kernel picks); the bound port, or 0.
uint16_t try_bind_port(bool loopback_only, uint16_t port, int* err) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw IoError(std::string("socket: ") + std::strerror(errno));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(loopback_only ? INADDR_LOOPBACK : INADDR_ANY);
  a.sin_port = htons(port);
  socklen_t len = sizeof a;
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0;
  *err = errno;
  ::close(fd);
  return ok ? ntohs(a.sin_port) : 0;
}

int ephemeral_first_port() {
  int first = 32768, last = 60999;  // the kernel's default
  if (FILE* f = std::fopen("/proc/sys/net/ipv4/ip_local_port_range", "r")) {
    if (std::fscanf(f, "%d %d", &first, &last) != 2) first = 32768;
    std::fclose(f);
  }
  return first;
}
}  // namespace

uint16_t free_tcp_port(bool loopback_only) {
  int err = 0;
  // Read and seeded once per process: an agent asks at every start and restart.
  static const std::pair<uint16_t, uint16_t> range = named_port_range(ephemeral_first_port());
  const auto [lo, hi] = range;
  if (lo != 0) {
    thread_local std::mt19937 gen(std::random_device{}());
    std::uniform_int_distribution<int> pick(lo, hi);
    // Without SO_REUSEADDR the bind also fails on a port in TIME_WAIT or
    // held by a listener on any address: such ports are passed over.
    for (int tries = 0; tries < 64; ++tries)
      if (const uint16_t p = try_bind_port(loopback_only, static_cast<uint16_t>(pick(gen)), &err)) return p;
  }
  if (const uint16_t p = try_bind_port(loopback_only, 0, &err)) return p;
  throw IoError(std::string("cannot find a free TCP port: ") + std::strerror(err));
}

std::pair<std::string, uint16_t> split_host_port(std::string_view s, std::string_view what) {
  std::string host;
  std::string_view port;
  if (!s.empty() && s.front() == '[') {
    auto close = s.find(']');
    if (close == std::string_view::npos || close + 1 >= s.size() || s[close + 1] != ':')
      throw UsageError(std::string(what) + ": expected [ipv6]:port, got '" + std::string(s) + "'");
    host = std::string(s.substr(1, close - 1));
    port = s.substr(close + 2);
  } else {
    auto colon = s.rfind(':');
    if (colon == std::string_view::npos)
      throw UsageError(std::string(what) + ": expected host:port, got '" + std::string(s) + "'");
    host = std::string(s.substr(0, colon));
    port = s.substr(colon + 1);
  }
  unsigned long v = 0;
  bool ok = !port.empty() && port.size() <= 5;
  for (char c : port) ok = ok && c >= '0' && c <= '9', v = v * 10 + static_cast<unsigned>(c - '0');
  if (!ok || v > 65535)
    throw UsageError(std::string(what) + ": port must be a number 0-65535, got '" + std::string(port) + "'");
  return {host, static_cast<uint16_t>(v)};
}

}  // namespace dl::wire
