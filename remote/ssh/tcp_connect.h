#pragma once
// The TCP connection under an ssh session, made by us rather than by libssh so
// that a refused connection, an unreachable host and a timeout are told apart
// exactly (errno, not libssh's message text).
#include <chrono>
#include <cstdint>
#include <string>

namespace dl::ssh {

struct TcpConnection {
  int fd = -1;                 // connected, blocking; the caller owns it
  std::string local_address;   // our end, numeric ("10.200.3.1")
  std::string remote_address;  // their end, numeric
};

// Resolves host and connects to the first address that accepts within
// `timeout` (all addresses share the deadline). Throws IoError naming `who`:
// "connection refused (is sshd running ...?)", "unreachable (...)", "cannot
// resolve"; TimeoutError "no answer within N ms (host down or firewalled?)".
TcpConnection tcp_connect(const std::string& host, uint16_t port, std::chrono::milliseconds timeout,
                          const std::string& who);

// The errors tcp_connect throws, for connects made elsewhere (async_exec.h):
// errno `err` of a connect to `port` (ECONNREFUSED, ETIMEDOUT, EHOSTUNREACH...),
// and a name that did not resolve (`why`: the resolver's message).
[[noreturn]] void throw_connect_error(int err, const std::string& who, uint16_t port,
                                      std::chrono::milliseconds timeout);
[[noreturn]] void throw_resolve_error(const std::string& host, const std::string& why, const std::string& who);

// The local and remote numeric addresses of a connected socket (fd not owned).
TcpConnection describe_socket(int fd);

}  // namespace dl::ssh
