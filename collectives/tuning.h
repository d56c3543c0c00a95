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
  // then sleep on the doorbell (exchange.h, WaitPolicy).
  size_t spin_us = 50;
  size_t yield_us = 100000;

  // Defaults, overridden by DLCOLL_ALLREDUCE_RING_BYTES, DLCOLL_BCAST_CHAIN_BYTES,
  // DLCOLL_REDUCE_RING_BYTES, DLCOLL_CHUNK_BYTES, DLCOLL_REDUCE_CHUNK_BYTES,
  // DLCOLL_SPIN_US, DLCOLL_YIELD_US when set.
  static Tuning from_env();
};

}  // namespace dl::coll
