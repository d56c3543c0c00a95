#pragma once
// Options of a Communicator, with their defaults. Empty strings mean "take
// it from the environment" as described per field.
#include <chrono>
#include <string>

#include "collectives/tuning.h"

namespace dl::coll {

struct Options {
  // Every collective, and connection setup, fails with TimeoutError after
  // this long without completing (torch.distributed's default).
  std::chrono::milliseconds timeout{300000};
  // Job token for the peer handshake. Empty: $DLAUNCH_TOKEN; when that is
  // unset too (not launched by dlaunch), rank 0 draws one and shares it
  // through the Store.
  std::string token;
  // Interface whose IPv4 address is published (NCCL_SOCKET_IFNAME syntax).
  // Empty: $DLAUNCH_SOCKET_IFNAME, $NCCL_SOCKET_IFNAME, $GLOO_SOCKET_IFNAME,
  // else the address that routes to the store host (tcp/address.h).
  std::string interface;
  // Publish exactly this address (overrides `interface`).
  std::string address;
  // Ranks with the same host id talk through shared memory. Empty:
  // $DLAUNCH_HOST_ID, else the hostname.
  std::string host_id;
  // Use shared memory between ranks of one host (else TCP for all peers).
  // $DLCOLL_SHM=0 turns it off too.
  bool use_shm = true;
  // Store key prefix; one Communicator per (store, prefix) at a time.
  std::string prefix = "dlcoll";
  // Algorithm thresholds; defaults from Tuning::from_env().
  Tuning tuning = Tuning::from_env();
};

}  // namespace dl::coll
