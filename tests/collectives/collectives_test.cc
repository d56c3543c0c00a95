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

void full_matrix(int n, bool shm, bool tiny_thresholds) {
  Options o = test_options(shm);
  if (tiny_thresholds) {
    o.tuning.allreduce_ring_bytes = 1;
    o.tuning.bcast_chain_bytes = 1;
    o.tuning.reduce_ring_bytes = 1;
    o.tuning.chunk_bytes = 40;
    o.tuning.reduce_chunk_bytes = 24;
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

TEST_CASE("collectives: default thresholds pick ring and chain on large buffers", "[collectives]") {
  // 300000 floats = 1.2 MB: ring all_reduce, chained broadcast, ring reduce.
  for (bool shm : {false, true}) {
    run_ranks(3, [&](Communicator& c) {
      check_reductions(c, DataType::kFloat32, ReduceOp::kSum, 300000);
      check_movement(c, DataType::kFloat32, 300000);
    }, test_options(shm));
  }
}
