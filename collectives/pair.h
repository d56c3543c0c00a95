#pragma once
// The transport interface the algorithms see: a Pair is this rank's ordered,
// reliable byte stream to one peer (both directions). Transports fill it in:
// tcp/pair.h (sockets), shm/pair.h (ring buffers in shared memory). Algorithms
// never name a transport; they drive Pairs through progress.h.
//
// Thread-safety: a Pair is used by one thread at a time (the communicator's),
// except shutdown(), which any thread may call to abort.
#include <cstddef>
#include <string>

namespace dl::coll {

// Who is at the other end, for error messages.
struct PeerInfo {
  int rank = -1;
  std::string host;  // host id (DLAUNCH_HOST_ID or hostname)
  std::string addr;  // host:port it published
  // "rank 3 on host node2 (10.0.0.2:41234)"
  std::string describe() const;
};

class Pair {
 public:
  virtual ~Pair() = default;
  // Moves up to n bytes without blocking; returns how many moved (0 if none
  // could). Throws RemoteError naming the peer when it closed or broke.
  virtual size_t try_send(const char* data, size_t n) = 0;
  virtual size_t try_recv(char* data, size_t n) = 0;
  // A descriptor that poll() reports ready when try_send/try_recv may make
  // progress (POLLOUT for sends, POLLIN for receives), or, for a spinning
  // transport (shm), its doorbell: readable once arm()ed and the peer moved.
  virtual int poll_fd() const = 0;
  // True for transports that are polled by spinning on memory (shm): the
  // progress engine spins on them for a while and only then arm()s them and
  // sleeps in poll() on their doorbells.
  virtual bool spins() const { return false; }
  // Spinning transports: asks the peer to ring the doorbell the next time it
  // moves data (send) or frees space (!send) in this direction. The caller
  // must try to make progress once more after arming, before sleeping.
  virtual void arm(bool send) {}
  // Spinning transports: consumes doorbell rings; throws RemoteError naming
  // the peer when it died or aborted.
  virtual void drain() {}
  // For spinning transports: throws RemoteError naming the peer when it died
  // or aborted. Cheap enough to call every millisecond.
  virtual void check_alive() = 0;
  // Aborts the stream in both directions; the peer's next call fails.
  virtual void shutdown() = 0;
  const PeerInfo& peer() const { return peer_; }
  // "tcp" or "shm"
  virtual const char* transport() const = 0;

 protected:
  explicit Pair(PeerInfo peer) : peer_(std::move(peer)) {}
  PeerInfo peer_;
};

}  // namespace dl::coll
