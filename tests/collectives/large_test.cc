// Buffers of 64 MiB and more, over both transports ([slow]).
#include "tests/collectives/rank_threads.h"

using namespace dl::coll;
using namespace dl::coll::test;

TEST_CASE("collectives: 64 MiB all_reduce, broadcast and all_gather", "[collectives][slow]") {
  for (bool shm : {true, false}) {
    run_ranks(3, [](Communicator& c) {
      const size_t n = (64u << 20) / 4 + 3;  // 64 MiB of int32, plus an unaligned tail
      std::vector<int32_t> v(n);
      for (size_t i = 0; i < n; ++i) v[i] = int32_t(i % 1000) * (c.rank() + 1);
      c.all_reduce(v.data(), v.data(), n, DataType::kInt32, ReduceOp::kSum);
      size_t bad = 0;
      for (size_t i = 0; i < n; ++i) bad += v[i] != int32_t(i % 1000) * 6;
      RCHECK(bad == 0);
      if (c.rank() != 1) std::fill(v.begin(), v.end(), -1);
      else for (size_t i = 0; i < n; ++i) v[i] = int32_t(i * 7);
      c.broadcast(v.data(), n, DataType::kInt32, 1);
      for (size_t i = 0; i < n; ++i) bad += v[i] != int32_t(i * 7);
      RCHECK(bad == 0);
      const size_t m = (24u << 20) + 1;  // 3 x 24 MiB gathered = 72 MiB
      std::vector<uint8_t> mine(m, uint8_t(c.rank() + 1)), all(m * 3);
      c.all_gather(mine.data(), all.data(), m, DataType::kUint8);
      for (size_t i = 0; i < all.size(); ++i) bad += all[i] != uint8_t(i / m + 1);
      RCHECK(bad == 0);
    }, test_options(shm));
  }
}
