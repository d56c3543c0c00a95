#pragma once
// The accepting half of mesh setup (mesh.h): takes the connections of the
// ranks above this one. The port is open to anyone who can reach the host,
// so a connection counts for nothing until its greeting (greeting.h)
// completes: one that closes, sends garbage, fails the token handshake,
// claims a rank already connected, or does not finish within
// `greeting_timeout` of its accept is dropped, and accepting goes on.
// Greetings run side by side in one poll loop, so intruders that stay
// silent cost the real ranks no time; at most kMaxPendingGreetings are held
// at once, the oldest dropped to make room.
#include <chrono>
#include <vector>

#include "collectives/tcp/mesh.h"
#include "wire/socket.h"

namespace dl::coll::tcp {

inline constexpr size_t kMaxPendingGreetings = 64;

// Accepts on `lsn` until peers[j].sock is set for every j in (c.rank,
// c.size), each a blocking socket past its greeting, or until `deadline`.
// Throws TimeoutError naming the ranks that never connected (and how many
// connections were dropped, with the last one's reason), IoError when the
// listening socket fails.
void accept_ranks(const MeshConfig& c, const wire::Socket& lsn, std::vector<MeshPeer>& peers,
                  std::chrono::steady_clock::time_point deadline);

}  // namespace dl::coll::tcp
