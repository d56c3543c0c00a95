#pragma once
// Blocking TCP sockets with deadlines, for the client side of every protocol
// (agents, store clients, collectives peers). Servers use Asio instead.
// Every call that can wait takes a timeout, and its error names `peer`.
#include <sys/resource.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "errors/error.h"
#include "wire/frame.h"

namespace dl::wire {

using Millis = std::chrono::milliseconds;

// An owned file descriptor; closes on destruction. Move-only.
class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  Socket(Socket&& o) noexcept : fd_(o.release()) {}
  Socket& operator=(Socket&& o) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  ~Socket() { close(); }

  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() { int f = fd_; fd_ = -1; return f; }
  void close();

 private:
  int fd_ = -1;
};

// A host name that does not resolve: an IoError that no retry will mend.
struct UnresolvedHost : IoError {
  using IoError::IoError;
};

// Nothing listens at the address (refused) where the client knows its
// server opened its port before it started the client (an agent and the
// launcher or parent agent that started it): the server is gone, and no
// retry will mend it.
struct NotListening : IoError {
  using IoError::IoError;
};

// What a refused connection means to connect_tcp: a server that may still be
// starting (tried again), or one that is gone (NotListening at once).
enum class Refused { kRetried, kFinal };

// Connects to host:port (name or address, IPv4 or IPv6), retrying refused
// connections until `timeout` (a server may still be starting) unless
// `refused` is kFinal. Sets TCP_NODELAY. Throws TimeoutError / IoError
// naming host:port, UnresolvedHost at once when the name does not resolve.
Socket connect_tcp(const std::string& host, uint16_t port, Millis timeout, Refused refused = Refused::kRetried);

// Connects to the AF_UNIX stream socket at `path`, once (a caller that may
// find it not there yet retries: wire/client_retry.h). Throws IoError naming
// the path (no such socket, refused, path too long).
Socket connect_unix(const std::string& path);

// Writes all of `bytes` to `fd` (stdout, stderr, a pipe or a file), through
// EINTR and a full non-blocking descriptor; gives up on any other error, for
// writers that have nowhere to report one (the console, a stall warning).
void write_all_fd(int fd, std::string_view bytes);

// Writes all bytes; throws IoError naming `peer` if the connection breaks.
void send_all(const Socket& s, std::string_view bytes, const std::string& peer);

// Reads exactly n bytes within `timeout`; throws TimeoutError or RemoteError
// (peer closed) naming `peer`.
void recv_exact(const Socket& s, char* out, size_t n, Millis timeout, const std::string& peer);

void write_frame(const Socket& s, uint8_t type, std::string_view payload, const std::string& peer);
// Reads one frame of at most max_payload bytes within `timeout`.
Frame read_frame(const Socket& s, size_t max_payload, Millis timeout, const std::string& peer);

// A TCP port that was free a moment ago on `loopback_only` ? 127.0.0.1 : every
// IPv4 interface (MASTER_PORT, a test's rendezvous port). Someone may take it
// before the caller binds it: use it where a port must be named in advance.
// It is drawn at random below the kernel's ephemeral range
// (net.ipv4.ip_local_port_range) and below 30000, from 10000 up: a port of
// the ephemeral range is what every outgoing connection on the host takes
// as its own end, so one named seconds ahead (rank 0's TCPStore binds
// MASTER_PORT after `import torch`) could be gone on a busy node; 30000-32767
// is Kubernetes' NodePort range. Falls back to one the kernel picks.
uint16_t free_tcp_port(bool loopback_only = false);
// The range free_tcp_port draws from, [first, last], given the ephemeral
// range's first port; {0, 0} when there is no room below it.
std::pair<uint16_t, uint16_t> named_port_range(int ephemeral_first);

// Splits "host:port" / "[v6]:port"; throws UsageError naming `what` on bad input.
std::pair<std::string, uint16_t> split_host_port(std::string_view s, std::string_view what);

// Opens /dev/null on whichever of descriptors 0, 1 and 2 is closed. Called
// first in dlaunch's and dlaunch-agent's main: a program started with its
// stdin (or stdout, stderr) closed would otherwise get its first socket or
// pipe at that number, and then "stdin" or "stdout" is the agent's control
// link (`dlaunch ... <&-` lost its local agent one run in six). Never throws.
void open_standard_descriptors();

// The descriptor limit a server raises its soft RLIMIT_NOFILE to when the
// hard limit is unlimited.
inline constexpr rlim_t kDescriptorLimitCap = 65536;
// The soft limit raise_descriptor_limit() sets for a hard limit of `hard`.
rlim_t descriptor_limit_target(rlim_t hard);
// Raises the soft RLIMIT_NOFILE to the hard limit (kDescriptorLimitCap when
// that is unlimited), and remembers the limit it found. Called at the start
// of dlaunch's and dlaunch-agent's main, before any thread: the launcher
// and each agent hold a descriptor per connection, rank stream and child,
// and 1024 (the usual soft limit) is soon spent by a large job or by
// another user's idle connections. Never throws; a failure leaves the limit.
void raise_descriptor_limit();
// Sets the soft limit back to what raise_descriptor_limit() found: in a
// rank's child before exec, so a rank starts with the limit it was given
// (a program that closes every descriptor up to its limit, or uses
// select(2), expects the usual one). Async-signal-safe; does nothing when
// the limit was not raised.
void restore_descriptor_limit() noexcept;

}  // namespace dl::wire
