#pragma once
// The one-host arena: when every rank of a communicator is on the same host,
// they also share one segment in which each rank owns a control line (a step
// counter and the header of its current operation) and a slot of two
// staging buffers. all_reduce, broadcast and all_gather(_v) run on it
// directly instead of over the pairwise rings of shm/pair.h:
//
// - Ranks advance in lockstep "steps". A rank writes its staging buffer for
//   step s (parity s % 2), then publishes s; it reads other ranks' step-s
//   buffers only after all have published s, and finishes those reads
//   before publishing s + 1. So a buffer is never rewritten while read, with
//   no other handshake: one cache line per rank per step.
// - The first step of every operation carries the operation's header
//   (op_header.h); each rank compares everyone's with its own, which
//   replaces the pairwise signature check. Operations that the arena does
//   not run take one header-only step and then use the pairs.
// - all_reduce, small: every rank copies its input into its buffer and,
//   after one step, reduces all buffers in rank order itself (one step).
//   Large: in chunks of the buffer size, each rank copies into its buffer
//   the slices the others own, reduces its own slice from its input and
//   their buffers into its other buffer, and after a second step copies
//   every reduced slice out (each byte crosses between ranks once, and the
//   staging buffers stay in cache). Non-temporal stores for large outputs.
//
// Waiting spins, yields, then sleeps on a futex on the awaited rank's step
// counter (the poster wakes sleepers), checking the peers' liveness through
// their Pairs and the deadline, as progress.h does for pairs.
#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "collectives/dtype.h"
#include "collectives/op_header.h"
#include "collectives/tcp/mesh.h"

namespace dl::coll {
class Context;
}

namespace dl::coll::shm {

struct RankCtl;

class Arena {
 public:
  ~Arena();
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  // Called by every rank over the setup mesh when all ranks share a host:
  // rank 0 creates the segment (buffers of `slot_bytes`, its value wins) and
  // sends its name; every rank maps it and answers; rank 0 unlinks the name
  // and tells all whether every rank mapped it. Returns nullptr on every
  // rank when any could not.
  static std::unique_ptr<Arena> connect(std::vector<tcp::MeshPeer>& mesh, int rank, int size, size_t slot_bytes,
                                        std::chrono::milliseconds timeout);

  // The operations the arena runs itself (their first step carries the header).
  static bool handles(OpKind k) {
    return k == OpKind::kAllReduce || k == OpKind::kBroadcast || k == OpKind::kAllGather ||
           k == OpKind::kAllGatherV;
  }
  // Sets the header that the next operation's first step publishes and checks.
  void begin(const OpHeader& h) {
    hdr_ = h;
    fresh_ = true;
  }
  // Header-only step, for operations that then run over the pairs.
  void check(Context& c);
  void all_reduce(Context& c, const void* in, void* out, size_t count, DataType t, ReduceOp op);
  void broadcast(Context& c, void* buf, size_t bytes, int root);
  // As algo::all_gather_v; in may already be at its place in out.
  void all_gather_v(Context& c, const void* in, void* out, const std::vector<size_t>& bytes);

  size_t slot_bytes() const { return slot_; }
  // Marks this rank's side aborted: peers' waits and their next steps fail
  // (as a closed Pair does). Any thread may call it.
  void abort();

 private:
  Arena(void* base, size_t map_bytes, int rank, int size, size_t slot);
  static size_t layout(int size, size_t slot, size_t* slots_at);
  RankCtl& ctl(int r) const;
  // Rank r's staging buffer for step s.
  char* buf(int r, uint32_t s) const { return slots_ + (size_t(r) * 2 + (s & 1)) * slot_; }
  // Publishes the next step (with the header on an operation's first).
  void post();
  // Waits until every rank has published step_; checks headers on the first.
  void wait_all(Context& c);
  void sleep_on(int r, uint32_t s);
  // Throws RemoteError when some other rank aborted.
  void check_aborted(Context& c) const;

  void* base_;
  size_t map_bytes_;
  int rank_, size_;
  size_t slot_;
  char* slots_;
  uint32_t step_ = 0;
  // More ranks than CPUs: a rank that spins holds the CPU the awaited rank
  // needs, so waits yield at once.
  bool oversubscribed_ = false;
  OpHeader hdr_;
  bool fresh_ = false;
};

}  // namespace dl::coll::shm
