#pragma once
// Shared-memory transport between ranks of one host: each pair of local
// ranks shares one segment holding two single-producer/single-consumer byte
// rings (one per direction). The lower rank creates the segment with
// shm_open under a random name, the higher maps it, and the name is unlinked
// as soon as both have it mapped (or setup failed), so nothing stays in
// /dev/shm. The pair's TCP connection stays open only to notice a peer that
// dies and as a doorbell: a side that has spun long enough without progress
// arms a flag in the ring and sleeps in poll() on the socket; the peer, when
// it next moves the ring's head (or tail) and finds the flag set, clears it
// and writes one byte. So an oversubscribed host does not burn the cores
// the peer needs, and a dead peer still wakes the sleeper (EOF). A pair
// whose segment cannot be made falls back to TCP.
#include <atomic>
#include <memory>
#include <vector>

#include "collectives/pair.h"
#include "collectives/tcp/mesh.h"

namespace dl::coll::shm {

// Ring capacity per direction.
inline constexpr size_t kRingBytes = size_t{2} << 20;

struct Ring;

class ShmPair : public Pair {
 public:
  // `base` maps a segment of segment_bytes(); `lower` says which ring is ours.
  ShmPair(void* base, bool lower, wire::Socket sock, PeerInfo peer);
  ~ShmPair() override;
  size_t try_send(const char* data, size_t n) override;
  size_t try_recv(char* data, size_t n) override;
  int poll_fd() const override { return sock_.fd(); }
  bool spins() const override { return true; }
  void arm(bool send) override;
  // Both throw RemoteError when the peer is gone: it aborted, or its
  // socket's EOF came and nothing it wrote is left unread.
  void drain() override;
  void check_alive() override;
  void shutdown() override;
  const char* transport() const override { return "shm"; }

  static size_t segment_bytes();

 private:
  void* base_;
  Ring* out_;
  Ring* in_;
  void ring_doorbell();
  bool unread() const;  // bytes the peer wrote that this side has not read
  wire::Socket sock_;
};

// For every r with local[r], replaces mesh[r]'s TCP socket by a ShmPair
// (returned at index r). Where a segment cannot be created or mapped (no
// /dev/shm, out of space), local[r] is cleared and mesh[r] is left for TCP.
// Both ends of each pair reach the same decision. Throws TimeoutError naming
// the peer when it does not answer within `timeout`.
std::vector<std::unique_ptr<Pair>> connect_local(std::vector<tcp::MeshPeer>& mesh, std::vector<bool>& local,
                                                 int rank, std::chrono::milliseconds timeout);

}  // namespace dl::coll::shm
