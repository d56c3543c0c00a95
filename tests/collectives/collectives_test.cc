// Every collective x dtype x op against independently computed references,
// for world sizes 1..7, over TCP and over shared memory, with the default
// thresholds and with tiny ones (so the ring and pipelined algorithms run on
// small buffers too).
#include <numeric>

#include "tests/collectives/checks.h"
#include "tests/collectives/rank_threads.h"

using namespace dl::coll;
using namespace dl::coll::test;

namespace {

// arena: false runs shared memory over the pairwise rings only (the path
// ranks on several hosts take between local ranks).
void full_matrix(int n, bool shm, bool tiny_thresholds, bool arena = true) {
  Options o = test_options(shm);
  o.tuning.shm_arena = arena;
  if (tiny_thresholds) {
    o.tuning.allreduce_ring_bytes = 1;
    o.tuning.bcast_chain_bytes = 1;
    o.tuning.reduce_ring_bytes = 1;
    o.tuning.chunk_bytes = 40;
    o.tuning.reduce_chunk_bytes = 24;
    // One-host arena: chunked reduce-scatter from 1 byte, 64-byte buffers
    // (many chunks, slices of 0 elements for large worlds).
    o.tuning.shm_direct_bytes = 1;
    o.tuning.shm_slot_bytes = 64;
    o.tuning.shm_nt_bytes = 1;
  }
  run_ranks(n, [&](Communicator& c) {
    for (int r = 0; r < n; ++r)
      if (r != c.rank()) RCHECK(std::string(c.transport_to(r)) == (shm ? "shm" : "tcp"));
    for (size_t count : {size_t{0}, size_t{1}, size_t{13}, size_t{1031}})
      for (DataType t : kTypes) {
        for (ReduceOp op : kOps) check_reductions(c, t, op, count);
        check_movement(c, t, count);
      }
  }, o);
}

}  // namespace

TEST_CASE("collectives: every op and dtype over TCP for world sizes 1-7", "[collectives]") {
  for (int n : {1, 2, 3, 4, 5, 7}) {
    INFO("world size " << n);
    full_matrix(n, false, false);
  }
}

TEST_CASE("collectives: every op and dtype over TCP with ring and chain forced", "[collectives]") {
  for (int n : {2, 3, 4, 5, 7}) {
    INFO("world size " << n);
    full_matrix(n, false, true);
  }
}

TEST_CASE("collectives: every op and dtype over shared memory for world sizes 1-7", "[collectives]") {
  for (int n : {1, 2, 3, 4, 5, 7}) {
    INFO("world size " << n);
    full_matrix(n, true, false);
  }
}

TEST_CASE("collectives: every op and dtype over shared memory with ring and chain forced", "[collectives]") {
  for (int n : {2, 3, 5, 7}) {
    INFO("world size " << n);
    full_matrix(n, true, true);
  }
}

TEST_CASE("collectives: every op and dtype over shared-memory pairs without the arena", "[collectives]") {
  for (int n : {2, 3, 5}) {
    INFO("world size " << n);
    full_matrix(n, true, false, false);
    full_matrix(n, true, true, false);
  }
}

TEST_CASE("collectives: one-host arena at sizes straddling its thresholds", "[collectives]") {
  // Defaults: direct all_reduce below shm_direct_bytes, chunked at or
  // above; chunks of shm_slot_bytes; non-temporal copies from shm_nt_bytes.
  // Counts one below, at and one above each, plus odd ones, for several
  // world sizes, out of place and in place (check_reductions does both).
  const Tuning def;
  for (int n : {2, 3, 4}) {
    INFO("world size " << n);
    Options o = test_options(true);
    o.tuning.shm_nt_bytes = def.shm_slot_bytes;  // exercise the non-temporal copy on smaller buffers
    run_ranks(n, [&](Communicator& c) {
      for (size_t bytes : {def.shm_direct_bytes, def.shm_slot_bytes, 3 * def.shm_slot_bytes + 4})
        for (size_t count : {bytes / 4 - 1, bytes / 4, bytes / 4 + 1, bytes / 4 + 7}) {
          check_reductions(c, DataType::kFloat32, ReduceOp::kSum, count);
          check_reductions(c, DataType::kInt8, ReduceOp::kMax, count * 4 + 3);
          check_movement(c, DataType::kUint8, count + 5);
        }
      check_reductions(c, DataType::kFloat16, ReduceOp::kAvg, def.shm_slot_bytes / 2 + 9);
      check_reductions(c, DataType::kFloat64, ReduceOp::kProd, def.shm_direct_bytes / 8 + 1);
    }, o);
  }
}

TEST_CASE("collectives: default thresholds pick ring and chain on large buffers", "[collectives]") {
  // 300000 floats = 1.2 MB: ring all_reduce, chained broadcast, ring reduce.
  for (bool shm : {false, true}) {
    run_ranks(3, [&](Communicator& c) {
      check_reductions(c, DataType::kFloat32, ReduceOp::kSum, 300000);
      check_movement(c, DataType::kFloat32, 300000);
    }, test_options(shm));
  }
}

TEST_CASE("collectives: TCP ring reduce windows wrap many times per step with receive spinning on",
          "[collectives]") {
  // Incoming reduce-scatter data lands in a window of reduce_chunk_bytes
  // (rounded down to whole elements) that is refilled many times per step;
  // 40 bytes is 5 float64, 10 float32, 20 float16 or 40 int8 per window, and
  // the counts leave a partial last window. Spinning before poll()
  // (tcp_spin_us) must not change any result.
  for (int n : {2, 3, 5}) {
    INFO("world size " << n);
    Options o = test_options(false);
    o.tuning.allreduce_ring_bytes = 1;
    o.tuning.reduce_ring_bytes = 1;
    o.tuning.reduce_chunk_bytes = 40;
    o.tuning.tcp_spin_us = 50;
    run_ranks(n, [&](Communicator& c) {
      for (size_t count : {size_t{97}, size_t{4099}})
        for (DataType t : kTypes) check_reductions(c, t, ReduceOp::kSum, count);
      check_reductions(c, DataType::kFloat32, ReduceOp::kMax, 100003);
    }, o);
  }
}
