#pragma once
// Which user of this host owns a TCP socket, read from the kernel's socket
// tables (/proc/net/tcp and /proc/net/tcp6: every socket of this network
// namespace with its owner's uid, readable by any user). TCP carries no
// credentials, so this is how a server tells a connection from another
// local user from one of its own job (mpi/pmix/front_door.h, the
// pre-handshake caps of wire/admission.h), and how a client names the
// program that holds the port it expected a dlaunch server on. For a
// connection's peer the kernel is asked directly (sock_diag, as ss(8) does:
// no privilege needed), the tables being the fallback.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace dl::wire {

inline constexpr const char* kTcpTable = "/proc/net/tcp";
inline constexpr const char* kTcp6Table = "/proc/net/tcp6";

// The uid that owns the loopback socket 127.0.0.1:peer_port connected to
// 127.0.0.1:our_port, read from `table` (a /proc/net/tcp); nullopt if absent.
std::optional<unsigned> loopback_peer_uid(uint16_t peer_port, uint16_t our_port, const char* table);

// Who is at the other end of an accepted socket.
struct PeerOwner {
  bool local = false;            // on this host: loopback, or the connection's own local address
  std::optional<unsigned> uid;   // the uid owning it, when local and found
};

// For each accepted socket in `fds`, whether its other end is on this host
// and which uid owns that end. Asks the kernel for each socket by its
// addresses (sock_diag, one exact lookup each); where that cannot be used,
// reads the tables once for all of `fds`. A local peer's uid is unknown
// (nullopt) when its socket is gone, when no process holds it any more (a
// client that sent its bytes and closed: TIME_WAIT or an orphaned FIN_WAIT2,
// which the kernel lists as uid 0 with inode 0), or when the tables missed
// it. An unknown peer is nobody's, never root's: callers refuse it.
// `ask_kernel` false: the tables only.
std::vector<PeerOwner> local_peer_owners(const std::vector<int>& fds, bool ask_kernel = true,
                                         const char* table = kTcpTable, const char* table6 = kTcp6Table);

// The uid of a socket of this host listening on TCP `port` (any address,
// IPv4 or IPv6); nullopt when nothing listens there or the tables cannot be
// read.
std::optional<unsigned> listener_uid(uint16_t port, const char* table = kTcpTable, const char* table6 = kTcp6Table);

// "user mallory (uid 1001)", or "uid 1001" when the user has no name here.
std::string describe_uid(unsigned uid);

// Whether `host` names this host's loopback ("localhost", 127.0.0.0/8, ::1).
bool is_loopback_host(const std::string& host);

// When a user other than this process's listens on `port` of this host:
// "port P on HOST is held by user X (uid N), not by a dlaunch WHAT". Else ""
// (nothing listens, the tables cannot be read, or the holder is us). The
// caller knows `host` is this host's (`host` is only named).
std::string foreign_holder(const std::string& host, uint16_t port, const std::string& what);

}  // namespace dl::wire
