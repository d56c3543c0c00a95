#pragma once
// Connection setup through the Store: every rank listens on port 0, publishes
// "<host id>\n<addr>:<port>" under <prefix>/peer/<rank>, connects to each lower
// rank and accepts each higher one. Every connection opens with the job-token
// handshake (tag "coll/1") and then the connecting rank's number.
#include <chrono>
#include <string>
#include <vector>

#include "collectives/pair.h"
#include "rendezvous/store.h"
#include "wire/socket.h"

namespace dl::coll::tcp {

using Millis = std::chrono::milliseconds;

inline constexpr const char* kHandshakeTag = "coll/1";

struct MeshConfig {
  rdzv::Store* store = nullptr;
  std::string prefix;   // store key prefix of this communicator
  int rank = 0, size = 1;
  std::string token;    // job token for the handshake
  std::string address;  // address to publish (tcp/address.h)
  std::string host_id;  // ranks with equal host ids share memory
  Millis timeout{300000};
};

struct MeshPeer {
  PeerInfo info;
  wire::Socket sock;  // invalid for this rank's own slot
};

// Returns one entry per rank, connected to every other rank. Throws
// TimeoutError naming the ranks that never published or connected, AuthError
// when a peer has another job token.
std::vector<MeshPeer> connect_mesh(const MeshConfig& cfg);

}  // namespace dl::coll::tcp
