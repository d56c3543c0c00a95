#pragma once
// Connection setup through the Store: every rank listens on port 0, publishes
// "<host id>\n<addr>:<port>" under <prefix>/peer/<rank>, connects to each lower
// rank and accepts each higher one (acceptor.h). Every connection opens with
// the greeting of greeting.h: the job-token handshake, the connecting rank's
// number and the accepting rank's welcome.
#include <chrono>
#include <string>
#include <vector>

#include "collectives/pair.h"
#include "collectives/tcp/greeting.h"
#include "rendezvous/store.h"
#include "wire/socket.h"

namespace dl::coll::tcp {

using Millis = std::chrono::milliseconds;

struct MeshConfig {
  rdzv::Store* store = nullptr;
  std::string prefix;   // store key prefix of this communicator
  int rank = 0, size = 1;
  std::string token;    // job token for the handshake
  std::string address;  // address to publish (tcp/address.h)
  std::string host_id;  // ranks with equal host ids share memory
  Millis timeout{300000};
  Millis greeting_timeout = kGreetingTimeout;  // per accepted connection
};

struct MeshPeer {
  PeerInfo info;
  wire::Socket sock;  // invalid for this rank's own slot
};

// Returns one entry per rank, connected to every other rank. A lower rank
// that drops this rank's connection before its welcome (it took it for an
// intruder: too slow) is dialed again until the deadline. Throws
// TimeoutError naming the ranks that never published or connected, AuthError
// when a peer has another job token, RemoteError when a peer refuses this
// rank's number.
std::vector<MeshPeer> connect_mesh(const MeshConfig& cfg);

}  // namespace dl::coll::tcp
