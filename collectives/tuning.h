#pragma once
// Size thresholds that pick an algorithm, and pipeline chunk sizes. The
// defaults were measured on loopback TCP and shared memory (see
// docs/collectives.md, "Thresholds"); DLCOLL_* environment variables
// override them (Tuning::from_env).
#include <cstddef>

namespace dl::coll {

struct Tuning {
  // all_reduce: recursive doubling below this many bytes, ring
  // reduce-scatter + all-gather at or above.
  size_t allreduce_ring_bytes = 64 << 10;
  // broadcast: binomial tree below, pipelined chain at or above.
  size_t bcast_chain_bytes = 256 << 10;
  // reduce: binomial tree below, ring reduce-scatter + gather at or above.
  size_t reduce_ring_bytes = 256 << 10;
  // Pipeline chunk of the broadcast chain.
  size_t chunk_bytes = 512 << 10;
  // Received bytes between two incremental reductions in the ring.
  size_t reduce_chunk_bytes = 128 << 10;
  // Waiting on shared memory: spin this long, then sched_yield() this long,
  // then sleep on the doorbell (progress.h, WaitPolicy).
  size_t spin_us = 50;
  size_t yield_us = 100000;
  // Waiting to receive over TCP: retry the sockets this long before sleeping
  // in poll(), which saves a wake-up per message when the peer answers
  // quickly and both have a core to themselves. Off by default: on a loaded
  // machine the spinning ranks slow each other down (docs/collectives.md).
  size_t tcp_spin_us = 0;
  // One host (shm/arena.h): all_reduce reduces every rank's whole buffer in
  // one step below this many bytes, else reduce-scatters slices in chunks.
  size_t shm_direct_bytes = 4 << 10;
  // Arena staging buffer per rank (two of them): the chunk of the large
  // all_reduce, broadcast and all_gather. Rank 0's value wins.
  size_t shm_slot_bytes = 256 << 10;
  // Non-temporal stores into outputs of at least this many bytes.
  size_t shm_nt_bytes = 8 << 20;
  // Use the arena when every rank shares a host (DLCOLL_SHM_ARENA=0: off).
  bool shm_arena = true;

  // Defaults, overridden by DLCOLL_ALLREDUCE_RING_BYTES, DLCOLL_BCAST_CHAIN_BYTES,
  // DLCOLL_REDUCE_RING_BYTES, DLCOLL_CHUNK_BYTES, DLCOLL_REDUCE_CHUNK_BYTES,
  // DLCOLL_SPIN_US, DLCOLL_YIELD_US, DLCOLL_TCP_SPIN_US, DLCOLL_SHM_DIRECT_BYTES,
  // DLCOLL_SHM_SLOT_BYTES, DLCOLL_SHM_NT_BYTES, DLCOLL_SHM_ARENA when set.
  static Tuning from_env();
};

}  // namespace dl::coll
